import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatasetItem, WorkerPool } from '@fugu/core';
import { ServiceUnavailableError } from '@fugu/core';
import { createTestDatabase, type TestDatabase } from './testing.ts';
import { sql } from 'kysely';
import { connectDb, migrate, PREPARED } from './connection.ts';
import {
  createRun, existingCallKeys, getCachedResponse, getDatasetItems, getRun, itemWorkerMeans, putCachedResponse, recordCalls,
  saveDataset, savePool, setRunStatus, workerCallStats, type CallRecord,
} from './repositories.ts';

let t: TestDatabase;
beforeAll(async () => { t = await createTestDatabase(); });
afterAll(async () => { await t?.drop(); });

const items: DatasetItem[] = [
  { id: 'a', task: 'math', prompt: 'What is 2+2?', groundTruth: '4', metric: 'numeric', recorded: { w1: { score: 1 }, w2: { score: 0 } } },
  { id: 'b', task: 'qa', prompt: 'Capital of France?', groundTruth: 'Paris', choices: { labels: ['A', 'B'], texts: ['Paris', 'Rome'] } },
];
const pool: WorkerPool = {
  name: 'p',
  workers: [
    { name: 'w1', provider: 'replay', model: 'm1', settings: {}, prices: { inputPerMTok: '0.2', outputPerMTok: '0.2' } },
    { name: 'w2', provider: 'openai', model: 'gpt', apiKeyEnv: 'OPENAI_API_KEY', settings: { temperature: 0.5 }, prices: { inputPerMTok: '0.15', outputPerMTok: '0.6' } },
  ],
};

function call(runId: string, itemId: number, workerId: number, repetition: number, over: Partial<CallRecord> = {}): CallRecord {
  return {
    runId, itemId, workerId, repetition, requestHash: `h${itemId}-${workerId}-${repetition}`, status: 'ok', response: { text: 'x' },
    tokensIn: 10, tokensOut: 5, cost: '0.000000300000', latencyMs: 12, attempts: 1, cached: false, errorKind: null, error: null,
    score: 1, verifier: 'recorded', ...over,
  };
}

describe('db', () => {
  it('migrations are idempotent', async () => {
    expect(await migrate(t.db)).toEqual([]);
  });

  it('stores a dataset and a pool once per content hash', async () => {
    const a = await saveDataset(t.db, { name: 'd', source: 'test', contentHash: 'hash-d', items });
    const b = await saveDataset(t.db, { name: 'd', source: 'test', contentHash: 'hash-d', items });
    expect(a.created).toBe(true);
    expect(b).toEqual({ id: a.id, created: false });
    const stored = await getDatasetItems(t.db, a.id);
    expect(stored.map((i) => i.id)).toEqual(['a', 'b']);
    expect(stored[0]!.recorded).toEqual(items[0]!.recorded);
    expect(stored[1]!.choices).toEqual(items[1]!.choices);
    const p = await savePool(t.db, pool, 'hash-p');
    expect(p.workers.map((w) => [w.name, w.prices.inputPerMTok, w.prices.outputPerMTok])).toEqual([['w1', '0.2', '0.2'], ['w2', '0.15', '0.6']]);
    expect((await savePool(t.db, pool, 'hash-p')).poolId).toBe(p.poolId);
  });

  it('records calls idempotently with exact counters and spend', async () => {
    const ds = await saveDataset(t.db, { name: 'd', source: 'test', contentHash: 'hash-d', items });
    const [i1, i2] = await getDatasetItems(t.db, ds.id);
    const { poolId, workers } = await savePool(t.db, pool, 'hash-p');
    const [w1, w2] = workers;
    await createRun(t.db, { id: 'run1', datasetId: ds.id, poolId, repetitions: 2, sampleSize: null, seed: 1, itemCount: 2, totalCalls: 8, spendCap: '0.000001', options: {} });
    await setRunStatus(t.db, 'run1', 'running');
    const first = await recordCalls(t.db, [call('run1', i1!.dbId, w1!.id, 0), call('run1', i1!.dbId, w2!.id, 0, { score: 0 }), call('run1', i2!.dbId, w1!.id, 0)]);
    expect(first.inserted).toBe(3);
    // the same key again (a retried job) and a duplicate inside one batch: no new row, no double spend
    const second = await recordCalls(t.db, [
      call('run1', i1!.dbId, w1!.id, 0, { score: 0 }),
      call('run1', i2!.dbId, w2!.id, 1, { status: 'error', score: null, verifier: null, errorKind: 'bad-request', error: 'no', cost: '0' }),
      call('run1', i2!.dbId, w2!.id, 1, { status: 'error', score: null, verifier: null, errorKind: 'bad-request', error: 'no', cost: '0' }),
    ]);
    expect(second.inserted).toBe(1);
    expect(second.runs[0]).toMatchObject({ doneCalls: 3, failedCalls: 1, spent: '0.000000900000', spendCap: '0.000001000000' });
    const run = await getRun(t.db, 'run1');
    expect(run).toMatchObject({ doneCalls: 3, failedCalls: 1, spent: '0.000000900000', status: 'running' });
    expect((await existingCallKeys(t.db, 'run1')).size).toBe(4);
    const means = await itemWorkerMeans(t.db, 'run1');
    expect(means.find((m) => m.itemId === i1!.dbId && m.workerId === w1!.id)?.mean).toBe(1); // the first write won
    const stats = await workerCallStats(t.db, 'run1');
    expect(stats.find((s) => s.workerId === w2!.id)).toMatchObject({ calls: 2, failed: 1 });
    expect(await setRunStatus(t.db, 'run1', 'completed', { from: ['paused'] })).toBe(false);
    expect(await setRunStatus(t.db, 'run1', 'completed', { from: ['running'] })).toBe(true);
    expect((await getRun(t.db, 'run1'))!.finishedAt).toBeInstanceOf(Date);
  });

  it('rejects a score outside [0, 1] without writing anything', async () => {
    const ds = await saveDataset(t.db, { name: 'd', source: 'test', contentHash: 'hash-d', items });
    const [i1] = await getDatasetItems(t.db, ds.id);
    const { poolId, workers } = await savePool(t.db, pool, 'hash-p');
    await createRun(t.db, { id: 'run2', datasetId: ds.id, poolId, repetitions: 1, sampleSize: null, seed: 1, itemCount: 1, totalCalls: 2, spendCap: null, options: {} });
    await expect(recordCalls(t.db, [call('run2', i1!.dbId, workers[0]!.id, 0, { score: 1.5 })])).rejects.toThrow();
    expect((await existingCallKeys(t.db, 'run2')).size).toBe(0);
    expect((await getRun(t.db, 'run2'))!.doneCalls).toBe(0);
  });

  it('caches responses by request hash', async () => {
    await putCachedResponse(t.db, { requestHash: 'r1', provider: 'openai', model: 'gpt', response: { text: 'hi' }, tokensIn: 3, tokensOut: 1, paidBy: 'run1.1.1.0' });
    await putCachedResponse(t.db, { requestHash: 'r1', provider: 'openai', model: 'gpt', response: { text: 'other' }, tokensIn: 3, tokensOut: 1, paidBy: 'run2.1.1.0' });
    expect(await getCachedResponse(t.db, 'r1')).toEqual({ response: { text: 'hi' }, tokensIn: 3, tokensOut: 1, paidBy: 'run1.1.1.0' });
    expect(await getCachedResponse(t.db, 'nope')).toBeUndefined();
  });

  it('names FUGU_DATABASE_URL when Postgres is unreachable', async () => {
    const err = await connectDb('postgres://nobody@127.0.0.1:1/x').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceUnavailableError);
    expect((err as Error).message).toMatch(/cannot reach Postgres at postgres:\/\/nobody@127.0.0.1:1\/x .*set FUGU_DATABASE_URL/);
  });

  it('runs a text marked PREPARED as a prepared statement of its connection, parsed once, and any other text unnamed', async () => {
    const one = await connectDb(t.url, { max: 1 });
    try {
      const marked = (n: number) => sql<{ n: number }>`${sql.raw(PREPARED)}select ${n}::int + 1 as n`.execute(one);
      expect((await marked(1)).rows[0]!.n).toBe(2);
      expect((await marked(41)).rows[0]!.n).toBe(42);
      await sql`select ${1}::int + 2 as n`.execute(one);
      const kept = await sql<{ statement: string; runs: number }>`select statement, (generic_plans + custom_plans)::int as runs from pg_prepared_statements where from_sql = false`.execute(one);
      // one statement kept, the marked text, run twice (the second call bound it again, with no parse)
      expect(kept.rows).toEqual([{ statement: `${PREPARED}select $1::int + 1 as n`, runs: 2 }]);
    } finally {
      await one.destroy();
    }
  });
});
