// The provider worker (apps/provider-worker) on real Redis and real Postgres, with a local server
// speaking OpenAI's wire format in place of the provider: retries with backoff, permanent
// errors, 429s that use no attempt, the response cache (also across a crash between the call
// and its row), exact cost, missing and wrong API keys (and no secret anywhere), job payloads
// that fail validation, and the worker process's ops endpoints and SIGTERM drain.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import pg from 'pg';
import { sql, type RawBuilder } from 'kysely';
import { Job } from 'bullmq';
import type { DatasetItem, WorkerPool, WorkerSpec } from '@fugu/core';
import { getRun, type Db } from '@fugu/db';
import { providerCallQueue, type RedisClient } from '@fugu/queue';
import { startOpenAIStub, type OpenAIStub, type StubReply, type StubServerOptions, type StubUsage } from '@fugu/providers/testing';
import { createLogger, Registry, type Logger } from '@fugu/telemetry';
import { providerCallCounterKey, startProviderWorker, type ProviderWorkerHandle } from '../../apps/provider-worker/src/worker.ts';
import { runEval, type EvalOptions } from '@fugu/evaluation';
import {
  createEvalEnv, replayPool, startWorkerProcess, syntheticItems, waitFor, writeFixtures, type EvalEnv, type WorkerProcess,
} from '../support/eval-env.ts';

const KEY_ENV = 'FUGU_TEST_OPENAI_KEY';
const SECRET = `sk-test-SECRET123-${randomBytes(8).toString('hex')}`;
const overrides = { 'worker.concurrency': 4, 'worker.attempts': 3, 'worker.backoffMs': 20 };
const quiet = (): void => {};

let env: EvalEnv;
const workers: ProviderWorkerHandle[] = [];
const stubs: OpenAIStub[] = [];
const processes: WorkerProcess[] = [];
const ownEnvs: EvalEnv[] = [];

beforeAll(async () => {
  process.env[KEY_ENV] = SECRET; // runEval's key check reads process.env
  env = await createEvalEnv({ overrides });
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.close()));
  await Promise.all(processes.splice(0).map((p) => (p.child.exitCode === null && p.child.signalCode === null ? p.kill9() : undefined)));
  await Promise.all(stubs.splice(0).map((s) => s.close()));
  await Promise.all(ownEnvs.splice(0).map((e) => e.cleanup()));
});
afterAll(async () => {
  await env?.cleanup();
  delete process.env[KEY_ENV];
});

// ------------------------------------------------------------------------------------ helpers

/** The right (or a wrong) answer to item i: syntheticItems' ground truth is String(2 * i). */
const answer = (i: number, right = true, usage: StubUsage = { input: 12, output: 4 }): StubReply => ({
  type: 'text', text: `The answer is ${right ? 2 * i : 2 * i + 1}.`, usage,
});
const fail = (status: number, headers?: Record<string, string>): StubReply => ({ type: 'error', status, ...(headers && { headers }) });

/** An OpenAI stub whose reply to the n-th request (0-based) about item i is `script(i, n)`. */
async function scriptedStub(script: (item: number, nth: number) => StubReply, opts: StubServerOptions = {}): Promise<{ stub: OpenAIStub; requestsFor(item: number): number }> {
  const seen = new Map<number, number>();
  const stub = await startOpenAIStub({
    ...opts,
    defaultReply: (req) => {
      // the prompts of syntheticItems read "Question <i> about <task>: ..."
      const m = /Question (\d+) about/.exec(req.rawBody);
      if (!m) return fail(400, { 'x-stub': 'no item in the prompt' });
      const i = Number(m[1]);
      const n = seen.get(i) ?? 0;
      seen.set(i, n + 1);
      return script(i, n);
    },
  });
  stubs.push(stub);
  return { stub, requestsFor: (i) => seen.get(i) ?? 0 };
}

const gpt = (stub: OpenAIStub, over: Partial<WorkerSpec> = {}): WorkerSpec => ({
  name: 'gpt', provider: 'openai', model: 'gpt-test', baseUrl: stub.baseURL, apiKeyEnv: KEY_ENV, settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' }, ...over,
});
const poolOf = (...ws: WorkerSpec[]): WorkerPool => ({ name: 'stubbed', workers: ws });

let fixtureSeq = 0;
const fixtures = (items: DatasetItem[], pool: WorkerPool, e: EvalEnv = env) => writeFixtures(path.join(e.dir, `f${++fixtureSeq}`), items, pool);

/**
 * An environment of its own (database, queue prefix) for a test whose worker processes must not
 * meet the queues' state left by earlier tests (e.g. BullMQ's stalled-check key, which holds
 * off the next check for the stalledInterval of the worker that set it).
 */
async function ownEnv(over: Record<string, unknown> = overrides): Promise<EvalEnv> {
  const e = await createEvalEnv({ overrides: over });
  ownEnvs.push(e);
  return e;
}

async function startWorker(workerEnv: Record<string, string | undefined> = { [KEY_ENV]: SECRET }, log: Logger = createLogger({ name: 'test', level: 'silent' })): Promise<ProviderWorkerHandle> {
  const w = await startProviderWorker({ config: env.config, db: env.ctx.db, log, registry: new Registry(), env: workerEnv });
  workers.push(w);
  return w;
}

async function startProcess(e: EvalEnv, vars: Record<string, string> = {}): Promise<WorkerProcess> {
  const p = await startWorkerProcess(e.config, vars);
  processes.push(p);
  return p;
}

function evaluate(files: { dataset: string; pool: string }, runId: string, over: Partial<EvalOptions> = {}, e: EvalEnv = env) {
  return runEval(e.ctx, { dataset: files.dataset, pool: files.pool, repetitions: 1, sample: null, seed: 1, spendCap: null, localWorkers: 0, keyCheck: true, wait: true, log: quiet, runId, ...over });
}

type CallRow = {
  item: string; worker: string; status: 'ok' | 'error'; attempts: number; errorKind: string | null; error: string | null;
  cost: string; cached: boolean; tokensIn: number; tokensOut: number; score: number | null; verifier: string | null;
};

/** A run's call rows with their rewards (score null: no reward row), in item then worker order. */
async function callRows(runId: string, db: Db = env.ctx.db): Promise<CallRow[]> {
  const r = await sql<CallRow>`
    select i.ext_id as item, w.name as worker, c.status, c.attempts, c.error_kind as "errorKind", c.error, c.cost::text as cost,
           c.cached, c.tokens_in as "tokensIn", c.tokens_out as "tokensOut", r.score, r.verifier
      from calls c join items i on i.id = c.item_id join workers w on w.id = c.worker_id left join rewards r on r.call_id = c.id
     where c.run_id = ${runId}
     order by i.idx, w.name, c.repetition`.execute(db);
  return r.rows;
}

async function count(query: RawBuilder<{ n: number }>, db: Db = env.ctx.db): Promise<number> {
  return (await query.execute(db)).rows[0]!.n;
}

const waitForStatus = (runId: string, status: string, e: EvalEnv = env, timeoutMs = 30_000) =>
  waitFor(`run ${runId} ${status}`, async () => (await getRun(e.ctx.db, runId))?.status === status, timeoutMs, 50);

/** Every value under the env's Redis prefix (job payloads, results, events), as one text. */
async function redisDump(redis: RedisClient, prefix: string): Promise<string> {
  const out: string[] = [];
  for (const key of await redis.keys(`${prefix}:*`)) {
    const type = await redis.type(key);
    if (type === 'string') out.push(key, (await redis.get(key)) ?? '');
    else if (type === 'hash') out.push(key, ...Object.entries(await redis.hgetall(key)).flat());
    else if (type === 'list') out.push(key, ...(await redis.lrange(key, 0, -1)));
    else if (type === 'set') out.push(key, ...(await redis.smembers(key)));
    else if (type === 'zset') out.push(key, ...(await redis.zrange(key, 0, -1)));
    else if (type === 'stream') out.push(key, ...(await redis.xrange(key, '-', '+')).flatMap(([, fields]) => fields));
  }
  return out.join('\n');
}

/** Exact USD decimal with Postgres numeric(24,12)'s 12 places, from picodollars. */
const usd12 = (pico: bigint): string => `${pico / 10n ** 12n}.${(pico % 10n ** 12n).toString().padStart(12, '0')}`;

// -------------------------------------------------------------------------------------- tests

describe('provider worker: errors and retries', () => {
  it('retries transient errors with backoff: 500, 500, then an answer is one ok row after 3 attempts', async () => {
    // item 0 fails twice then answers right; item 1 answers wrong at once; the rest right
    const { stub, requestsFor } = await scriptedStub((i, n) => (i === 0 && n < 2 ? fail(500) : answer(i, i !== 1)));
    const files = await fixtures(syntheticItems(4), poolOf(gpt(stub)));
    await startWorker();
    const out = await evaluate(files, 'retry');
    expect(out.run).toMatchObject({ status: 'completed', totalCalls: 4, doneCalls: 4, failedCalls: 0 });
    const rows = await callRows('retry');
    expect(rows).toHaveLength(4);
    expect(rows[0]).toMatchObject({ item: 'q0', status: 'ok', attempts: 3, errorKind: null, cached: false, score: 1, verifier: 'exact-match' });
    expect(rows[1]).toMatchObject({ item: 'q1', status: 'ok', attempts: 1, score: 0, verifier: 'exact-match' });
    expect(rows.slice(2).map((r) => [r.attempts, r.score])).toEqual([[1, 1], [1, 1]]);
    expect([0, 1, 2, 3].map(requestsFor)).toEqual([3, 1, 1, 1]);
  });

  it('records a permanent error (400) at once: one error row, no reward, and the run completes', async () => {
    const { stub, requestsFor } = await scriptedStub((i) => (i === 2 ? fail(400) : answer(i)));
    const files = await fixtures(syntheticItems(4), poolOf(gpt(stub)));
    await startWorker();
    const out = await evaluate(files, 'permanent');
    expect(out.run).toMatchObject({ status: 'completed', totalCalls: 4, doneCalls: 3, failedCalls: 1 });
    const rows = await callRows('permanent');
    expect(rows).toHaveLength(4);
    const bad = rows.find((r) => r.item === 'q2')!;
    expect(bad).toMatchObject({ status: 'error', errorKind: 'bad-request', attempts: 1, score: null, cost: '0.000000000000', tokensIn: 0 });
    expect(bad.error).toMatch(/400/);
    expect(rows.filter((r) => r.item !== 'q2').every((r) => r.status === 'ok' && r.score === 1)).toBe(true);
    expect(requestsFor(2)).toBe(1);
    expect(await count(sql<{ n: number }>`select count(*)::int as n from rewards where run_id = 'permanent'`)).toBe(3);
  });

  it('records a transient error on every attempt as one server error row after `attempts` tries', async () => {
    const { stub, requestsFor } = await scriptedStub((i) => (i === 0 ? fail(500) : answer(i)));
    const files = await fixtures(syntheticItems(3), poolOf(gpt(stub)));
    await startWorker();
    const out = await evaluate(files, 'exhausted');
    expect(out.run).toMatchObject({ status: 'completed', totalCalls: 3, doneCalls: 2, failedCalls: 1 });
    const rows = await callRows('exhausted');
    expect(rows).toHaveLength(3);
    expect(rows[0]).toMatchObject({ item: 'q0', status: 'error', errorKind: 'server', attempts: overrides['worker.attempts'], score: null });
    expect(requestsFor(0)).toBe(overrides['worker.attempts']);
  });

  it('a 429 with retry-after pauses the queue without using an attempt', async () => {
    const K = 6;
    let n = 0;
    const { stub } = await scriptedStub((i) => (n++ < K ? fail(429, { 'retry-after-ms': '200' }) : answer(i)));
    const files = await fixtures(syntheticItems(5), poolOf(gpt(stub)));
    await startWorker();
    const out = await evaluate(files, 'limited');
    expect(out.run).toMatchObject({ status: 'completed', doneCalls: 5, failedCalls: 0 });
    const rows = await callRows('limited');
    expect(rows.map((r) => [r.status, r.attempts, r.score])).toEqual(Array.from({ length: 5 }, () => ['ok', 1, 1]));
    expect(stub.requestCount).toBe(K + 5);
  });
});

describe('provider worker: response cache and cost', () => {
  it('a second run of the same calls is served from the cache: no request, cost 0, the same rewards', async () => {
    const items = syntheticItems(6);
    const { stub } = await scriptedStub((i) => answer(i, i % 3 !== 0, { input: 30 + i, output: 7 }));
    const files = await fixtures(items, poolOf(gpt(stub)));
    await startWorker();
    const first = await evaluate(files, 'cache-1');
    expect(first.run).toMatchObject({ status: 'completed', doneCalls: 6 });
    expect(stub.requestCount).toBe(6);
    const second = await evaluate(files, 'cache-2');
    expect(second.run).toMatchObject({ status: 'completed', doneCalls: 6, spent: '0.000000000000' });
    expect(stub.requestCount).toBe(6);

    const rows1 = await callRows('cache-1');
    const rows2 = await callRows('cache-2');
    expect(rows1.every((r) => !r.cached && r.cost !== '0.000000000000')).toBe(true);
    expect(rows2.every((r) => r.cached && r.cost === '0.000000000000' && r.attempts === 1)).toBe(true);
    expect(rows2.map((r) => [r.item, r.score])).toEqual(rows1.map((r) => [r.item, r.score]));
    expect(new Set(rows1.map((r) => r.score))).toEqual(new Set([0, 1]));
    expect(rows2.map((r) => r.tokensIn)).toEqual(rows1.map((r) => r.tokensIn));
  });

  it('a job run again after its call succeeded (the worker died before writing the row) does not call again', async () => {
    const own = await ownEnv();
    const { stub } = await scriptedStub((i) => answer(i, true, { input: 40, output: 9 }));
    const files = await fixtures(syntheticItems(1), poolOf(gpt(stub)), own);
    const vars = { [KEY_ENV]: SECRET, FUGU_WORKER_PROVIDERS: 'openai', FUGU_WORKER_LOCK_MS: '1000' };
    const cacheRows = () => count(sql<{ n: number }>`select count(*)::int as n from response_cache`, own.ctx.db);
    const workerBackends = sql<{ pid: number; waiting: boolean }>`
      select pid, wait_event_type = 'Lock' as waiting from pg_stat_activity
       where datname = current_database() and application_name = 'fugu-provider-worker'`;

    // hold every write to `calls`, so the worker gets its answer (and caches it) but cannot record it
    const lock = new pg.Client({ connectionString: own.database.url });
    await lock.connect();
    try {
      await lock.query('begin');
      await lock.query('lock table calls in exclusive mode');
      const first = await startProcess(own, vars);
      await evaluate(files, 'crash', { wait: false }, own);
      // (pg_stat_activity is read outside the locking transaction: inside one it is a snapshot)
      await waitFor('the answer cached and its row waiting for the lock', async () =>
        (await cacheRows()) === 1 && (await workerBackends.execute(own.ctx.db)).rows.some((b) => b.waiting), 20_000, 50);
      expect(stub.requestCount).toBe(1);
      // a crash: the process dies, and with it the statement that would have written the row
      // (a backend waiting for a lock notices its client's death only once it has the lock)
      await first.kill9();
      for (const b of (await workerBackends.execute(own.ctx.db)).rows) await sql`select pg_terminate_backend(${b.pid})`.execute(own.ctx.db);
      await lock.query('rollback');
    } finally {
      await lock.end();
    }
    expect(await callRows('crash', own.ctx.db)).toEqual([]);

    // the job's lock expires, another worker takes it back and answers it from the cache
    await startProcess(own, vars);
    await waitForStatus('crash', 'completed', own);
    const rows = await callRows('crash', own.ctx.db);
    expect(rows).toEqual([expect.objectContaining({ item: 'q0', status: 'ok', cached: true, score: 1, tokensIn: 40, tokensOut: 9 })]);
    expect(stub.requestCount).toBe(1);
    // the one real call is charged once: the cache knows this very call paid for it
    expect(rows[0]!.cost).not.toBe('0.000000000000');
    expect((await getRun(own.ctx.db, 'crash'))!.spent).toBe(rows[0]!.cost);
  });

  it('costs are exact: tokens from the provider times prices, and spent is their sum', async () => {
    const usage = (i: number): StubUsage => ({ input: 1_000_001 + 7_919 * i, output: 333 + 17 * i });
    const { stub } = await scriptedStub((i) => answer(i, true, usage(i)));
    // $0.35 and $1.05 per million tokens: 350,000 and 1,050,000 picodollars a token
    const files = await fixtures(syntheticItems(7), poolOf(gpt(stub, { prices: { inputPerMTok: '0.35', outputPerMTok: '1.05' } })));
    await startWorker();
    const out = await evaluate(files, 'costs');
    expect(out.run.status).toBe('completed');
    const rows = await callRows('costs');
    const want = rows.map((_, i) => BigInt(usage(i).input) * 350_000n + BigInt(usage(i).output) * 1_050_000n);
    expect(rows.map((r) => [r.tokensIn, r.tokensOut])).toEqual(rows.map((_, i) => [usage(i).input, usage(i).output]));
    expect(rows.map((r) => r.cost)).toEqual(want.map(usd12));
    expect(rows[0]!.cost).toBe('0.350350000000'); // 1,000,001 x $0.35 + 333 x $1.05, per million
    expect(out.run.spent).toBe(usd12(want.reduce((a, b) => a + b, 0n)));
  });
});

describe('provider worker: API keys and secrets', () => {
  it('a missing key is recorded as config errors naming the variable; no key appears in rows, payloads or logs', async () => {
    const ABSENT = 'FUGU_TEST_ABSENT_OPENAI_KEY';
    const WRONG_ENV = 'FUGU_TEST_WRONG_OPENAI_KEY';
    const WRONG = `wrong-key-${randomBytes(8).toString('hex')}`;
    delete process.env[ABSENT];
    // the stub takes only SECRET, and answers another key with a 401 that echoes it
    const { stub } = await scriptedStub((i) => answer(i), { apiKey: SECRET });
    const pool = poolOf(
      gpt(stub),
      // different models: a shared request hash would let the cache answer for them
      gpt(stub, { name: 'nokey', model: 'gpt-test-nokey', apiKeyEnv: ABSENT }),
      gpt(stub, { name: 'wrongkey', model: 'gpt-test-wrongkey', apiKeyEnv: WRONG_ENV }),
    );
    const files = await fixtures(syntheticItems(3), pool);
    await evaluate(files, 'keys', { keyCheck: false, wait: false });

    // the queued payloads, before any worker takes them
    const redis = env.ctx.redis!;
    const queued = await redisDump(redis, env.config.queuePrefix);
    expect(queued).toContain('"runId":"keys"');

    let logs = '';
    const sink = new Writable({ write(chunk, _enc, done) { logs += String(chunk); done(); } });
    await startWorker({ [KEY_ENV]: SECRET, [WRONG_ENV]: WRONG }, createLogger({ name: 'test', level: 'debug', destination: sink }));
    await waitForStatus('keys', 'completed');

    const rows = await callRows('keys');
    expect(rows).toHaveLength(9);
    for (const r of rows.filter((x) => x.worker === 'gpt')) expect(r).toMatchObject({ status: 'ok', score: 1 });
    for (const r of rows.filter((x) => x.worker === 'nokey')) {
      expect(r).toMatchObject({ status: 'error', errorKind: 'config', attempts: 1, score: null });
      expect(r.error).toContain(ABSENT);
    }
    for (const r of rows.filter((x) => x.worker === 'wrongkey')) expect(r).toMatchObject({ status: 'error', errorKind: 'auth', attempts: 1 });
    // the keys did reach the provider (the 401 body carried WRONG back to the worker)
    expect(stub.requests.some((q) => q.headers.authorization === `Bearer ${SECRET}`)).toBe(true);
    expect(stub.requests.some((q) => q.headers.authorization === `Bearer ${WRONG}`)).toBe(true);

    const texts = [queued, await redisDump(redis, env.config.queuePrefix), logs];
    for (const table of ['calls', 'rewards', 'eval_runs', 'response_cache', 'workers', 'worker_pools', 'items', 'datasets']) {
      const all = await sql<{ t: string }>`select coalesce(string_agg(x::text, E'\n'), '') as t from ${sql.table(table)} x`.execute(env.ctx.db);
      texts.push(all.rows[0]!.t);
    }
    expect(texts.join('\n')).toContain('[redacted]'); // the echoed wrong key, scrubbed from the error row
    for (const secret of [SECRET, WRONG, SECRET.slice(-16), WRONG.slice(-16)]) {
      for (const t of texts) expect(t.includes(secret)).toBe(false);
    }
  });
});

describe('provider worker: job contracts', () => {
  it('a job whose payload fails validation fails at once, naming the field, and writes nothing', async () => {
    await startWorker();
    const callsBefore = await count(sql<{ n: number }>`select count(*)::int as n from calls`);
    const queue = env.ctx.queue(providerCallQueue('replay'));
    const added = await queue.add('call', { v: 1, runId: 'x', itemId: 'oops' }, { attempts: 3, backoff: { type: 'fixed', delay: 10 } });
    // the state first, then the job: a job read before its state is asked may be out of date
    const failed = await waitFor('the job to fail', async () =>
      (await queue.getJobState(added.id!)) === 'failed' ? Job.fromId(queue, added.id!) : undefined, 15_000, 50);
    expect({ attemptsMade: failed.attemptsMade, failedReason: failed.failedReason }).toEqual({ attemptsMade: 1, failedReason: expect.stringMatching(/field itemId/) });
    expect(await count(sql<{ n: number }>`select count(*)::int as n from calls`)).toBe(callsBefore);
  });
});

describe('provider worker process', () => {
  it('serves /healthz, /readyz and /metrics counting the calls it made', async () => {
    const proc = await startProcess(env);
    const base = `http://127.0.0.1:${proc.port}`;
    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: 'ok' });
    expect((await fetch(`${base}/readyz`)).status).toBe(200);

    const files = await fixtures(syntheticItems(10), replayPool());
    const out = await evaluate(files, 'ops');
    expect(out.run).toMatchObject({ status: 'completed', doneCalls: 30 });
    const metrics = await (await fetch(`${base}/metrics`)).text();
    const replayCalls = [...metrics.matchAll(/^fugu_provider_calls_total\{([^}]*)\} (\d+)$/gm)]
      .filter((m) => m[1]!.includes('provider="replay"'))
      .reduce((s, m) => s + Number(m[2]), 0);
    expect(replayCalls).toBe(30);
    expect(await proc.term()).toEqual({ code: 0, signal: null });
  });

  it('drains on SIGTERM: every job taken is finished, a second worker finishes the batch, no call runs twice', async () => {
    const own = await ownEnv();
    const files = await fixtures(syntheticItems(2000), replayPool(), own);
    const vars = { FUGU_WORKER_CONCURRENCY: '8', FUGU_WORKER_PROVIDERS: 'replay', FUGU_WORKER_LOCK_MS: '2000' };
    const first = await startProcess(own, vars);
    const out = await evaluate(files, 'drain', { wait: false }, own);
    const total = out.run.totalCalls;
    expect(total).toBe(6000);
    await waitFor('some rows', async () => ((await getRun(own.ctx.db, 'drain'))?.doneCalls ?? 0) >= 300, 30_000, 20);
    expect(await first.term()).toEqual({ code: 0, signal: null });
    // it left no job behind in `active` (one that would come back to a worker once its lock expired)
    expect(await own.ctx.queue(providerCallQueue('replay')).getJobCounts('active')).toEqual({ active: 0 });
    expect((await getRun(own.ctx.db, 'drain'))!.doneCalls).toBeLessThan(total);

    const second = await startProcess(own, vars);
    await waitForStatus('drain', 'completed', own, 50_000);
    const r = await sql<{ total: number; distinct: number }>`
      select count(*)::int as total, count(distinct (item_id, worker_id, repetition))::int as distinct from calls where run_id = 'drain'`.execute(own.ctx.db);
    expect(r.rows[0]).toEqual({ total, distinct: total });
    // every call was made once: the first worker finished each job it had taken before exiting
    expect(Number(await own.ctx.redis!.hget(providerCallCounterKey(own.config.queuePrefix), 'replay'))).toBe(total);
    expect(await second.term()).toEqual({ code: 0, signal: null });
  });
});
