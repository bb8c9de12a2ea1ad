// ES runs, generations and evaluations (migration 0005_es). The optimiser state is opaque JSON
// here (a @fugu/es SepCmaEsState); @fugu/db does not depend on @fugu/es.
import { sql } from 'kysely';
import type { Db } from './connection.ts';
import type { EsRunStatus } from './schema.ts';
import { saveCheckpoint, type CheckpointRecord } from './router-repositories.ts';

export type EsState = Record<string, unknown>;

export type EsRunRecord = {
  id: string;
  status: EsRunStatus;
  statusReason: string | null;
  config: Record<string, unknown>;
  codeVersion: string;
  checkpointId: string;
  bestCheckpointId: string | null;
  /** the generation `state` asks = the number of committed generations */
  generation: number;
  createdAt: Date;
  updatedAt: Date;
};

export type EsGenerationRecord = {
  generation: number;
  meanFitness: number;
  bestFitness: number;
  medianFitness: number;
  bestSoFar: number;
  sigma: number;
  sigmaAfter: number;
  evaluations: number;
  dispatches: number;
  wallMs: number | null;
  committedAt: Date;
};

export type EsEvaluationRow = {
  runId: string;
  generation: number;
  candidate: number;
  replica: number;
  fitness: number;
  seed: string;
  summary: Record<string, unknown>;
  evaluator?: string | null;
  evalMs?: number | null;
};

export class EsCommitConflictError extends Error {
  constructor(runId: string, generation: number) {
    super(`ES run ${runId}: generation ${generation} was already committed (another coordinator?)`);
    this.name = 'EsCommitConflictError';
  }
}

export async function createEsRun(
  db: Db,
  r: { id: string; config: Record<string, unknown>; codeVersion: string; checkpointId: string; initialState: EsState },
): Promise<void> {
  const state = JSON.stringify(r.initialState);
  await db
    .insertInto('es_runs')
    .values({ id: r.id, status: 'running', config: JSON.stringify(r.config), code_version: r.codeVersion, checkpoint_id: r.checkpointId, initial_state: state, state, generation: 0 })
    .execute();
}

const runColumns = ['id', 'status', 'status_reason', 'config', 'code_version', 'checkpoint_id', 'best_checkpoint_id', 'generation', 'created_at', 'updated_at'] as const;

export async function getEsRun(db: Db, id: string): Promise<EsRunRecord | undefined> {
  const r = await db.selectFrom('es_runs').select(runColumns).where('id', '=', id).executeTakeFirst();
  if (!r) return undefined;
  return {
    id: r.id, status: r.status, statusReason: r.status_reason, config: r.config, codeVersion: r.code_version, checkpointId: r.checkpoint_id,
    bestCheckpointId: r.best_checkpoint_id, generation: r.generation, createdAt: r.created_at, updatedAt: r.updated_at,
  };
}

export async function listEsRuns(db: Db, limit = 20): Promise<EsRunRecord[]> {
  const rows = await db.selectFrom('es_runs').select(runColumns).orderBy('created_at', 'desc').limit(limit).execute();
  return rows.map((r) => ({
    id: r.id, status: r.status, statusReason: r.status_reason, config: r.config, codeVersion: r.code_version, checkpointId: r.checkpoint_id,
    bestCheckpointId: r.best_checkpoint_id, generation: r.generation, createdAt: r.created_at, updatedAt: r.updated_at,
  }));
}

/** The run's current optimiser state (the one that asks `generation`). */
export async function getEsState(db: Db, id: string): Promise<{ generation: number; state: EsState; status: EsRunStatus } | undefined> {
  const r = await db.selectFrom('es_runs').select(['generation', 'state', 'status']).where('id', '=', id).executeTakeFirst();
  return r && { generation: r.generation, state: r.state, status: r.status };
}

/** The state that asked generation g: the initial state for g = 0, else generation g-1's state after tell. */
export async function getEsStateAsking(db: Db, id: string, generation: number): Promise<EsState | undefined> {
  if (generation === 0) {
    const r = await db.selectFrom('es_runs').select('initial_state').where('id', '=', id).executeTakeFirst();
    return r?.initial_state;
  }
  const r = await db.selectFrom('es_generations').select('state').where('run_id', '=', id).where('generation', '=', generation - 1).executeTakeFirst();
  return r?.state;
}

export async function setEsRunStatus(db: Db, id: string, status: EsRunStatus, reason: string | null = null): Promise<void> {
  await db.updateTable('es_runs').set({ status, status_reason: reason, updated_at: sql`now()` }).where('id', '=', id).execute();
}

/** Writes evaluations; an existing (run, generation, candidate, replica) is left as it is (first
 *  result wins). Returns how many rows were inserted. */
export async function recordEsEvaluations(db: Db, rows: readonly EsEvaluationRow[]): Promise<number> {
  if (rows.length === 0) return 0;
  const r = await db
    .insertInto('es_evaluations')
    .values(
      rows.map((e) => ({
        run_id: e.runId, generation: e.generation, candidate: e.candidate, replica: e.replica, fitness: e.fitness, seed: e.seed,
        summary: JSON.stringify(e.summary), evaluator: e.evaluator ?? null, eval_ms: e.evalMs ?? null,
      })),
    )
    .onConflict((oc) => oc.columns(['run_id', 'generation', 'candidate', 'replica']).doNothing())
    .executeTakeFirst();
  return Number(r.numInsertedOrUpdatedRows ?? 0);
}

/** Which of these candidates of (run, generation, replica) already have an evaluation row (one query). */
export async function recordedEsCandidates(db: Db, runId: string, generation: number, replica: number, candidates: readonly number[]): Promise<Set<number>> {
  if (candidates.length === 0) return new Set();
  const rows = await db
    .selectFrom('es_evaluations')
    .select('candidate')
    .where('run_id', '=', runId)
    .where('generation', '=', generation)
    .where('replica', '=', replica)
    .where('candidate', 'in', [...candidates])
    .execute();
  return new Set(rows.map((r) => r.candidate));
}

/** Fitness of every recorded evaluation of a generation, ordered by (candidate, replica). */
export async function esGenerationFitness(db: Db, runId: string, generation: number): Promise<Array<{ candidate: number; replica: number; fitness: number }>> {
  return db
    .selectFrom('es_evaluations')
    .select(['candidate', 'replica', 'fitness'])
    .where('run_id', '=', runId)
    .where('generation', '=', generation)
    .orderBy('candidate')
    .orderBy('replica')
    .execute();
}

export async function countEsEvaluations(db: Db, runId: string, generation: number): Promise<number> {
  const r = await db
    .selectFrom('es_evaluations')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('run_id', '=', runId)
    .where('generation', '=', generation)
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

export async function esEvaluations(db: Db, runId: string, generation?: number): Promise<EsEvaluationRow[]> {
  let q = db.selectFrom('es_evaluations').selectAll().where('run_id', '=', runId);
  if (generation !== undefined) q = q.where('generation', '=', generation);
  const rows = await q.orderBy('generation').orderBy('candidate').orderBy('replica').execute();
  return rows.map((r) => ({
    runId: r.run_id, generation: r.generation, candidate: r.candidate, replica: r.replica, fitness: r.fitness, seed: r.seed, summary: r.summary,
    evaluator: r.evaluator, evalMs: r.eval_ms,
  }));
}

export type EsCommit = {
  runId: string;
  generation: number;
  stateAfter: EsState;
  record: Omit<EsGenerationRecord, 'generation' | 'committedAt'>;
  /** the best candidate so far as a router checkpoint, when this generation found it */
  checkpoint?: CheckpointRecord;
  /** the run is over after this generation */
  completed?: boolean;
  /** with completed: the final search mean as a router checkpoint (the run's estimate of the optimum) */
  meanCheckpoint?: CheckpointRecord;
};

/** One transaction: the new optimiser state, the generation's record, the best checkpoint.
 *  Refuses (EsCommitConflictError) when the run is no longer at this generation. */
export async function commitEsGeneration(db: Db, c: EsCommit): Promise<void> {
  await db.transaction().execute(async (trx) => {
    if (c.checkpoint) await saveCheckpoint(trx, c.checkpoint);
    if (c.meanCheckpoint) await saveCheckpoint(trx, c.meanCheckpoint);
    const state = JSON.stringify(c.stateAfter);
    const r = await trx
      .updateTable('es_runs')
      .set({
        state, generation: c.generation + 1, updated_at: sql`now()`,
        ...(c.checkpoint && { best_checkpoint_id: c.checkpoint.id }),
        ...(c.completed && { status: 'completed' as const, status_reason: null }),
      })
      .where('id', '=', c.runId)
      .where('generation', '=', c.generation)
      .executeTakeFirst();
    if (Number(r.numUpdatedRows) !== 1) throw new EsCommitConflictError(c.runId, c.generation);
    const g = c.record;
    await trx
      .insertInto('es_generations')
      .values({
        run_id: c.runId, generation: c.generation, state, mean_fitness: g.meanFitness, best_fitness: g.bestFitness, median_fitness: g.medianFitness,
        best_so_far: g.bestSoFar, sigma: g.sigma, sigma_after: g.sigmaAfter, evaluations: g.evaluations, dispatches: g.dispatches, wall_ms: g.wallMs,
      })
      .execute();
  });
}

export async function listEsGenerations(db: Db, runId: string): Promise<EsGenerationRecord[]> {
  const rows = await db
    .selectFrom('es_generations')
    .select(['generation', 'mean_fitness', 'best_fitness', 'median_fitness', 'best_so_far', 'sigma', 'sigma_after', 'evaluations', 'dispatches', 'wall_ms', 'committed_at'])
    .where('run_id', '=', runId)
    .orderBy('generation')
    .execute();
  return rows.map((r) => ({
    generation: r.generation, meanFitness: r.mean_fitness, bestFitness: r.best_fitness, medianFitness: r.median_fitness, bestSoFar: r.best_so_far,
    sigma: r.sigma, sigmaAfter: r.sigma_after, evaluations: r.evaluations, dispatches: r.dispatches, wallMs: r.wall_ms, committedAt: r.committed_at,
  }));
}
