import { describe, expect, it } from 'vitest';
import { rng } from '@fugu/core';
import { costAwareDecisions, costQualitySweep, nonDecreasingConvexHull } from './sweep.ts';
import { makeTable } from './test-tables.ts';

describe('non-decreasing convex hull', () => {
  it('hand-computed: drops points under the hull and the falling tail', () => {
    const pts = [
      { cost: 0, reward: 0.1 },
      { cost: 1, reward: 0.5 },
      { cost: 2, reward: 0.6 },
      { cost: 3, reward: 0.9 },
      { cost: 4, reward: 0.85 },
      { cost: 2, reward: 0.2 },
      { cost: 1, reward: 0.3 },
    ];
    expect(nonDecreasingConvexHull(pts).map((p) => [p.cost, p.reward])).toEqual([
      [0, 0.1],
      [1, 0.5],
      [3, 0.9],
    ]);
  });

  it('collinear points are not vertices; an empty input gives an empty hull', () => {
    const pts = [{ cost: 0, reward: 0 }, { cost: 1, reward: 1 }, { cost: 2, reward: 2 }];
    expect(nonDecreasingConvexHull(pts)).toEqual([pts[0], pts[2]]);
    expect(nonDecreasingConvexHull([])).toEqual([]);
  });

  it('random points: the hull rises, is concave, and no point lies above it', () => {
    const r = rng('hull');
    for (let trial = 0; trial < 50; trial++) {
      const pts = Array.from({ length: 30 }, () => ({ cost: r.next(), reward: r.next() }));
      const h = nonDecreasingConvexHull(pts);
      for (let t = 1; t < h.length; t++) expect(h[t]!.reward).toBeGreaterThan(h[t - 1]!.reward);
      const slopes = h.slice(1).map((p, t) => (p.reward - h[t]!.reward) / (p.cost - h[t]!.cost));
      for (let t = 1; t < slopes.length; t++) expect(slopes[t]!).toBeLessThan(slopes[t - 1]!);
      const at = (c: number) => {
        if (c >= h[h.length - 1]!.cost) return h[h.length - 1]!.reward;
        for (let t = 1; t < h.length; t++) {
          if (c <= h[t]!.cost) return h[t - 1]!.reward + ((c - h[t - 1]!.cost) / (h[t]!.cost - h[t - 1]!.cost)) * (h[t]!.reward - h[t - 1]!.reward);
        }
        return h[0]!.reward;
      };
      for (const p of pts) if (p.cost >= h[0]!.cost) expect(p.reward).toBeLessThanOrEqual(at(p.cost) + 1e-12);
      // the best point is on it
      expect(h[h.length - 1]!.reward).toBe(Math.max(...pts.map((p) => p.reward)));
    }
  });
});

describe('cost-quality sweep', () => {
  // worker 0 costs 1, worker 1 costs 3 (normalised 1/3 and 1); worker 1 is the right one on both items
  const t = makeTable([['x', 'test'], ['x', 'test']], [[0, 1], [0, 1]], [1, 3]);
  const scores = [0.4, 0.6, 0.1, 0.9];

  it('hand-computed points: item a switches to the cheap worker at lambda 0.3, item b at 1.2', () => {
    const s = costQualitySweep(t, [0, 1], scores, { lambdas: [0, 0.5, 2] });
    expect([...s.normalisedPrices]).toEqual([1 / 3, 1]);
    expect(s.points).toEqual([
      { lambda: 0, cost: 3, reward: 1 },
      { lambda: 0.5, cost: 2, reward: 0.5 },
      { lambda: 2, cost: 1, reward: 0 },
    ]);
    // the middle point is on the chord: not a hull vertex
    expect(s.hull).toEqual([s.points[2], s.points[0]]);
  });

  it('the default grid spans quality-only (lambda 0) to cheapest-always', () => {
    const s = costQualitySweep(t, [0, 1], scores);
    expect(s.points[0]).toEqual({ lambda: 0, cost: 3, reward: 1 });
    expect(s.points[s.points.length - 1]).toMatchObject({ cost: 1, reward: 0 });
    for (let n = 1; n < s.points.length; n++) expect(s.points[n]!.lambda).toBeGreaterThan(s.points[n - 1]!.lambda);
  });

  it('ties go to the cheaper worker, and the pool is respected', () => {
    expect([...costAwareDecisions([0.5, 0.5], 2, [1, 0.2], 0, [0, 1])]).toEqual([1]);
    const s = costQualitySweep(t, [0, 1], scores, { lambdas: [0], allowed: [0] });
    expect(s.points).toEqual([{ lambda: 0, cost: 1, reward: 0 }]);
  });

  it('given prices drive the decision, realised costs the reported cost', () => {
    // claim worker 1 is the cheap one: a high lambda now picks it
    const s = costQualitySweep(t, [0, 1], scores, { lambdas: [100], prices: [10, 1] });
    expect(s.points[0]).toEqual({ lambda: 100, cost: 3, reward: 1 });
    expect(() => costQualitySweep(t, [0, 1], scores.slice(1))).toThrow(/scores/);
  });
});
