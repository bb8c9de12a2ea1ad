// What every fitness task loads once: the checkpoint, the evaluation run's routing data (per item
// and worker the mean recorded reward), the checkpoint's split (by unique prompt, or the dataset's
// own when it was trained with --split-by dataset), the router model (USE-lite +
// the SVF head for the checkpoint's workers) and the projected features y = x U of every prompt
// (x from the Postgres feature cache, computed and stored there when missing).
import { InputError } from '@fugu/core';
import { splitScheme } from '@fugu/datasets';
import { getCheckpoint, type CheckpointRecord, type Db } from '@fugu/db';
import { ProjectedFeatures, type RouterHead, loadRouterModel, type ExecutionProviderSetting, type RouterModel } from '@fugu/router-model';
import { cachedFeatures } from './features.ts';
import { checkCompatible, checkWorkers, routingDataFromRun, splitIndices, type RoutingData, type SplitName } from './routing-data.ts';
import type { EvalContext, FitnessTaskSpec } from './types.ts';

export type TaskData = {
  checkpoint: CheckpointRecord;
  /** the evaluation run whose rewards define outcomes */
  run: string;
  data: RoutingData;
  splitSeed: number;
  split: Record<SplitName, number[]>;
  model: RouterModel;
  head: RouterHead;
  /** y = x U of every item's prompt, [items, R] in data.items order */
  promptY: ProjectedFeatures;
  release(): Promise<void>;
};

export type LoadTaskDataOptions = {
  db: Db;
  home: string;
  checkpointId: string;
  run?: string;
  splitSeed?: number;
  executionProvider?: ExecutionProviderSetting;
  threads?: number;
};

export async function getCheckpointOrThrow(db: Db, id: string, field = 'checkpointId'): Promise<CheckpointRecord> {
  if (typeof id !== 'string' || id.length === 0) throw new InputError('give a router checkpoint id', { field });
  const ckpt = await getCheckpoint(db, id);
  if (!ckpt) throw new InputError(`no router checkpoint "${id}"`, { field });
  return ckpt;
}

/** The run and split seed a checkpoint names, unless given. */
export function runOf(ckpt: CheckpointRecord, run: string | undefined, splitSeed: number | undefined): { run: string; splitSeed: number } {
  const r = run ?? (typeof ckpt.training.run === 'string' ? ckpt.training.run : undefined);
  if (!r) throw new InputError(`checkpoint ${ckpt.id} names no training run: give the evaluation run`, { field: 'run' });
  const s = splitSeed ?? (typeof ckpt.training.splitSeed === 'number' ? ckpt.training.splitSeed : 0);
  if (!Number.isSafeInteger(s)) throw new InputError(`splitSeed must be an integer, got ${s}`, { field: 'splitSeed' });
  return { run: r, splitSeed: s };
}

export async function loadTaskData(opts: LoadTaskDataOptions): Promise<TaskData> {
  const checkpoint = await getCheckpointOrThrow(opts.db, opts.checkpointId);
  const { run, splitSeed } = runOf(checkpoint, opts.run, opts.splitSeed);
  const data = await routingDataFromRun(opts.db, run);
  checkWorkers(checkpoint, data); // before loading the model: the cheap refusal first
  const model = await loadRouterModel(opts.home, data.workers.length, {
    executionProvider: opts.executionProvider ?? 'cpu',
    ...(opts.threads !== undefined && { intraOpNumThreads: opts.threads }),
  });
  try {
    checkCompatible(checkpoint, data, model.backboneId);
    const { features } = await cachedFeatures(opts.db, model.encoder, data.items.map((i) => i.prompt));
    const promptY = await projectRows(model.head, features);
    // the checkpoint's own scheme (records before it existed: by prompt)
    const by = splitScheme(checkpoint.training.splitBy ?? 'prompt', 'checkpoint');
    return {
      checkpoint, run, data, splitSeed, split: splitIndices(data, { by, seed: splitSeed }), model, head: model.head, promptY,
      release: () => model.release(),
    };
  } catch (err) {
    await model.release();
    throw err;
  }
}

/** y = x U of feature rows, in chunks, as one ProjectedFeatures. */
export async function projectRows(head: RouterHead, rows: readonly Float32Array[]): Promise<ProjectedFeatures> {
  const I = head.layer.inDim, R = head.layer.rank;
  const y = new Float32Array(rows.length * R);
  const CHUNK = 2048;
  for (let i = 0; i < rows.length; i += CHUNK) {
    const part = rows.slice(i, i + CHUNK);
    const x = new Float32Array(part.length * I);
    part.forEach((r, j) => x.set(r, j * I));
    y.set((await head.project(x)).y, i * R);
  }
  return new ProjectedFeatures(y, rows.length, R);
}

/** Rows of a ProjectedFeatures gathered into a new one. */
export function gatherRows(all: ProjectedFeatures, rows: readonly number[]): ProjectedFeatures {
  const R = all.rank;
  const y = new Float32Array(rows.length * R);
  rows.forEach((r, i) => y.set(all.y.subarray(r * R, (r + 1) * R), i * R));
  return new ProjectedFeatures(y, rows.length, R);
}

const posInt = (v: unknown, field: string): number => {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) throw new InputError(`${field} must be a positive integer, got ${String(v)}`, { field });
  return v;
};

/** Throws an InputError naming the field of a bad spec. */
export function validateSpec(spec: FitnessTaskSpec): FitnessTaskSpec {
  if (!spec || typeof spec !== 'object') throw new InputError('give a fitness task spec', { field: 'spec' });
  switch (spec.kind) {
    case 'single-step':
      posInt(spec.batchSize, 'spec.batchSize');
      return { kind: 'single-step', batchSize: spec.batchSize };
    case 'episodes': {
      posInt(spec.episodes, 'spec.episodes');
      posInt(spec.questions, 'spec.questions');
      posInt(spec.turnBudget, 'spec.turnBudget');
      if (spec.turnBudget < spec.questions) {
        throw new InputError(`turnBudget ${spec.turnBudget} is below questions ${spec.questions}: no episode could be solved`, { field: 'spec.turnBudget' });
      }
      return { kind: 'episodes', episodes: spec.episodes, questions: spec.questions, turnBudget: spec.turnBudget };
    }
    default:
      throw new InputError(`spec.kind must be single-step or episodes, got ${String((spec as { kind?: unknown }).kind)}`, { field: 'spec.kind' });
  }
}

export function validateContext(ctx: EvalContext): EvalContext {
  if (!ctx || typeof ctx !== 'object') throw new InputError('give an evaluation context', { field: 'ctx' });
  if (!(typeof ctx.seed === 'string' || (typeof ctx.seed === 'number' && Number.isFinite(ctx.seed)))) throw new InputError(`ctx.seed must be a number or string, got ${String(ctx.seed)}`, { field: 'ctx.seed' });
  for (const k of ['generation', 'replica'] as const) {
    if (!Number.isSafeInteger(ctx[k]) || ctx[k] < 0) throw new InputError(`ctx.${k} must be an integer >= 0, got ${String(ctx[k])}`, { field: `ctx.${k}` });
  }
  if (ctx.split !== 'train' && ctx.split !== 'val' && ctx.split !== 'test') throw new InputError(`ctx.split must be train, val or test, got ${String(ctx.split)}`, { field: 'ctx.split' });
  return ctx;
}

/** Softmax of logits[from, from + K) into out[at, at + K), in float64. */
export function softmaxInto(logits: ArrayLike<number>, from: number, K: number, out: Float64Array, at: number): void {
  let max = -Infinity;
  for (let j = 0; j < K; j++) max = Math.max(max, logits[from + j]!);
  let sum = 0;
  for (let j = 0; j < K; j++) sum += out[at + j] = Math.exp(logits[from + j]! - max);
  for (let j = 0; j < K; j++) out[at + j]! /= sum;
}

/** Index of the largest of xs[from, from + K) (the first on ties). */
export function argmaxAt(xs: ArrayLike<number>, from: number, K: number): number {
  let best = 0;
  for (let j = 1; j < K; j++) if (xs[from + j]! > xs[from + best]!) best = j;
  return best;
}

/** Inverse-CDF draw from p[at, at + K) with the uniform u (common random numbers: same u, same pi, same draw). */
export function sampleAt(p: ArrayLike<number>, at: number, K: number, u: number): number {
  let acc = 0;
  let last = -1;
  for (let j = 0; j < K; j++) {
    const pj = p[at + j]!;
    if (pj <= 0) continue;
    last = j;
    acc += pj;
    if (u < acc) return j;
  }
  return last < 0 ? 0 : last; // rounding at u ~ 1 goes to the last worker with mass
}
