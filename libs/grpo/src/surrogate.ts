// The clipped surrogate of PPO/GRPO over samples that are sequences of decisions, with an optional
// k3 KL term to a reference policy, its exact gradient with respect to each decision's logp, and
// the usual diagnostics (clip fraction, approximate KL). Conventions follow verl's core_algos.py
// (`compute_policy_loss_vanilla`, `agg_loss`, `kl_penalty`) and TRL's GRPOTrainer `_compute_loss`;
// see README.md.
import { InputError } from '@fugu/core';

/** One sample (rollout) for the surrogate: its advantage and, per decision, the three logprobs. */
export type SurrogateSample = {
  /** the sample's advantage A, shared by all its decisions */
  advantage: number;
  /** log-probability of each decision under the current policy */
  logp: ArrayLike<number>;
  /** log-probability of each decision under the sampling (old) policy */
  oldLogp: ArrayLike<number>;
  /** log-probability of each decision under the reference policy; required when beta > 0 */
  refLogp?: ArrayLike<number>;
};

/** 'token-mean': mean over every decision of the batch; 'seq-mean-token-mean': mean per sample, then over samples. */
export type LossAgg = 'token-mean' | 'seq-mean-token-mean';

export type SurrogateOptions = {
  /** lower clip range: rho >= 1 - epsLow; default 0.2 */
  epsLow?: number;
  /** upper clip range: rho <= 1 + epsHigh; default 0.2 (DAPO's clip-higher: 0.28) */
  epsHigh?: number;
  /** default 'seq-mean-token-mean' (the original GRPO objective) */
  lossAgg?: LossAgg;
  /** coefficient of the k3 KL to the reference policy; default 0 (no KL term) */
  beta?: number;
};

export type SurrogateStats = {
  samples: number;
  decisions: number;
  /** share of decisions where the clipped branch is taken and differs (verl's pg_clipfrac, TRL's clip_ratio) */
  clipFraction: number;
  /** mean over decisions of oldLogp - logp (verl's ppo_kl) */
  approxKl: number;
  /** mean over decisions of rho - 1 - log rho: the k3 estimate of KL(old || current) */
  k3Kl: number;
  /** mean over decisions of the k3 KL to the reference; null unless every sample has refLogp */
  refKl: number | null;
  /** the aggregated clipped term alone */
  pgLoss: number;
  /** the aggregated k3 term before beta; 0 unless every sample has refLogp */
  klLoss: number;
};

export type SurrogateResult = {
  /** pgLoss + beta * klLoss: the value to minimise */
  loss: number;
  /** dLoss/dlogp per decision, one Float64Array per sample */
  grad: Float64Array[];
  /** per sample, per decision: whether the clip was active (zero policy-gradient there) */
  clipped: boolean[][];
  stats: SurrogateStats;
};

/** Default clip range on both sides (PPO, GRPO). */
export const DEFAULT_CLIP_EPS = 0.2;

/** The k3 estimator of KL: exp(ref - logp) - (ref - logp) - 1 (>= 0; verl's "low_var_kl", TRL's per_token_kl). */
export function k3(logp: number, refLogp: number): number {
  const d = refLogp - logp;
  return Math.exp(d) - d - 1;
}

/** d k3(logp, refLogp) / d logp = 1 - exp(ref - logp). */
export function k3GradLogp(logp: number, refLogp: number): number {
  return 1 - Math.exp(refLogp - logp);
}

/** The weight of each decision of each sample in the aggregated loss, one number per sample (shared by its decisions). */
export function aggregationWeights(lengths: readonly number[], lossAgg: LossAgg): number[] {
  if (lossAgg === 'token-mean') {
    let total = 0;
    for (const t of lengths) total += t;
    return lengths.map(() => 1 / total);
  }
  return lengths.map((t) => 1 / (lengths.length * t));
}

/** Checks a finite number in a sample field, else an InputError naming it. */
function finite(v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new InputError(`must be a finite number, got ${String(v)}`, { field });
  return v;
}

/** Validates the options and returns them with defaults filled in. */
export function surrogateOptions(opts: SurrogateOptions = {}): Required<SurrogateOptions> {
  const epsLow = opts.epsLow ?? DEFAULT_CLIP_EPS;
  const epsHigh = opts.epsHigh ?? DEFAULT_CLIP_EPS;
  const lossAgg = opts.lossAgg ?? 'seq-mean-token-mean';
  const beta = opts.beta ?? 0;
  if (!(Number.isFinite(epsLow) && epsLow >= 0 && epsLow < 1)) throw new InputError(`epsLow must be in [0, 1), got ${epsLow}`, { field: 'epsLow' });
  if (!(Number.isFinite(epsHigh) && epsHigh >= 0)) throw new InputError(`epsHigh must be a finite number >= 0, got ${epsHigh}`, { field: 'epsHigh' });
  if (lossAgg !== 'token-mean' && lossAgg !== 'seq-mean-token-mean') throw new InputError(`lossAgg must be 'token-mean' or 'seq-mean-token-mean', got ${String(lossAgg)}`, { field: 'lossAgg' });
  if (!(Number.isFinite(beta) && beta >= 0)) throw new InputError(`beta must be a finite number >= 0, got ${beta}`, { field: 'beta' });
  return { epsLow, epsHigh, lossAgg, beta };
}

/**
 * The clipped surrogate loss over a batch of samples: per decision
 * max(-A rho, -A clip(rho, 1 - epsLow, 1 + epsHigh)) + beta k3(logp, refLogp), rho = exp(logp - oldLogp),
 * aggregated by `lossAgg`; with dLoss/dlogp per decision (0 on the policy term where the clip is
 * active; ties take the unclipped gradient, which is what torch's maximum/clamp rules give).
 */
export function clippedSurrogate(samples: readonly SurrogateSample[], opts: SurrogateOptions = {}): SurrogateResult {
  const { epsLow, epsHigh, lossAgg, beta } = surrogateOptions(opts);
  if (!Array.isArray(samples) || samples.length === 0) throw new InputError('samples must be a non-empty array', { field: 'samples' });
  const lengths = samples.map((s, i) => {
    const n = s.logp?.length ?? 0;
    if (n === 0) throw new InputError(`sample ${i} has no decisions`, { field: `samples[${i}].logp` });
    if ((s.oldLogp?.length ?? -1) !== n) throw new InputError(`sample ${i}: oldLogp has ${s.oldLogp?.length ?? 0} entries, logp ${n}`, { field: `samples[${i}].oldLogp` });
    if (s.refLogp !== undefined && s.refLogp.length !== n) throw new InputError(`sample ${i}: refLogp has ${s.refLogp.length} entries, logp ${n}`, { field: `samples[${i}].refLogp` });
    if (beta > 0 && s.refLogp === undefined) throw new InputError(`sample ${i}: refLogp is required when beta > 0`, { field: `samples[${i}].refLogp` });
    finite(s.advantage, `samples[${i}].advantage`);
    return n;
  });
  const weights = aggregationWeights(lengths, lossAgg);
  const allRef = samples.every((s) => s.refLogp !== undefined);
  const lo = 1 - epsLow;
  const hi = 1 + epsHigh;
  let pgLoss = 0;
  let klLoss = 0;
  let decisions = 0;
  let clippedCount = 0;
  let sumLogRatio = 0;
  let sumK3Old = 0;
  let sumRefKl = 0;
  const grad: Float64Array[] = [];
  const clipped: boolean[][] = [];
  samples.forEach((s, i) => {
    const A = s.advantage;
    const w = weights[i]!;
    const n = lengths[i]!;
    const g = new Float64Array(n);
    const c = new Array<boolean>(n);
    for (let d = 0; d < n; d++) {
      const logp = finite(s.logp[d], `samples[${i}].logp[${d}]`);
      const oldLogp = finite(s.oldLogp[d], `samples[${i}].oldLogp[${d}]`);
      const logRatio = logp - oldLogp;
      const rho = Math.exp(logRatio);
      const rhoClipped = Math.min(Math.max(rho, lo), hi);
      const pg1 = -A * rho;
      const pg2 = -A * rhoClipped;
      // verl: torch.maximum(pg_losses1, pg_losses2); clip active iff pg_losses2 > pg_losses1 (strict)
      const isClipped = pg2 > pg1;
      pgLoss += w * (isClipped ? pg2 : pg1);
      g[d] = isClipped ? 0 : w * pg1; // d(-A rho)/dlogp = -A rho
      c[d] = isClipped;
      if (isClipped) clippedCount++;
      sumLogRatio += -logRatio;
      sumK3Old += rho - 1 - logRatio;
      if (allRef) {
        const ref = finite(s.refLogp![d], `samples[${i}].refLogp[${d}]`);
        const kl = k3(logp, ref);
        klLoss += w * kl;
        sumRefKl += kl;
        if (beta > 0) g[d] = g[d]! + beta * w * k3GradLogp(logp, ref);
      }
    }
    decisions += n;
    grad.push(g);
    clipped.push(c);
  });
  return {
    loss: pgLoss + beta * klLoss,
    grad,
    clipped,
    stats: {
      samples: samples.length,
      decisions,
      clipFraction: clippedCount / decisions,
      approxKl: sumLogRatio / decisions,
      k3Kl: sumK3Old / decisions,
      refKl: allRef ? sumRefKl / decisions : null,
      pgLoss,
      klLoss,
    },
  };
}
