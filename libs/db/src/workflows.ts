// The Conductor's rows (migration 0008_conductor): one `workflows` row per submitted key however
// often it is executed, and one `workflow_steps` row per step. A workflow is claimed (pending or
// running -> running, attempts + 1) by whoever executes it, and finished exactly once: the final
// write only happens from `running`, so a second executor after a crash writes nothing.
import { sql } from 'kysely';
import type { WireError } from '@fugu/core';
import type { Db } from './connection.ts';
import type { WorkflowFinishReason, WorkflowStatus } from './schema.ts';

export type WorkflowParseError = { list: string; step?: number; message: string };
export type WorkflowStepSpec = { worker: number; name: string; subtask: string; access: 'all' | 'none' | number[] };

export type NewWorkflowRow = {
  key: string;
  runId?: string | null;
  itemId?: number | null;
  poolId: number;
  question: string;
  conductor: string;
  seed: number;
  repeat?: number;
  options: Record<string, unknown>;
};

export type WorkflowRow = {
  id: number;
  key: string;
  runId: string | null;
  itemId: number | null;
  poolId: number;
  question: string;
  conductor: string;
  seed: number;
  repeat: number;
  options: Record<string, unknown>;
  status: WorkflowStatus;
  attempts: number;
  finishReason: WorkflowFinishReason | null;
  completion: string | null;
  promptVersion: string | null;
  parseOk: boolean | null;
  parseError: WorkflowParseError | null;
  steps: WorkflowStepSpec[] | null;
  topology: string | null;
  nSteps: number | null;
  criticalPath: number | null;
  finalAnswer: string | null;
  score: number | null;
  outcome: string | null;
  reward: number | null;
  logprob: number | null;
  conductorTokensIn: number;
  conductorTokensOut: number;
  /** USD, a 12-place decimal string */
  conductorCost: string;
  workerTokensIn: number;
  workerTokensOut: number;
  workerCost: string;
  latencyMs: number | null;
  error: WireError | null;
  /** the writer's own record of its decisions (the embedded policy's), when it gave one */
  decisions: unknown;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
};

export type WorkflowStepRow = {
  workflowId: number;
  idx: number;
  workerId: number;
  worker: string;
  subtask: string;
  access: 'all' | 'none' | number[];
  sees: number[];
  chatCallId: string;
  status: 'ok' | 'error' | 'skipped';
  answer: string | null;
  tokensIn: number;
  tokensOut: number;
  cost: string;
  latencyMs: number;
  cached: boolean;
  replay: Record<string, unknown> | null;
  error: WireError | null;
};

type Raw = {
  id: number; key: string; run_id: string | null; item_id: number | null; pool_id: number; question: string; conductor: string; seed: number; repeat: number;
  options: Record<string, unknown>; status: WorkflowStatus; attempts: number; finish_reason: WorkflowFinishReason | null; completion: string | null;
  prompt_version: string | null; parse_ok: boolean | null; parse_error: WorkflowParseError | null; steps: WorkflowStepSpec[] | null; topology: string | null;
  n_steps: number | null; critical_path: number | null; final_answer: string | null; score: number | null; outcome: string | null; reward: number | null;
  logprob: number | null; conductor_tokens_in: number; conductor_tokens_out: number; conductor_cost: string; worker_tokens_in: number; worker_tokens_out: number;
  worker_cost: string; latency_ms: number | null; error: Record<string, unknown> | null; decisions: unknown; created_at: Date; started_at: Date | null; finished_at: Date | null;
};

/** A workflows row as read (selectAll / returning *) to its WorkflowRow. */
export function toWorkflowRow(r: unknown): WorkflowRow {
  return toRow(r as Raw);
}

function toRow(r: Raw): WorkflowRow {
  return {
    id: Number(r.id), key: r.key, runId: r.run_id, itemId: r.item_id, poolId: r.pool_id, question: r.question, conductor: r.conductor, seed: r.seed, repeat: r.repeat,
    options: r.options, status: r.status, attempts: r.attempts, finishReason: r.finish_reason, completion: r.completion, promptVersion: r.prompt_version,
    parseOk: r.parse_ok, parseError: r.parse_error, steps: r.steps, topology: r.topology, nSteps: r.n_steps, criticalPath: r.critical_path,
    finalAnswer: r.final_answer, score: r.score, outcome: r.outcome, reward: r.reward, logprob: r.logprob, conductorTokensIn: r.conductor_tokens_in,
    conductorTokensOut: r.conductor_tokens_out, conductorCost: r.conductor_cost, workerTokensIn: r.worker_tokens_in, workerTokensOut: r.worker_tokens_out,
    workerCost: r.worker_cost, latencyMs: r.latency_ms, error: r.error as WireError | null, decisions: r.decisions ?? null, createdAt: r.created_at, startedAt: r.started_at, finishedAt: r.finished_at,
  };
}

/**
 * Inserts the workflows whose keys are new (a key already stored keeps its first row); returns
 * the id of every given key, in order, existing or new.
 */
export async function insertWorkflows(db: Db, rows: readonly NewWorkflowRow[]): Promise<number[]> {
  const byKey = new Map<string, number>();
  for (let i = 0; i < rows.length; i += 1000) {
    const chunk = rows.slice(i, i + 1000);
    await db
      .insertInto('workflows')
      .values(chunk.map((r) => ({
        key: r.key, run_id: r.runId ?? null, item_id: r.itemId ?? null, pool_id: r.poolId, question: r.question, conductor: r.conductor,
        seed: r.seed, repeat: r.repeat ?? 0, options: JSON.stringify(r.options),
      })))
      .onConflict((oc) => oc.column('key').doNothing())
      .execute();
    const keys = chunk.map((r) => r.key);
    const got = await db.selectFrom('workflows').select(['id', 'key']).where('key', '=', sql<string>`any(${keys}::text[])`).execute();
    for (const g of got) byKey.set(g.key, Number(g.id));
  }
  return rows.map((r) => {
    const id = byKey.get(r.key);
    if (id === undefined) throw new Error(`workflow ${r.key} was neither inserted nor found`);
    return id;
  });
}

/** The rows of these ids, in the order given (ids without a row are left out). */
export async function getWorkflows(db: Db, ids: readonly number[]): Promise<WorkflowRow[]> {
  if (ids.length === 0) return [];
  const out = new Map<number, WorkflowRow>();
  for (let i = 0; i < ids.length; i += 5000) {
    const chunk = ids.slice(i, i + 5000);
    const rows = await db.selectFrom('workflows').selectAll().where('id', '=', sql<number>`any(${chunk as number[]}::bigint[])`).execute();
    for (const r of rows) out.set(Number(r.id), toRow(r as unknown as Raw));
  }
  return ids.flatMap((id) => (out.has(id) ? [out.get(id)!] : []));
}

export async function getWorkflowByKey(db: Db, key: string): Promise<WorkflowRow | undefined> {
  const r = await db.selectFrom('workflows').selectAll().where('key', '=', key).executeTakeFirst();
  return r && toRow(r as unknown as Raw);
}

/** The steps of a workflow, by index. */
export async function getWorkflowSteps(db: Db, workflowId: number): Promise<WorkflowStepRow[]> {
  const rows = await db.selectFrom('workflow_steps').selectAll().where('workflow_id', '=', workflowId).orderBy('idx').execute();
  return rows.map((r) => ({
    workflowId: Number(r.workflow_id), idx: r.idx, workerId: r.worker_id, worker: r.worker, subtask: r.subtask, access: r.access, sees: r.sees,
    chatCallId: r.chat_call_id, status: r.status, answer: r.answer, tokensIn: r.tokens_in, tokensOut: r.tokens_out, cost: r.cost, latencyMs: r.latency_ms,
    cached: r.cached, replay: r.replay, error: r.error as WireError | null,
  }));
}

/**
 * Claims a workflow for execution: pending or running (an executor that died) -> running,
 * attempts + 1, started_at set on the first claim. Returns the row, or undefined when it is
 * done or failed (or does not exist).
 */
export async function claimWorkflow(db: Db, id: number): Promise<WorkflowRow | undefined> {
  const r = await db
    .updateTable('workflows')
    .set({ status: 'running', attempts: sql<number>`attempts + 1`, started_at: sql<Date>`coalesce(started_at, now())` })
    .where('id', '=', id)
    .where('status', 'in', ['pending', 'running'])
    .returningAll()
    .executeTakeFirst();
  return r && toRow(r as unknown as Raw);
}

/**
 * Takes a workflow to run again from its start, whatever its status (status running, attempts + 1):
 * a caller that names its workflow by key (a batch line's fugu-ultra turn) runs it again after its
 * process died, its finished steps and calls found under the same keys.
 */
export async function reopenWorkflow(db: Db, id: number): Promise<WorkflowRow | undefined> {
  const r = await db
    .updateTable('workflows')
    .set({ status: 'running', attempts: sql<number>`attempts + 1`, started_at: sql<Date>`coalesce(started_at, now())` })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
  return r && toRow(r as unknown as Raw);
}

/** A step row's columns as JSON values (jsonb_populate_recordset over workflow_steps reads them). */
export const stepRecord = (s: WorkflowStepRow) => ({
  workflow_id: s.workflowId, idx: s.idx, worker_id: s.workerId, worker: s.worker, subtask: s.subtask, access: s.access, sees: s.sees,
  chat_call_id: s.chatCallId, status: s.status, answer: s.answer, tokens_in: s.tokensIn, tokens_out: s.tokensOut, cost: s.cost, latency_ms: s.latencyMs,
  cached: s.cached, replay: s.replay, error: s.error,
});

const stepValues = (s: WorkflowStepRow) => ({
  workflow_id: s.workflowId, idx: s.idx, worker_id: s.workerId, worker: s.worker, subtask: s.subtask, access: JSON.stringify(s.access), sees: JSON.stringify(s.sees),
  chat_call_id: s.chatCallId, status: s.status, answer: s.answer, tokens_in: s.tokensIn, tokens_out: s.tokensOut, cost: s.cost, latency_ms: s.latencyMs,
  cached: s.cached, replay: s.replay === null ? null : JSON.stringify(s.replay), error: s.error === null ? null : JSON.stringify(s.error),
});

/** Writes step rows in one statement; the first final row of each (workflow, idx) wins. */
export async function saveWorkflowSteps(db: Db, steps: readonly WorkflowStepRow[]): Promise<void> {
  if (steps.length === 0) return;
  await db.insertInto('workflow_steps').values(steps.map(stepValues)).onConflict((oc) => oc.columns(['workflow_id', 'idx']).doNothing()).execute();
}

export type WorkflowFinish = {
  status?: 'done' | 'failed';
  finishReason?: WorkflowFinishReason | null;
  completion?: string | null;
  promptVersion?: string | null;
  parseOk?: boolean | null;
  parseError?: WorkflowParseError | null;
  steps?: WorkflowStepSpec[] | null;
  topology?: string | null;
  nSteps?: number | null;
  criticalPath?: number | null;
  finalAnswer?: string | null;
  score?: number | null;
  outcome?: string | null;
  reward?: number | null;
  logprob?: number | null;
  conductorTokensIn?: number;
  conductorTokensOut?: number;
  conductorCost?: string;
  workerTokensIn?: number;
  workerTokensOut?: number;
  workerCost?: string;
  latencyMs?: number | null;
  error?: WireError | null;
  decisions?: unknown;
};

const json = (v: unknown): string | null => (v === null || v === undefined ? null : JSON.stringify(v));

/** The one final write of a workflow (status done unless given), only from running; returns whether it was written. */
export async function finishWorkflow(db: Db, id: number, f: WorkflowFinish): Promise<boolean> {
  const res = await finishWorkflowQuery(db, id, f).returning('id').executeTakeFirst();
  return res !== undefined;
}

/** finishWorkflow's statement, not run (a served turn's end runs it in its own statement: saveTurn). */
export function finishWorkflowQuery(db: Db, id: number, f: WorkflowFinish) {
  return db.updateTable('workflows').set(finishColumns(f)).where('id', '=', id).where('status', '=', 'running');
}

/** The columns a workflow's final write sets (finishWorkflow's; a served first turn inserts its row with them: saveTurn's `create`). */
export function finishColumns(f: WorkflowFinish) {
  return {
    status: f.status ?? 'done',
    finished_at: sql<Date>`now()`,
    ...(f.finishReason !== undefined && { finish_reason: f.finishReason }),
    ...(f.completion !== undefined && { completion: f.completion }),
    ...(f.promptVersion !== undefined && { prompt_version: f.promptVersion }),
    ...(f.parseOk !== undefined && { parse_ok: f.parseOk }),
    ...(f.parseError !== undefined && { parse_error: json(f.parseError) }),
    ...(f.steps !== undefined && { steps: json(f.steps) }),
    ...(f.topology !== undefined && { topology: f.topology }),
    ...(f.nSteps !== undefined && { n_steps: f.nSteps }),
    ...(f.criticalPath !== undefined && { critical_path: f.criticalPath }),
    ...(f.finalAnswer !== undefined && { final_answer: f.finalAnswer }),
    ...(f.score !== undefined && { score: f.score }),
    ...(f.outcome !== undefined && { outcome: f.outcome }),
    ...(f.reward !== undefined && { reward: f.reward }),
    ...(f.logprob !== undefined && { logprob: f.logprob }),
    ...(f.conductorTokensIn !== undefined && { conductor_tokens_in: f.conductorTokensIn }),
    ...(f.conductorTokensOut !== undefined && { conductor_tokens_out: f.conductorTokensOut }),
    ...(f.conductorCost !== undefined && { conductor_cost: f.conductorCost }),
    ...(f.workerTokensIn !== undefined && { worker_tokens_in: f.workerTokensIn }),
    ...(f.workerTokensOut !== undefined && { worker_tokens_out: f.workerTokensOut }),
    ...(f.workerCost !== undefined && { worker_cost: f.workerCost }),
    ...(f.latencyMs !== undefined && { latency_ms: f.latencyMs }),
    ...(f.error !== undefined && { error: json(f.error) }),
    ...(f.decisions !== undefined && { decisions: json(f.decisions) }),
  };
}

/** How many of these workflows are finished (done or failed): a count, cheap to poll. */
export async function countFinishedWorkflows(db: Db, ids: readonly number[]): Promise<number> {
  if (ids.length === 0) return 0;
  const r = await db
    .selectFrom('workflows')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('id', '=', sql<number>`any(${ids as number[]}::bigint[])`)
    .where('status', 'in', ['done', 'failed'])
    .executeTakeFirstOrThrow();
  return Number(r.n);
}
