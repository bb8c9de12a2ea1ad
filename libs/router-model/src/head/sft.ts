// Supervised fine-tuning of theta on soft labels: minibatch Adam on mean KL(p_i || pi_theta),
// gradients from the ONNX training graph (router-graph.ts), early stopping on a validation split.
//
// The features are projected once (y = x U, RouterHead.project) and every batch runs the
// training graph on y; the only JS loops are the batch gather (row copies), Adam over the theta
// vector, and validation KL over [n_val, K].

import { InputError, rng, shuffled } from '@fugu/core';
import { ProjectedFeatures, type RouterHead } from './router-graph.ts';
import { initTheta, unpackTheta } from './theta.ts';

export interface SftEpoch {
  /** 1-based. */
  epoch: number;
  /** Mean training KL over the epoch's batches (weighted by batch size), at the weights of each step. */
  trainLoss: number;
  /** Mean KL on the validation split after the epoch (NaN without a validation split). */
  valLoss: number;
  /** Mean reward of the argmax decisions on the validation split (when `rewards` is given). */
  valReward?: number;
}

export interface SftOptions {
  head: RouterHead;
  /** N feature rows x (each [I], I = head.layer.inDim). */
  features: readonly Float32Array[];
  /** N soft labels (each [K], non-negative, summing to 1). */
  labels: readonly Float32Array[];
  /** Row indices of the training and validation splits (disjoint). An empty val split turns early stopping off. */
  split: { train: readonly number[]; val: readonly number[] };
  seed: number | string;
  epochs: number;
  batchSize: number;
  /** Adam step size. */
  lr: number;
  /** Stop after this many epochs without a new best validation loss. */
  patience: number;
  /** Train z as well as the head (default true); false freezes z at its start (1): the head-only ablation. */
  trainZ?: boolean;
  /** Starting theta (default initTheta(head.dims, seed)). Not modified. */
  init?: Float32Array;
  /** Adam betas and epsilon (default 0.9, 0.999, 1e-8). */
  beta1?: number;
  beta2?: number;
  adamEps?: number;
  /** Rows per projection / validation run (default 4096): bounds memory on big splits. */
  chunkRows?: number;
  onEpoch?: (e: SftEpoch) => void | Promise<void>;
  /** N rows of mean rewards per worker: with them each epoch also reports the validation mean reward of the argmax decisions. */
  rewards?: readonly Float32Array[];
  /** Decoupled weight decay (AdamW) on the head weights W_h; default 0. */
  weightDecay?: number;
  /** What early stopping keeps: the lowest validation KL (default) or the highest validation mean reward (needs `rewards`). */
  selectBy?: 'loss' | 'reward';
}

export interface SftResult {
  /** The theta of the best validation epoch (the last epoch without a validation split). */
  theta: Float32Array;
  history: SftEpoch[];
  /** 1-based epoch whose theta is returned; 0 if no epoch improved on the start. */
  bestEpoch: number;
  bestValLoss: number;
}

export async function trainSft(options: SftOptions): Promise<SftResult> {
  const { head, features, labels, split, seed } = options;
  const { rank: R, workers: K } = head.dims;
  const I = head.layer.inDim;
  const N = features.length;
  validate(options, N, I, K);
  const trainZ = options.trainZ ?? true;
  const beta1 = options.beta1 ?? 0.9, beta2 = options.beta2 ?? 0.999, adamEps = options.adamEps ?? 1e-8;
  const chunk = options.chunkRows ?? 4096;

  // Project every row used once: Y [N, R] (rows outside both splits stay zero).
  const used = [...new Set([...split.train, ...split.val])].sort((a, b) => a - b);
  const Y = new Float32Array(N * R);
  for (let start = 0; start < used.length; start += chunk) {
    const rows = used.slice(start, start + chunk);
    const x = new Float32Array(rows.length * I);
    rows.forEach((r, i) => x.set(features[r]!, i * I));
    const y = await head.project(x);
    rows.forEach((r, i) => Y.set(y.y.subarray(i * R, (i + 1) * R), r * R));
  }
  const P = new Float32Array(N * K);
  labels.forEach((l, i) => P.set(l, i * K));

  const theta = options.init ? Float32Array.from(options.init) : initTheta(head.dims, seed);
  unpackTheta(theta, head.dims); // checks the size
  const m = new Float64Array(theta.length), v = new Float64Array(theta.length);
  const frozen = trainZ ? 0 : R; // theta[0, frozen) is not updated
  const weightDecay = options.weightDecay ?? 0;
  const headFrom = R, headTo = R + head.dims.dim * K; // W_h within theta
  let step = 0;

  const selectBy = options.selectBy ?? 'loss';
  if (selectBy === 'reward' && !options.rewards) throw new InputError('SFT: selectBy reward needs rewards', { field: 'rewards' });
  const valOf = async (t: Float32Array): Promise<{ loss: number; reward: number }> => {
    if (split.val.length === 0) return { loss: NaN, reward: NaN };
    let total = 0;
    let reward = 0;
    for (let start = 0; start < split.val.length; start += chunk) {
      const rows = split.val.slice(start, start + chunk);
      const logits = (await head.logits(gather(Y, rows, R), t)).data;
      for (let i = 0; i < rows.length; i++) {
        total += klRow(P, rows[i]! * K, logits, i * K, K);
        if (options.rewards) {
          let best = 0;
          for (let k = 1; k < K; k++) if (logits[i * K + k]! > logits[i * K + best]!) best = k;
          reward += options.rewards[rows[i]!]![best]!;
        }
      }
    }
    return { loss: total / split.val.length, reward: options.rewards ? reward / split.val.length : NaN };
  };
  // the quantity early stopping minimises
  const criterion = (v: { loss: number; reward: number }): number => (selectBy === 'reward' ? -v.reward : v.loss);

  const shuffle = rng(seed, 'sft-minibatches');
  const history: SftEpoch[] = [];
  const start0 = await valOf(theta);
  let best = { loss: start0.loss, score: criterion(start0), epoch: 0, theta: Float32Array.from(theta) };
  if (Number.isNaN(best.score)) best.score = Infinity;

  for (let epoch = 1; epoch <= options.epochs; epoch++) {
    const order = shuffled(split.train, shuffle);
    let trainTotal = 0;
    for (let start = 0; start < order.length; start += options.batchSize) {
      const rows = order.slice(start, start + options.batchSize);
      const p = new Float32Array(rows.length * K);
      rows.forEach((r, i) => p.set(P.subarray(r * K, (r + 1) * K), i * K));
      const { loss, grad } = await head.lossAndGrad(gather(Y, rows, R), p, theta);
      if (!Number.isFinite(loss)) throw new Error(`SFT: the training loss became ${loss} at epoch ${epoch} (lower lr?)`);
      trainTotal += loss * rows.length;
      // Adam with bias correction.
      step++;
      const c1 = 1 - beta1 ** step, c2 = 1 - beta2 ** step;
      if (weightDecay > 0) for (let i = headFrom; i < headTo; i++) theta[i] = theta[i]! * (1 - options.lr * weightDecay);
      for (let i = frozen; i < theta.length; i++) {
        const g = grad[i]!;
        m[i] = beta1 * m[i]! + (1 - beta1) * g;
        v[i] = beta2 * v[i]! + (1 - beta2) * g * g;
        theta[i] = theta[i]! - (options.lr * (m[i]! / c1)) / (Math.sqrt(v[i]! / c2) + adamEps);
      }
    }
    const val = await valOf(theta);
    const record: SftEpoch = { epoch, trainLoss: trainTotal / order.length, valLoss: val.loss, ...(options.rewards && { valReward: val.reward }) };
    history.push(record);
    await options.onEpoch?.(record);
    if (split.val.length === 0) {
      best = { loss: NaN, score: NaN, epoch, theta: Float32Array.from(theta) };
      continue;
    }
    if (criterion(val) < best.score) best = { loss: val.loss, score: criterion(val), epoch, theta: Float32Array.from(theta) };
    else if (epoch - best.epoch >= options.patience) break;
  }
  return { theta: best.theta, history, bestEpoch: best.epoch, bestValLoss: best.loss };
}

/** Rows of Y [*, R] gathered into a contiguous batch. */
function gather(Y: Float32Array, rows: readonly number[], R: number): ProjectedFeatures {
  const y = new Float32Array(rows.length * R);
  rows.forEach((r, i) => y.set(Y.subarray(r * R, (r + 1) * R), i * R));
  return new ProjectedFeatures(y, rows.length, R);
}

/** KL(p || softmax(logits)) for one row, float64, 0 log 0 = 0. */
function klRow(p: Float32Array, pOff: number, logits: Float32Array, lOff: number, K: number): number {
  let mx = -Infinity;
  for (let k = 0; k < K; k++) mx = Math.max(mx, logits[lOff + k]!);
  let sum = 0;
  for (let k = 0; k < K; k++) sum += Math.exp(logits[lOff + k]! - mx);
  const logZ = mx + Math.log(sum);
  let kl = 0;
  for (let k = 0; k < K; k++) {
    const pv = p[pOff + k]!;
    if (pv > 0) kl += pv * (Math.log(pv) - (logits[lOff + k]! - logZ));
  }
  return kl;
}

function validate(o: SftOptions, N: number, I: number, K: number): void {
  if (N === 0) throw new InputError('SFT: no feature rows', { field: 'features' });
  if (o.labels.length !== N) throw new InputError(`SFT: ${N} feature rows but ${o.labels.length} label rows`, { field: 'labels' });
  o.features.forEach((f, i) => {
    if (f.length !== I) throw new InputError(`SFT: feature row ${i} has ${f.length} values, expected ${I}`, { field: `features[${i}]` });
  });
  o.labels.forEach((l, i) => {
    if (l.length !== K) throw new InputError(`SFT: label row ${i} has ${l.length} values, expected ${K} (one per worker)`, { field: `labels[${i}]` });
    let sum = 0;
    for (const v of l) {
      if (!(v >= 0)) throw new InputError(`SFT: label row ${i} has a negative or NaN value`, { field: `labels[${i}]` });
      sum += v;
    }
    if (Math.abs(sum - 1) > 1e-3) throw new InputError(`SFT: label row ${i} sums to ${sum}, not 1`, { field: `labels[${i}]` });
  });
  const seen = new Set<number>();
  for (const [name, rows] of [['train', o.split.train], ['val', o.split.val]] as const) {
    for (const r of rows) {
      if (!Number.isInteger(r) || r < 0 || r >= N) throw new InputError(`SFT: split.${name} has row ${r}, outside [0, ${N})`, { field: `split.${name}` });
      if (seen.has(r)) throw new InputError(`SFT: row ${r} appears twice in the splits`, { field: `split.${name}` });
      seen.add(r);
    }
  }
  if (o.split.train.length === 0) throw new InputError('SFT: the training split is empty', { field: 'split.train' });
  const positiveInt = (k: 'epochs' | 'batchSize' | 'patience') => {
    if (!Number.isInteger(o[k]) || o[k] < 1) throw new InputError(`SFT: ${k} must be a positive integer, got ${o[k]}`, { field: k });
  };
  positiveInt('epochs');
  positiveInt('batchSize');
  positiveInt('patience');
  if (!(o.lr > 0) || !Number.isFinite(o.lr)) throw new InputError(`SFT: lr must be a positive number, got ${o.lr}`, { field: 'lr' });
  if (o.chunkRows !== undefined && (!Number.isInteger(o.chunkRows) || o.chunkRows < 1)) throw new InputError(`SFT: chunkRows must be a positive integer`, { field: 'chunkRows' });
}
