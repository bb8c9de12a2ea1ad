// OpenTelemetry tracing (libs/telemetry tracing.ts) end to end: the real SDK exporting OTLP/HTTP
// JSON to a local receiver (test/support/otlp-receiver.ts, what a Collector's otlphttp receiver
// accepts), a gateway (buildGateway, stub OpenAI-compatible workers) and a provider worker on real
// Redis and Postgres.
//
//   1. a request with a `traceparent` header: the gateway's server span continues the caller's
//      trace, and the provider call is its child (GenAI attributes: model, tokens as answered),
//      a streamed one too;
//   2. a fugu-ultra workflow: every agent call is a child of the request's span;
//   3. chat-call jobs: the job carries the trace across the queue (BullMQ's telemetry through
//      bullmq-otel), and the provider worker's call span descends from the span that submitted it
//      (the worker runs in this process, but its job's context comes from the job in Redis only);
//   4. a BullMQ flow (a training iteration's fan-out: children and their fan-in parent) is one trace;
//   5. `fugu eval` traced (a process of its own): its jobs' spans continue the CLI's adds.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import OpenAI from 'openai';
import type { FastifyInstance } from 'fastify';
import type { WorkerPool } from '@fugu/core';
import { defaultChatCallJobOptions, submitChatCalls, waitForChatCalls } from '@fugu/calls';
import { createApiKey, publishUltraDeployment, savePool, type StoredWorker } from '@fugu/db';
import { poolContentHash } from '@fugu/evaluation';
import { startOpenAIStub, type OpenAIStub } from '@fugu/providers/testing';
import { createRedis } from '@fugu/queue';
import { bullTelemetry, createLogger, inSpan, Registry, startTracing, type Tracing } from '@fugu/telemetry';
import { FlowProducer, QueueEvents, Worker } from 'bullmq';
import { startProviderWorker, type ProviderWorkerHandle } from '../../apps/provider-worker/src/worker.ts';
import { runCli } from '../support/es-env.ts';
import { createEvalEnv, replayPool, syntheticItems, writeFixtures, type EvalEnv } from '../support/eval-env.ts';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.ts';
import { startUltraGateway, stubWorker } from '../support/ultra-gateway.ts';

const SERVER = 2;
const CLIENT = 3;

let receiver: OtlpReceiver;
let tracing: Tracing;
let env: EvalEnv;
const stubs: OpenAIStub[] = [];
let pool: WorkerPool;
let stored: { poolId: number; workers: StoredWorker[] };
let app: FastifyInstance;
let baseURL: string;
let apiKey: string;
let worker: ProviderWorkerHandle;
const quiet = createLogger({ name: 'tracing-test', level: 'silent' });

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  // first: the queues made after this carry the trace context
  tracing = (await startTracing('fugu-test', { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '50' }))!;
  env = await createEvalEnv();
  for (const name of ['alpha', 'beta']) {
    stubs.push(await startOpenAIStub({ defaultReply: () => ({ type: 'text', text: `${name} answers`, usage: { input: 11, output: 4 } }) }));
  }
  pool = { name: 'traced', workers: [stubWorker('alpha', stubs[0]!), stubWorker('beta', stubs[1]!)] };
  stored = await savePool(env.ctx.db, pool, poolContentHash(pool));
  ({ app, url: baseURL } = await startUltraGateway({ config: env.config, db: env.ctx.db, pool, stored, secret: randomBytes(32), log: quiet }));
  apiKey = (await createApiKey(env.ctx.db, { name: 'traced' })).key;
  worker = await startProviderWorker({ config: env.config, db: env.ctx.db, log: quiet, registry: new Registry(), env: {} });
});

afterAll(async () => {
  await worker?.close();
  await app?.close();
  await tracing?.shutdown();
  await Promise.all(stubs.map((s) => s.close()));
  await receiver?.close();
  await env?.cleanup();
});

/** The spans of a trace the receiver has, once `n` have come (exported every 50 ms). */
async function spansOf(traceId: string, n: number): Promise<ReceivedSpan[]> {
  await tracing.flush();
  await expect.poll(() => receiver.spans.filter((s) => s.traceId === traceId).length).toBeGreaterThanOrEqual(n);
  return receiver.spans.filter((s) => s.traceId === traceId);
}

/** A caller's trace context as a W3C `traceparent` header: a fresh trace id and parent span id. */
function callerTrace() {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, client: new OpenAI({ apiKey, baseURL, maxRetries: 0, defaultHeaders: { traceparent: `00-${traceId}-${spanId}-01` } }) };
}

describe('tracing (OTLP/HTTP to a local receiver)', () => {
  it("a request continues the caller's trace: the gateway's server span, and the provider call as its child", async () => {
    const { traceId, spanId, client } = callerTrace();
    const { data: r, response } = await client.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'hello' }] }).withResponse();
    const spans = await spansOf(traceId, 2);
    const server = spans.find((s) => s.kind === SERVER)!;
    expect(server).toMatchObject({
      name: 'POST /v1/chat/completions', parentSpanId: spanId, service: 'fugu-test',
      attributes: { 'http.request.method': 'POST', 'http.route': '/v1/chat/completions', 'http.response.status_code': 200, 'fugu.model': 'alpha', 'fugu.worker': 'alpha' },
    });
    expect(server.attributes['fugu.request_id']).toBe(response.headers.get('x-request-id'));
    const call = spans.find((s) => s.kind === CLIENT)!;
    expect(call).toMatchObject({
      name: 'chat alpha-model', parentSpanId: server.spanId,
      attributes: { 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai-compatible', 'gen_ai.request.model': 'alpha-model', 'gen_ai.usage.input_tokens': r.usage!.prompt_tokens, 'gen_ai.usage.output_tokens': r.usage!.completion_tokens, 'fugu.cached': false },
    });
    // no message text in any span
    expect(JSON.stringify(spans)).not.toContain('hello');
  });

  it("a streamed answer: the call's span ends with the stream, with the tokens of its usage chunk", async () => {
    const { traceId, client } = callerTrace();
    const s = await client.chat.completions.create({ model: 'beta', messages: [{ role: 'user', content: 'stream please' }], stream: true, stream_options: { include_usage: true } });
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of s) usage = chunk.usage ?? usage;
    const spans = await spansOf(traceId, 2);
    const server = spans.find((x) => x.kind === SERVER)!;
    expect(server.attributes).toMatchObject({ 'http.response.status_code': 200, 'fugu.worker': 'beta' });
    expect(spans.find((x) => x.kind === CLIENT)).toMatchObject({
      name: 'chat beta-model', parentSpanId: server.spanId,
      attributes: { 'fugu.stream': true, 'gen_ai.usage.input_tokens': usage!.prompt_tokens, 'gen_ai.usage.output_tokens': usage!.completion_tokens },
    });
  });

  it('a fugu-ultra workflow: each agent call is a child of the request span, which names the workflow', async () => {
    await publishUltraDeployment(env.ctx.db, { name: 'fugu-ultra', conductor: 'fixed:moa:2', pool: pool.name, options: {} });
    const { traceId, client } = callerTrace();
    const r = await client.chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: 'Should I take an umbrella?' }] });
    const workflow = (r as unknown as { fugu: { workflow: number } }).fugu.workflow;
    // moa:2 over two workers: two proposers and an aggregator
    const spans = await spansOf(traceId, 4);
    const server = spans.find((s) => s.kind === SERVER)!;
    expect(server.attributes).toMatchObject({ 'fugu.model': 'fugu-ultra', 'fugu.workflow_id': workflow, 'http.response.status_code': 200 });
    const calls = spans.filter((s) => s.kind === CLIENT);
    expect(calls.map((c) => c.parentSpanId)).toEqual([server.spanId, server.spanId, server.spanId]);
    expect(calls.map((c) => String(c.attributes['fugu.call.key'])).sort()).toEqual([`wf${workflow}.s0.t1`, `wf${workflow}.s1.t1`, `wf${workflow}.s2.t1`]);
  });

  it("chat-call jobs carry the trace across the queue: the provider worker's call descends from the span that submitted it", async () => {
    const client = { db: env.ctx.db, queue: (n: string) => env.ctx.queue(n), jobOptions: defaultChatCallJobOptions(env.config.worker), shards: env.config.providerQueueShards };
    const ids = ['traced.1', 'traced.2'];
    const root = await inSpan('submit', {}, async (span) => {
      await submitChatCalls(client, ids.map((id) => ({ id, worker: stored.workers[1]!, request: { messages: [{ role: 'user', content: `question ${id}` }] } })));
      return span!.spanContext();
    });
    const results = await waitForChatCalls(env.ctx.db, ids, { timeoutMs: 60_000 });
    expect([...results.values()].map((r) => r.status)).toEqual(['ok', 'ok']);
    // each call's span and its ancestors up to the root (the worker's job span ends after the call's,
    // so the spans are read once both calls' chains are whole)
    const chains = (): string[][] => {
      const spans = receiver.spans.filter((s) => s.traceId === root.traceId);
      const byId = new Map(spans.map((s) => [s.spanId, s]));
      return spans
        .filter((s) => s.kind === CLIENT && s.name === 'chat beta-model')
        .sort((a, b) => String(a.attributes['fugu.call.key']).localeCompare(String(b.attributes['fugu.call.key'])))
        .map((c) => {
          const names = [String(c.attributes['fugu.call.key'])];
          for (let p = byId.get(c.parentSpanId); p; p = byId.get(p.parentSpanId)) names.push(p.name);
          return names;
        });
    };
    await tracing.flush();
    await expect.poll(() => chains().map((c) => c.at(-1))).toEqual(['submit', 'submit']);
    // through BullMQ's spans (the worker's job, the producer's add) up to the submitter
    for (const [i, c] of chains().entries()) {
      expect(c).toHaveLength(4);
      expect(c[0]).toBe(ids[i]);
      expect(c[1]).toMatch(/^process \S*provider-call/);
      expect(c[2]).toMatch(/^addBulk \S*provider-call/);
    }
  });

  it("a flow (a training iteration's fan-out) is one trace: every child's job and the fan-in under the flow's add", async () => {
    const prefix = env.config.queuePrefix;
    const connection = createRedis(env.config.redisUrl, 'worker');
    const flow = new FlowProducer({ connection, prefix, ...bullTelemetry() });
    const children = new Worker('{trace}child', async (job) => job.data.n * 2, { connection, prefix, concurrency: 4, ...bullTelemetry() });
    const fanin = new Worker('{trace}fanin', async (job) => Object.values(await job.getChildrenValues()).reduce((a: number, b) => a + Number(b), 0), { connection, prefix, ...bullTelemetry() });
    const events = new QueueEvents('{trace}fanin', { connection: createRedis(env.config.redisUrl, 'worker'), prefix });
    try {
      await events.waitUntilReady();
      // (with options on every node, as the staged loop gives them: BullMQ 6.7 passes the context to a node that has opts only)
      const node = await flow.add({
        name: 'fanin', queueName: '{trace}fanin', opts: { removeOnComplete: { count: 10 } },
        children: [1, 2, 3].map((n) => ({ name: 'eval', queueName: '{trace}child', data: { n }, opts: { attempts: 1, ignoreDependencyOnFailure: true } })),
      });
      expect(await node.job.waitUntilFinished(events, 60_000)).toBe(12);
      await tracing.flush();
      const processed = () => receiver.spans.filter((s) => s.name.startsWith('process') && s.name.includes('{trace}'));
      await expect.poll(() => processed().length).toBe(4);
      // the three children and the fan-in: one trace, whose root is the flow's add
      const traceId = processed()[0]!.traceId;
      expect(new Set(processed().map((s) => s.traceId))).toEqual(new Set([traceId]));
      const trace = receiver.spans.filter((s) => s.traceId === traceId);
      const roots = trace.filter((s) => !trace.some((p) => p.spanId === s.parentSpanId));
      expect(roots.map((r) => r.name)).toEqual([expect.stringMatching(/^addFlow /)]);
    } finally {
      await Promise.all([children.close(), fanin.close(), flow.close(), events.close()]);
      connection.disconnect();
    }
  });

  it("fugu eval, traced: each job's span (in the worker) continues the add of the CLI process (service fugu-cli)", async () => {
    const files = await writeFixtures(`${env.dir}/traced`, syntheticItems(6, 3), replayPool());
    const r = await runCli(env.config, ['eval', '--dataset', files.dataset, '--pool', files.pool, '--run-id', 'traced', '--local-workers', '0', '--json'], { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '50' });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).run).toMatchObject({ id: 'traced', status: 'completed', doneCalls: 18 });
    // the CLI shut its tracing down before it exited: its adds are here
    const adds = receiver.spans.filter((s) => s.service === 'fugu-cli' && /^add/.test(s.name));
    expect(adds.length).toBeGreaterThan(0);
    // the 18 calls' jobs (this process's worker took them) are children of those adds
    await tracing.flush();
    const addIds = new Set(adds.map((s) => s.spanId));
    await expect.poll(() => receiver.spans.filter((s) => s.name.startsWith('process') && addIds.has(s.parentSpanId)).length).toBe(18);
  });
});
