// Adam (Kingma & Ba 2015) with bias correction and optional decoupled weight decay (AdamW,
// Loshchilov & Hutter 2019), in the order of torch.optim.AdamW; and global-norm gradient clipping.
// The optimiser state is plain JSON (moments as number arrays, the step count), so a trainer can
// commit it to Postgres and resume bit for bit. Parameters are updated in place; the state is not
// mutated: adamStep returns the next one.
import { InputError } from '@fugu/core';

export type AdamOptions = {
  /** learning rate, > 0 */
  lr: number;
  /** default 0.9 */
  beta1?: number;
  /** default 0.999 */
  beta2?: number;
  /** default 1e-8 */
  eps?: number;
  /** decoupled (AdamW) weight decay; default 0 */
  weightDecay?: number;
};

/** Adam's whole state: plain JSON. `version` is the format version. */
export type AdamState = {
  version: 1;
  algorithm: 'adam';
  /** steps taken so far (the next step is step + 1 in the bias correction) */
  step: number;
  /** first moment, one per parameter */
  m: number[];
  /** second moment, one per parameter */
  v: number[];
};

/** Parameters Adam can update in place. */
export type ParamArray = Float32Array | Float64Array | number[];

/** A fresh Adam state for n parameters (zero moments, step 0). */
export function adamInit(n: number): AdamState {
  if (!(Number.isInteger(n) && n >= 0)) throw new InputError(`n must be an integer >= 0, got ${n}`, { field: 'n' });
  return { version: 1, algorithm: 'adam', step: 0, m: new Array<number>(n).fill(0), v: new Array<number>(n).fill(0) };
}

/** Checks that a value (e.g. read back from JSON) is an AdamState for n parameters, else an InputError naming the field. */
export function checkAdamState(state: unknown, n?: number): AdamState {
  const s = state as Partial<AdamState> | null;
  if (!s || typeof s !== 'object') throw new InputError('must be an Adam state object', { field: 'state' });
  if (s.version !== 1) throw new InputError(`unknown version ${String(s.version)} (expected 1)`, { field: 'state.version' });
  if (s.algorithm !== 'adam') throw new InputError(`algorithm must be 'adam', got ${String(s.algorithm)}`, { field: 'state.algorithm' });
  if (!(Number.isInteger(s.step) && s.step! >= 0)) throw new InputError(`step must be an integer >= 0, got ${String(s.step)}`, { field: 'state.step' });
  for (const key of ['m', 'v'] as const) {
    const a = s[key];
    if (!Array.isArray(a)) throw new InputError('must be an array of numbers', { field: `state.${key}` });
    if (n !== undefined && a.length !== n) throw new InputError(`has ${a.length} entries, expected ${n}`, { field: `state.${key}` });
    for (let i = 0; i < a.length; i++) if (typeof a[i] !== 'number' || !Number.isFinite(a[i])) throw new InputError(`must be a finite number, got ${String(a[i])}`, { field: `state.${key}[${i}]` });
  }
  if (s.m!.length !== s.v!.length) throw new InputError(`m has ${s.m!.length} entries, v ${s.v!.length}`, { field: 'state.v' });
  return s as AdamState;
}

/** Validates Adam's options and fills in the defaults. */
export function adamOptions(opts: AdamOptions): Required<AdamOptions> {
  const o = { beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, ...opts };
  if (!(Number.isFinite(o.lr) && o.lr > 0)) throw new InputError(`lr must be a finite number > 0, got ${o.lr}`, { field: 'lr' });
  if (!(o.beta1 >= 0 && o.beta1 < 1)) throw new InputError(`beta1 must be in [0, 1), got ${o.beta1}`, { field: 'beta1' });
  if (!(o.beta2 >= 0 && o.beta2 < 1)) throw new InputError(`beta2 must be in [0, 1), got ${o.beta2}`, { field: 'beta2' });
  if (!(Number.isFinite(o.eps) && o.eps > 0)) throw new InputError(`eps must be a finite number > 0, got ${o.eps}`, { field: 'eps' });
  if (!(Number.isFinite(o.weightDecay) && o.weightDecay >= 0)) throw new InputError(`weightDecay must be a finite number >= 0, got ${o.weightDecay}`, { field: 'weightDecay' });
  return o;
}

/**
 * One Adam(W) step: params updated in place (float64 arithmetic, stored in the array's own type),
 * the next state returned (the given one is not modified). Per parameter, t = step + 1:
 * p *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
 * p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps).
 */
export function adamStep(params: ParamArray, grad: ArrayLike<number>, state: AdamState, opts: AdamOptions): AdamState {
  const { lr, beta1, beta2, eps, weightDecay } = adamOptions(opts);
  const n = params.length;
  checkAdamState(state, n);
  if (grad.length !== n) throw new InputError(`gradient has ${grad.length} entries, params ${n}`, { field: 'grad' });
  for (let i = 0; i < n; i++) if (!Number.isFinite(grad[i]!)) throw new InputError(`gradient entry ${i} is not finite (${grad[i]})`, { field: `grad[${i}]` });
  const t = state.step + 1;
  const bc1 = 1 - Math.pow(beta1, t);
  const bc2Sqrt = Math.sqrt(1 - Math.pow(beta2, t));
  const stepSize = lr / bc1;
  const decay = 1 - lr * weightDecay;
  const m = new Array<number>(n);
  const v = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const g = grad[i]!;
    const mi = beta1 * state.m[i]! + (1 - beta1) * g;
    const vi = beta2 * state.v[i]! + (1 - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    let p = params[i]!;
    if (weightDecay !== 0) p *= decay;
    params[i] = p - (stepSize * mi) / (Math.sqrt(vi) / bc2Sqrt + eps);
  }
  return { version: 1, algorithm: 'adam', step: t, m, v };
}

/** The Euclidean norm of a vector. */
export function l2Norm(x: ArrayLike<number>): number {
  let ss = 0;
  for (let i = 0; i < x.length; i++) ss += x[i]! * x[i]!;
  return Math.sqrt(ss);
}

/**
 * Global-norm clipping in place: when ||grad|| > maxNorm, grad *= maxNorm / ||grad|| (so the clipped
 * norm is maxNorm). Returns the norm before clipping. A non-finite gradient is an InputError.
 */
export function clipGradNorm(grad: ParamArray, maxNorm: number): number {
  if (!(maxNorm > 0)) throw new InputError(`maxNorm must be > 0, got ${maxNorm}`, { field: 'maxNorm' });
  const norm = l2Norm(grad);
  if (!Number.isFinite(norm)) throw new InputError(`gradient norm is not finite (${norm})`, { field: 'grad' });
  if (norm > maxNorm) {
    const s = maxNorm / norm;
    for (let i = 0; i < grad.length; i++) grad[i] = grad[i]! * s;
  }
  return norm;
}
