// Conductor runs (`fugu ultra eval`): the batch row, its progress, and what a summary reads from
// the run's workflows and their steps (SQL aggregates over `workflows` / `workflow_steps`).
// A workflow "finished" is one in status done or failed; a failed workflow counts with reward 0.
import { sql } from 'kysely';
import type { Db } from './connection.ts';
import type { RunStatus, WorkflowStatus } from './schema.ts';

export type ConductorRunRow = {
  id: string; datasetId: number | null; poolId: number; specs: string[]; options: Record<string, unknown>;
  status: RunStatus; statusReason: string | null; total: number; createdAt: Date; updatedAt: Date; finishedAt: Date | null;
};

export type NewConductorRun = { id: string; datasetId: number | null; poolId: number; specs: string[]; options: Record<string, unknown>; total: number };

export async function createConductorRun(db: Db, r: NewConductorRun): Promise<ConductorRunRow> {
  await db
    .insertInto('conductor_runs')
    .values({ id: r.id, dataset_id: r.datasetId, pool_id: r.poolId, specs: JSON.stringify(r.specs), options: JSON.stringify(r.options), status: 'pending', total: r.total })
    .execute();
  return (await getConductorRun(db, r.id))!;
}

export async function getConductorRun(db: Db, id: string): Promise<ConductorRunRow | undefined> {
  const r = await db.selectFrom('conductor_runs').selectAll().where('id', '=', id).executeTakeFirst();
  return r && {
    id: r.id, datasetId: r.dataset_id, poolId: r.pool_id, specs: r.specs, options: r.options, status: r.status, statusReason: r.status_reason,
    total: r.total, createdAt: r.created_at, updatedAt: r.updated_at, finishedAt: r.finished_at,
  };
}

export async function listConductorRuns(db: Db, limit = 20): Promise<ConductorRunRow[]> {
  const ids = await db.selectFrom('conductor_runs').select('id').orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
  return (await Promise.all(ids.map((r) => getConductorRun(db, r.id)))).filter((r): r is ConductorRunRow => r !== undefined);
}

/** Moves a run to `status` (only from one of `from`, when given); returns whether it moved. */
export async function setConductorRunStatus(db: Db, id: string, status: RunStatus, opts: { reason?: string | null; from?: RunStatus[] } = {}): Promise<boolean> {
  let q = db
    .updateTable('conductor_runs')
    .set({
      status,
      status_reason: opts.reason ?? null,
      updated_at: sql<Date>`now()`,
      ...(status === 'completed' || status === 'failed' || status === 'cancelled' ? { finished_at: sql<Date>`now()` } : {}),
    })
    .where('id', '=', id);
  if (opts.from) q = q.where('status', 'in', opts.from);
  const res = await q.executeTakeFirst();
  return Number(res.numUpdatedRows) > 0;
}

export type StatusCounts = Record<WorkflowStatus, number>;
export type ConductorRunProgress = { total: number; submitted: number; counts: StatusCounts; bySpec: Record<string, StatusCounts> };

const zero = (): StatusCounts => ({ pending: 0, running: 0, done: 0, failed: 0 });

/** The run's workflows by status, overall and per conductor spec (`total` is the run's planned count). */
export async function conductorRunProgress(db: Db, runId: string): Promise<ConductorRunProgress> {
  const run = await db.selectFrom('conductor_runs').select('total').where('id', '=', runId).executeTakeFirst();
  const rows = await sql<{ conductor: string; status: WorkflowStatus; n: number }>`
    select conductor, status, count(*)::int as n from workflows where run_id = ${runId} group by conductor, status
  `.execute(db);
  const counts = zero();
  const bySpec: Record<string, StatusCounts> = {};
  let submitted = 0;
  for (const r of rows.rows) {
    counts[r.status] += r.n;
    (bySpec[r.conductor] ??= zero())[r.status] += r.n;
    submitted += r.n;
  }
  return { total: run?.total ?? submitted, submitted, counts, bySpec };
}

// ---------------------------------------------------------------- what a summary reads

export type SpecStats = {
  conductor: string; workflows: number; meanReward: number; correct: number; unparsed: number;
  conductorTokens: number; workerTokens: number; conductorUsd: number; workerUsd: number;
  latencyMeanMs: number | null; latencyP95Ms: number | null; meanSteps: number; items: number;
};

/** Per conductor spec, over its finished workflows: sums and means (a failed workflow has reward 0). */
export async function workflowSpecStats(db: Db, runId: string): Promise<SpecStats[]> {
  const rows = await sql<{
    conductor: string; workflows: number; mean_reward: number; correct: number; unparsed: number; ctok: number; wtok: number; cusd: number; wusd: number;
    lat_mean: number | null; lat_p95: number | null; steps: number; items: number;
  }>`
    select conductor, count(*)::int as workflows,
           avg(coalesce(reward, 0))::float8 as mean_reward,
           count(*) filter (where outcome = 'correct')::int as correct,
           count(*) filter (where parse_ok = false)::int as unparsed,
           avg(conductor_tokens_in + conductor_tokens_out)::float8 as ctok,
           avg(worker_tokens_in + worker_tokens_out)::float8 as wtok,
           avg(conductor_cost)::float8 as cusd,
           avg(worker_cost)::float8 as wusd,
           avg(latency_ms)::float8 as lat_mean,
           percentile_cont(0.95) within group (order by latency_ms) as lat_p95,
           avg(coalesce(n_steps, 0))::float8 as steps,
           count(distinct item_id)::int as items
      from workflows where run_id = ${runId} and status in ('done', 'failed')
     group by conductor order by conductor
  `.execute(db);
  return rows.rows.map((r) => ({
    conductor: r.conductor, workflows: r.workflows, meanReward: r.mean_reward, correct: r.correct, unparsed: r.unparsed,
    conductorTokens: r.ctok, workerTokens: r.wtok, conductorUsd: r.cusd, workerUsd: r.wusd,
    latencyMeanMs: r.lat_mean, latencyP95Ms: r.lat_p95, meanSteps: r.steps, items: r.items,
  }));
}

/** conductor -> key -> count over finished workflows, for `topology` (unparsed when the completion did not parse) or `finish_reason`. */
export async function workflowCounts(db: Db, runId: string, what: 'topology' | 'finish_reason'): Promise<Record<string, Record<string, number>>> {
  const key = what === 'topology'
    ? sql<string>`coalesce(topology, case when parse_ok = false then 'unparsed' else 'other' end)`
    : sql<string>`coalesce(finish_reason, status)`;
  const rows = await sql<{ conductor: string; k: string; n: number }>`
    select conductor, ${key} as k, count(*)::int as n from workflows where run_id = ${runId} and status in ('done', 'failed') group by 1, 2 order by 1, 2
  `.execute(db);
  const out: Record<string, Record<string, number>> = {};
  for (const r of rows.rows) (out[r.conductor] ??= {})[r.k] = r.n;
  return out;
}

/** Steps that ran (not skipped) per conductor, task and worker of finished workflows. */
export async function stepWorkerCounts(db: Db, runId: string): Promise<Array<{ conductor: string; task: string; worker: string; steps: number }>> {
  const rows = await sql<{ conductor: string; task: string; worker: string; steps: number }>`
    select w.conductor, coalesce(i.task, '(free)') as task, s.worker, count(*)::int as steps
      from workflow_steps s join workflows w on w.id = s.workflow_id left join items i on i.id = w.item_id
     where w.run_id = ${runId} and w.status in ('done', 'failed') and s.status <> 'skipped'
     group by 1, 2, 3 order by 1, 2, 3
  `.execute(db);
  return rows.rows;
}

/** The run's distinct items with task, external id and recorded outcomes (for reference rows and task counts). */
export async function conductorRunItems(db: Db, runId: string): Promise<Array<{ itemId: number; extId: string; task: string; prompt: string; recorded: Record<string, { score: number; tokensIn?: number; tokensOut?: number; answer?: string }> | null }>> {
  const rows = await sql<{ id: number; ext_id: string; task: string; prompt: string; recorded: Record<string, { score: number; tokensIn?: number; tokensOut?: number; answer?: string }> | null }>`
    select i.id, i.ext_id, i.task, i.prompt, i.recorded from items i where i.id in (select distinct item_id from workflows where run_id = ${runId} and item_id is not null) order by i.id
  `.execute(db);
  return rows.rows.map((r) => ({ itemId: Number(r.id), extId: r.ext_id, task: r.task, prompt: r.prompt, recorded: r.recorded }));
}

export type WorkflowDetail = {
  id: number; key: string; runId: string | null; conductor: string; itemId: number | null; itemExtId: string | null; task: string | null; question: string;
  seed: number; repeat: number; status: WorkflowStatus; finishReason: string | null; completion: string | null; parseOk: boolean | null;
  parseError: { list: string; step?: number; message: string } | null; topology: string | null; nSteps: number | null; finalAnswer: string | null;
  outcome: string | null; reward: number | null; conductorTokens: number; workerTokens: number; conductorCost: string; workerCost: string;
  latencyMs: number | null; error: Record<string, unknown> | null;
  /** `error`: a failed step's error (its wire form: code, message), else null */
  steps: Array<{ idx: number; worker: string; subtask: string; access: unknown; sees: number[]; status: string; answer: string | null; error: Record<string, unknown> | null; tokensIn: number; tokensOut: number; cost: string; latencyMs: number }>;
};

/** Workflows with their steps, by id (in the order given). */
export async function workflowDetails(db: Db, ids: readonly number[]): Promise<WorkflowDetail[]> {
  if (ids.length === 0) return [];
  const wf = await db
    .selectFrom('workflows as w')
    .leftJoin('items as i', 'i.id', 'w.item_id')
    .select([
      'w.id', 'w.key', 'w.run_id', 'w.conductor', 'w.item_id', 'i.ext_id', 'i.task', 'w.question', 'w.seed', 'w.repeat', 'w.status', 'w.finish_reason',
      'w.completion', 'w.parse_ok', 'w.parse_error', 'w.topology', 'w.n_steps', 'w.final_answer', 'w.outcome', 'w.reward', 'w.conductor_tokens_in',
      'w.conductor_tokens_out', 'w.worker_tokens_in', 'w.worker_tokens_out', 'w.conductor_cost', 'w.worker_cost', 'w.latency_ms', 'w.error',
    ])
    .where('w.id', 'in', ids as number[])
    .execute();
  const steps = await db.selectFrom('workflow_steps').selectAll().where('workflow_id', 'in', ids as number[]).orderBy('workflow_id').orderBy('idx').execute();
  const byId = new Map(wf.map((w) => [Number(w.id), w]));
  return ids.flatMap((id) => {
    const w = byId.get(Number(id));
    if (!w) return [];
    return [{
      id: Number(w.id), key: w.key, runId: w.run_id, conductor: w.conductor, itemId: w.item_id === null ? null : Number(w.item_id), itemExtId: w.ext_id, task: w.task,
      question: w.question, seed: w.seed, repeat: w.repeat, status: w.status, finishReason: w.finish_reason, completion: w.completion, parseOk: w.parse_ok,
      parseError: w.parse_error, topology: w.topology, nSteps: w.n_steps, finalAnswer: w.final_answer, outcome: w.outcome, reward: w.reward,
      conductorTokens: w.conductor_tokens_in + w.conductor_tokens_out, workerTokens: w.worker_tokens_in + w.worker_tokens_out,
      conductorCost: w.conductor_cost, workerCost: w.worker_cost, latencyMs: w.latency_ms, error: w.error,
      steps: steps.filter((s) => Number(s.workflow_id) === Number(id)).map((s) => ({
        idx: s.idx, worker: s.worker, subtask: s.subtask, access: s.access, sees: s.sees, status: s.status, answer: s.answer, error: (s.error as Record<string, unknown> | null) ?? null,
        tokensIn: s.tokens_in, tokensOut: s.tokens_out, cost: s.cost, latencyMs: s.latency_ms,
      })),
    }];
  });
}

/**
 * A few finished workflows per conductor spec to show step by step, mixed: the first correct,
 * the first incorrect and the first unparsed (by id), then others up to `perSpec`.
 */
export async function exampleWorkflowIds(db: Db, runId: string, perSpec = 3): Promise<number[]> {
  const rows = await sql<{ id: number }>`
    select id from (
      select id, conductor, row_number() over (partition by conductor order by
               case when rk > 1 then 4 when outcome = 'correct' then 0 when outcome = 'incorrect' then 1 when outcome = 'unparsed' then 2 else 3 end, id) as pos
        from (select id, conductor, outcome, row_number() over (partition by conductor, coalesce(outcome, status::text) order by id) as rk
                from workflows where run_id = ${runId} and status in ('done', 'failed')) t
    ) u where pos <= ${perSpec} order by conductor, pos
  `.execute(db);
  return rows.rows.map((r) => Number(r.id));
}

export type ParseFailure = { workflowId: number; key: string; conductor: string; item: string | null; list: string; step?: number; message: string };

/** The finished workflows of a run whose completion did not parse, with the list and step the error names (by id). */
export async function conductorRunParseFailures(db: Db, runId: string): Promise<ParseFailure[]> {
  const rows = await db
    .selectFrom('workflows as w')
    .leftJoin('items as i', 'i.id', 'w.item_id')
    .select(['w.id', 'w.key', 'w.conductor', 'i.ext_id', 'w.parse_error'])
    .where('w.run_id', '=', runId)
    .where('w.parse_ok', '=', false)
    .orderBy('w.id')
    .execute();
  return rows.map((r) => ({
    workflowId: Number(r.id), key: r.key, conductor: r.conductor, item: r.ext_id, list: r.parse_error?.list ?? 'model id',
    ...(r.parse_error?.step !== undefined && { step: r.parse_error.step }), message: r.parse_error?.message ?? '(no parse error stored)',
  }));
}

/** The worker names (in ordinal-id order) of a stored Conductor policy checkpoint; undefined when there is none. */
export async function conductorCheckpointWorkers(db: Db, id: string): Promise<string[] | undefined> {
  const r = await db.selectFrom('conductor_checkpoints').select('workers').where('id', '=', id).executeTakeFirst();
  return r?.workers;
}
