// The head graphs against the float64 JS reference, and the analytic gradients against central
// finite differences, on the real USE-lite tanh layer (R = D = 512) with real pooled features.

import { beforeAll, describe, expect, it } from 'vitest';
import { InputError, rng } from '@fugu/core';
import { loadUseLite, type UseLiteBackbone } from '../backbones/use-lite/load.ts';
import { referenceForwardOne } from '../backbones/use-lite/reference.ts';
import { USE_LITE_TEST_TEXTS } from '../backbones/use-lite/test-sentences.ts';
import { createSession } from '../onnx/session.ts';
import { headReferenceForward, headReferenceGrad, headReferenceLogits, headReferenceLoss, headReferenceProject } from './reference.ts';
import { buildCandidateGraph, buildTrainingGraph, ProjectedFeatures, RouterHead } from './router-graph.ts';
import { initTheta, thetaSize, unpackTheta } from './theta.ts';

const K = 5;
const B = 8;
let backbone: UseLiteBackbone;
let head: RouterHead;
/** Real pooled features of B test sentences [B, 512], and the package-exact embeddings. */
let x: Float32Array;
let embeddings: Float32Array[];

beforeAll(async () => {
  backbone = await loadUseLite();
  const { tanhKernel, tanhBias } = backbone.params;
  head = RouterHead.fromDense(tanhKernel, tanhBias, K, { session: { intraOpNumThreads: 1 } });
  const texts = USE_LITE_TEST_TEXTS.slice(0, B);
  x = new Float32Array(B * 512);
  embeddings = [];
  texts.forEach((t, i) => {
    const out = referenceForwardOne(backbone.params, backbone.tokenizer.encode(t));
    x.set(Float32Array.from(out.pooled), i * 512);
    embeddings.push(out.embedding);
  });
});

/** A theta away from the start: z around 1, a head of useful size. */
function randomTheta(seed: string, zSpread = 0.3, headScale = 1): Float32Array {
  const r = rng(seed);
  const theta = initTheta(head.dims, seed, { headScale });
  const { z, b_h } = unpackTheta(theta, head.dims);
  for (let i = 0; i < z.length; i++) z[i] = 1 + zSpread * r.normal();
  for (let i = 0; i < b_h.length; i++) b_h[i] = 0.1 * r.normal();
  return theta;
}

function softLabels(seed: string, n: number): Float32Array {
  const r = rng(seed);
  const p = new Float32Array(n * K);
  for (let i = 0; i < n; i++) {
    let sum = 0;
    for (let k = 0; k < K; k++) sum += p[i * K + k] = Math.exp(2 * r.normal());
    for (let k = 0; k < K; k++) p[i * K + k]! /= sum;
  }
  p[3] = 0; // a zero label: 0 log 0 must not give NaN
  let sum = 0;
  for (let k = 0; k < K; k++) sum += p[K * 0 + k]!;
  for (let k = 0; k < K; k++) p[k]! /= sum;
  return p;
}

const maxAbsDiff = (a: ArrayLike<number>, b: ArrayLike<number>): number => {
  expect(a.length).toBe(b.length);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
  return worst;
};

describe('SVF head graphs', () => {
  it('z = 1 reproduces the backbone: e equals L2-normalised tanh(x W + b)', async () => {
    // A head W_h = I (K = D = 512 columns would be big; take the first K embedding coordinates
    // through a selection head instead) reads e directly: logits_k = e_k.
    const theta = new Float32Array(thetaSize(head.dims));
    const { z, W_h } = unpackTheta(theta, head.dims);
    z.fill(1);
    for (let k = 0; k < K; k++) W_h[k * K + k] = 1; // rows 0..K-1 of the [512, K] head
    const out = await head.logits(x, theta);
    expect(out.dims).toEqual([B, K]);
    const expected = new Float32Array(B * K);
    for (let i = 0; i < B; i++) for (let k = 0; k < K; k++) expected[i * K + k] = embeddings[i]![k]!;
    expect(maxAbsDiff(out.data, expected)).toBeLessThan(2e-6);
    // And over the whole embedding, through the float64 reference of the SVF form.
    const ref = headReferenceForward(head.layer, headReferenceProject(head.layer, x, B), B, theta, K);
    for (let i = 0; i < B; i++) expect(maxAbsDiff(ref.e.subarray(i * 512, (i + 1) * 512), embeddings[i]!)).toBeLessThan(1e-6);
  });

  it('graph logits and probs equal the plain JS forward, from x and from projected y', async () => {
    const theta = randomTheta('fwd');
    const y = await head.project(x);
    const yRef = headReferenceProject(head.layer, x, B);
    expect(maxAbsDiff(y.y, yRef)).toBeLessThan(1e-4);
    const ref = headReferenceForward(head.layer, yRef, B, theta, K);
    const fromX = await head.logits(x, theta);
    const fromY = await head.logits(y, theta);
    expect(maxAbsDiff(fromX.data, ref.logits)).toBeLessThan(1e-4);
    expect(maxAbsDiff(fromY.data, ref.logits)).toBeLessThan(1e-4);
    const probs = await head.candidateProbs(x, [theta]);
    expect(probs.dims).toEqual([1, B, K]);
    expect(maxAbsDiff(probs.data, ref.probs)).toBeLessThan(1e-5);
  });

  it('the candidate batch [P, N, K] equals P single runs', async () => {
    const thetas = [randomTheta('c0'), randomTheta('c1', 0.8), initTheta(head.dims, 'c2'), randomTheta('c3', 0)];
    const batched = await head.candidateLogits(x, thetas);
    expect(batched.dims).toEqual([thetas.length, B, K]);
    for (let p = 0; p < thetas.length; p++) {
      const single = await head.logits(x, thetas[p]!);
      expect(maxAbsDiff(batched.data.subarray(p * B * K, (p + 1) * B * K), single.data)).toBeLessThan(1e-5);
    }
    // Candidates differ: the batch is not P copies of one.
    expect(maxAbsDiff(batched.data.subarray(0, B * K), batched.data.subarray(B * K, 2 * B * K))).toBeGreaterThan(1e-2);
  });

  it('loss and gradients equal the float64 reference; the reference equals central finite differences', async () => {
    const theta = randomTheta('grad');
    const p = softLabels('grad-labels', B);
    const y64 = headReferenceProject(head.layer, x, B);
    const loss64 = (t: Float64Array): number => headReferenceLoss(headReferenceForward(head.layer, y64, B, t, K).probs, p, B, K);
    const analytic = headReferenceGrad(head.layer, y64, p, B, theta, K);

    // Central differences in float64 on every coordinate of theta (z: 512, W_h: 2560, b_h: 5).
    // The head coordinates do not move e, so their loss reuses e (same function, less work).
    const R = head.dims.rank, D = head.dims.dim;
    const t = Float64Array.from(theta);
    const e64 = headReferenceForward(head.layer, y64, B, t, K).e;
    const headLoss = (u: Float64Array): number =>
      headReferenceLoss(headReferenceLogits(e64, B, D, K, u.subarray(R, R + D * K), u.subarray(R + D * K)).probs, p, B, K);
    const fd = new Float64Array(t.length);
    for (let i = 0; i < t.length; i++) {
      const f = i < R ? loss64 : headLoss;
      const h = 1e-5 * Math.max(1, Math.abs(t[i]!));
      const v = t[i]!;
      t[i] = v + h;
      const up = f(t);
      t[i] = v - h;
      const down = f(t);
      t[i] = v;
      fd[i] = (up - down) / (2 * h);
    }
    const rel = (a: number, b: number, floor: number): number => Math.abs(a - b) / Math.max(Math.abs(a), Math.abs(b), floor);
    let worstRef = 0;
    for (let i = 0; i < t.length; i++) worstRef = Math.max(worstRef, rel(analytic[i]!, fd[i]!, 1e-12));
    expect(worstRef).toBeLessThan(1e-3);

    // The graph (float32) against the float64 gradient, every coordinate: relative error, with a
    // floor of 1e-4 of the part's largest entry (float32 carries ~1e-7 of the largest terms, so
    // a coordinate 1e5 times smaller than its part's largest cannot be known to 1e-3 relative).
    const graph = await head.lossAndGrad(x, p, theta);
    expect(graph.loss).toBeCloseTo(loss64(Float64Array.from(theta)), 5);
    const parts = unpackTheta(graph.grad, head.dims);
    const refParts = unpackTheta(Float32Array.from(fd), head.dims);
    for (const name of ['z', 'W_h', 'b_h'] as const) {
      const g = parts[name], r = refParts[name];
      let scale = 0;
      for (const v of r) scale = Math.max(scale, Math.abs(v));
      expect(scale).toBeGreaterThan(0);
      let worst = 0;
      for (let i = 0; i < g.length; i++) worst = Math.max(worst, rel(g[i]!, r[i]!, 1e-4 * scale));
      expect(worst, `graph ${name} vs finite differences`).toBeLessThan(1e-3);
    }
    // From projected features: the same numbers.
    const fromY = await head.lossAndGrad(await head.project(x), p, theta);
    expect(maxAbsDiff(fromY.grad, graph.grad)).toBeLessThan(1e-6);
    expect(Math.abs(fromY.loss - graph.loss)).toBeLessThan(1e-6);
  });

  it('bad inputs get clear errors', async () => {
    const theta = initTheta(head.dims, 'bad');
    await expect(head.logits(new Float32Array(511), theta)).rejects.toThrow(InputError);
    await expect(head.logits(x, theta.subarray(1))).rejects.toThrow(/theta has 3076 values/);
    await expect(head.candidateLogits(x, [])).rejects.toThrow(/no parameter vectors/);
    await expect(head.lossAndGrad(x, new Float32Array(3), theta)).rejects.toThrow(/field p/);
    await expect(head.logits(new ProjectedFeatures(new Float32Array(4), 1, 4), theta)).rejects.toThrow(/rank 4/);
  });

  it('the graphs declare the documented inputs and outputs', async () => {
    const cand = await createSession(buildCandidateGraph(head.layer, K), { label: 'cand' });
    cand.checkContract({
      inputs: [{ name: 'x', dtype: 'float32', shape: ['N', 512] }, { name: 'z', shape: ['P', 512] }, { name: 'W_h', shape: ['P', 512, K] }, { name: 'b_h', shape: ['P', K] }],
      outputs: [{ name: 'logits', shape: ['P', 'N', K] }, { name: 'probs', shape: ['P', 'N', K] }],
    });
    const train = await createSession(buildTrainingGraph(head.layer, K, { features: 'y' }), { label: 'train' });
    train.checkContract({
      inputs: ['y', 'p', { name: 'z', shape: [512] }, { name: 'W_h', shape: [512, K] }, { name: 'b_h', shape: [K] }],
      outputs: ['loss', 'logits', { name: 'dz', shape: [512] }, { name: 'dW_h', shape: [512, K] }, { name: 'db_h', shape: [K] }],
    });
    await Promise.all([cand.release(), train.release()]);
  });
});
