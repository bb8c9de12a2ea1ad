// Cost-quality curve of a router swept over its willingness to pay, and the non-decreasing convex
// hull of such a curve (RouterBench's R~, used by AIQ and drawn by `fugu router sweep`).
//
// For lambda in a grid, each item goes to argmax_j (s_ij - lambda * cn_j) over the allowed workers,
// where s_ij is the router's score (e.g. pi_theta(j | x_i), or a kNN neighbour mean) and cn_j the
// worker's normalised price: its expected cost per call divided by the largest among the allowed
// workers, so lambda is in units of score per "most expensive call". The expected cost per call is
// what a router knows before calling (a price, not the realised tokens of this item): by default
// the mean of costs[i][j] over the swept rows, or the caller's `prices`. The point reports the mean
// REALISED cost and reward of the decisions. Ties go to the cheaper worker, then the lower index.

import { InputError } from '@fugu/core';
import { resolveAllowed, type EvalTable } from './types.ts';

export type CostQualityPoint = { cost: number; reward: number };
export type SweepPoint = CostQualityPoint & { lambda: number };

export type SweepOptions = {
  /** the lambda grid; default: 0 and 100 log-spaced values from 1e-3 up to one where the cheapest worker always wins */
  lambdas?: readonly number[];
  /** expected cost per call of each worker (length K), used for the decision; default the mean realised cost over the rows */
  prices?: readonly number[];
  /** worker indices the router may choose; default all */
  allowed?: readonly number[];
};

export type Sweep = {
  points: SweepPoint[];
  /** the non-decreasing convex hull of `points`, by increasing cost */
  hull: SweepPoint[];
  /** cn_j, the normalised prices used (0 for workers outside the allowed pool) */
  normalisedPrices: Float64Array;
};

/**
 * Decisions of a score matrix at one lambda: argmax_j (scores[t*K + j] - lambda * cn[j]) over the
 * allowed workers, ties to the lower cn, then the lower index.
 */
export function costAwareDecisions(
  scores: ArrayLike<number>,
  K: number,
  normalisedPrices: ArrayLike<number>,
  lambda: number,
  allowed: readonly number[],
): Int32Array {
  const n = scores.length / K;
  const out = new Int32Array(n);
  for (let t = 0; t < n; t++) {
    const o = t * K;
    let best = allowed[0]!;
    let bestV = scores[o + best]! - lambda * normalisedPrices[best]!;
    for (const j of allowed) {
      const v = scores[o + j]! - lambda * normalisedPrices[j]!;
      if (v > bestV || (v === bestV && normalisedPrices[j]! < normalisedPrices[best]!)) {
        best = j;
        bestV = v;
      }
    }
    out[t] = best;
  }
  return out;
}

/** Default grid: 0, then 100 log-spaced values from 1e-3 to lambdaMax (where the cheapest worker always wins). */
function defaultLambdas(scores: ArrayLike<number>, cn: Float64Array, allowed: readonly number[]): number[] {
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = 0; i < scores.length; i++) {
    const v = scores[i]!;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  const levels = [...new Set(allowed.map((j) => cn[j]!))].sort((a, b) => a - b);
  let minGap = Infinity;
  for (let i = 1; i < levels.length; i++) minGap = Math.min(minGap, levels[i]! - levels[i - 1]!);
  // past (score range) / (smallest price gap), no score difference can pay for a dearer worker
  const lambdaMax = Math.max(1, Number.isFinite(minGap) ? (2 * (hi - lo)) / minGap : 1);
  const n = 100;
  const a = Math.log(1e-3);
  const b = Math.log(Math.max(lambdaMax, 1e-3));
  const grid = [0];
  for (let i = 0; i < n; i++) grid.push(Math.exp(a + ((b - a) * i) / (n - 1)));
  return grid;
}

/**
 * Sweep a router's per-item worker scores (row-major [rows.length * K]) over lambda: one point
 * (lambda, mean realised cost, mean reward) per grid value, and their non-decreasing convex hull.
 */
export function costQualitySweep(table: EvalTable, rows: readonly number[], scores: ArrayLike<number>, opts: SweepOptions = {}): Sweep {
  const K = table.workers.length;
  if (rows.length === 0) throw new InputError('no items to sweep', { field: 'rows' });
  if (scores.length !== rows.length * K) {
    throw new InputError(`${rows.length} items x ${K} workers need ${rows.length * K} scores, got ${scores.length}`, { field: 'scores' });
  }
  const allowed = resolveAllowed(table, opts.allowed);
  let prices: number[];
  if (opts.prices) {
    if (opts.prices.length !== K) throw new InputError(`${K} workers but ${opts.prices.length} prices`, { field: 'prices' });
    opts.prices.forEach((p, j) => {
      if (!(p >= 0) || !Number.isFinite(p)) throw new InputError(`not a non-negative price: ${p}`, { field: `prices[${j}]` });
    });
    prices = [...opts.prices];
  } else {
    prices = Array.from({ length: K }, (_, j) => rows.reduce((s, i) => s + table.costs[i]![j]!, 0) / rows.length);
  }
  const maxPrice = Math.max(...allowed.map((j) => prices[j]!));
  const cn = new Float64Array(K);
  for (const j of allowed) cn[j] = maxPrice > 0 ? prices[j]! / maxPrice : 0;

  const lambdas = opts.lambdas ? [...opts.lambdas] : defaultLambdas(scores, cn, allowed);
  lambdas.forEach((l, n) => {
    if (!(l >= 0) || !Number.isFinite(l)) throw new InputError(`lambda must be finite and >= 0, got ${l}`, { field: `lambdas[${n}]` });
  });
  const points: SweepPoint[] = lambdas.map((lambda) => {
    const choice = costAwareDecisions(scores, K, cn, lambda, allowed);
    let r = 0;
    let c = 0;
    rows.forEach((i, t) => {
      r += table.rewards[i]![choice[t]!]!;
      c += table.costs[i]![choice[t]!]!;
    });
    return { lambda, cost: c / rows.length, reward: r / rows.length };
  });
  return { points, hull: nonDecreasingConvexHull(points), normalisedPrices: cn };
}

/**
 * RouterBench's non-decreasing convex hull of cost-quality points: the upper convex hull
 * (any point on a segment between two routers is reachable by mixing them at random), started at
 * the cheapest point (the best one at that cost) and cut at the first point of highest quality
 * (paying more for no more quality is never on the frontier). Returns a subset of the input
 * points, by increasing cost, with strictly increasing quality.
 */
export function nonDecreasingConvexHull<P extends CostQualityPoint>(points: readonly P[]): P[] {
  if (points.length === 0) return [];
  for (const p of points) {
    if (!Number.isFinite(p.cost) || !Number.isFinite(p.reward)) throw new InputError(`not a finite point: (${p.cost}, ${p.reward})`, { field: 'points' });
  }
  const sorted = [...points].sort((a, b) => a.cost - b.cost || b.reward - a.reward);
  // one point per cost: the best
  const uniq: P[] = [];
  for (const p of sorted) if (uniq.length === 0 || uniq[uniq.length - 1]!.cost !== p.cost) uniq.push(p);
  const hull: P[] = [];
  for (const p of uniq) {
    while (hull.length >= 2) {
      const a = hull[hull.length - 2]!;
      const b = hull[hull.length - 1]!;
      // b on or below the line a -> p: not a vertex of the upper hull
      const cross = (b.cost - a.cost) * (p.reward - a.reward) - (b.reward - a.reward) * (p.cost - a.cost);
      if (cross >= 0) hull.pop();
      else break;
    }
    hull.push(p);
  }
  // the upper hull rises then falls: keep the rising part
  let end = 1;
  while (end < hull.length && hull[end]!.reward > hull[end - 1]!.reward) end++;
  return hull.slice(0, end);
}
