// The calibration estimator: from observed dependent steps (the worker's own outcome s, the
// fraction f of visible answers that were correct, whether the step was correct) to the replay
// parameters, with counts and intervals. `fugu ultra calibrate` feeds it live two-step
// workflows (README, "Calibration"); here it is pure.

import { InputError } from '@fugu/core';
import { REPLAY_PRESETS, type ReplayParams } from './params.ts';
import { stepProbability } from './model.ts';

export type CalibrationObservation = {
  /** the step worker's own (live, solo) outcome on the item */
  s: boolean;
  /** fraction of the visible answers that were correct, in [0, 1] */
  f: number;
  /** whether the dependent step's answer was correct */
  correct: boolean;
  /** the worker that performed the step (for per-worker estimates) */
  worker?: string;
};

export type CornerName = 'keep' | 'misled' | 'adopt' | 'fix';

export type CellEstimate = {
  /** the cell's observations: s and f as the parameter defines them (f exactly 0 or 1) */
  n: number;
  /** how many of them were correct */
  correct: number;
  /** the estimate (for `misled`, 1 - the shrunk share correct); the fallback when n = 0 and no prior */
  estimate: number;
  /** 95% Wilson interval of the parameter from the cell's own counts; [0, 1] when n = 0 */
  interval: [number, number];
  source: 'data' | 'prior' | 'fallback';
};

export type HerdEstimate = {
  /** observations with 0 < f < 1 (only those inform herd) */
  n: number;
  estimate: number;
  /** 95% profile-likelihood interval within the valid range [0.1, 10] */
  interval: [number, number];
  /** false when the interval covers the whole published range [1, 4] (or there are no observations) */
  identified: boolean;
  source: 'data' | 'fallback';
};

export type ReplayEstimate = {
  params: ReplayParams;
  n: number;
  cells: Record<CornerName, CellEstimate>;
  herd: HerdEstimate;
};

export type EstimateOptions = {
  /** values for parameters without data (default: the large preset) */
  fallback?: ReplayParams;
  /** a Beta prior for the corners: mean = the prior's parameter, strength = pseudo-observations (0: none, the default) */
  prior?: ReplayParams;
  priorStrength?: number;
};

const Z95 = 1.959963984540054;
const HERD_MIN = 0.1, HERD_MAX = 10;

/** The 95% Wilson score interval of a binomial proportion. */
export function wilsonInterval(successes: number, n: number, z = Z95): [number, number] {
  if (n === 0) return [0, 1];
  const p = successes / n, z2 = z * z;
  const centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const half = (z * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n))) / (1 + z2 / n);
  return [Math.max(0, centre - half), Math.min(1, centre + half)];
}

function checkObservations(obs: readonly CalibrationObservation[]): void {
  obs.forEach((o, i) => {
    if (typeof o.s !== 'boolean') throw new InputError('s must be a boolean', { field: `observations[${i}].s` });
    if (typeof o.correct !== 'boolean') throw new InputError('correct must be a boolean', { field: `observations[${i}].correct` });
    if (typeof o.f !== 'number' || !(o.f >= 0 && o.f <= 1)) throw new InputError(`f must be in [0, 1], got ${o.f}`, { field: `observations[${i}].f` });
  });
}

const CORNERS: Array<{ name: CornerName; s: boolean; f: 0 | 1 }> = [
  { name: 'keep', s: true, f: 1 },
  { name: 'misled', s: true, f: 0 },
  { name: 'adopt', s: false, f: 1 },
  { name: 'fix', s: false, f: 0 },
];

function logLik(obs: readonly CalibrationObservation[], corners: Omit<ReplayParams, 'herd'>, h: number): number {
  let ll = 0;
  const p0 = { ...corners, herd: h };
  for (const o of obs) {
    const p = Math.min(1 - 1e-12, Math.max(1e-12, stepProbability(p0, o.s, o.f)));
    ll += o.correct ? Math.log(p) : Math.log(1 - p);
  }
  return ll;
}

function estimateHerd(mid: readonly CalibrationObservation[], corners: Omit<ReplayParams, 'herd'>, fallback: number): HerdEstimate {
  if (mid.length === 0) return { n: 0, estimate: fallback, interval: [HERD_MIN, HERD_MAX], identified: false, source: 'fallback' };
  // a grid on log h, refined by golden section around the best grid point
  const lo = Math.log(HERD_MIN), hi = Math.log(HERD_MAX), G = 120;
  const grid = Array.from({ length: G + 1 }, (_, k) => lo + ((hi - lo) * k) / G);
  const lls = grid.map((x) => logLik(mid, corners, Math.exp(x)));
  let best = 0;
  for (let k = 1; k <= G; k++) if (lls[k]! > lls[best]!) best = k;
  let a = grid[Math.max(0, best - 1)]!, b = grid[Math.min(G, best + 1)]!;
  const phi = (Math.sqrt(5) - 1) / 2;
  for (let it = 0; it < 60; it++) {
    const c = b - phi * (b - a), d = a + phi * (b - a);
    if (logLik(mid, corners, Math.exp(c)) >= logLik(mid, corners, Math.exp(d))) b = d;
    else a = c;
  }
  const xHat = (a + b) / 2;
  const llMax = Math.max(logLik(mid, corners, Math.exp(xHat)), lls[best]!);
  const cut = llMax - (Z95 * Z95) / 2;
  // the interval's ends: bisection between the optimum and the first grid point below the cut on each side
  const edge = (dir: -1 | 1): number => {
    let k = best;
    while (k + dir >= 0 && k + dir <= G && lls[k + dir]! >= cut) k += dir;
    if (k + dir < 0 || k + dir > G) return grid[k]!;
    let inside = dir < 0 ? Math.min(grid[k]!, xHat) : Math.max(grid[k]!, xHat), outside = grid[k + dir]!;
    for (let it = 0; it < 50; it++) {
      const m = (inside + outside) / 2;
      if (logLik(mid, corners, Math.exp(m)) >= cut) inside = m;
      else outside = m;
    }
    return inside;
  };
  const interval: [number, number] = [Math.exp(edge(-1)), Math.exp(edge(1))];
  return { n: mid.length, estimate: Math.exp(xHat), interval, identified: !(interval[0] <= 1 && interval[1] >= 4), source: 'data' };
}

/**
 * Estimates of the five parameters from observed dependent steps. The corners are count-based:
 * keep = share correct among (s=1, f=1), misled = 1 - share correct among (s=1, f=0), adopt =
 * share correct among (s=0, f=1), fix = share correct among (s=0, f=0), each with its count and
 * 95% Wilson interval, shrunk toward `prior` by `priorStrength` pseudo-observations when given.
 * herd is the maximum-likelihood value over the observations with 0 < f < 1, holding the
 * corners at their estimates, with a 95% profile-likelihood interval.
 */
export function estimateReplayParams(obs: readonly CalibrationObservation[], opts: EstimateOptions = {}): ReplayEstimate {
  checkObservations(obs);
  const fallback = opts.fallback ?? REPLAY_PRESETS.large;
  const k = opts.priorStrength ?? 0;
  if (!(k >= 0 && Number.isFinite(k))) throw new InputError(`priorStrength must be a finite number >= 0, got ${k}`, { field: 'priorStrength' });
  if (k > 0 && !opts.prior) throw new InputError('priorStrength needs a prior', { field: 'prior' });
  const cells = {} as Record<CornerName, CellEstimate>;
  for (const c of CORNERS) {
    const inCell = obs.filter((o) => o.s === c.s && o.f === c.f);
    const n = inCell.length, y = inCell.filter((o) => o.correct).length;
    // everything below is in terms of P(correct) in the cell; misled is 1 - that
    const toParam = (q: number): number => (c.name === 'misled' ? 1 - q : q);
    const priorQ = opts.prior ? toParam(opts.prior[c.name]) : undefined;
    let q: number, source: CellEstimate['source'];
    if (n === 0 && priorQ === undefined) [q, source] = [toParam(fallback[c.name]), 'fallback'];
    else if (n === 0) [q, source] = [priorQ!, 'prior'];
    else if (k > 0 && priorQ !== undefined) [q, source] = [(y + k * priorQ) / (n + k), 'data'];
    else [q, source] = [y / n, 'data'];
    const [wl, wh] = wilsonInterval(y, n);
    cells[c.name] = { n, correct: y, estimate: toParam(q), interval: c.name === 'misled' ? [1 - wh, 1 - wl] : [wl, wh], source };
  }
  const corners = { keep: cells.keep.estimate, misled: cells.misled.estimate, adopt: cells.adopt.estimate, fix: cells.fix.estimate };
  const herd = estimateHerd(obs.filter((o) => o.f > 0 && o.f < 1), corners, fallback.herd);
  return { params: { ...corners, herd: herd.estimate }, n: obs.length, cells, herd };
}

/**
 * Per-worker estimates: the pool's estimate over every observation, then each worker's own,
 * shrunk toward the pool's corners by `priorStrength` pseudo-observations (default 20, as the
 * evidence note (docs/analysis/conductor-replay/evidence.md) proposes). Observations without a worker count only toward the pool.
 */
export function estimateReplayParamsByWorker(
  obs: readonly CalibrationObservation[],
  opts: { fallback?: ReplayParams; priorStrength?: number } = {},
): { pool: ReplayEstimate; workers: Record<string, ReplayEstimate> } {
  const pool = estimateReplayParams(obs, opts.fallback ? { fallback: opts.fallback } : {});
  const byWorker = new Map<string, CalibrationObservation[]>();
  for (const o of obs) if (o.worker !== undefined) (byWorker.get(o.worker) ?? byWorker.set(o.worker, []).get(o.worker)!).push(o);
  const workers: Record<string, ReplayEstimate> = {};
  for (const [w, list] of byWorker) workers[w] = estimateReplayParams(list, { fallback: pool.params, prior: pool.params, priorStrength: opts.priorStrength ?? 20 });
  return { pool, workers };
}
