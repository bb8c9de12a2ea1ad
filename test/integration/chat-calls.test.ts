// chat-call jobs (libs/calls + apps/provider-worker) on real Redis and Postgres against a local
// OpenAI wire-format stub: a stored request with assistant tool calls and tool results reaches the
// provider as sent; exactly one row per id however often it runs; an id submitted again is never
// called again; errors are stored as wire errors; results are read back by id from a fresh
// connection (a coordinator that restarted).
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { Job, type Queue } from 'bullmq';
import type { ChatRequest, WorkerSpec } from '@fugu/core';
import { connectDb, saveChatRequests, savePool, type StoredWorker } from '@fugu/db';
import { CHAT_CALL_JOB, createRedis, providerCallQueue } from '@fugu/queue';
import { ChatCallEvents, defaultChatCallJobOptions, getChatCallResults, limitKeyBase, reconcileChatCalls, submitChatCalls, waitForChatCalls, type ChatCallClientOptions } from '@fugu/calls';
import { startOpenAIStub, type OpenAIStub, type StubReply } from '@fugu/providers/testing';
import { createLogger, Registry } from '@fugu/telemetry';
import { providerCallCounterKey, startProviderWorker, type ProviderWorkerHandle } from '../../apps/provider-worker/src/worker.ts';
import { createEvalEnv, waitFor, type EvalEnv } from '../support/eval-env.ts';

const KEY_ENV = 'FUGU_TEST_CHAT_CALL_KEY';
const SECRET = 'sk-test-chat-calls-0123456789';

let env: EvalEnv;
let stub: OpenAIStub;
let worker: ProviderWorkerHandle;
let gpt: StoredWorker;
let client: ChatCallClientOptions;
/** replies by the question in the last user message; default: "answer to <question>" */
const script = new Map<string, StubReply[]>();

beforeAll(async () => {
  env = await createEvalEnv({ overrides: { 'worker.concurrency': 4, 'worker.attempts': 3, 'worker.backoffMs': 20 } });
  stub = await startOpenAIStub({
    apiKey: SECRET,
    defaultReply: (req) => {
      const msgs = (req.body?.messages ?? []) as Array<{ role: string; content: unknown }>;
      const q = String(msgs.filter((m) => m.role === 'user').at(-1)?.content ?? '');
      const queued = script.get(q);
      if (queued?.length) return queued.shift()!;
      return { type: 'text', text: `answer to ${q}`, usage: { input: 10, output: 3 } };
    },
  });
  const spec: WorkerSpec = { name: 'gpt', provider: 'openai', model: 'gpt-test', baseUrl: stub.baseURL, apiKeyEnv: KEY_ENV, settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' } };
  gpt = (await savePool(env.ctx.db, { name: 'chat', workers: [spec] }, 'chat-pool')).workers[0]!;
  worker = await startProviderWorker({ config: env.config, db: env.ctx.db, log: createLogger({ name: 't', level: 'silent' }), registry: new Registry(), env: { [KEY_ENV]: SECRET } });
  client = { db: env.ctx.db, queue: (n) => env.ctx.queue(n), jobOptions: defaultChatCallJobOptions(env.config.worker), shards: env.config.providerQueueShards };
});
afterEach(() => {
  script.clear();
  stub.reset();
});
afterAll(async () => {
  await worker?.close();
  await stub?.close();
  await env?.cleanup();
});

const ask = (q: string): ChatRequest => ({ messages: [{ role: 'user', content: q }] });
const rowsOf = async (id: string) => (await sql<{ n: number }>`select count(*)::int as n from chat_calls where key = ${id}`.execute(env.ctx.db)).rows[0]!.n;

describe('chat-call jobs', () => {
  it('a stored conversation with tool calls and results reaches the provider as sent, and its answer is one row', async () => {
    const request: ChatRequest = {
      messages: [
        { role: 'system', content: 'You use tools.' },
        { role: 'user', content: 'weather in Paris?' },
        { role: 'assistant', content: [{ type: 'tool-call', id: 'call_1', name: 'weather', arguments: '{"city":"Paris"}' }] },
        { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'call_1', name: 'weather', content: '{"c":21}' }] },
        { role: 'user', content: 'and in Rome?' },
      ],
      tools: [{ name: 'weather', description: 'weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }],
      toolChoice: 'auto',
      temperature: 0.3,
      maxTokens: 64,
    };
    script.set('and in Rome?', [{ type: 'tool-calls', calls: [{ id: 'call_2', name: 'weather', arguments: '{"city":"Rome"}' }], usage: { input: 50, output: 9 } }]);
    const { ids, answered, enqueued } = await submitChatCalls(client, [{ id: 'conv-1.step-1', worker: gpt, request }]);
    expect({ ids, answered, enqueued }).toEqual({ ids: ['conv-1.step-1'], answered: 0, enqueued: 1 });
    const results = await waitForChatCalls(env.ctx.db, ids, { timeoutMs: 20_000 });
    const r = results.get('conv-1.step-1')!;
    expect(r).toMatchObject({ status: 'ok', cost: '0.000068000000', cached: false, attempts: 1, worker: 'gpt' });
    if (r.status !== 'ok') throw new Error('not ok');
    expect(r.result.toolCalls).toEqual([{ id: 'call_2', name: 'weather', arguments: '{"city":"Rome"}' }]);
    expect(r.result.finishReason).toBe('tool-calls');
    // what the provider received
    const body = stub.lastRequest!.body as { messages: Array<Record<string, unknown>>; tools: unknown[]; tool_choice: unknown; temperature: number; max_tokens?: number; max_completion_tokens?: number };
    expect(body.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'user']);
    expect(body.messages[2]).toMatchObject({ tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] });
    expect(body.messages[3]).toMatchObject({ tool_call_id: 'call_1', content: '{"c":21}' });
    expect(body.tools).toHaveLength(1);
    expect(body.temperature).toBe(0.3);
    expect(await rowsOf('conv-1.step-1')).toBe(1);
    // the job payload carried ids only; the request is in Postgres
    const stored = await sql<{ n: number }>`select count(*)::int as n from chat_requests where id = 'conv-1.step-1'`.execute(env.ctx.db);
    expect(stored.rows[0]!.n).toBe(1);
  });

  it('with ChatCallEvents a waiter wakes when its jobs complete, not at its next poll', async () => {
    const events = new ChatCallEvents({ connection: () => createRedis(env.config.redisUrl, 'worker'), prefix: env.config.queuePrefix });
    try {
      await events.listen([providerCallQueue('openai')]);
      const calls = [1, 2, 3].map((i) => ({ id: `events-${i}`, worker: gpt, request: ask(`events question ${i}`) }));
      // the wait starts before the jobs exist (its first look finds nothing), and its next poll is
      // 10 minutes away: only the jobs' completion events can end it before the suite's timeout
      const waiting = waitForChatCalls(env.ctx.db, calls.map((c) => c.id), { pollMs: 600_000, events });
      await submitChatCalls(client, calls);
      const results = await waiting;
      for (const c of calls) expect(results.get(c.id)).toMatchObject({ status: 'ok' });
    } finally {
      await events.close();
    }
  });

  it('an id submitted again returns the existing result and never calls again; a job re-run on an answered id makes no call', async () => {
    const { ids } = await submitChatCalls(client, [{ id: 'again-1', worker: gpt, request: ask('two plus two') }]);
    await waitForChatCalls(env.ctx.db, ids, { timeoutMs: 20_000 });
    expect(stub.requestCount).toBe(1);
    // a coordinator that took over submits the same step again
    const second = await submitChatCalls(client, [{ id: 'again-1', worker: gpt, request: ask('two plus two') }]);
    expect(second).toMatchObject({ answered: 1, enqueued: 0 });
    // the same id with another request is refused, naming the id
    await expect(submitChatCalls(client, [{ id: 'again-1', worker: gpt, request: ask('three plus three') }])).rejects.toThrow(/chat call again-1 was submitted before/);
    // a job of the same id run again (e.g. re-added after its first run completed): no call
    const counter = providerCallCounterKey(env.config.queuePrefix);
    const before = Number(await env.ctx.redis!.hget(counter, 'openai'));
    const q: Queue = env.ctx.queue(providerCallQueue('openai'));
    const job = await q.add(CHAT_CALL_JOB, { v: 1, id: 'again-1', workerId: gpt.id, provider: 'openai' }, { jobId: 'again-1.rerun' });
    const done = await waitFor('the re-run job', async () => ((await q.getJobState(job.id!)) === 'completed' ? Job.fromId(q, job.id!) : undefined), 20_000, 50);
    expect(done!.returnvalue).toEqual({ outcome: 'existing', status: 'ok' });
    expect(Number(await env.ctx.redis!.hget(counter, 'openai'))).toBe(before);
    expect(stub.requestCount).toBe(1);
    expect(await rowsOf('again-1')).toBe(1);
  });

  it('transient errors are retried into one ok row; a permanent error is one error row with the wire error', async () => {
    script.set('flaky', [{ type: 'error', status: 500 }, { type: 'error', status: 503 }]);
    script.set('bad', [{ type: 'error', status: 400, message: 'no such parameter' }]);
    const { ids } = await submitChatCalls(client, [
      { id: 'flaky-1', worker: gpt, request: ask('flaky') },
      { id: 'bad-1', worker: gpt, request: ask('bad') },
    ]);
    const results = await waitForChatCalls(env.ctx.db, ids, { timeoutMs: 20_000 });
    expect(results.get('flaky-1')).toMatchObject({ status: 'ok', attempts: 3 });
    expect(results.get('bad-1')).toMatchObject({ status: 'error', attempts: 1, error: { code: 'provider-bad-request', fields: { kind: 'bad-request', transient: false, status: 400 } } });
    expect(await rowsOf('flaky-1')).toBe(1);
    expect(await rowsOf('bad-1')).toBe(1);
  });

  it('results are read by id from a fresh connection (the waiting process restarted)', async () => {
    const { ids } = await submitChatCalls(client, Array.from({ length: 20 }, (_, i) => ({ id: `restart-${i}`, worker: gpt, request: ask(`q${i}`) })));
    await waitForChatCalls(env.ctx.db, ids, { timeoutMs: 20_000 });
    const db = await connectDb(env.config.databaseUrl);
    try {
      const again = await getChatCallResults(db, ids);
      expect(again.size).toBe(20);
      expect([...again.values()].every((r) => r.status === 'ok' && r.result.text === `answer to q${r.id.slice('restart-'.length)}`)).toBe(true);
      // and waiting on answered ids returns at once
      expect((await waitForChatCalls(db, ids, { timeoutMs: 1_000 })).size).toBe(20);
    } finally {
      await db.destroy();
    }
  });

  it('a waiter with the queues puts back a lost job and one that failed for good without a row', async () => {
    // a stored request whose job never made it (a flushed Redis), and one whose job failed for good
    await saveChatRequests(env.ctx.db, [
      { id: 'lost-1', workerId: gpt.id, request: ask('lost') as unknown as Record<string, unknown>, sample: 0, origin: 'chat-call' },
      { id: 'failed-1', workerId: gpt.id, request: ask('failed') as unknown as Record<string, unknown>, sample: 0, origin: 'chat-call' },
    ]);
    const q: Queue = env.ctx.queue(providerCallQueue('openai'));
    await q.add(CHAT_CALL_JOB, { v: 1, id: 'failed-1', workerId: gpt.id }, { jobId: 'failed-1' }); // no provider: invalid, fails at once
    await waitFor('the invalid job to fail', async () => (await q.getJobState('failed-1')) === 'failed', 20_000, 50);
    expect(await reconcileChatCalls(client, ['lost-1', 'failed-1'])).toEqual(expect.arrayContaining(['lost-1', 'failed-1']));
    const results = await waitForChatCalls(env.ctx.db, ['lost-1', 'failed-1'], { timeoutMs: 20_000, reconcile: { client, stallMs: 500 } });
    expect(results.get('lost-1')).toMatchObject({ status: 'ok' });
    expect(results.get('failed-1')).toMatchObject({ status: 'ok' });
    expect(await rowsOf('failed-1')).toBe(1);
  });

  it('rejects a bad id before storing anything', async () => {
    await expect(submitChatCalls(client, [{ id: 'has:colon', worker: gpt, request: ask('x') }])).rejects.toThrow(/has:colon/);
  });
});

describe('chat-call jobs under a per-worker limit', () => {
  it('jobs over the worker\'s own limit are delayed, not failed, and use no attempt', async () => {
    const own = await createEvalEnv({ overrides: { 'worker.concurrency': 4, 'worker.attempts': 1, 'workerRateLimits.gpt.requestsPerMinute': 300 } });
    let w: ProviderWorkerHandle | undefined;
    try {
      const spec: WorkerSpec = { name: 'gpt', provider: 'openai', model: 'gpt-test', baseUrl: stub.baseURL, apiKeyEnv: KEY_ENV, settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' } };
      const stored = (await savePool(own.ctx.db, { name: 'chat', workers: [spec] }, 'chat-pool-limited')).workers[0]!;
      w = await startProviderWorker({ config: own.config, db: own.ctx.db, log: createLogger({ name: 't', level: 'silent' }), registry: new Registry(), env: { [KEY_ENV]: SECRET } });
      const c: ChatCallClientOptions = { db: own.ctx.db, queue: (n) => own.ctx.queue(n), jobOptions: defaultChatCallJobOptions(own.config.worker), shards: own.config.providerQueueShards };
      // 5 a second, a burst of 1: with 4 jobs taken at once, most must wait their turn
      const { ids } = await submitChatCalls(c, Array.from({ length: 8 }, (_, i) => ({ id: `limited-${i}`, worker: stored, request: ask(`limited ${i}`) })));
      const results = await waitForChatCalls(own.ctx.db, ids, { timeoutMs: 30_000 });
      // attempts is 1 for every job (worker.attempts is 1: a delay that used an attempt would have failed it)
      expect([...results.values()].map((r) => [r.status, r.attempts])).toEqual(ids.map(() => ['ok', 1]));
      expect(await own.ctx.redis!.exists(`${limitKeyBase.worker(own.config.queuePrefix, 'openai', 'gpt')}:requests`)).toBe(1);
    } finally {
      await w?.close();
      await own.cleanup();
    }
  });
});
