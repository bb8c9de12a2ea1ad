// The GRPO update over one batch of sampled rollouts: several epochs, each split into
// mini-batches; per mini-batch, recompute the current per-decision logprobs through the policy,
// the clipped surrogate and its dLoss/dlogp, chain them into dLoss/dθ through the policy's
// weighted gradient, clip the global norm, one Adam step (none when the gradient is exactly 0:
// momentum alone never moves the parameters). The sampling policy's logprobs (oldLogp) stay fixed
// across epochs. See README.md for the policy contract.
import { InputError, rng, shuffled } from '@fugu/core';
import { adamInit, adamStep, checkAdamState, clipGradNorm, l2Norm, type AdamOptions, type AdamState } from './adam.ts';
import { clippedSurrogate, surrogateOptions, type SurrogateOptions, type SurrogateResult, type SurrogateSample } from './surrogate.ts';

/** Flat parameter vectors the driver works on (the embedded Conductor policy's θ is a Float32Array). */
export type FlatParams = Float32Array | Float64Array;

/**
 * What the update needs of a policy: per-decision logprobs of a sample, and the gradient of a
 * weighted sum of them. Both read the params they are given, never a copy of their own.
 */
export type GrpoPolicy<S, P extends FlatParams = FlatParams> = {
  /** log π_θ(decision d) for each decision d of the sample, in the sample's decision order */
  logps(params: P, sample: S): ArrayLike<number>;
  /** Σ_d weights[d] · ∂ log π_θ(decision d) / ∂θ, flat in params' layout (length params.length) */
  weightedGradLogp(params: P, sample: S, weights: Float64Array): ArrayLike<number>;
};

/** One sampled rollout of the batch: the policy's own sample, its advantage and fixed logprobs. */
export type GrpoSample<S> = {
  /** whatever the policy needs to recompute the rollout's decisions (features, decisions) */
  sample: S;
  /** the rollout's advantage (groupAdvantages) */
  advantage: number;
  /** per-decision logprobs under the sampling policy, recorded at rollout time; fixed across epochs */
  oldLogp: ArrayLike<number>;
  /** per-decision logprobs under the reference policy (needed when beta > 0) */
  refLogp?: ArrayLike<number>;
};

export type GrpoLossAndGrad = {
  loss: number;
  /** dLoss/dθ, flat in params' layout */
  grad: Float64Array;
  surrogate: SurrogateResult;
};

export type GrpoUpdateOptions<S, P extends FlatParams> = SurrogateOptions & {
  /** the parameters the batch was sampled with (not modified: the result holds new ones) */
  params: P;
  samples: readonly GrpoSample<S>[];
  policy: GrpoPolicy<S, P>;
  /** optimisation epochs over the batch (GRPO's μ, TRL's num_iterations); default 1 */
  epochs?: number;
  /** mini-batches per epoch, one Adam step each; default 1 (one step per epoch over the whole batch) */
  miniBatches?: number;
  /** Adam's options (lr required) */
  adam: AdamOptions;
  /** the optimiser state to continue from; default a fresh one */
  adamState?: AdamState;
  /** global-norm clipping of dLoss/dθ before each step; default none */
  maxGradNorm?: number;
  /** when given, the samples are shuffled into mini-batches per epoch from rng(seed, 'grpo-minibatch', epoch); default: in order */
  shuffleSeed?: number | string;
};

export type GrpoStepStats = {
  epoch: number;
  miniBatch: number;
  samples: number;
  decisions: number;
  /** the surrogate loss at the parameters before this step */
  loss: number;
  clipFraction: number;
  approxKl: number;
  k3Kl: number;
  refKl: number | null;
  /** ||dLoss/dθ|| before clipping */
  gradNorm: number;
  /** false: the gradient was exactly 0 and no step was taken (parameters, moments and step count unchanged) */
  stepped: boolean;
};

export type GrpoEpochStats = {
  epoch: number;
  /** mean of the epoch's mini-batch losses (each measured before its step) */
  loss: number;
  /** decision-weighted over the epoch's mini-batches */
  clipFraction: number;
  approxKl: number;
  k3Kl: number;
  refKl: number | null;
  /** mean over the epoch's steps of ||dLoss/dθ|| before clipping */
  gradNorm: number;
};

export type GrpoUpdateResult<P extends FlatParams> = {
  /** the parameters after every step, a new array of the input's type */
  params: P;
  adamState: AdamState;
  epochs: GrpoEpochStats[];
  steps: GrpoStepStats[];
};

/** Checks a positive integer option, else an InputError naming it. */
function positiveInt(v: number, field: string, max = Number.MAX_SAFE_INTEGER): number {
  if (!(Number.isInteger(v) && v >= 1 && v <= max)) throw new InputError(`must be an integer in [1, ${max}], got ${v}`, { field });
  return v;
}

/** The loss and dLoss/dθ over samples `idx` of the batch (errors name the batch index). */
function lossAndGrad<S, P extends FlatParams>(params: P, samples: readonly GrpoSample<S>[], idx: readonly number[], policy: GrpoPolicy<S, P>, opts: SurrogateOptions): GrpoLossAndGrad {
  const surrogateSamples: SurrogateSample[] = idx.map((i) => {
    const s = samples[i]!;
    const logp = policy.logps(params, s.sample);
    if (logp.length !== s.oldLogp.length) throw new InputError(`sample ${i}: the policy gave ${logp.length} logprobs, oldLogp has ${s.oldLogp.length}`, { field: `samples[${i}].oldLogp` });
    for (let d = 0; d < logp.length; d++) if (!Number.isFinite(logp[d]!)) throw new InputError(`sample ${i}: the policy's logprob of decision ${d} is not finite (${logp[d]})`, { field: `samples[${i}].sample` });
    return { advantage: s.advantage, logp, oldLogp: s.oldLogp, ...(s.refLogp !== undefined && { refLogp: s.refLogp }) };
  });
  const surrogate = clippedSurrogate(surrogateSamples, opts);
  const grad = new Float64Array(params.length);
  idx.forEach((i, k) => {
    const w = surrogate.grad[k]!;
    if (w.every((x) => x === 0)) return; // zero advantage and no KL, or every decision clipped
    const g = policy.weightedGradLogp(params, samples[i]!.sample, w);
    if (g.length !== params.length) throw new InputError(`sample ${i}: the policy's weighted gradient has ${g.length} entries, params ${params.length}`, { field: `samples[${i}].sample` });
    for (let j = 0; j < grad.length; j++) grad[j] = grad[j]! + g[j]!;
  });
  return { loss: surrogate.loss, grad, surrogate };
}

/** Validates the batch's samples (advantage, oldLogp, refLogp), naming the first bad field. */
function checkSamples<S>(samples: readonly GrpoSample<S>[], beta: number): void {
  if (!Array.isArray(samples) || samples.length === 0) throw new InputError('samples must be a non-empty array', { field: 'samples' });
  samples.forEach((s, i) => {
    if (typeof s.advantage !== 'number' || !Number.isFinite(s.advantage)) throw new InputError(`advantage must be a finite number, got ${String(s.advantage)}`, { field: `samples[${i}].advantage` });
    const n = s.oldLogp?.length ?? 0;
    if (n === 0) throw new InputError(`sample ${i} has no decisions`, { field: `samples[${i}].oldLogp` });
    for (let d = 0; d < n; d++) if (!Number.isFinite(s.oldLogp[d]!)) throw new InputError(`must be a finite number, got ${s.oldLogp[d]}`, { field: `samples[${i}].oldLogp[${d}]` });
    if (s.refLogp !== undefined && s.refLogp.length !== n) throw new InputError(`sample ${i}: refLogp has ${s.refLogp.length} entries, oldLogp ${n}`, { field: `samples[${i}].refLogp` });
    if (beta > 0 && s.refLogp === undefined) throw new InputError(`sample ${i}: refLogp is required when beta > 0`, { field: `samples[${i}].refLogp` });
  });
}

/**
 * The clipped-surrogate loss of a batch at `params` and its gradient dLoss/dθ: the policy's current
 * logprobs, dLoss/dlogp per decision, chained through policy.weightedGradLogp (skipped for samples
 * whose weights are all 0).
 */
export function grpoLossAndGrad<S, P extends FlatParams>(params: P, samples: readonly GrpoSample<S>[], policy: GrpoPolicy<S, P>, opts: SurrogateOptions = {}): GrpoLossAndGrad {
  const o = surrogateOptions(opts);
  checkSamples(samples, o.beta);
  return lossAndGrad(params, samples, samples.map((_, i) => i), policy, o);
}

/** Splits `order` into k contiguous chunks whose sizes differ by at most one (the first ones larger). */
function chunks(order: readonly number[], k: number): number[][] {
  const out: number[][] = [];
  const base = Math.floor(order.length / k);
  const extra = order.length % k;
  let at = 0;
  for (let c = 0; c < k; c++) {
    const size = base + (c < extra ? 1 : 0);
    out.push(order.slice(at, at + size));
    at += size;
  }
  return out;
}

/**
 * Several epochs of clipped-surrogate Adam steps over one sampled batch (module comment). Returns
 * the new params (a copy; the input is not modified), the optimiser state and per-epoch and
 * per-step stats. Deterministic: same inputs (and shuffleSeed), same bits.
 */
export function grpoUpdate<S, P extends FlatParams>(opts: GrpoUpdateOptions<S, P>): GrpoUpdateResult<P> {
  const surrogate = surrogateOptions(opts);
  const epochs = positiveInt(opts.epochs ?? 1, 'epochs', 10_000);
  const samples = opts.samples;
  checkSamples(samples, surrogate.beta);
  const miniBatches = positiveInt(opts.miniBatches ?? 1, 'miniBatches', samples.length);
  if (opts.maxGradNorm !== undefined && !(opts.maxGradNorm > 0)) throw new InputError(`maxGradNorm must be > 0, got ${opts.maxGradNorm}`, { field: 'maxGradNorm' });
  if (opts.shuffleSeed !== undefined && !(typeof opts.shuffleSeed === 'string' ? opts.shuffleSeed.length > 0 : Number.isFinite(opts.shuffleSeed))) {
    throw new InputError('shuffleSeed must be a finite number or a non-empty string', { field: 'shuffleSeed' });
  }
  if (!(opts.params instanceof Float32Array || opts.params instanceof Float64Array)) throw new InputError('params must be a Float32Array or a Float64Array', { field: 'params' });
  const params = opts.params.slice() as P;
  let state = opts.adamState !== undefined ? checkAdamState(opts.adamState, params.length) : adamInit(params.length);
  const identity = samples.map((_, i) => i);
  const steps: GrpoStepStats[] = [];
  const epochStats: GrpoEpochStats[] = [];
  for (let epoch = 0; epoch < epochs; epoch++) {
    const order = opts.shuffleSeed !== undefined ? shuffled(identity, rng(opts.shuffleSeed, 'grpo-minibatch', epoch)) : identity;
    const first = steps.length;
    chunks(order, miniBatches).forEach((idx, miniBatch) => {
      const { loss, grad, surrogate: s } = lossAndGrad(params, samples, idx, opts.policy, surrogate);
      const gradNorm = opts.maxGradNorm !== undefined ? clipGradNorm(grad, opts.maxGradNorm) : l2Norm(grad);
      // no gradient at all (every sample of the mini-batch has zero advantage and no KL term, or every
      // decision that has one is clipped): no step. Adam would otherwise move the parameters by its
      // momentum alone, without any signal, and advance its moments and step count.
      const stepped = gradNorm !== 0;
      if (stepped) state = adamStep(params, grad, state, opts.adam);
      const { samples: n, decisions, clipFraction, approxKl, k3Kl, refKl } = s.stats;
      steps.push({ epoch, miniBatch, samples: n, decisions, loss, clipFraction, approxKl, k3Kl, refKl, gradNorm, stepped });
    });
    const mine = steps.slice(first);
    const total = mine.reduce((a, s) => a + s.decisions, 0);
    const weighted = (f: (s: GrpoStepStats) => number): number => mine.reduce((a, s) => a + f(s) * s.decisions, 0) / total;
    epochStats.push({
      epoch,
      loss: mine.reduce((a, s) => a + s.loss, 0) / mine.length,
      clipFraction: weighted((s) => s.clipFraction),
      approxKl: weighted((s) => s.approxKl),
      k3Kl: weighted((s) => s.k3Kl),
      refKl: mine.every((s) => s.refKl !== null) ? weighted((s) => s.refKl!) : null,
      gradNorm: mine.reduce((a, s) => a + s.gradNorm, 0) / mine.length,
    });
  }
  return { params, adamState: state, epochs: epochStats, steps };
}
