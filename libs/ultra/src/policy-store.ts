// The embedded Conductor policy's checkpoints: made (the documented initialisation), stored in
// Postgres (`conductor_checkpoints`), loaded for a pool, and moved as one JSON file (theta as
// base64 float32 LE), the way `fugu router export/import` moves router checkpoints.
import { writeFile } from 'node:fs/promises';
import { z } from 'zod';
import { InputError, type DatasetItem } from '@fugu/core';
import { readJsonFile, type SplitScheme } from '@fugu/datasets';
import {
  ConductorPolicy, policyCheckpoint, policyFromCheckpoint, type PolicyCheckpoint, type PolicyConfig,
} from '@fugu/conductor';
import { bytesToFloats, floatsToBytes, getConductorCheckpoint, saveConductorCheckpoint, type ConductorCheckpointRecord, type Db } from '@fugu/db';
import { splitItems, trainSplitRanking, workerMeans } from './split.ts';

export const POLICY_FILE_FORMAT = 'fugu-conductor-policy/1';

/** A policy checkpoint as its database record. */
export function policyRecord(c: PolicyCheckpoint): ConductorCheckpointRecord {
  return { ...c, config: { ...c.config } };
}

function fromRecord(r: ConductorCheckpointRecord): PolicyCheckpoint {
  const { createdAt: _createdAt, ...rest } = r;
  return { ...rest, config: r.config as unknown as PolicyConfig };
}

/** Stores a policy checkpoint (its parent, when it names one, must be stored). */
export async function savePolicyCheckpoint(db: Db, c: PolicyCheckpoint): Promise<void> {
  if (await getConductorCheckpoint(db, c.id)) throw new InputError(`a policy checkpoint "${c.id}" already exists`, { field: 'id' });
  if (c.parentId !== null && !(await getConductorCheckpoint(db, c.parentId))) throw new InputError(`parent policy checkpoint "${c.parentId}" does not exist`, { field: 'parentId' });
  await saveConductorCheckpoint(db, policyRecord(c));
}

/** A stored policy checkpoint (InputError naming `checkpoint` when there is none). */
export async function getPolicyCheckpoint(db: Db, id: string): Promise<PolicyCheckpoint> {
  const r = await getConductorCheckpoint(db, id);
  if (!r) throw new InputError(`no policy checkpoint "${id}" (fugu ultra policy list shows the stored ones)`, { field: 'checkpoint' });
  return fromRecord(r);
}

/** The policy of a stored checkpoint for a pool (worker names in ordinal order; a different pool is refused). */
export async function loadPolicy(db: Db, id: string, pool: { workers: readonly string[] }): Promise<{ policy: ConductorPolicy; checkpoint: PolicyCheckpoint }> {
  const checkpoint = await getPolicyCheckpoint(db, id);
  return { policy: policyFromCheckpoint(checkpoint, { workers: pool.workers }), checkpoint };
}

export type TrainingRanking = {
  /** worker names best first: those with recorded scores by mean, then the rest in pool order */
  ranking: string[];
  /** the training-split mean of each ranked worker, and how many items it averages */
  means: Array<{ worker: string; mean: number; items: number }>;
};

/**
 * The pool's workers ranked by their mean recorded score on the training split: the `train` part
 * of the router's split (by unique prompt with `splitSeed`, default 0, or the dataset's own with
 * `splitBy: 'dataset'`, as `fugu router train` and `fugu ultra eval` split), so a policy, the fixed
 * topologies and the router rank on the same items. Ties keep pool order. A dataset with no
 * recorded score for any pool worker on its training items is an InputError (field `dataset`).
 */
export function trainingRanking(items: readonly DatasetItem[], workers: readonly string[], opts: { splitSeed?: number; splitBy?: SplitScheme; datasetName?: string } = {}): TrainingRanking {
  const split = { by: opts.splitBy ?? 'prompt', seed: opts.splitSeed ?? 0 } as const;
  const train = splitItems(items, 'train', split).map((i) => items[i]!);
  const means = workerMeans(workers, train).filter((m) => m.items > 0);
  if (means.length === 0) {
    const name = opts.datasetName ? `dataset "${opts.datasetName}"` : 'the dataset';
    throw new InputError(`${name} has no recorded scores for the pool's workers (${workers.join(', ')}) on its ${train.length} training items: nothing to rank them by`, { field: 'dataset' });
  }
  const ranking = trainSplitRanking(workers, items, split);
  const ranked = ranking.flatMap((w) => means.filter((m) => m.worker === w));
  return { ranking, means: ranked };
}

export type InitPolicyOptions = {
  /** pool worker names in ordinal order */
  workers: readonly string[];
  backboneId: string;
  featureDim: number;
  seed: number;
  maxSteps?: number;
  /** worker names best first; default pool order */
  ranking?: readonly string[];
  /** default `policy-<backbone id prefix>-<time>` */
  id?: string;
  /** what the training record says about where the ranking came from */
  rankedBy?: Record<string, unknown>;
  /** ISO time for the default id and the record (tests pass a fixed one) */
  now?: Date;
};

/** A checkpoint at the documented initialisation, stored; returns it. */
export async function initPolicyCheckpoint(db: Db, opts: InitPolicyOptions): Promise<PolicyCheckpoint> {
  const policy = ConductorPolicy.init({
    workers: opts.workers, featureDim: opts.featureDim, seed: opts.seed,
    ...(opts.ranking !== undefined && { ranking: opts.ranking }),
    ...(opts.maxSteps !== undefined && { maxSteps: opts.maxSteps }),
  });
  const now = opts.now ?? new Date();
  const id = opts.id ?? `policy-${now.toISOString().replace(/[-:]/g, '').replace(/\..*$/, '')}-${opts.seed}`;
  const c = policyCheckpoint(policy, {
    id, backboneId: opts.backboneId, parentId: null,
    training: { stage: 'init', seed: opts.seed, ranking: opts.ranking ?? [...opts.workers], ...(opts.rankedBy && { rankedBy: opts.rankedBy }), createdAt: now.toISOString() },
  });
  await savePolicyCheckpoint(db, c);
  return c;
}

const fileSchema = z.object({
  format: z.literal(POLICY_FILE_FORMAT),
  id: z.string().min(1),
  workers: z.array(z.string().min(1)).min(1),
  backboneId: z.string().min(1),
  featureDim: z.number().int().positive(),
  config: z.record(z.string(), z.unknown()),
  theta: z.string().min(1),
  thetaLayout: z.array(z.object({ name: z.string(), offset: z.number().int().nonnegative(), shape: z.array(z.number().int().positive()) })),
  training: z.record(z.string(), z.unknown()),
  metrics: z.record(z.string(), z.unknown()),
  parentId: z.string().nullable(),
});

/** Writes a stored checkpoint to one JSON file. */
export async function exportPolicyCheckpoint(db: Db, id: string, out: string): Promise<void> {
  const c = await getPolicyCheckpoint(db, id);
  const { theta, ...rest } = c;
  await writeFile(out, `${JSON.stringify({ format: POLICY_FILE_FORMAT, ...rest, theta: floatsToBytes(theta).toString('base64') }, null, 1)}\n`);
}

/**
 * Stores the checkpoint of a file written by exportPolicyCheckpoint (under a new id when its id
 * is taken; without its parent when that is not stored here) and returns its id. The file is
 * checked first (its shape, then that it loads as a policy for its own workers): a bad file is
 * an InputError naming the file and the field, and stores nothing.
 */
export async function importPolicyCheckpoint(db: Db, file: string, opts: { now?: Date } = {}): Promise<string> {
  const { format: _format, ...f } = await readJsonFile(file, fileSchema);
  const checkpoint: PolicyCheckpoint = { ...f, config: f.config as unknown as PolicyConfig, theta: bytesToFloats(Buffer.from(f.theta, 'base64')) };
  try {
    policyFromCheckpoint(checkpoint, { workers: checkpoint.workers });
  } catch (e) {
    const field = e instanceof InputError && e.field !== undefined ? e.field : 'checkpoint';
    throw new InputError((e as Error).message.replace(`field ${field}: `, ''), { file, field });
  }
  const stamp = (opts.now ?? new Date()).getTime().toString(36);
  const id = (await getConductorCheckpoint(db, f.id)) ? `${f.id}_import_${stamp}` : f.id;
  const parent = f.parentId && (await getConductorCheckpoint(db, f.parentId)) ? f.parentId : null;
  await savePolicyCheckpoint(db, { ...checkpoint, id, parentId: parent, training: { ...f.training, importedFrom: file, originalParent: f.parentId, originalId: f.id } });
  return id;
}
