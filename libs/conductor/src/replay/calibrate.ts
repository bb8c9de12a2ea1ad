// The step model's estimator: from observed dependent steps (the worker's own outcome s, the
// share f of the answers it read that were correct, whether the step was correct) to the five
// replay parameters by maximum likelihood, with counts, and intervals by a seeded bootstrap over
// questions. One path, two inputs: `fugu ultra calibrate` feeds it a live pool's two-step
// workflows (README, "Calibration"), `fugu multistep fit` the recorded multi-agent runs of
// data/multistep (issue 29). Pure.

import { InputError, rng } from '@fugu/core';
import { REPLAY_PARAM_NAMES, REPLAY_PRESETS, type ReplayParams } from './params.ts';
import { herdCurve } from './model.ts';

export type CalibrationObservation = {
  /** the step worker's own (solo) outcome on the item */
  s: boolean;
  /** fraction of the visible answers that were correct, in [0, 1] */
  f: number;
  /** whether the dependent step's answer was correct */
  correct: boolean;
  /** the worker that performed the step (for per-worker estimates) */
  worker?: string;
  /** what the bootstrap resamples as a whole (the question: its observations are not independent); absent: the observation alone */
  cluster?: string;
};

export type CornerName = 'keep' | 'misled' | 'adopt' | 'fix';

export type CellEstimate = {
  /** the cell's observations: s and f as the parameter defines them (f exactly 0 or 1) */
  n: number;
  /** how many of them were correct */
  correct: number;
  /**
   * The parameter's estimate: the joint maximum-likelihood value over every observation of its
   * own outcome s (the corner's count and the split observations, which carry it too), shrunk
   * toward `prior` where given; the prior or the fallback where no observation informs it.
   */
  estimate: number;
  /** 95% Wilson interval of the parameter from the corner's own counts; [0, 1] when n = 0 */
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
  /** the maximised log-likelihood (the prior's pseudo-observations left out) */
  logLik: number;
  /** with `bootstrap`: each parameter's 95% percentile interval over the resamples, and how many */
  bootstrap?: { samples: number; clusters: number; intervals: Record<keyof ReplayParams, [number, number]>; /** with `keepDraws`: each resample's parameters */ draws?: ReplayParams[] };
};

export type EstimateOptions = {
  /** values for parameters without data (default: the large preset) */
  fallback?: ReplayParams;
  /** a Beta prior for the corners: mean = the prior's parameter, strength = pseudo-observations (0: none, the default) */
  prior?: ReplayParams;
  priorStrength?: number;
  /** resample the clusters (questions) this many times with this seed: percentile intervals of every parameter */
  bootstrap?: { samples: number; seed: number | string; keepDraws?: boolean };
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

/** Observations of one own outcome s, counted by f (the likelihood depends on nothing else). */
type Tally = Array<{ f: number; n: number; y: number }>;

function tally(obs: readonly CalibrationObservation[], weights?: readonly number[]): { 1: Tally; 0: Tally } {
  const maps = { 1: new Map<number, { n: number; y: number }>(), 0: new Map<number, { n: number; y: number }>() };
  obs.forEach((o, i) => {
    const w = weights ? weights[i]! : 1;
    if (w === 0) return;
    const m = maps[o.s ? 1 : 0];
    const c = m.get(o.f) ?? m.set(o.f, { n: 0, y: 0 }).get(o.f)!;
    c.n += w;
    if (o.correct) c.y += w;
  });
  const out = (m: Map<number, { n: number; y: number }>): Tally => [...m].sort((a, b) => a[0] - b[0]).map(([f, c]) => ({ f, ...c }));
  return { 1: out(maps[1]), 0: out(maps[0]) };
}

const clamp = (p: number): number => Math.min(1 - 1e-12, Math.max(1e-12, p));

/** Log-likelihood of one own outcome's tally at P = lo + (hi - lo) g_h(f). */
function tallyLogLik(t: Tally, lo: number, hi: number, h: number): number {
  let ll = 0;
  for (const c of t) {
    const p = clamp(lo + (hi - lo) * herdCurve(c.f, h));
    ll += c.y * Math.log(p) + (c.n - c.y) * Math.log(1 - p);
  }
  return ll;
}

type Pseudo = { lo?: [number, number]; hi?: [number, number] };

/**
 * The maximum-likelihood (lo, hi) of one own outcome at a given herd h, by EM: each observation
 * is a mixture of the f = 0 corner (weight 1 - g) and the f = 1 corner (weight g), so each
 * iteration moves (lo, hi) to the responsibility-weighted shares, never leaving [0, 1], never
 * lowering the likelihood (the likelihood is concave in (lo, hi): EM finds the maximum). The
 * prior's pseudo-observations (strength k, mean q) sit at the corners. A corner no observation
 * weighs on keeps its start value.
 */
function fitCorners(t: Tally, h: number, start: { lo: number; hi: number }, pseudo: Pseudo): { lo: number; hi: number } {
  const cells = t.map((c) => ({ ...c, g: herdCurve(c.f, h) }));
  if (pseudo.lo) cells.push({ f: 0, n: pseudo.lo[0], y: pseudo.lo[0] * pseudo.lo[1], g: 0 });
  if (pseudo.hi) cells.push({ f: 1, n: pseudo.hi[0], y: pseudo.hi[0] * pseudo.hi[1], g: 1 });
  let { lo, hi } = start;
  for (let it = 0; it < 2000; it++) {
    let loY = 0, loN = 0, hiY = 0, hiN = 0;
    for (const c of cells) {
      // a corner observation belongs to its corner outright (exact counts, no division)
      if (c.g === 0 || c.g === 1) {
        if (c.g === 1) [hiY, hiN] = [hiY + c.y, hiN + c.n];
        else [loY, loN] = [loY + c.y, loN + c.n];
        continue;
      }
      const p = clamp(lo + (hi - lo) * c.g);
      // responsibilities of the two corners for the successes and for the failures
      const rHiY = (hi * c.g) / p, rHiF = ((1 - hi) * c.g) / (1 - p);
      hiY += c.y * rHiY;
      hiN += c.y * rHiY + (c.n - c.y) * rHiF;
      loY += c.y * (1 - rHiY);
      loN += c.y * (1 - rHiY) + (c.n - c.y) * (1 - rHiF);
    }
    const nlo = loN > 1e-12 ? loY / loN : lo, nhi = hiN > 1e-12 ? hiY / hiN : hi;
    const done = Math.abs(nlo - lo) < 1e-11 && Math.abs(nhi - hi) < 1e-11;
    [lo, hi] = [nlo, nhi];
    if (done) break;
  }
  return { lo, hi };
}

type Fit = { corners: Omit<ReplayParams, 'herd'>; herd: number; logLik: number };

/** The joint maximum: the corners by EM at each h, h by the profile likelihood (a grid on log h, refined by golden section). */
function fitJoint(t: { 1: Tally; 0: Tally }, start: ReplayParams, pseudo: { 1: Pseudo; 0: Pseudo }, herdFree: boolean): Fit {
  const at = (h: number, from: Omit<ReplayParams, 'herd'>): Fit => {
    const a = fitCorners(t[1], h, { lo: 1 - from.misled, hi: from.keep }, pseudo[1]);
    const b = fitCorners(t[0], h, { lo: from.fix, hi: from.adopt }, pseudo[0]);
    const corners = { keep: a.hi, misled: 1 - a.lo, adopt: b.hi, fix: b.lo };
    return { corners, herd: h, logLik: tallyLogLik(t[1], a.lo, a.hi, h) + tallyLogLik(t[0], b.lo, b.hi, h) };
  };
  const { herd: h0, ...c0 } = start;
  if (!herdFree) return at(h0, c0);
  const lo = Math.log(HERD_MIN), hi = Math.log(HERD_MAX), G = 40;
  const grid = Array.from({ length: G + 1 }, (_, k) => at(Math.exp(lo + ((hi - lo) * k) / G), c0));
  let best = 0;
  for (let k = 1; k <= G; k++) if (grid[k]!.logLik > grid[best]!.logLik) best = k;
  let a = lo + ((hi - lo) * Math.max(0, best - 1)) / G, b = lo + ((hi - lo) * Math.min(G, best + 1)) / G;
  const phi = (Math.sqrt(5) - 1) / 2;
  const from = grid[best]!.corners;
  for (let it = 0; it < 40; it++) {
    const c = b - phi * (b - a), d = a + phi * (b - a);
    if (at(Math.exp(c), from).logLik >= at(Math.exp(d), from).logLik) b = d;
    else a = c;
  }
  const refined = at(Math.exp((a + b) / 2), from);
  return refined.logLik >= grid[best]!.logLik ? refined : grid[best]!;
}

/** The 95% profile-likelihood interval of h around the joint maximum, within [0.1, 10]. */
function herdInterval(t: { 1: Tally; 0: Tally }, fit: Fit, pseudo: { 1: Pseudo; 0: Pseudo }): [number, number] {
  const ll = (x: number): number => fitJoint(t, { ...fit.corners, herd: Math.exp(x) }, pseudo, false).logLik;
  const cut = fit.logLik - (Z95 * Z95) / 2;
  const x0 = Math.log(fit.herd);
  const edge = (end: number): number => {
    if (ll(end) >= cut) return end;
    let inside = x0, outside = end;
    for (let it = 0; it < 40; it++) {
      const m = (inside + outside) / 2;
      if (ll(m) >= cut) inside = m;
      else outside = m;
    }
    return inside;
  };
  return [Math.exp(edge(Math.log(HERD_MIN))), Math.exp(edge(Math.log(HERD_MAX)))];
}

/** The percentile interval of values (any order; linear interpolation between order statistics): 95% by default. */
export function percentileInterval(xs: readonly number[], lo = 0.025, hi = 0.975): [number, number] {
  const v = [...xs].sort((a, b) => a - b);
  const at = (q: number): number => {
    const k = q * (v.length - 1), i = Math.floor(k), fr = k - i;
    return v[i]! + (i + 1 < v.length ? (v[i + 1]! - v[i]!) * fr : 0);
  };
  return [at(lo), at(hi)];
}

/**
 * Estimates of the five parameters from observed dependent steps, by maximum likelihood over the
 * model P(correct) = L_s + (U_s - L_s) g_h(f): every observation counts, the corners' (f = 0 or
 * 1) and the split ones' (0 < f < 1), which inform the corners and herd together. The corners
 * are shrunk toward `prior` by `priorStrength` pseudo-observations at each corner when given;
 * a corner no observation weighs on takes the prior, else the fallback; herd, without split
 * observations, the fallback (not identified). Each corner also reports its own counts and their
 * Wilson interval; herd its profile-likelihood interval. With `bootstrap`, the clusters
 * (`cluster`: the question; else each observation) are resampled with replacement, seeded, and
 * every parameter gets its 95% percentile interval.
 */
export function estimateReplayParams(obs: readonly CalibrationObservation[], opts: EstimateOptions = {}): ReplayEstimate {
  checkObservations(obs);
  const fallback = opts.fallback ?? REPLAY_PRESETS.large;
  const k = opts.priorStrength ?? 0;
  if (!(k >= 0 && Number.isFinite(k))) throw new InputError(`priorStrength must be a finite number >= 0, got ${k}`, { field: 'priorStrength' });
  if (k > 0 && !opts.prior) throw new InputError('priorStrength needs a prior', { field: 'prior' });
  if (opts.bootstrap && !(Number.isInteger(opts.bootstrap.samples) && opts.bootstrap.samples >= 2)) {
    throw new InputError(`bootstrap.samples must be an integer >= 2, got ${opts.bootstrap.samples}`, { field: 'bootstrap.samples' });
  }
  const prior = opts.prior;
  // where no observation weighs on a corner: the prior, else the fallback
  const start: ReplayParams = { ...(prior ?? fallback), herd: fallback.herd };
  const pseudo = k > 0 && prior
    ? { 1: { lo: [k, 1 - prior.misled], hi: [k, prior.keep] } as Pseudo, 0: { lo: [k, prior.fix], hi: [k, prior.adopt] } as Pseudo }
    : { 1: {}, 0: {} };
  const split = obs.filter((o) => o.f > 0 && o.f < 1);
  const herdFree = split.length > 0;
  const fitOf = (t: { 1: Tally; 0: Tally }): Fit => fitJoint(t, start, pseudo, herdFree);
  const t = tally(obs);
  const fit = fitOf(t);

  // which corners any observation weighs on (an observation at f weighs 1 - g on L, g on U; a split one on both)
  const weighs = (s: 0 | 1, upper: boolean): boolean => t[s].some((c) => (upper ? c.f > 0 : c.f < 1));
  const cells = {} as Record<CornerName, CellEstimate>;
  for (const c of CORNERS) {
    const inCell = obs.filter((o) => o.s === c.s && o.f === c.f);
    const n = inCell.length, y = inCell.filter((o) => o.correct).length;
    const [wl, wh] = wilsonInterval(y, n);
    const informed = weighs(c.s ? 1 : 0, c.f === 1);
    const source: CellEstimate['source'] = informed ? 'data' : prior ? 'prior' : 'fallback';
    cells[c.name] = { n, correct: y, estimate: fit.corners[c.name], interval: c.name === 'misled' ? [1 - wh, 1 - wl] : [wl, wh], source };
  }
  const herd: HerdEstimate = herdFree
    ? (() => {
        const interval = herdInterval(t, fit, pseudo);
        return { n: split.length, estimate: fit.herd, interval, identified: !(interval[0] <= 1 && interval[1] >= 4), source: 'data' as const };
      })()
    : { n: 0, estimate: fallback.herd, interval: [HERD_MIN, HERD_MAX], identified: false, source: 'fallback' };
  const params: ReplayParams = { ...fit.corners, herd: herd.estimate };
  // the log-likelihood of the observations alone (without the pseudo-observations)
  const logLik = tallyLogLik(t[1], 1 - params.misled, params.keep, params.herd) + tallyLogLik(t[0], params.fix, params.adopt, params.herd);
  const out: ReplayEstimate = { params, n: obs.length, cells, herd, logLik };

  if (opts.bootstrap) {
    // clusters: the observations of one question go together
    const ids = new Map<string, number>();
    const clusterOf = obs.map((o, i) => {
      const key = o.cluster ?? `#${i}`;
      return ids.get(key) ?? ids.set(key, ids.size).get(key)!;
    });
    const C = ids.size;
    const r = rng('fugu-replay-bootstrap', opts.bootstrap.seed);
    const draws: Record<keyof ReplayParams, number[]> = { keep: [], misled: [], adopt: [], fix: [], herd: [] };
    for (let b = 0; b < opts.bootstrap.samples; b++) {
      const times = new Array<number>(C).fill(0);
      for (let i = 0; i < C; i++) times[r.int(C)]! += 1;
      const f = fitOf(tally(obs, clusterOf.map((c) => times[c]!)));
      for (const name of REPLAY_PARAM_NAMES) draws[name].push(name === 'herd' ? (herdFree ? f.herd : fallback.herd) : f.corners[name]);
    }
    const intervals = Object.fromEntries(REPLAY_PARAM_NAMES.map((name) => [name, percentileInterval(draws[name])])) as Record<keyof ReplayParams, [number, number]>;
    out.bootstrap = { samples: opts.bootstrap.samples, clusters: C, intervals };
    if (opts.bootstrap.keepDraws) out.bootstrap.draws = draws.keep.map((_, b) => ({ keep: draws.keep[b]!, misled: draws.misled[b]!, adopt: draws.adopt[b]!, fix: draws.fix[b]!, herd: draws.herd[b]! }));
  }
  return out;
}

/**
 * Per-worker estimates: the pool's estimate over every observation, then each worker's own,
 * shrunk toward the pool's corners by `priorStrength` pseudo-observations (default 20, as the
 * evidence note (docs/analysis/conductor-replay/evidence.md) proposes). Observations without a worker count only toward the pool.
 */
export function estimateReplayParamsByWorker(
  obs: readonly CalibrationObservation[],
  opts: { fallback?: ReplayParams; priorStrength?: number; bootstrap?: EstimateOptions['bootstrap'] } = {},
): { pool: ReplayEstimate; workers: Record<string, ReplayEstimate> } {
  const boot = opts.bootstrap && { bootstrap: opts.bootstrap };
  const pool = estimateReplayParams(obs, { ...(opts.fallback && { fallback: opts.fallback }), ...boot });
  const byWorker = new Map<string, CalibrationObservation[]>();
  for (const o of obs) if (o.worker !== undefined) (byWorker.get(o.worker) ?? byWorker.set(o.worker, []).get(o.worker)!).push(o);
  const workers: Record<string, ReplayEstimate> = {};
  for (const [w, list] of byWorker) workers[w] = estimateReplayParams(list, { fallback: pool.params, prior: pool.params, priorStrength: opts.priorStrength ?? 20, ...boot });
  return { pool, workers };
}
