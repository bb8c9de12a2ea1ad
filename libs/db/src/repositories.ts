// Repositories: every query fugu makes of Postgres lives here.
import { sql } from 'kysely';
import type { DatasetItem, WorkerPool, WorkerSpec, ProviderKind } from '@fugu/core';
import type { Db } from './connection.ts';
import type { CallStatus, RunStatus } from './schema.ts';

const ITEM_CHUNK = 1000;

// ---------------------------------------------------------------- datasets and items

export type StoredItem = DatasetItem & { dbId: number; idx: number };

/** Stores a dataset once per content hash; returns its id (and whether it was new). */
export async function saveDataset(
  db: Db,
  ds: { name: string; source: string; contentHash: string; items: readonly DatasetItem[] },
): Promise<{ id: number; created: boolean }> {
  return db.transaction().execute(async (tx) => {
    const inserted = await tx
      .insertInto('datasets')
      .values({ name: ds.name, source: ds.source, content_hash: ds.contentHash, item_count: ds.items.length })
      .onConflict((oc) => oc.column('content_hash').doNothing())
      .returning('id')
      .executeTakeFirst();
    if (!inserted) {
      const row = await tx.selectFrom('datasets').select('id').where('content_hash', '=', ds.contentHash).executeTakeFirstOrThrow();
      return { id: row.id, created: false };
    }
    for (let i = 0; i < ds.items.length; i += ITEM_CHUNK) {
      const chunk = ds.items.slice(i, i + ITEM_CHUNK);
      await tx
        .insertInto('items')
        .values(
          chunk.map((it, j) => ({
            dataset_id: inserted.id,
            idx: i + j,
            ext_id: it.id,
            task: it.task,
            prompt: it.prompt,
            ground_truth: it.groundTruth ?? null,
            metric: it.metric ?? null,
            choices: it.choices ? JSON.stringify(it.choices) : null,
            source_split: it.sourceSplit ?? null,
            recorded: it.recorded ? JSON.stringify(it.recorded) : null,
          })),
        )
        .execute();
    }
    return { id: inserted.id, created: true };
  });
}

type ItemRow = {
  id: number; idx: number; ext_id: string; task: string; prompt: string; ground_truth: string | null; metric: string | null;
  choices: { labels: string[]; texts: string[] } | null; source_split: string | null; recorded: DatasetItem['recorded'] | null;
};

function toItem(r: ItemRow): StoredItem {
  return {
    dbId: r.id,
    idx: r.idx,
    id: r.ext_id,
    task: r.task,
    prompt: r.prompt,
    ...(r.ground_truth !== null && { groundTruth: r.ground_truth }),
    ...(r.metric !== null && { metric: r.metric }),
    ...(r.choices !== null && { choices: r.choices }),
    ...(r.source_split !== null && { sourceSplit: r.source_split }),
    ...(r.recorded !== null && { recorded: r.recorded }),
  };
}

const ITEM_COLUMNS = ['id', 'idx', 'ext_id', 'task', 'prompt', 'ground_truth', 'metric', 'choices', 'source_split', 'recorded'] as const;

/** Item keys of a dataset in index order (ids and tasks only: small, for planning a run). */
export async function listItemKeys(db: Db, datasetId: number): Promise<Array<{ dbId: number; idx: number; extId: string; task: string; sourceSplit: string | null }>> {
  const rows = await db.selectFrom('items').select(['id', 'idx', 'ext_id', 'task', 'source_split']).where('dataset_id', '=', datasetId).orderBy('idx').execute();
  return rows.map((r) => ({ dbId: r.id, idx: r.idx, extId: r.ext_id, task: r.task, sourceSplit: r.source_split }));
}

export async function getItems(db: Db, ids: readonly number[]): Promise<StoredItem[]> {
  if (ids.length === 0) return [];
  const rows = await db.selectFrom('items').select(ITEM_COLUMNS).where('id', 'in', ids as number[]).execute();
  return rows.map((r) => toItem(r as ItemRow));
}

export async function getDatasetItems(db: Db, datasetId: number): Promise<StoredItem[]> {
  const rows = await db.selectFrom('items').select(ITEM_COLUMNS).where('dataset_id', '=', datasetId).orderBy('idx').execute();
  return rows.map((r) => toItem(r as ItemRow));
}

export async function getDataset(db: Db, id: number) {
  return db.selectFrom('datasets').selectAll().where('id', '=', id).executeTakeFirst();
}

// ---------------------------------------------------------------- worker pools

export type StoredWorker = WorkerSpec & { id: number; poolId: number };

/** Stores a pool once per content hash; returns its workers with their ids. */
export async function savePool(db: Db, pool: WorkerPool, contentHash: string): Promise<{ poolId: number; workers: StoredWorker[] }> {
  const poolId = await db.transaction().execute(async (tx) => {
    const inserted = await tx
      .insertInto('worker_pools')
      .values({ name: pool.name, content_hash: contentHash })
      .onConflict((oc) => oc.column('content_hash').doNothing())
      .returning('id')
      .executeTakeFirst();
    if (!inserted) {
      return (await tx.selectFrom('worker_pools').select('id').where('content_hash', '=', contentHash).executeTakeFirstOrThrow()).id;
    }
    await tx
      .insertInto('workers')
      .values(
        pool.workers.map((w) => ({
          pool_id: inserted.id,
          name: w.name,
          provider: w.provider,
          model: w.model,
          base_url: w.baseUrl ?? null,
          api_key_env: w.apiKeyEnv ?? null,
          settings: JSON.stringify(w.settings),
          input_price: w.prices.inputPerMTok,
          output_price: w.prices.outputPerMTok,
          description: w.description ?? null,
          size: w.size ?? null,
          ...(w.script !== undefined && { script: JSON.stringify(w.script) }),
        })),
      )
      .execute();
    return inserted.id;
  });
  return { poolId, workers: await getPoolWorkers(db, poolId) };
}

export async function getPoolWorkers(db: Db, poolId: number): Promise<StoredWorker[]> {
  const rows = await db.selectFrom('workers').selectAll().where('pool_id', '=', poolId).orderBy('id').execute();
  return rows.map(toWorker);
}

export async function getWorkersByIds(db: Db, ids: readonly number[]): Promise<StoredWorker[]> {
  if (ids.length === 0) return [];
  const rows = await db.selectFrom('workers').selectAll().where('id', 'in', ids as number[]).execute();
  return rows.map(toWorker);
}

function toWorker(r: {
  id: number; pool_id: number; name: string; provider: string; model: string; base_url: string | null; api_key_env: string | null;
  settings: Record<string, unknown>; input_price: string; output_price: string; description: string | null; size: string | null; script: Record<string, unknown> | null;
}): StoredWorker {
  return {
    id: r.id,
    poolId: r.pool_id,
    name: r.name,
    provider: r.provider as ProviderKind,
    model: r.model,
    ...(r.base_url !== null && { baseUrl: r.base_url }),
    ...(r.api_key_env !== null && { apiKeyEnv: r.api_key_env }),
    settings: r.settings as WorkerSpec['settings'],
    prices: { inputPerMTok: trimZeros(r.input_price), outputPerMTok: trimZeros(r.output_price) },
    ...(r.description !== null && { description: r.description }),
    ...(r.size !== null && { size: r.size }),
    ...(r.script !== null && { script: r.script as WorkerSpec['script'] }),
  };
}

/** "0.200000000000" -> "0.2" (numeric comes back with the column's scale). */
export function trimZeros(decimal: string): string {
  return decimal.includes('.') ? decimal.replace(/\.?0+$/, '') : decimal;
}

// ---------------------------------------------------------------- evaluation runs

export type RunRow = {
  id: string; datasetId: number; poolId: number; repetitions: number; sampleSize: number | null; seed: number;
  itemCount: number; totalCalls: number; enqueuedCalls: number; doneCalls: number; failedCalls: number;
  spent: string; spendCap: string | null; status: RunStatus; statusReason: string | null; options: Record<string, unknown>;
  createdAt: Date; startedAt: Date | null; finishedAt: Date | null;
};

export async function createRun(
  db: Db,
  r: { id: string; datasetId: number; poolId: number; repetitions: number; sampleSize: number | null; seed: number; itemCount: number; totalCalls: number; spendCap: string | null; options: Record<string, unknown> },
): Promise<RunRow> {
  await db
    .insertInto('eval_runs')
    .values({
      id: r.id, dataset_id: r.datasetId, pool_id: r.poolId, repetitions: r.repetitions, sample_size: r.sampleSize, seed: r.seed,
      item_count: r.itemCount, total_calls: r.totalCalls, spend_cap: r.spendCap, spent: '0', status: 'pending', status_reason: null,
      options: JSON.stringify(r.options), started_at: null, finished_at: null,
    })
    .execute();
  return (await getRun(db, r.id))!;
}

export async function getRun(db: Db, id: string): Promise<RunRow | undefined> {
  const r = await db.selectFrom('eval_runs').selectAll().where('id', '=', id).executeTakeFirst();
  if (!r) return undefined;
  return {
    id: r.id, datasetId: r.dataset_id, poolId: r.pool_id, repetitions: r.repetitions, sampleSize: r.sample_size, seed: r.seed,
    itemCount: r.item_count, totalCalls: r.total_calls, enqueuedCalls: r.enqueued_calls, doneCalls: r.done_calls, failedCalls: r.failed_calls,
    spent: r.spent, spendCap: r.spend_cap, status: r.status, statusReason: r.status_reason, options: r.options,
    createdAt: r.created_at, startedAt: r.started_at, finishedAt: r.finished_at,
  };
}

export async function listRuns(db: Db, limit = 20): Promise<RunRow[]> {
  const ids = await db.selectFrom('eval_runs').select('id').orderBy('created_at', 'desc').limit(limit).execute();
  return (await Promise.all(ids.map((r) => getRun(db, r.id)))).filter((r): r is RunRow => r !== undefined);
}

/** Moves a run to `status` (only from one of `from`, when given); returns whether it moved. */
export async function setRunStatus(db: Db, id: string, status: RunStatus, opts: { reason?: string | null; from?: RunStatus[]; spendCap?: string | null } = {}): Promise<boolean> {
  let q = db
    .updateTable('eval_runs')
    .set({
      status,
      status_reason: opts.reason ?? null,
      ...(status === 'running' && { started_at: sql<Date>`coalesce(started_at, now())` }),
      ...(status === 'completed' || status === 'failed' || status === 'cancelled' ? { finished_at: sql<Date>`now()` } : {}),
      ...(opts.spendCap !== undefined && { spend_cap: opts.spendCap }),
    })
    .where('id', '=', id);
  if (opts.from) q = q.where('status', 'in', opts.from);
  const res = await q.executeTakeFirst();
  return Number(res.numUpdatedRows) > 0;
}

export async function setEnqueued(db: Db, id: string, enqueued: number): Promise<void> {
  await db.updateTable('eval_runs').set({ enqueued_calls: enqueued }).where('id', '=', id).execute();
}

/** Keys (item, worker, repetition) that already have a call row, packed as `item:worker:rep`. */
export async function existingCallKeys(db: Db, runId: string): Promise<Set<string>> {
  const rows = await db.selectFrom('calls').select(['item_id', 'worker_id', 'repetition']).where('run_id', '=', runId).execute();
  return new Set(rows.map((r) => `${r.item_id}:${r.worker_id}:${r.repetition}`));
}

// ---------------------------------------------------------------- calls and rewards

export type CallRecord = {
  runId: string; itemId: number; workerId: number; repetition: number; requestHash: string; status: CallStatus;
  response: Record<string, unknown> | null; tokensIn: number; tokensOut: number; cost: string; latencyMs: number;
  attempts: number; cached: boolean; errorKind: string | null; error: string | null;
  /** reward of a successful call, written to `rewards` with the call */
  score: number | null; verifier: string | null;
};

export type RunProgress = { id: string; doneCalls: number; failedCalls: number; totalCalls: number; spent: string; spendCap: string | null; status: RunStatus };

/**
 * Writes calls and their rewards in ONE statement, idempotently: a (run, item, worker,
 * repetition) that already has a row is skipped (so a retried or re-executed job never makes a
 * second row), and the run's counters and spend grow by exactly what was inserted.
 */
export async function recordCalls(db: Db, records: readonly CallRecord[]): Promise<{ inserted: number; runs: RunProgress[] }> {
  if (records.length === 0) return { inserted: 0, runs: [] };
  // one row per key, in a fixed order (no duplicate keys in one INSERT, no lock-order deadlocks)
  const byKey = new Map<string, CallRecord>();
  for (const r of records) byKey.set(`${r.runId}\u0000${r.itemId}\u0000${r.workerId}\u0000${r.repetition}`, r);
  const rows = [...byKey.values()].sort((a, b) => (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : a.itemId - b.itemId || a.workerId - b.workerId || a.repetition - b.repetition));
  const col = <K extends keyof CallRecord>(k: K) => rows.map((r) => r[k]);
  const result = await sql<{ id: string; done_calls: number; failed_calls: number; total_calls: number; spent: string; spend_cap: string | null; status: RunStatus; inserted: number }>`
    with input as (
      select * from unnest(
        ${col('runId')}::text[], ${col('itemId')}::bigint[], ${col('workerId')}::int[], ${col('repetition')}::int[],
        ${col('requestHash')}::text[], ${col('status')}::text[], ${rows.map((r) => (r.response === null ? null : JSON.stringify(r.response)))}::text[],
        ${col('tokensIn')}::int[], ${col('tokensOut')}::int[], ${col('cost')}::numeric[], ${col('latencyMs')}::int[],
        ${col('attempts')}::int[], ${col('cached')}::bool[], ${col('errorKind')}::text[], ${col('error')}::text[],
        ${col('score')}::float8[], ${col('verifier')}::text[]
      ) as t(run_id, item_id, worker_id, repetition, request_hash, status, response, tokens_in, tokens_out, cost, latency_ms,
             attempts, cached, error_kind, error, score, verifier)
    ),
    ins as (
      insert into calls (run_id, item_id, worker_id, repetition, request_hash, status, response, tokens_in, tokens_out, cost,
                         latency_ms, attempts, cached, error_kind, error)
      select run_id, item_id, worker_id, repetition, request_hash, status, response::jsonb, tokens_in, tokens_out, cost,
             latency_ms, attempts, cached, error_kind, error
      from input
      on conflict on constraint calls_run_item_worker_rep do nothing
      returning id, run_id, item_id, worker_id, repetition, status, cost
    ),
    rw as (
      insert into rewards (call_id, run_id, item_id, worker_id, repetition, score, verifier)
      select ins.id, ins.run_id, ins.item_id, ins.worker_id, ins.repetition, input.score, input.verifier
      from ins join input using (run_id, item_id, worker_id, repetition)
      where input.score is not null
    ),
    agg as (
      select run_id, count(*) filter (where status = 'ok') as ok, count(*) filter (where status = 'error') as failed,
             coalesce(sum(cost), 0) as cost, count(*) as n
      from ins group by run_id
    )
    update eval_runs r
       set done_calls = r.done_calls + agg.ok, failed_calls = r.failed_calls + agg.failed, spent = r.spent + agg.cost
      from agg
     where r.id = agg.run_id
    returning r.id, r.done_calls, r.failed_calls, r.total_calls, r.spent, r.spend_cap, r.status, agg.n::int as inserted
  `.execute(db);
  const runs = result.rows.map((r) => ({
    id: r.id, doneCalls: r.done_calls, failedCalls: r.failed_calls, totalCalls: r.total_calls, spent: r.spent, spendCap: r.spend_cap, status: r.status,
  }));
  return { inserted: result.rows.reduce((s, r) => s + r.inserted, 0), runs };
}

// ---------------------------------------------------------------- response cache

export type CachedResponse = { response: Record<string, unknown>; tokensIn: number; tokensOut: number; paidBy: string };

export async function getCachedResponse(db: Db, requestHash: string): Promise<CachedResponse | undefined> {
  const r = await db.selectFrom('response_cache').select(['response', 'tokens_in', 'tokens_out', 'paid_by']).where('request_hash', '=', requestHash).executeTakeFirst();
  return r && { response: r.response, tokensIn: r.tokens_in, tokensOut: r.tokens_out, paidBy: r.paid_by };
}

export async function putCachedResponse(db: Db, e: { requestHash: string; provider: string; model: string } & CachedResponse): Promise<void> {
  await db
    .insertInto('response_cache')
    .values({ request_hash: e.requestHash, provider: e.provider, model: e.model, response: JSON.stringify(e.response), tokens_in: e.tokensIn, tokens_out: e.tokensOut, paid_by: e.paidBy })
    .onConflict((oc) => oc.column('request_hash').doNothing())
    .execute();
}

// ---------------------------------------------------------------- summaries

/** Mean reward and mean cost (USD) per (item, worker) over repetitions, with the item's task and source split. */
export async function itemWorkerMeans(db: Db, runId: string): Promise<Array<{ itemId: number; extId: string; task: string; sourceSplit: string | null; workerId: number; mean: number; meanCost: number; n: number }>> {
  const rows = await sql<{ item_id: number; ext_id: string; task: string; source_split: string | null; worker_id: number; mean: number; mean_cost: number; n: number }>`
    select r.item_id, i.ext_id, i.task, i.source_split, r.worker_id, avg(r.score)::float8 as mean, avg(c.cost)::float8 as mean_cost, count(*)::int as n
      from rewards r join items i on i.id = r.item_id join calls c on c.id = r.call_id
     where r.run_id = ${runId}
     group by r.item_id, i.ext_id, i.task, i.source_split, r.worker_id
     order by r.item_id, r.worker_id
  `.execute(db);
  return rows.rows.map((r) => ({ itemId: r.item_id, extId: r.ext_id, task: r.task, sourceSplit: r.source_split, workerId: r.worker_id, mean: r.mean, meanCost: r.mean_cost, n: r.n }));
}

/** Per-worker call statistics of a run: counts, tokens, exact cost, latency percentiles. */
export async function workerCallStats(db: Db, runId: string): Promise<Array<{ workerId: number; calls: number; failed: number; tokensIn: number; tokensOut: number; cost: string; latencyP50Ms: number | null; latencyP95Ms: number | null; cached: number; retried: number }>> {
  const rows = await sql<{ worker_id: number; calls: number; failed: number; tokens_in: number; tokens_out: number; cost: string; p50: number | null; p95: number | null; cached: number; retried: number }>`
    select worker_id, count(*)::int as calls, count(*) filter (where status = 'error')::int as failed,
           coalesce(sum(tokens_in), 0)::int8 as tokens_in, coalesce(sum(tokens_out), 0)::int8 as tokens_out, coalesce(sum(cost), 0)::text as cost,
           percentile_cont(0.5) within group (order by latency_ms) filter (where status = 'ok') as p50,
           percentile_cont(0.95) within group (order by latency_ms) filter (where status = 'ok') as p95,
           count(*) filter (where cached)::int as cached, count(*) filter (where attempts > 1)::int as retried
      from calls where run_id = ${runId} group by worker_id order by worker_id
  `.execute(db);
  return rows.rows.map((r) => ({
    workerId: r.worker_id, calls: r.calls, failed: r.failed, tokensIn: Number(r.tokens_in), tokensOut: Number(r.tokens_out), cost: r.cost,
    latencyP50Ms: r.p50, latencyP95Ms: r.p95, cached: r.cached, retried: r.retried,
  }));
}

/** Error kinds of a run's failed calls, most frequent first, with one example message each. */
export async function callErrors(db: Db, runId: string): Promise<Array<{ kind: string; count: number; example: string }>> {
  const rows = await sql<{ kind: string; count: number; example: string }>`
    select coalesce(error_kind, 'unknown') as kind, count(*)::int as count, min(error) as example
      from calls where run_id = ${runId} and status = 'error' group by 1 order by 2 desc
  `.execute(db);
  return rows.rows;
}
