import { describe, expect, it } from 'vitest';
import { InputError, rng } from '@fugu/core';
import { bestPerTask, bestSingle, knnRouter, nearestNeighbours, oracle, randomDecisions, randomExpected, type Embeddings } from './baselines.ts';
import { meanCost, meanReward } from './metrics.ts';
import { makeTable, tinyTable } from './test-tables.ts';
import { callCostUsd, splitRows, validateEvalTable } from './types.ts';

describe('evaluation table', () => {
  it('validates shapes and values, naming the field', () => {
    const t = tinyTable();
    expect(validateEvalTable(t)).toBe(t);
    const bad = { ...t, rewards: t.rewards.map((r, i) => (i === 3 ? [r[0]!, Number.NaN, r[2]!] : r)) };
    expect(() => validateEvalTable(bad)).toThrow(/field rewards\[3\]\[1\]/);
    expect(() => validateEvalTable({ ...t, costs: t.costs.slice(1) })).toThrow(InputError);
    expect(() => validateEvalTable({ ...t, workers: [{ name: 'A' }, { name: 'A' }, { name: 'C' }] })).toThrow(/workers\[1\]\.name/);
  });

  it('computes the USD of a call from token prices', () => {
    expect(callCostUsd(1000, 500, { inputPerMTok: '0.15', outputPerMTok: '0.60' })).toBeCloseTo(0.00045, 15);
    expect(callCostUsd(2_000_000, 0, { inputPerMTok: '3', outputPerMTok: '15' })).toBe(6);
  });
});

describe('baselines on a tiny table', () => {
  const t = tinyTable();
  const test = splitRows(t, 'test');

  it('best single: chosen on train, applied to test', () => {
    const d = bestSingle(t);
    expect(d.worker).toBe(2);
    expect([...d.choice]).toEqual([2, 2, 2]);
    expect(d.rows).toEqual(test);
    expect(meanReward(t, d)).toBeCloseTo((0.9 + 1 + 0.5) / 3, 12);
    expect(meanCost(t, d)).toBe(3);
  });

  it('best single: ties go to the cheaper worker; an allowed pool restricts the choice', () => {
    // A and B both have train mean 0.4; A is cheaper
    expect(bestSingle(t, { allowed: [1, 0] }).worker).toBe(0);
    expect(bestSingle(t, { allowed: [1] }).worker).toBe(1);
    expect(() => bestSingle(t, { allowed: [3] })).toThrow(/allowed/);
  });

  it('best per task: per-task train means, ties to the cheaper, unseen task falls back to best single', () => {
    const d = bestPerTask(t);
    expect(Object.fromEntries(d.perTask)).toEqual({ math: 1, code: 0 });
    expect(d.fallback).toBe(2);
    expect([...d.choice]).toEqual([1, 0, 2]);
    expect(meanCost(t, d)).toBe(2);
  });

  it('oracle: best per item, ties to the cheaper', () => {
    const d = oracle(t);
    expect([...d.choice]).toEqual([1, 0, 2]);
    expect(meanReward(t, d)).toBeCloseTo(2.4 / 3, 12);
    expect([...oracle(t, { allowed: [0, 2] }).choice]).toEqual([2, 0, 2]);
  });

  it('oracle: equal reward and cost go to the lower index', () => {
    const t2 = makeTable([['x', 'test']], [[0.5, 0.7, 0.7]], [1, 2, 2]);
    expect([...oracle(t2).choice]).toEqual([1]);
  });

  it('random: the exact expectation, and seeded samples within the pool', () => {
    const e = randomExpected(t);
    expect(e.meanReward).toBeCloseTo((2.0 / 3 + 1 + 0.5 / 3) / 3, 12);
    expect(e.meanCost).toBe(2);
    const onlyA = randomExpected(t, { allowed: [0] });
    expect(onlyA.meanReward).toBeCloseTo(0.4, 12);
    expect(onlyA.meanCost).toBe(1);
    const a = randomDecisions(t, 7, { allowed: [0, 2] });
    expect([...a.choice]).toEqual([...randomDecisions(t, 7, { allowed: [0, 2] }).choice]);
    for (const j of a.choice) expect([0, 2]).toContain(j);
  });

  it('random: sampled mean converges to the expectation', () => {
    const r = rng('random-table');
    const n = 4000;
    const rows = Array.from({ length: n }, () => [r.next(), r.next(), r.next()]);
    const big = makeTable(rows.map(() => ['t', 'test']), rows, [1, 2, 3]);
    const e = randomExpected(big);
    const d = randomDecisions(big, 1);
    expect(Math.abs(meanReward(big, d) - e.meanReward)).toBeLessThan(0.03);
  });

  it('errors name the missing split', () => {
    expect(() => bestSingle(t, { trainSplit: 'nope' })).toThrow(/split "nope"/);
  });
});

function naiveNeighbours(train: Embeddings, q: Embeddings, k: number): number[][] {
  const norm = (a: Float32Array, o: number, dim: number) => Math.hypot(...a.subarray(o, o + dim));
  const out: number[][] = [];
  for (let i = 0; i < q.n; i++) {
    const sims: Array<[number, number]> = [];
    for (let t = 0; t < train.n; t++) {
      let s = 0;
      for (let d = 0; d < q.dim; d++) s += train.data[t * q.dim + d]! * q.data[i * q.dim + d]!;
      sims.push([s / (norm(train.data, t * q.dim, q.dim) * norm(q.data, i * q.dim, q.dim)), t]);
    }
    sims.sort((a, b) => b[0] - a[0] || a[1] - b[1]);
    out.push(sims.slice(0, k).map((x) => x[1]));
  }
  return out;
}

function randomEmb(n: number, dim: number, seed: string): Embeddings {
  const r = rng(seed);
  const data = new Float32Array(n * dim);
  for (let i = 0; i < data.length; i++) data[i] = r.normal();
  return { data, n, dim };
}

describe('kNN', () => {
  it('finds the same neighbours as a naive search (query count not a multiple of 4)', () => {
    const train = randomEmb(57, 9, 'train');
    const q = randomEmb(11, 9, 'query');
    const { index, k } = nearestNeighbours(train, q, 5);
    expect(k).toBe(5);
    const naive = naiveNeighbours(train, q, 5);
    for (let i = 0; i < q.n; i++) expect([...index.subarray(i * 5, i * 5 + 5)]).toEqual(naive[i]);
  });

  it('breaks similarity ties to the lower train index, and clamps k to the train size', () => {
    const train = { data: Float32Array.from([1, 0, 2, 0, 0, 1]), n: 3, dim: 2 };
    const q = { data: Float32Array.from([1, 0.1]), n: 1, dim: 2 };
    const { index, k } = nearestNeighbours(train, q, 10);
    expect(k).toBe(3);
    expect([...index]).toEqual([0, 1, 2]);
  });

  it('routes a planted-cluster table to each cluster\'s best worker', () => {
    const r = rng('clusters');
    const dim = 16;
    const K = 3;
    const centres = Array.from({ length: K }, () => Array.from({ length: dim }, () => r.normal()));
    const items: Array<[string, string]> = [];
    const rewards: number[][] = [];
    const emb: Record<string, number[]> = { train: [], test: [] };
    const truth: number[] = [];
    for (const [split, per] of [['train', 40], ['test', 15]] as const) {
      for (let c = 0; c < K; c++) {
        for (let n = 0; n < per; n++) {
          items.push([`task${n % 2}`, split]);
          // worker c is right 85% of the time on cluster c, the others 20%
          rewards.push(Array.from({ length: K }, (_, j) => (r.next() < (j === c ? 0.85 : 0.2) ? 1 : 0)));
          emb[split]!.push(...centres[c]!.map((v) => v + 0.3 * r.normal()));
          if (split === 'test') truth.push(c);
        }
      }
    }
    const t = makeTable(items, rewards, [1, 1, 1]);
    const d = knnRouter(
      t,
      { data: Float32Array.from(emb.train!), n: 40 * K, dim },
      { data: Float32Array.from(emb.test!), n: 15 * K, dim },
      { k: 10 },
    );
    expect([...d.choice]).toEqual(truth);
    expect(d.scores.length).toBe(15 * K * K);
    // restricted pool: never outside it
    const d2 = knnRouter(t, { data: Float32Array.from(emb.train!), n: 40 * K, dim }, { data: Float32Array.from(emb.test!), n: 15 * K, dim }, { allowed: [0, 1] });
    expect(new Set(d2.choice)).toEqual(new Set([0, 1]));
  });

  it('checks embedding counts against the splits', () => {
    const t = tinyTable();
    expect(() => knnRouter(t, randomEmb(4, 3, 'a'), randomEmb(3, 3, 'b'))).toThrow(/5 train items but 4/);
  });

  it('runs on 5,600 x 500 x 512 random data (speed sanity, no timing asserted)', () => {
    const train = randomEmb(5600, 512, 'big-train');
    const q = randomEmb(500, 512, 'big-query');
    const { index, k } = nearestNeighbours(train, q, 10);
    expect(index.length).toBe(500 * k);
    // spot-check the last query row (in the remainder-free 4-row blocks) against a naive search
    const last = { data: q.data.subarray(499 * 512), n: 1, dim: 512 };
    expect([...index.subarray(499 * 10)]).toEqual(naiveNeighbours(train, last, 10)[0]);
  });
});
