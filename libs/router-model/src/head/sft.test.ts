// SFT on synthetic problems whose labels are a known function of the features (a small layer,
// I = D = 16, so the test stays fast; the graphs are the same as for USE-lite's 512).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError, rng } from '@fugu/core';
import { RouterHead } from './router-graph.ts';
import { trainSft, type SftOptions } from './sft.ts';
import { unpackTheta } from './theta.ts';

const I = 16, K = 4, N = 600;
let head: RouterHead;
let features: Float32Array[];
/** Labels from a teacher: softmax(logits of a teacher theta with z != 1). */
let labels: Float32Array[];

beforeAll(async () => {
  const r = rng('sft-test');
  const W = { data: Float32Array.from({ length: I * I }, () => r.normal() / Math.sqrt(I)), rows: I, cols: I };
  const b = Float32Array.from({ length: I }, () => 0.1 * r.normal());
  head = RouterHead.fromDense(W, b, K, { session: { intraOpNumThreads: 1 } });
  features = Array.from({ length: N }, () => Float32Array.from({ length: I }, () => r.normal()));
  const teacher = new Float32Array(head.thetaSize);
  const t = unpackTheta(teacher, head.dims);
  for (let i = 0; i < t.z.length; i++) t.z[i] = 1 + 0.5 * r.normal();
  for (let i = 0; i < t.W_h.length; i++) t.W_h[i] = 3 * r.normal();
  const x = new Float32Array(N * I);
  features.forEach((f, i) => x.set(f, i * I));
  const probs = (await head.candidateProbs(x, [teacher])).data;
  labels = Array.from({ length: N }, (_, i) => probs.slice(i * K, (i + 1) * K));
});

afterAll(async () => head.release());

const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);

const base = (): SftOptions => ({
  head,
  features,
  labels,
  split: { train: range(0, 480), val: range(480, 600) },
  seed: 1,
  epochs: 30,
  batchSize: 32,
  lr: 0.05,
  patience: 5,
});

describe('trainSft', () => {
  it('the loss falls on a learnable problem; same seed gives the same theta; onEpoch sees every epoch', async () => {
    const seen: number[] = [];
    const a = await trainSft({ ...base(), onEpoch: (e) => void seen.push(e.epoch) });
    expect(seen).toEqual(a.history.map((h) => h.epoch));
    const first = a.history[0]!, last = a.history[a.history.length - 1]!;
    expect(last.trainLoss).toBeLessThan(first.trainLoss * 0.5);
    expect(a.bestValLoss).toBeLessThan(first.valLoss * 0.5);
    expect(a.bestValLoss).toBe(Math.min(...a.history.map((h) => h.valLoss)));
    // z moved (it is trained), the run is reproducible.
    expect(unpackTheta(a.theta, head.dims).z.some((v) => Math.abs(v - 1) > 1e-3)).toBe(true);
    const b = await trainSft(base());
    expect(b.theta).toEqual(a.theta);
    expect(b.history).toEqual(a.history);
    const c = await trainSft({ ...base(), seed: 2 });
    expect(c.theta).not.toEqual(a.theta);
  });

  it('head-only keeps z at 1', async () => {
    const r = await trainSft({ ...base(), epochs: 5, trainZ: false });
    expect(Array.from(unpackTheta(r.theta, head.dims).z)).toEqual(new Array(head.dims.rank).fill(1));
    expect(r.history[r.history.length - 1]!.trainLoss).toBeLessThan(r.history[0]!.trainLoss);
  });

  it('early-stops when the validation loss stops improving, and returns the best theta', async () => {
    // 40 training rows whose labels are the teacher's times strong noise: the first epochs learn
    // the shared signal, then the fit to the noise makes the validation loss rise.
    const noise = rng('noise');
    const noisy = labels.map((t) => {
      const l = t.map((v) => v * Math.exp(2 * noise.normal()));
      const s = l.reduce((x, y) => x + y, 0);
      return l.map((v) => v / s);
    });
    const res = await trainSft({ ...base(), labels: noisy, split: { train: range(0, 40), val: range(100, 300) }, epochs: 200, batchSize: 8, lr: 0.05, patience: 3 });
    expect(res.bestEpoch).toBeGreaterThan(0);
    expect(res.history.length).toBeLessThan(200);
    expect(res.history.length).toBe(res.bestEpoch + 3);
    const x = new Float32Array(200 * I);
    range(100, 300).forEach((r, i) => x.set(features[r]!, i * I));
    // The returned theta is the best epoch's: its val loss, recomputed, is the recorded best.
    const logits = (await head.logits(x, res.theta)).data;
    let total = 0;
    for (let i = 0; i < 200; i++) {
      const row = Array.from(logits.subarray(i * K, (i + 1) * K));
      const mx = Math.max(...row);
      const lz = mx + Math.log(row.reduce((s, v) => s + Math.exp(v - mx), 0));
      const p = noisy[100 + i]!;
      for (let k = 0; k < K; k++) if (p[k]! > 0) total += p[k]! * (Math.log(p[k]!) - (row[k]! - lz));
    }
    expect(total / 200).toBeCloseTo(res.bestValLoss, 5);
  });

  it('bad input gets clear errors', async () => {
    await expect(trainSft({ ...base(), labels: labels.slice(1) })).rejects.toThrow(/599 label rows/);
    await expect(trainSft({ ...base(), split: { train: [0, 1], val: [1] } })).rejects.toThrow(/row 1 appears twice/);
    await expect(trainSft({ ...base(), split: { train: [0, 600], val: [] } })).rejects.toThrow(/outside \[0, 600\)/);
    await expect(trainSft({ ...base(), split: { train: [], val: [1] } })).rejects.toThrow(InputError);
    await expect(trainSft({ ...base(), labels: labels.map(() => new Float32Array(K).fill(0.5)) })).rejects.toThrow(/sums to 2/);
    await expect(trainSft({ ...base(), features: features.map(() => new Float32Array(3)) })).rejects.toThrow(/field features\[0\]/);
    await expect(trainSft({ ...base(), lr: 0 })).rejects.toThrow(/lr must be/);
  });
});
