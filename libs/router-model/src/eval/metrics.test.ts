import { describe, expect, it } from 'vitest';
import { rng } from '@fugu/core';
import { aiq, apgr, callPerformanceCurve, cpt, gapClosed, meanCost, meanReward, pairScores, routingDistribution, strongWeakMetrics } from './metrics.ts';
import { makeTable, tinyTable } from './test-tables.ts';
import { splitRows } from './types.ts';

describe('mean reward, cost, distribution, gap closed', () => {
  const t = tinyTable();
  const rows = splitRows(t, 'test');

  it('means of a decision vector', () => {
    const d = { rows, choice: Int32Array.from([0, 1, 2]) };
    expect(meanReward(t, d)).toBeCloseTo((0.2 + 1 + 0.5) / 3, 12);
    expect(meanCost(t, d)).toBe(2);
    expect(() => meanReward(t, { rows, choice: Int32Array.from([0, 3, 0]) })).toThrow(/choice\[1\]/);
  });

  it('routing distribution per task', () => {
    const t2 = makeTable(
      [['math', 'test'], ['math', 'test'], ['math', 'test'], ['math', 'test'], ['code', 'test']],
      [[0, 0], [0, 0], [0, 0], [0, 0], [0, 0]],
      [1, 1],
      ['small', 'big'],
    );
    const dist = routingDistribution(t2, { rows: [0, 1, 2, 3, 4], choice: Int32Array.from([0, 1, 1, 1, 0]) });
    expect(dist).toEqual({ code: { small: 1, big: 0 }, math: { small: 0.25, big: 0.75 } });
    expect(Object.keys(dist)).toEqual(['code', 'math']);
  });

  it('gap closed toward the oracle', () => {
    expect(gapClosed(0.7, 0.6, 0.8)).toBeCloseTo(0.5, 12);
    expect(gapClosed(0.8, 0.6, 0.8)).toBe(1);
    expect(gapClosed(0.5, 0.6, 0.8)).toBeCloseTo(-0.5, 12);
    expect(gapClosed(0.6, 0.6, 0.6)).toBeNaN();
  });
});

describe('RouteLLM APGR and CPT', () => {
  it('a hand-computed curve', () => {
    // order by score: item0 (+1), item3 (-1), item2 (+1), item1 (0); r(S) = 0.5, r(W) = 0.25
    const c = callPerformanceCurve([0.9, 0.1, 0.5, 0.7], [1, 0, 1, 0], [0, 0, 0, 1]);
    expect([...c.calls]).toEqual([0, 0.25, 0.5, 0.75, 1]);
    expect([...c.perf]).toEqual([0.25, 0.5, 0.25, 0.5, 0.5]);
    expect([...c.pgr]).toEqual([0, 1, 0, 1, 1]);
    expect(apgr(c)).toBeCloseTo(0.625, 12);
    expect(cpt(c, 0.5)).toBeCloseTo(0.125, 12);
    expect(cpt(c, 0.8)).toBeCloseTo(0.2, 12);
  });

  it('items with equal scores switch together', () => {
    const c = callPerformanceCurve([0.5, 0.5, 0.1], [1, 0, 0], [0, 0, 0]);
    expect([...c.calls]).toEqual([0, 2 / 3, 1]);
    expect([...c.pgr]).toEqual([0, 1, 1]);
    expect(apgr(c)).toBeCloseTo(2 / 3, 12);
  });

  // S beats W on a fraction g of the items and never loses: a perfect router sends exactly those to S
  function perfectCase(n: number, g: number) {
    const strong: number[] = [];
    const weak: number[] = [];
    const scores: number[] = [];
    for (let i = 0; i < n; i++) {
      const gapItem = i < g * n;
      const both = !gapItem && i % 2 === 0;
      strong.push(gapItem || both ? 1 : 0);
      weak.push(both ? 1 : 0);
      scores.push(gapItem ? 1 : 0);
    }
    return { strong, weak, scores };
  }

  it('perfect router: PGR reaches 1 at the gap fraction; CPT(x) = x * gap fraction; APGR = 1 - g/2', () => {
    const { strong, weak, scores } = perfectCase(100, 0.4);
    const c = callPerformanceCurve(scores, strong, weak);
    expect(cpt(c, 1)).toBeCloseTo(0.4, 12);
    expect(cpt(c, 0.5)).toBeCloseTo(0.2, 12);
    expect(cpt(c, 0.8)).toBeCloseTo(0.32, 12);
    expect(apgr(c)).toBeCloseTo(0.8, 12);
    // with a small gap fraction the perfect router's APGR tends to 1
    const small = perfectCase(1000, 0.01);
    expect(apgr(callPerformanceCurve(small.scores, small.strong, small.weak))).toBeCloseTo(0.995, 12);
    // and no ordering of the items does better
    const r = rng('perms');
    for (let p = 0; p < 20; p++) {
      const other = scores.map(() => r.next());
      expect(apgr(callPerformanceCurve(other, strong, weak))).toBeLessThanOrEqual(apgr(c) + 1e-12);
    }
  });

  it('a random router recovers about half the gap (APGR ~ 0.5, CPT(50%) ~ 0.5)', () => {
    const r = rng('random-apgr');
    const n = 5000;
    const strong = Array.from({ length: n }, () => (r.next() < 0.7 ? 1 : 0));
    const weak = Array.from({ length: n }, () => (r.next() < 0.4 ? 1 : 0));
    const scores = Array.from({ length: n }, () => r.next());
    const c = callPerformanceCurve(scores, strong, weak);
    expect(c.calls[0]).toBe(0);
    expect(c.pgr[0]).toBe(0);
    expect(c.calls[c.calls.length - 1]).toBe(1);
    expect(c.pgr[c.pgr.length - 1]).toBe(1);
    expect(Math.abs(apgr(c) - 0.5)).toBeLessThan(0.03);
    expect(Math.abs(cpt(c, 0.5) - 0.5)).toBeLessThan(0.05);
  });

  it('no gap between S and W: NaN, not a number made up', () => {
    const c = callPerformanceCurve([0.2, 0.8], [1, 0], [0, 1]);
    expect(apgr(c)).toBeNaN();
    expect(cpt(c, 0.5)).toBeNaN();
  });

  it('pair scores pi(S) / (pi(S) + pi(W)) and the table wrapper', () => {
    const ps = pairScores([0.2, 0.6, 0.2, 0, 0, 1], 3, 1, 0);
    expect(ps[0]).toBeCloseTo(0.75, 12);
    expect(ps[1]).toBe(0.5);
    expect(() => pairScores([0.5, 0.5], 2, 1, 1)).toThrow(/two different workers/);
    const t = makeTable(
      [['x', 'test'], ['x', 'test'], ['x', 'test'], ['x', 'test']],
      [[0, 1], [0, 0], [0, 1], [1, 0]],
      [1, 5],
    );
    const m = strongWeakMetrics(t, [0, 1, 2, 3], [0.9, 0.1, 0.5, 0.7], 1, 0);
    expect(m.apgr).toBeCloseTo(0.625, 12);
    expect(m.cpt50).toBeCloseTo(0.125, 12);
    expect(m.cpt80).toBeCloseTo(0.2, 12);
  });
});

describe('RouterBench AIQ', () => {
  it('of a single point is its quality', () => {
    expect(aiq([{ cost: 2, reward: 0.7 }])).toBe(0.7);
  });

  it('is the mean height of the hull over its cost range', () => {
    expect(aiq([{ cost: 0, reward: 0.2 }, { cost: 1, reward: 0.8 }])).toBeCloseTo(0.5, 12);
    // a point under the hull does not count
    expect(aiq([{ cost: 0, reward: 0.2 }, { cost: 0.5, reward: 0.3 }, { cost: 1, reward: 0.8 }])).toBeCloseTo(0.5, 12);
    // a point above the chord does: hull (0,.2) (.5,.7) (1,.8): area .225 + .375
    expect(aiq([{ cost: 0, reward: 0.2 }, { cost: 0.5, reward: 0.7 }, { cost: 1, reward: 0.8 }])).toBeCloseTo(0.6, 12);
  });

  it('over a common range: 0 below the cheapest point, flat after the dearest', () => {
    const pts = [{ cost: 1, reward: 0.4 }, { cost: 2, reward: 0.8 }];
    expect(aiq(pts, { min: 0, max: 2 })).toBeCloseTo(0.3, 12);
    expect(aiq(pts, { min: 0, max: 3 })).toBeCloseTo((0.6 + 0.8) / 3, 12);
    expect(aiq(pts, { min: 1.5, max: 1.5 })).toBeCloseTo(0.6, 12);
  });

  it('a dearer, worse point is cut from the non-decreasing hull', () => {
    expect(aiq([{ cost: 0, reward: 0.9 }, { cost: 1, reward: 0.5 }], { min: 0, max: 1 })).toBeCloseTo(0.9, 12);
  });
});
