// GRPO runs, iterations and rollouts (migration 0010_grpo). The committed state of a run is its
// row: the iteration it asks, the policy checkpoint that samples it and Adam's moments (float64
// bytes). An iteration's commit (the next policy checkpoint, the moments, the iteration record,
// every rollout row, the best validation checkpoint) is ONE transaction, conditional on the run
// still asking that iteration: a second commit of the same iteration fails, never applies twice.
import { sql } from 'kysely';
import type { Db } from './connection.ts';
import { saveConductorCheckpoint, type ConductorCheckpointRecord } from './conductor-checkpoints.ts';
import type { GrpoRunStatus } from './schema.ts';

export type GrpoRunRecord = {
  id: string;
  datasetId: number;
  poolId: number;
  startCheckpointId: string;
  config: Record<string, unknown>;
  codeVersion: string;
  status: GrpoRunStatus;
  statusReason: string | null;
  /** the iteration the committed state asks = the number of committed iterations */
  iteration: number;
  policyCheckpointId: string;
  adam: { step: number; m: Float64Array | null; v: Float64Array | null };
  bestCheckpointId: string | null;
  bestValReward: number | null;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
};

export type GrpoIterationRecord = {
  iteration: number;
  policyCheckpointId: string;
  nextCheckpointId: string;
  record: Record<string, unknown>;
  valReward: number | null;
  committedAt: Date;
};

export type GrpoRolloutRow = {
  iteration: number;
  split: 'train' | 'val';
  question: number;
  sample: number;
  itemId: number;
  workflowId: number | null;
  finishReason: string | null;
  parseOk: boolean | null;
  reward: number | null;
  /** USD decimal string */
  cost: string;
  nSteps: number | null;
  topology: string | null;
  decisions: unknown;
  logprobs: unknown;
  advantage: number | null;
};

export class GrpoCommitConflictError extends Error {
  constructor(runId: string, iteration: number) {
    super(`GRPO run ${runId}: iteration ${iteration} was already committed (another coordinator?)`);
    this.name = 'GrpoCommitConflictError';
  }
}

const f64ToBytes = (a: Float64Array): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
const bytesToF64 = (b: Buffer): Float64Array => {
  const copy = new Uint8Array(b.byteLength);
  copy.set(b);
  return new Float64Array(copy.buffer);
};

/** Creates a run asking iteration 0, with its starting checkpoint as the sampling policy. */
export async function createGrpoRun(db: Db, r: { id: string; datasetId: number; poolId: number; startCheckpointId: string; config: Record<string, unknown>; codeVersion: string }): Promise<void> {
  await db
    .insertInto('grpo_runs')
    .values({
      id: r.id, dataset_id: r.datasetId, pool_id: r.poolId, start_checkpoint_id: r.startCheckpointId, config: JSON.stringify(r.config), code_version: r.codeVersion,
      status: 'running', policy_checkpoint_id: r.startCheckpointId,
    })
    .execute();
}

type RunRaw = {
  id: string; dataset_id: number; pool_id: number; start_checkpoint_id: string; config: Record<string, unknown>; code_version: string; status: GrpoRunStatus;
  status_reason: string | null; iteration: number; policy_checkpoint_id: string; adam_step: number; adam_m: Buffer | null; adam_v: Buffer | null;
  best_checkpoint_id: string | null; best_val_reward: number | null; created_at: Date; updated_at: Date; finished_at: Date | null;
};

const toRun = (r: RunRaw): GrpoRunRecord => ({
  id: r.id, datasetId: r.dataset_id, poolId: r.pool_id, startCheckpointId: r.start_checkpoint_id, config: r.config, codeVersion: r.code_version,
  status: r.status, statusReason: r.status_reason, iteration: r.iteration, policyCheckpointId: r.policy_checkpoint_id,
  adam: { step: r.adam_step, m: r.adam_m ? bytesToF64(r.adam_m) : null, v: r.adam_v ? bytesToF64(r.adam_v) : null },
  bestCheckpointId: r.best_checkpoint_id, bestValReward: r.best_val_reward, createdAt: r.created_at, updatedAt: r.updated_at, finishedAt: r.finished_at,
});

export async function getGrpoRun(db: Db, id: string): Promise<GrpoRunRecord | undefined> {
  const r = await db.selectFrom('grpo_runs').selectAll().where('id', '=', id).executeTakeFirst();
  return r ? toRun(r as unknown as RunRaw) : undefined;
}

/** The newest first. */
export async function listGrpoRuns(db: Db, limit = 20): Promise<GrpoRunRecord[]> {
  const rows = await db.selectFrom('grpo_runs').selectAll().orderBy('created_at', 'desc').limit(limit).execute();
  return rows.map((r) => toRun(r as unknown as RunRaw));
}

export async function setGrpoRunStatus(db: Db, id: string, status: GrpoRunStatus, reason: string | null = null): Promise<void> {
  await db
    .updateTable('grpo_runs')
    .set({ status, status_reason: reason, updated_at: sql`now()`, ...((status === 'completed' || status === 'failed') && { finished_at: sql`now()` }) })
    .where('id', '=', id)
    .execute();
}

export type GrpoCommit = {
  runId: string;
  iteration: number;
  /** the policy the update made: it samples the next iteration */
  next: ConductorCheckpointRecord;
  adam: { step: number; m: Float64Array; v: Float64Array };
  record: Record<string, unknown>;
  valReward: number | null;
  rollouts: readonly GrpoRolloutRow[];
  /** a new best on the validation split: its checkpoint (parent: the starting one) */
  best?: { checkpoint: ConductorCheckpointRecord; valReward: number };
  completed: boolean;
};

/** The iteration, in ONE transaction, only while the run still asks it (GrpoCommitConflictError otherwise). */
export async function commitGrpoIteration(db: Db, c: GrpoCommit): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const run = await trx.selectFrom('grpo_runs').select(['iteration', 'policy_checkpoint_id']).where('id', '=', c.runId).forUpdate().executeTakeFirst();
    if (!run || run.iteration !== c.iteration) throw new GrpoCommitConflictError(c.runId, c.iteration);
    await saveConductorCheckpoint(trx, c.next);
    if (c.best) await saveConductorCheckpoint(trx, c.best.checkpoint);
    await trx
      .updateTable('grpo_runs')
      .set({
        iteration: c.iteration + 1, policy_checkpoint_id: c.next.id, adam_step: c.adam.step, adam_m: f64ToBytes(c.adam.m), adam_v: f64ToBytes(c.adam.v),
        updated_at: sql`now()`,
        ...(c.best && { best_checkpoint_id: c.best.checkpoint.id, best_val_reward: c.best.valReward }),
        ...(c.completed && { status: 'completed' as const, status_reason: null, finished_at: sql`now()` }),
      })
      .where('id', '=', c.runId)
      .execute();
    await trx
      .insertInto('grpo_iterations')
      .values({ run_id: c.runId, iteration: c.iteration, policy_checkpoint_id: run.policy_checkpoint_id, next_checkpoint_id: c.next.id, record: JSON.stringify(c.record), val_reward: c.valReward })
      .execute();
    for (let i = 0; i < c.rollouts.length; i += 500) {
      await trx
        .insertInto('grpo_rollouts')
        .values(c.rollouts.slice(i, i + 500).map((r) => ({
          run_id: c.runId, iteration: r.iteration, split: r.split, question: r.question, sample: r.sample, item_id: r.itemId, workflow_id: r.workflowId,
          finish_reason: r.finishReason, parse_ok: r.parseOk, reward: r.reward, cost: r.cost, n_steps: r.nSteps, topology: r.topology,
          decisions: r.decisions === undefined ? null : JSON.stringify(r.decisions), logprobs: r.logprobs === undefined ? null : JSON.stringify(r.logprobs), advantage: r.advantage,
        })))
        .execute();
    }
  });
}

export async function listGrpoIterations(db: Db, runId: string): Promise<GrpoIterationRecord[]> {
  const rows = await db.selectFrom('grpo_iterations').selectAll().where('run_id', '=', runId).orderBy('iteration').execute();
  return rows.map((r) => ({ iteration: r.iteration, policyCheckpointId: r.policy_checkpoint_id, nextCheckpointId: r.next_checkpoint_id, record: r.record, valReward: r.val_reward, committedAt: r.committed_at }));
}

export async function listGrpoRollouts(db: Db, runId: string, iteration?: number): Promise<GrpoRolloutRow[]> {
  let q = db.selectFrom('grpo_rollouts').selectAll().where('run_id', '=', runId);
  if (iteration !== undefined) q = q.where('iteration', '=', iteration);
  const rows = await q.orderBy('iteration').orderBy('split').orderBy('question').orderBy('sample').execute();
  return rows.map((r) => ({
    iteration: r.iteration, split: r.split, question: r.question, sample: r.sample, itemId: r.item_id, workflowId: r.workflow_id === null ? null : Number(r.workflow_id),
    finishReason: r.finish_reason, parseOk: r.parse_ok, reward: r.reward, cost: r.cost, nSteps: r.n_steps, topology: r.topology, decisions: r.decisions, logprobs: r.logprobs,
    advantage: r.advantage,
  }));
}
