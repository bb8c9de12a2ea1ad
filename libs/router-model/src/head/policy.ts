// From the head's logits to a decision: which worker answers.
//
// 1. Restrict to the allowed workers: pi is the softmax of the logits over the allowed set only
//    (the others get probability 0), i.e. pi renormalised to that set.
// 2. Cost-aware score: score_j = pi_j - lambda * price_j / max_{allowed} price.
//    Predicted reward = pi_j. The head is trained towards p_j = softmax(rbar_j / tau), so pi_j is
//    the model's estimate of how much of the best-worker mass j deserves: 1 for a sure winner,
//    1/K for a toss-up. It lives in [0, 1], the same range as the normalised price, so lambda is
//    read as "how many units of winning probability is the most expensive allowed worker's price
//    worth"; lambda = 0 is plain argmax, and a large lambda picks the cheapest allowed worker.
//    (A calibrated reward estimate, tau * logit_j + const, would need tau and its constant, and
//    changes the meaning of lambda between checkpoints; pi_j does not.)
// 3. Normalised price: a worker's USD per 1M tokens over the largest among the allowed workers
//    (all prices 0 gives 0). Basis 'mean' (default) = (input + output) / 2, as a router does not
//    know the answer length in advance and output tokens usually cost more, so an input-only price
//    would understate the gap; basis 'input' = input price only (for prompt-heavy traffic).
// 4. mode 'argmax' takes the best score; mode 'sample' draws from pi (seeded; lambda must be 0:
//    cost-aware selection is a deterministic rule over scores, not a distribution).

import { InputError, parseUsd, rng, type Rng, type WorkerSpec } from '@fugu/core';

export type PriceBasis = 'mean' | 'input';
export type PolicyMode = 'argmax' | 'sample';
export type WorkerPrices = WorkerSpec['prices'];

export interface PolicyOptions {
  /** Worker names in head output order (length K, unique). */
  workers: readonly string[];
  /** The allowed subset (default: all workers). */
  allowed?: readonly string[];
  /** Default 'argmax'. */
  mode?: PolicyMode;
  /** Price weight, >= 0 (default 0). */
  lambda?: number;
  /** USD per 1M tokens by worker name; needed for every allowed worker when lambda > 0. */
  prices?: Readonly<Record<string, WorkerPrices>>;
  /** Default 'mean' ((input + output) / 2). */
  priceBasis?: PriceBasis;
  /** Seed for mode 'sample' (required there). */
  seed?: number | string;
}

export interface Decision {
  /** Index into `workers` (the head output). */
  index: number;
  worker: string;
  /** [K] pi restricted to the allowed set (0 elsewhere). */
  probs: Float64Array;
  /** [K] pi_j - lambda * normalised price_j; -Infinity outside the allowed set. */
  scores: Float64Array;
}

/** Prices by worker name from a pool's worker specs. */
export function pricesOf(workers: readonly WorkerSpec[]): Record<string, WorkerPrices> {
  return Object.fromEntries(workers.map((w) => [w.name, w.prices]));
}

export class RouterPolicy {
  readonly workers: readonly string[];
  readonly mode: PolicyMode;
  readonly lambda: number;
  /** [K] 1 for allowed workers. */
  readonly allowedMask: Uint8Array;
  /** [K] price_j / max allowed price (0 outside the allowed set, and when lambda = 0). */
  readonly normalisedPrices: Float64Array;
  private readonly random: Rng | undefined;

  constructor(options: PolicyOptions) {
    const { workers } = options;
    if (workers.length === 0) throw new InputError('policy: the worker list is empty', { field: 'workers' });
    const index = new Map<string, number>();
    workers.forEach((w, i) => {
      if (index.has(w)) throw new InputError(`policy: worker ${w} appears twice in the worker list`, { field: 'workers' });
      index.set(w, i);
    });
    this.workers = [...workers];
    const K = workers.length;

    const allowed = options.allowed ?? workers;
    if (allowed.length === 0) throw new InputError('policy: the allowed worker set is empty', { field: 'allowed' });
    this.allowedMask = new Uint8Array(K);
    for (const w of allowed) {
      const i = index.get(w);
      if (i === undefined) throw new InputError(`policy: unknown worker ${w} in the allowed set (workers: ${workers.join(', ')})`, { field: 'allowed' });
      this.allowedMask[i] = 1;
    }

    this.mode = options.mode ?? 'argmax';
    if (this.mode !== 'argmax' && this.mode !== 'sample') throw new InputError(`policy: mode must be argmax or sample, got ${String(this.mode)}`, { field: 'mode' });
    this.lambda = options.lambda ?? 0;
    if (!Number.isFinite(this.lambda) || this.lambda < 0) throw new InputError(`policy: lambda must be a finite number >= 0, got ${this.lambda}`, { field: 'lambda' });
    if (this.mode === 'sample') {
      if (this.lambda !== 0) throw new InputError('policy: cost-aware selection (lambda > 0) is an argmax rule; use mode argmax or lambda 0', { field: 'lambda' });
      if (options.seed === undefined) throw new InputError('policy: mode sample needs a seed', { field: 'seed' });
      this.random = rng(options.seed, 'router-policy');
    }

    this.normalisedPrices = new Float64Array(K);
    if (this.lambda > 0) this.normalisedPrices.set(normalisedPrices(this.workers, this.allowedMask, options.prices, options.priceBasis ?? 'mean'));
  }

  /** The decision for one input's logits [K]. */
  decide(logits: ArrayLike<number>): Decision {
    const K = this.workers.length;
    if (logits.length !== K) throw new InputError(`policy: ${logits.length} logits for ${K} workers`, { field: 'logits' });
    const probs = maskedSoftmax(logits, this.allowedMask);
    const scores = new Float64Array(K).fill(-Infinity);
    for (let j = 0; j < K; j++) if (this.allowedMask[j]) scores[j] = probs[j]! - this.lambda * this.normalisedPrices[j]!;
    let index: number;
    if (this.mode === 'sample') {
      const u = this.random!.next();
      let acc = 0;
      index = -1;
      for (let j = 0; j < K; j++) {
        if (!this.allowedMask[j]) continue;
        index = j; // the last allowed one catches rounding at u ~ 1
        acc += probs[j]!;
        if (u < acc) break;
      }
    } else {
      index = -1;
      for (let j = 0; j < K; j++) if (this.allowedMask[j] && (index < 0 || scores[j]! > scores[index]!)) index = j;
    }
    return { index, worker: this.workers[index]!, probs, scores };
  }

  /** Decisions for n inputs, logits [n, K] row-major. */
  decideBatch(logits: ArrayLike<number>, n: number): Decision[] {
    const K = this.workers.length;
    if (logits.length !== n * K) throw new InputError(`policy: ${logits.length} logits are not [${n}, ${K}]`, { field: 'logits' });
    const rows = ArrayBuffer.isView(logits) ? (logits as unknown as Float32Array) : Float64Array.from(logits);
    const out: Decision[] = [];
    for (let i = 0; i < n; i++) out.push(this.decide(rows.subarray(i * K, (i + 1) * K)));
    return out;
  }
}

/** Softmax over the entries with mask 1 (0 elsewhere); NaN logits are refused. */
export function maskedSoftmax(logits: ArrayLike<number>, mask: ArrayLike<number>): Float64Array {
  const K = logits.length;
  let mx = -Infinity;
  for (let j = 0; j < K; j++) {
    const v = logits[j]!;
    if (Number.isNaN(v)) throw new InputError(`policy: logit ${j} is NaN`, { field: 'logits' });
    if (mask[j] && v > mx) mx = v;
  }
  const out = new Float64Array(K);
  let sum = 0;
  for (let j = 0; j < K; j++) if (mask[j]) sum += out[j] = mx === Infinity ? (logits[j] === Infinity ? 1 : 0) : Math.exp(logits[j]! - mx);
  for (let j = 0; j < K; j++) out[j]! /= sum;
  return out;
}

/** price_j / max allowed price per worker (0 for workers outside the mask). */
export function normalisedPrices(
  workers: readonly string[],
  mask: ArrayLike<number>,
  prices: Readonly<Record<string, WorkerPrices>> | undefined,
  basis: PriceBasis = 'mean',
): Float64Array {
  if (basis !== 'mean' && basis !== 'input') throw new InputError(`policy: price basis must be mean or input, got ${String(basis)}`, { field: 'priceBasis' });
  const raw = new Float64Array(workers.length);
  let max = 0;
  workers.forEach((w, j) => {
    if (!mask[j]) return;
    const p = prices?.[w];
    if (!p) throw new InputError(`policy: no price for allowed worker ${w} (needed when lambda > 0)`, { field: `prices.${w}` });
    let pico: bigint;
    try {
      pico = basis === 'input' ? parseUsd(p.inputPerMTok) : (parseUsd(p.inputPerMTok) + parseUsd(p.outputPerMTok)) / 2n;
    } catch (err) {
      throw new InputError(`policy: bad price for worker ${w}: ${(err as Error).message}`, { field: `prices.${w}` }, { cause: err });
    }
    // Picodollars per 1M tokens: exact as a double up to $9,007 per 1M tokens.
    raw[j] = Number(pico);
    max = Math.max(max, raw[j]!);
  });
  if (max > 0) for (let j = 0; j < raw.length; j++) raw[j]! /= max;
  return raw;
}
