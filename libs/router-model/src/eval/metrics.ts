// Metrics of `fugu router eval`: mean reward and cost of a decision, RouteLLM's APGR and CPT for a
// strong/weak pair, RouterBench's AIQ, the routing distribution per task, and the gap closed
// toward the oracle.

import { InputError } from '@fugu/core';
import { nonDecreasingConvexHull, type CostQualityPoint } from './sweep.ts';
import type { Decisions, EvalTable } from './types.ts';

function checkDecisions(table: EvalTable, d: Decisions): void {
  if (d.rows.length !== d.choice.length) throw new InputError(`${d.rows.length} rows but ${d.choice.length} choices`, { field: 'choice' });
  if (d.rows.length === 0) throw new InputError('no decisions to measure', { field: 'rows' });
  const K = table.workers.length;
  d.rows.forEach((i, t) => {
    if (!Number.isInteger(i) || i < 0 || i >= table.items.length) throw new InputError(`no item row ${i}`, { field: `rows[${t}]` });
    const j = d.choice[t]!;
    if (j < 0 || j >= K) throw new InputError(`no worker ${j}`, { field: `choice[${t}]` });
  });
}

/** Mean reward of the chosen workers over the decided items. */
export function meanReward(table: EvalTable, d: Decisions): number {
  checkDecisions(table, d);
  let s = 0;
  d.rows.forEach((i, t) => (s += table.rewards[i]![d.choice[t]!]!));
  return s / d.rows.length;
}

/** Mean cost (USD per item) of the chosen workers over the decided items. */
export function meanCost(table: EvalTable, d: Decisions): number {
  checkDecisions(table, d);
  let s = 0;
  d.rows.forEach((i, t) => (s += table.costs[i]![d.choice[t]!]!));
  return s / d.rows.length;
}

/**
 * Routing distribution per task: task -> worker name -> fraction of that task's decided items
 * routed to the worker (every worker listed, 0 when never chosen; tasks in sorted order). The data
 * of a stacked bar plot as in the Fugu report's Figure 5.
 */
export function routingDistribution(table: EvalTable, d: Decisions): Record<string, Record<string, number>> {
  checkDecisions(table, d);
  const K = table.workers.length;
  const counts = new Map<string, number[]>();
  d.rows.forEach((i, t) => {
    const task = table.items[i]!.task;
    let c = counts.get(task);
    if (!c) counts.set(task, (c = new Array<number>(K).fill(0)));
    c[d.choice[t]!]!++;
  });
  const out: Record<string, Record<string, number>> = {};
  for (const task of [...counts.keys()].sort()) {
    const c = counts.get(task)!;
    const total = c.reduce((a, b) => a + b, 0);
    out[task] = Object.fromEntries(table.workers.map((w, j) => [w.name, c[j]! / total]));
  }
  return out;
}

/**
 * Gap closed toward the oracle: (router - bestSingle) / (oracle - bestSingle), 1 = as good as the
 * oracle, 0 = no better than the best single worker, negative = worse. NaN when the oracle is no
 * better than the best single worker (there is no gap to close).
 */
export function gapClosed(router: number, bestSingle: number, oracle: number): number {
  const gap = oracle - bestSingle;
  return gap > 0 ? (router - bestSingle) / gap : Number.NaN;
}

// ---------------------------------------------------------------------------------------------
// RouteLLM: APGR and CPT

/**
 * The call-performance curve of a threshold router between a strong model S and a weak model W.
 *
 * Source: Ong et al., "RouteLLM: Learning to Route LLMs with Preference Data" (2024,
 * arXiv:2406.18665), its evaluation metrics (PGR, APGR, CPT), and lm-sys/RouteLLM routellm/evals/evaluate.py.
 * A router R_alpha sends item x to S when its score (their "strong win rate" P(S wins | x)) is
 * >= alpha. With c(R_alpha) the fraction of calls to S and r(.) the mean reward:
 *
 *   PGR(R_alpha) = (r(R_alpha) - r(W)) / (r(S) - r(W))            performance gap recovered
 *   APGR         = integral_0^1 PGR(R_alpha) d c(R_alpha)           area under PGR over c in [0,1]
 *   CPT(x%)      = min { c(R_alpha) : PGR(R_alpha) >= x% }          call-performance threshold
 *
 * RouteLLM's code evaluates 10 quantile thresholds and integrates with np.trapz over c; CPT is
 * np.interp of the target performance on that curve. Here every distinct score is a threshold (the
 * exact curve, from c = 0, all to W, to c = 1, all to S; items with equal scores switch together),
 * APGR is the trapezoid rule over it, and CPT linearly interpolates the first crossing of x% (the
 * same as np.interp where the curve is monotone, and still the minimum where it is not).
 *
 * Our router's score for the pair is pi(S) / (pi(S) + pi(W)): its probability that S is the better
 * of the two, conditioned on choosing one of them, the analogue of RouteLLM's strong win rate.
 * (A cost-aware lambda sweep between two workers thresholds pi(S) - pi(W) instead, which mixes
 * in the mass the router gives to other workers; the conditional ratio does not.)
 */
export type CallPerformanceCurve = {
  /** fraction of calls to S at each operating point, increasing from 0 to 1 */
  calls: Float64Array;
  /** mean reward at each operating point */
  perf: Float64Array;
  /** PGR at each operating point (NaN everywhere when r(S) = r(W)) */
  pgr: Float64Array;
  perfStrong: number;
  perfWeak: number;
};

/** The exact call-performance curve of thresholding `scores` (higher = send to S) over all distinct scores. */
export function callPerformanceCurve(
  scores: ArrayLike<number>,
  strongRewards: ArrayLike<number>,
  weakRewards: ArrayLike<number>,
): CallPerformanceCurve {
  const n = scores.length;
  if (n === 0) throw new InputError('no items', { field: 'scores' });
  if (strongRewards.length !== n || weakRewards.length !== n) {
    throw new InputError(`${n} scores but ${strongRewards.length} strong and ${weakRewards.length} weak rewards`, { field: 'rewards' });
  }
  for (let i = 0; i < n; i++) {
    if (Number.isNaN(scores[i]!)) throw new InputError('score is NaN', { field: `scores[${i}]` });
  }
  let perfStrong = 0;
  let perfWeak = 0;
  for (let i = 0; i < n; i++) {
    perfStrong += strongRewards[i]!;
    perfWeak += weakRewards[i]!;
  }
  perfStrong /= n;
  perfWeak /= n;
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => scores[b]! - scores[a]!);
  const calls = [0];
  const perf = [perfWeak];
  let gain = 0;
  for (let t = 0; t < n; ) {
    const s = scores[order[t]!]!;
    // all items with this score switch to S together
    while (t < n && scores[order[t]!] === s) {
      const i = order[t]!;
      gain += strongRewards[i]! - weakRewards[i]!;
      t++;
    }
    calls.push(t / n);
    perf.push(t === n ? perfStrong : perfWeak + gain / n);
  }
  const gap = perfStrong - perfWeak;
  const pgr = perf.map((p) => (gap !== 0 ? (p - perfWeak) / gap : Number.NaN));
  return { calls: Float64Array.from(calls), perf: Float64Array.from(perf), pgr: Float64Array.from(pgr), perfStrong, perfWeak };
}

/** APGR: trapezoid area under PGR over the fraction of calls to S (NaN when r(S) = r(W)). */
export function apgr(curve: CallPerformanceCurve): number {
  let a = 0;
  for (let t = 1; t < curve.calls.length; t++) {
    a += ((curve.pgr[t]! + curve.pgr[t - 1]!) / 2) * (curve.calls[t]! - curve.calls[t - 1]!);
  }
  return a;
}

/** CPT(x): the least fraction of calls to S at which the (piecewise-linear) PGR reaches x, x in [0, 1] (0.5 for CPT(50%)). */
export function cpt(curve: CallPerformanceCurve, x: number): number {
  if (!(x >= 0 && x <= 1)) throw new InputError(`the PGR target must be in [0, 1], got ${x}`, { field: 'x' });
  const { calls, pgr } = curve;
  if (Number.isNaN(pgr[0]!)) return Number.NaN;
  if (pgr[0]! >= x) return calls[0]!;
  for (let t = 1; t < calls.length; t++) {
    const p0 = pgr[t - 1]!;
    const p1 = pgr[t]!;
    if (p1 >= x) return calls[t - 1]! + ((x - p0) / (p1 - p0)) * (calls[t]! - calls[t - 1]!);
  }
  return Number.NaN; // unreachable with PGR(1) = 1 and x <= 1
}

/**
 * A K-worker router's score for the pair (S, W): pi(S) / (pi(S) + pi(W)) per item, from a
 * row-major probability matrix [n * K]; 0.5 where both are 0.
 */
export function pairScores(probs: ArrayLike<number>, K: number, strong: number, weak: number): Float64Array {
  if (!(strong >= 0 && strong < K && weak >= 0 && weak < K) || strong === weak) {
    throw new InputError(`strong ${strong} and weak ${weak} must be two different workers of ${K}`, { field: 'strong' });
  }
  if (probs.length % K !== 0) throw new InputError(`${probs.length} probabilities is not a multiple of ${K} workers`, { field: 'probs' });
  const n = probs.length / K;
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const s = probs[i * K + strong]!;
    const w = probs[i * K + weak]!;
    out[i] = s + w > 0 ? s / (s + w) : 0.5;
  }
  return out;
}

export type StrongWeakReport = { apgr: number; cpt50: number; cpt80: number; curve: CallPerformanceCurve };

/** APGR, CPT(50%) and CPT(80%) of a router's pair scores on table rows, for workers `strong` and `weak`. */
export function strongWeakMetrics(
  table: EvalTable,
  rows: readonly number[],
  scores: ArrayLike<number>,
  strong: number,
  weak: number,
): StrongWeakReport {
  const K = table.workers.length;
  if (!(Number.isInteger(strong) && strong >= 0 && strong < K)) throw new InputError(`no worker ${strong}`, { field: 'strong' });
  if (!(Number.isInteger(weak) && weak >= 0 && weak < K) || weak === strong) throw new InputError(`bad weak worker ${weak}`, { field: 'weak' });
  if (scores.length !== rows.length) throw new InputError(`${rows.length} rows but ${scores.length} scores`, { field: 'scores' });
  const curve = callPerformanceCurve(
    scores,
    rows.map((i) => table.rewards[i]![strong]!),
    rows.map((i) => table.rewards[i]![weak]!),
  );
  return { apgr: apgr(curve), cpt50: cpt(curve, 0.5), cpt80: cpt(curve, 0.8), curve };
}

// ---------------------------------------------------------------------------------------------
// RouterBench: AIQ

/**
 * AIQ, Average Improvement in Quality, of a router swept over its willingness to pay.
 *
 * Source: Hu et al., "RouterBench: A Benchmark for Multi-LLM Routing System" (2024,
 * arXiv:2403.12031), its cost-quality framework (non-decreasing convex hull, AIQ), and withmartian/routerbench
 * evaluation/AIQ.py. With R~ the non-decreasing convex hull of the router's (cost, quality) points:
 *
 *   AIQ(R) = 1 / (c_max - c_min) * integral_{c_min}^{c_max} R~(c) dc
 *
 * R~ is linear between hull vertices (a random mixture of two operating points), flat after the
 * last one (a larger budget buys no more), and 0 below the cheapest (the router cannot run for
 * less; RouterBench's code integrates from the hull's first point and normalises by the common
 * maximum cost, the same convention). [c_min, c_max] is the hull's own cost range unless `range`
 * is given; to compare routers, give them all the same range (RouterBench: the common cost range
 * of the routers compared). With c_min = c_max (one point, one cost) AIQ is R~(c_min), the limit
 * of the average: the point's quality.
 */
export function aiq(points: readonly CostQualityPoint[], range?: { min: number; max: number }): number {
  const hull = nonDecreasingConvexHull(points);
  if (hull.length === 0) throw new InputError('no cost-quality points', { field: 'points' });
  const lo = range?.min ?? hull[0]!.cost;
  const hi = range?.max ?? hull[hull.length - 1]!.cost;
  if (!(Number.isFinite(lo) && Number.isFinite(hi) && hi >= lo)) throw new InputError(`bad cost range [${lo}, ${hi}]`, { field: 'range' });
  if (hi === lo) return hullAt(hull, lo);
  return integrateHull(hull, lo, hi) / (hi - lo);
}

/** R~(c): the hull as a function of cost. */
function hullAt(hull: readonly CostQualityPoint[], c: number): number {
  const first = hull[0]!;
  const last = hull[hull.length - 1]!;
  if (c < first.cost) return 0;
  if (c >= last.cost) return last.reward;
  for (let t = 1; t < hull.length; t++) {
    const a = hull[t - 1]!;
    const b = hull[t]!;
    if (c <= b.cost) return a.reward + ((c - a.cost) / (b.cost - a.cost)) * (b.reward - a.reward);
  }
  return last.reward;
}

/** integral of R~ over [lo, hi], exact for the piecewise-linear hull. */
function integrateHull(hull: readonly CostQualityPoint[], lo: number, hi: number): number {
  // breakpoints inside (lo, hi), then the trapezoid rule is exact between consecutive breakpoints
  const xs = [lo, ...hull.map((p) => p.cost).filter((c) => c > lo && c < hi), hi];
  let area = 0;
  for (let t = 1; t < xs.length; t++) {
    const a = xs[t - 1]!;
    const b = xs[t]!;
    // R~ jumps from 0 to the first quality at the first cost: evaluate just inside each piece
    const ya = a < hull[0]!.cost ? 0 : hullAt(hull, a);
    const yb = b <= hull[0]!.cost ? 0 : hullAt(hull, b);
    area += ((ya + yb) / 2) * (b - a);
  }
  return area;
}
