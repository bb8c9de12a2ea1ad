// The call pipeline on real Redis and Postgres against a local OpenAI wire-format stub: rows,
// exact cost, the response cache's paid-by rule, errors rethrown unchanged (and recorded), shared
// rate limits for direct callers (wait up to a bound, else a transient rate-limit error), streams.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { sql } from 'kysely';
import { loadConfig } from '@fugu/config';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { getChatCalls } from '@fugu/db';
import { BadRequestError, isProviderError, RateLimitError } from '@fugu/providers';
import { startOpenAIStub, type OpenAIStub } from '@fugu/providers/testing';
import { createRedis } from '@fugu/queue';
import type { ChatRequest, StreamEvent, WorkerSpec } from '@fugu/core';
import { createCallPipeline, LimitExceededError, type CallPipelineOptions } from './pipeline.ts';
import { fromWireError, toWireError } from './wire-error.ts';

const KEY_ENV = 'FUGU_TEST_CALLS_KEY';
const env = { [KEY_ENV]: 'sk-test-calls-0123456789' };
const redis = createRedis(process.env.FUGU_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', 'producer');
const prefix = `fugu-calls-${randomBytes(4).toString('hex')}`;
let t: TestDatabase;
let stub: OpenAIStub;

beforeAll(async () => {
  t = await createTestDatabase('fugu_calls');
  stub = await startOpenAIStub({ defaultReply: { type: 'text', text: 'The answer is 4.', usage: { input: 1_000_001, output: 333 } } });
});
afterAll(async () => {
  await stub?.close();
  await t?.drop();
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
});
beforeEach(() => stub.reset());

const worker = (over: Partial<WorkerSpec> = {}): WorkerSpec => ({
  name: 'gpt', provider: 'openai', model: 'gpt-test', baseUrl: stub.baseURL, apiKeyEnv: KEY_ENV, settings: {}, prices: { inputPerMTok: '0.35', outputPerMTok: '1.05' }, ...over,
});
const ask = (q: string): ChatRequest => ({ messages: [{ role: 'user', content: q }] });
const pipeline = (over: Record<string, unknown> = {}, extra: Partial<CallPipelineOptions> = {}) =>
  createCallPipeline({ db: t.db, redis, config: loadConfig({}, { queuePrefix: prefix, ...over }), env, ...extra });
const row = async (key: string) => (await getChatCalls(t.db, [key]))[0];

describe('call pipeline: call()', () => {
  it('records one row with exact cost; a second call of the same request is cached and costs nothing', async () => {
    const p = pipeline();
    const a = await p.call({ worker: worker(), request: ask('2+2?'), origin: 'gateway', key: 'req-1' });
    expect(a).toMatchObject({ cached: false, cost: 1_000_001n * 350_000n + 333n * 1_050_000n, attempts: 1 });
    expect(a.result.text).toBe('The answer is 4.');
    expect(await row('req-1')).toMatchObject({ origin: 'gateway', status: 'ok', worker: 'gpt', provider: 'openai', cost: '0.350350000000', tokensIn: 1_000_001, tokensOut: 333, cached: false, workerId: null, error: null });
    const b = await p.call({ worker: worker(), request: ask('2+2?'), origin: 'gateway', key: 'req-2' });
    expect(b).toMatchObject({ cached: true, cost: 0n });
    expect(stub.requestCount).toBe(1);
    expect(await row('req-2')).toMatchObject({ status: 'ok', cached: true, cost: '0.000000000000' });
  });

  it('a call run again under the same key pays once and keeps its one row (paid-by rule)', async () => {
    const p = pipeline();
    await p.call({ worker: worker(), request: ask('3+3?'), origin: 'chat-call', key: 'same' });
    // the same key again (a re-run after a crash): served by the cache, charged as the call that paid
    const again = await p.call({ worker: worker(), request: ask('3+3?'), origin: 'chat-call', key: 'same', attempt: 2 });
    expect(again).toMatchObject({ cached: true, cost: 350_350_000_000n });
    expect(stub.requestCount).toBe(1);
    const n = await sql<{ n: number }>`select count(*)::int as n from chat_calls where key = 'same'`.execute(t.db);
    expect(n.rows[0]!.n).toBe(1);
  });

  // the cache entry and the row are written at once: each must hold without the other
  /** Runs `fn` while `table` is locked; the pipeline's statements that wait for the lock are cancelled (a crash mid-write). */
  async function withTableHeld<T>(table: 'chat_calls' | 'response_cache', waitFor: () => Promise<boolean>, fn: () => Promise<T>): Promise<T> {
    const lock = new pg.Client({ connectionString: t.url });
    await lock.connect();
    try {
      await lock.query('begin');
      await lock.query(`lock table ${table} in exclusive mode`);
      const lockPid = (await lock.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
      const running = fn();
      running.catch(() => {});
      const waiting = sql<{ pid: number }>`select pid from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and pid <> ${lockPid}`;
      for (let until = Date.now() + 10_000; ; ) {
        if ((await waitFor()) && (await waiting.execute(t.db)).rows.length > 0) break;
        if (Date.now() > until) throw new Error(`no statement waiting for ${table}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      for (const b of (await waiting.execute(t.db)).rows) await sql`select pg_cancel_backend(${b.pid})`.execute(t.db);
      return await running;
    } finally {
      await lock.query('rollback').catch(() => {});
      await lock.end();
    }
  }
  const cacheEntries = async () => (await sql<{ n: number }>`select count(*)::int as n from response_cache`.execute(t.db)).rows[0]!.n;

  it('a fresh answer whose row could not be written is cached already: the re-run under its key answers from the cache and pays once', async () => {
    const p = pipeline();
    const before = await cacheEntries();
    const first = withTableHeld('chat_calls', async () => (await cacheEntries()) > before, () => p.call({ worker: worker(), request: ask('held row'), origin: 'chat-call', key: 'held-row' }));
    await expect(first).rejects.toThrow(/cancel/);
    expect(await row('held-row')).toBeUndefined();
    const again = await p.call({ worker: worker(), request: ask('held row'), origin: 'chat-call', key: 'held-row', attempt: 2 });
    expect(again).toMatchObject({ cached: true, cost: 350_350_000_000n, attempts: 2 });
    expect(stub.requestCount).toBe(1);
    expect(await row('held-row')).toMatchObject({ status: 'ok', cached: true, cost: '0.350350000000' });
  });

  it('a call whose row is written is recorded even when its cache entry could not be', async () => {
    const p = pipeline();
    const o = await withTableHeld('response_cache', async () => (await row('held-cache')) !== undefined, () => p.call({ worker: worker(), request: ask('held cache'), origin: 'chat-call', key: 'held-cache' }));
    expect(o).toMatchObject({ cached: false, cost: 350_350_000_000n });
    expect(await row('held-cache')).toMatchObject({ status: 'ok', cached: false, cost: '0.350350000000' });
    expect(stub.requestCount).toBe(1);
  });

  it('rethrows a provider error unchanged and records it as an error row with the wire error', async () => {
    const p = pipeline();
    stub.enqueue({ type: 'error', status: 400, message: 'bad things' });
    const e = await p.call({ worker: worker(), request: ask('bad'), origin: 'gateway', key: 'err-1' }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(BadRequestError);
    const r = await row('err-1');
    expect(r).toMatchObject({ status: 'error', tokensIn: 0, cost: '0.000000000000', error: { code: 'provider-bad-request', fields: { provider: 'openai', kind: 'bad-request', transient: false, status: 400 } } });
    expect(r!.error!.message).toMatch(/bad things/);
    // the wire error round-trips to the same kind of error
    const back = fromWireError(r!.error!);
    expect(isProviderError(back) && back.kind === 'bad-request' && !back.transient).toBe(true);
    expect(toWireError(back)).toEqual(r!.error);
  });

  it('a failed call whose error the caller will retry leaves no row (recordError)', async () => {
    const p = pipeline();
    stub.enqueue({ type: 'error', status: 500 });
    await expect(p.call({ worker: worker(), request: ask('flaky'), origin: 'chat-call', key: 'retry-1', recordError: (e) => !(isProviderError(e) && e.transient) })).rejects.toThrow();
    expect(await row('retry-1')).toBeUndefined();
  });

  it('with no limit configured makes no Redis round trip (works with no Redis at all)', async () => {
    const p = createCallPipeline({ db: t.db, config: loadConfig({}, { queuePrefix: prefix }), env });
    expect(p.isLimited(worker())).toBe(false);
    await expect(p.call({ worker: worker(), request: ask('no redis'), origin: 'gateway', key: 'nr-1' })).resolves.toMatchObject({ cached: false });
  });
});

describe('call pipeline: shared rate limits for direct callers', () => {
  it('over the limit: a transient rate-limit error at once (maxWaitMs 0), or a wait within the bound', async () => {
    // 600 a minute: a burst of 2, then one every 100 ms; limits keyed by provider, shared by pipelines
    const over = { 'rateLimits.openai.requestsPerMinute': 600, 'worker.responseCache': false };
    const p1 = pipeline(over);
    const p2 = pipeline(over);
    await p1.call({ worker: worker(), request: ask('a'), origin: 'gateway', key: 'rl-1' });
    await p2.call({ worker: worker(), request: ask('b'), origin: 'gateway', key: 'rl-2' });
    const e = await p1.call({ worker: worker(), request: ask('c'), origin: 'gateway', key: 'rl-3' }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(LimitExceededError);
    expect(e).toBeInstanceOf(RateLimitError);
    expect(e).toMatchObject({ transient: true, kind: 'rate-limit', scope: 'provider', limit: 'requests' });
    expect((e as RateLimitError).retryAfterMs).toBeGreaterThan(0);
    expect((e as RateLimitError).retryAfterMs).toBeLessThanOrEqual(100);
    expect(await row('rl-3')).toMatchObject({ status: 'error', error: { code: 'provider-rate-limit', fields: { transient: true, scope: 'provider', limit: 'requests' } } });
    expect(stub.requestCount).toBe(2);
    // the same call allowed to wait (longer than a refill) goes through
    await expect(p2.call({ worker: worker(), request: ask('d'), origin: 'gateway', key: 'rl-4', maxWaitMs: 5_000 })).resolves.toMatchObject({ cached: false });
    expect(stub.requestCount).toBe(3);
  });

  it('a per-worker limit applies to that worker only', async () => {
    const p = pipeline({ 'workerRateLimits.slow.requestsPerMinute': 1, 'worker.responseCache': false });
    expect(p.isLimited(worker())).toBe(false);
    const slow = worker({ name: 'slow' });
    await p.call({ worker: slow, request: ask('s1'), origin: 'gateway', key: 'pw-1' });
    await expect(p.call({ worker: slow, request: ask('s2'), origin: 'gateway', key: 'pw-2' })).rejects.toMatchObject({ scope: 'worker', kind: 'rate-limit' });
    await expect(p.call({ worker: worker(), request: ask('s3'), origin: 'gateway', key: 'pw-3' })).resolves.toBeDefined();
  });

  it('tokens per minute: a request bigger than what is left waits, whatever its request count', async () => {
    const p = pipeline({ 'rateLimits.openai.tokensPerMinute': 1000, 'worker.responseCache': false });
    const req = { ...ask('x'.repeat(400)), maxTokens: 300 }; // about 100 + 300 tokens
    await p.call({ worker: worker(), request: req, origin: 'gateway', key: 'tpm-1' });
    await p.call({ worker: worker(), request: { ...req, messages: [{ role: 'user', content: 'y'.repeat(400) }] }, origin: 'gateway', key: 'tpm-2' });
    await expect(p.call({ worker: worker(), request: { ...req, messages: [{ role: 'user', content: 'z'.repeat(400) }] }, origin: 'gateway', key: 'tpm-3' })).rejects.toMatchObject({ limit: 'tokens' });
  });
});

describe('call pipeline: stream()', () => {
  async function drain(s: AsyncIterable<StreamEvent>): Promise<StreamEvent[]> {
    const out: StreamEvent[] = [];
    for await (const e of s) out.push(e);
    return out;
  }

  it('streams the events, then writes the row; the outcome carries usage and exact cost', async () => {
    const p = pipeline({ 'worker.responseCache': false });
    const s = await p.stream({ worker: worker(), request: ask('stream me'), origin: 'gateway', key: 'st-1' });
    const events = await drain(s);
    expect(events.map((e) => e.type)).toContain('text-delta');
    expect(events.at(-1)).toMatchObject({ type: 'finish', usage: { inputTokens: 1_000_001, outputTokens: 333 } });
    const o = await s.outcome;
    expect(o).toMatchObject({ cost: 350_350_000_000n, cached: false });
    expect(o.result.text).toBe('The answer is 4.');
    expect(await row('st-1')).toMatchObject({ status: 'ok', cost: '0.350350000000', tokensIn: 1_000_001 });
  });

  it('a stream its consumer leaves early is recorded as aborted; a provider error as its error', async () => {
    const p = pipeline({ 'worker.responseCache': false });
    const s = await p.stream({ worker: worker(), request: ask('leave early'), origin: 'gateway', key: 'st-2' });
    for await (const _ of s) break;
    await expect(s.outcome).rejects.toMatchObject({ kind: 'aborted' });
    expect(await row('st-2')).toMatchObject({ status: 'error', error: { code: 'provider-aborted' } });

    stub.enqueue({ type: 'error', status: 400 });
    const bad = await p.stream({ worker: worker(), request: ask('bad stream'), origin: 'gateway', key: 'st-3' });
    await expect(drain(bad)).rejects.toBeInstanceOf(BadRequestError);
    expect(await row('st-3')).toMatchObject({ status: 'error', error: { code: 'provider-bad-request' } });
  });

  it('a stream over the limit is refused before its first event', async () => {
    const p = pipeline({ 'workerRateLimits.once.requestsPerMinute': 1, 'worker.responseCache': false });
    const once = worker({ name: 'once' });
    await drain(await p.stream({ worker: once, request: ask('one'), origin: 'gateway', key: 'st-4' }));
    await expect(p.stream({ worker: once, request: ask('two'), origin: 'gateway', key: 'st-5' })).rejects.toBeInstanceOf(LimitExceededError);
    expect(stub.requestCount).toBe(1);
  });
});
