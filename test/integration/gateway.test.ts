// The OpenAI-compatible gateway end to end: the real `openai` npm client against the gateway
// (buildGateway, listening on a free port), the real router in process (worker threads, an
// anchor checkpoint published as the deployment), real Postgres (API keys, spend) and Redis, and
// stub providers from @fugu/providers/testing as OpenAI-compatible workers.
//
// The anchor checkpoint sends each text to the worker whose anchor text is nearest; the anchors
// are the routing texts of the conversation below, so its turns go to different workers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fork, type ChildProcess } from 'node:child_process';
import OpenAI, { APIError } from 'openai';
import { tokenCost, type ChatMessage, type WorkerPool } from '@fugu/core';
import { loadConfig, serviceEnv, type FuguConfig } from '@fugu/config';
import { createApiKey, revokeApiKey, listApiKeys } from '@fugu/db';
import type { TestDatabase } from '@fugu/db/testing';
import { replayStoreFor, writeWorkerPool } from '@fugu/datasets';
import { startOpenAIStub, WEATHER_TOOL, type OpenAIStub } from '@fugu/providers/testing';
import { InProcessRouteClient, routingText } from '@fugu/serving';
import { createLogger } from '@fugu/telemetry';
import { providerCallQueue, type RedisClient } from '@fugu/queue';
import { buildGateway } from '../../apps/gateway/src/server.ts';
import { toChatMessages } from '../../apps/gateway/src/wire.ts';
import { startRouterWorkerProcess, type RouterWorkerProcess } from '../support/router-workers.ts';
import { forkGateway } from '../support/app-process.ts';
import { replyAs, startRoutedGateway, worker, type RoutedGateway } from '../support/routed-gateway.ts';

const gatewayMain = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../apps/gateway/src/main.ts');

const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { name: WEATHER_TOOL.name, description: WEATHER_TOOL.description!, parameters: WEATHER_TOOL.parameters } }];

// the conversation: turn 1 (weather question, tool call), turn 2 (after the tool result), turn 3 (a new question)
const TURN1: OpenAI.ChatCompletionMessageParam[] = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: "What's the weather in Paris right now?" },
];
const CALL_ID = 'call_paris_1';
const TURN2: OpenAI.ChatCompletionMessageParam[] = [
  ...TURN1,
  { role: 'assistant', content: null, tool_calls: [{ id: CALL_ID, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
  { role: 'tool', tool_call_id: CALL_ID, content: '18 degrees Celsius and sunny' },
];
const TURN3: OpenAI.ChatCompletionMessageParam[] = [
  ...TURN2,
  { role: 'assistant', content: 'It is 18 degrees Celsius and sunny in Paris.' },
  { role: 'user', content: 'Prove that the square root of two is irrational, step by step.' },
];
const VOLCANO = 'Tell me about the volcanoes of Iceland and their eruptions.';
const KNOWN_QUESTION = 'What is the capital of Australia?';

const routing = (m: OpenAI.ChatCompletionMessageParam[]): string => routingText(toChatMessages(m as never) as ChatMessage[]);

let routed: RoutedGateway | undefined;
let database: TestDatabase;
let home: string;
let config: FuguConfig;
let routeClient: InProcessRouteClient;
let baseURL: string;
let adminKey: string;
let redis: RedisClient;
let replay: ReturnType<typeof replayStoreFor>;
let fullKey: string;
const stubs: Record<string, OpenAIStub> = {};
let pool: WorkerPool;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;
const quiet = createLogger({ name: 'gateway-test', level: 'silent' });

const client = (apiKey = fullKey) => new OpenAI({ apiKey, baseURL, maxRetries: 0, timeout: 30_000 });

beforeAll(async () => {
  for (const name of ['alpha', 'beta', 'gamma']) stubs[name] = await startOpenAIStub({ defaultReply: replyAs(name) });
  stubs.flaky = await startOpenAIStub({ defaultReply: { type: 'error', status: 500, message: 'the flaky server broke' } });
  pool = {
    name: 'gateway-test',
    workers: [
      worker('alpha', stubs.alpha!, ['1', '2']),
      worker('beta', stubs.beta!, ['0.5', '1.5']),
      worker('gamma', stubs.gamma!),
      worker('flaky', stubs.flaky!),
      { name: 'recorded', provider: 'replay', model: 'recorded-model', settings: {}, prices: { inputPerMTok: '0', outputPerMTok: '0' } },
    ],
  };
  replay = replayStoreFor([{ id: 'au', task: 'qa', prompt: KNOWN_QUESTION, recorded: { recorded: { score: 1, answer: 'Canberra', tokensIn: 9, tokensOut: 3 } } }], 'recorded');
  adminKey = randomBytes(16).toString('hex');
  routed = await startRoutedGateway({
    name: 'gw',
    env: {
      // the fallback tests send the flaky worker request after request: no cooldown here (its own test below)
      FUGU_GATEWAY_COOLDOWN_FAILS: '0',
      FUGU_GATEWAY_BODY_LIMIT_BYTES: String(64 * 1024),
    },
    pool,
    checkpoint: { anchors: { alpha: routing(TURN3), beta: routing(TURN1), gamma: routing(TURN2), flaky: VOLCANO } },
    redis: true,
    gateway: () => ({ replayStore: (name) => (name === 'recorded' ? replay : undefined), adminKey }),
  });
  ({ database, home, config, routeClient, baseURL } = routed);
  redis = routed.redis!;
  fullKey = (await createApiKey(database.db, { name: 'full' })).key;
});

afterAll(async () => {
  await routed?.close();
  await Promise.all(Object.values(stubs).map((s) => s.close()));
});

describe('chat completions through the router', () => {
  it('answers a plain completion from the chosen worker, naming it', async () => {
    const { data, response } = await client().chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: "What's the weather in Paris right now?" }] }).withResponse();
    expect(data.model).toBe('beta');
    expect(response.headers.get('x-fugu-worker')).toBe('beta');
    expect(response.headers.get('x-fugu-checkpoint')).toMatch(/^anchor-/);
    expect(Number(response.headers.get('x-fugu-routing-ms'))).toBeGreaterThan(0);
    expect(data.object).toBe('chat.completion');
    expect(data.choices[0]!.message.content).toBe('answer from beta');
    expect(data.choices[0]!.finish_reason).toBe('stop');
    expect(data.usage!.total_tokens).toBe(data.usage!.prompt_tokens + data.usage!.completion_tokens);
    // the worker's own model id went to its provider, with the user's message
    const sent = stubs.beta!.requests.at(-1)!.body;
    expect(sent.model).toBe('beta-model');
    expect(sent.messages.at(-1)).toEqual({ role: 'user', content: "What's the weather in Paris right now?" });
  });

  it('streams chunks: role, content deltas, finish reason, usage, [DONE]', async () => {
    const { data: stream, response } = await client()
      .chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: "What's the weather in Paris right now?" }], stream: true, stream_options: { include_usage: true } })
      .withResponse();
    expect(response.headers.get('content-type')).toMatch(/text\/event-stream/);
    expect(response.headers.get('x-fugu-worker')).toBe('beta');
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.model === 'beta')).toBe(true);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('answer from beta');
    expect(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0]!.finish_reason).toBe('stop');
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage!.completion_tokens).toBeGreaterThan(0);
  });

  it('routes each turn of a tool-calling conversation to its own worker, tools passing through unchanged', async () => {
    const c = client();
    const t1 = await c.chat.completions.create({ model: 'fugu', messages: TURN1, tools }).withResponse();
    expect(t1.data.model).toBe('beta');
    expect(t1.data.choices[0]!.finish_reason).toBe('tool_calls');
    expect(t1.data.choices[0]!.message.tool_calls).toEqual([{ id: 'call_beta', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }]);
    expect(stubs.beta!.requests.at(-1)!.body.tools).toEqual(tools);

    const t2 = await c.chat.completions.create({ model: 'fugu', messages: TURN2, tools });
    expect(t2.model).toBe('gamma');
    expect(t2.choices[0]!.message.content).toBe('answer from gamma');
    const sent = stubs.gamma!.requests.at(-1)!.body;
    expect(sent.messages.slice(-2)).toEqual([
      { role: 'assistant', content: null, tool_calls: [{ id: CALL_ID, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: CALL_ID, content: '18 degrees Celsius and sunny' },
    ]);

    // turn 3 streamed: the tool call arrives as a tool_calls delta with its index
    const stream = await c.chat.completions.create({ model: 'fugu', messages: TURN3, tools, stream: true });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const ch of stream) chunks.push(ch);
    expect(chunks[0]!.model).toBe('alpha');
    const calls = chunks.flatMap((ch) => ch.choices[0]?.delta.tool_calls ?? []);
    expect(calls).toEqual([{ index: 0, id: 'call_alpha', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }]);
    expect(chunks.find((ch) => ch.choices[0]?.finish_reason)?.choices[0]!.finish_reason).toBe('tool_calls');
    expect(new Set([t1.data.model, t2.model, chunks[0]!.model]).size).toBe(3);
  });

  it("calls a worker directly by its name", async () => {
    const before = stubs.gamma!.requests.length;
    const { data, response } = await client().chat.completions.create({ model: 'gamma', messages: [{ role: 'user', content: "What's the weather in Paris right now?" }] }).withResponse();
    expect(data.model).toBe('gamma');
    expect(response.headers.get('x-fugu-worker')).toBe('gamma');
    expect(response.headers.get('x-fugu-checkpoint')).toBeNull();
    expect(stubs.gamma!.requests.length).toBe(before + 1);
  });

  it('falls back to the next-best worker when the chosen one fails (500)', async () => {
    const before = stubs.flaky!.requests.length;
    const { data, response } = await client().chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: VOLCANO }] }).withResponse();
    expect(stubs.flaky!.requests.length).toBe(before + 1);
    expect(response.headers.get('x-fugu-fallback-from')).toBe('flaky');
    expect(['alpha', 'beta', 'gamma']).toContain(data.model);
    expect(data.choices[0]!.message.content).toBe(`answer from ${data.model}`);
    // the next-best by the router's probabilities
    const r = (await (await fetch(`${baseURL}/route`, { method: 'POST', headers: { authorization: `Bearer ${fullKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ text: VOLCANO }) })).json() as Json);
    const ranked = (r.workers as Array<{ name: string; prob: number }>).filter((w) => w.name !== 'flaky').sort((a, b) => b.prob - a.prob);
    expect(data.model).toBe(ranked[0]!.name);
  });

  it('streams from the fallback worker when the chosen one fails before the first byte', async () => {
    const stream = await client().chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: VOLCANO }], stream: true });
    let text = '';
    let model = '';
    for await (const ch of stream) {
      text += ch.choices[0]?.delta.content ?? '';
      model = ch.model;
    }
    expect(model).not.toBe('flaky');
    expect(text).toBe(`answer from ${model}`);
  });

  it('returns the replay worker refusing an unknown prompt as a 400 with its message, and answers a known one', async () => {
    const ok = await client().chat.completions.create({ model: 'recorded', messages: [{ role: 'user', content: KNOWN_QUESTION }] });
    expect(ok.choices[0]!.message.content).toBe('Canberra');
    const e = await client().chat.completions.create({ model: 'recorded', messages: [{ role: 'user', content: 'Write me a sonnet about gateways.' }] }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    expect((e as APIError).message).toMatch(/replay worker "recorded" only answers questions of its dataset/);
    expect((e as APIError).code).toBe('provider_bad_request');
  });
});

describe('models and route', () => {
  it('lists fugu and the key\'s workers', async () => {
    const models = [];
    for await (const m of client().models.list()) models.push(m.id);
    expect(models).toEqual(['fugu', 'alpha', 'beta', 'gamma', 'flaky', 'recorded']);
  });

  it('returns the decision and probabilities without calling a worker', async () => {
    const before = Object.values(stubs).reduce((n, s) => n + s.requests.length, 0);
    const res = await fetch(`${baseURL}/route`, { method: 'POST', headers: { authorization: `Bearer ${fullKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ messages: TURN2 }) });
    expect(res.status).toBe(200);
    const r = (await res.json() as Json);
    expect(r.worker).toBe('gamma');
    expect(r.checkpoint).toMatch(/^anchor-/);
    expect(r.workers.map((w: { name: string }) => w.name)).toEqual(['alpha', 'beta', 'gamma', 'flaky']);
    const sum = r.workers.reduce((s: number, w: { prob: number }) => s + w.prob, 0);
    expect(sum).toBeCloseTo(1, 5);
    expect(Object.values(stubs).reduce((n, s) => n + s.requests.length, 0)).toBe(before);
    const bad = await fetch(`${baseURL}/route`, { method: 'POST', headers: { authorization: `Bearer ${fullKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ text: 'x', lambda: -1 }) });
    expect(bad.status).toBe(400);
    expect(((await bad.json() as Json)).error.param).toBe('lambda');
  });
});

describe('API keys', () => {
  it("keeps the router and direct calls within the key's allowed workers", async () => {
    const { key } = await createApiKey(database.db, { name: 'narrow', allowedWorkers: ['alpha', 'gamma'] });
    const c = client(key);
    const models = [];
    for await (const m of c.models.list()) models.push(m.id);
    expect(models).toEqual(['fugu', 'alpha', 'gamma']);
    // beta's own anchor text: the router chooses among alpha and gamma only
    const r = await c.chat.completions.create({ model: 'fugu', messages: TURN1 });
    expect(['alpha', 'gamma']).toContain(r.model);
    const route = (await (await fetch(`${baseURL}/route`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ messages: TURN1 }) })).json() as Json);
    const probs = Object.fromEntries(route.workers.map((w: { name: string; prob: number }) => [w.name, w.prob]));
    expect(probs.beta).toBe(0);
    expect(probs.flaky).toBe(0);
    const e = await c.chat.completions.create({ model: 'beta', messages: TURN1 }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.NotFoundError);
    expect((e as APIError).code).toBe('model_not_found');
  });

  it('adds each call\'s exact cost to the key and refuses a key at its limit with 429 insufficient_quota', async () => {
    // $0.00001 = 10 input tokens of alpha ($1 per 1M): the first call passes the limit
    const { key, record } = await createApiKey(database.db, { name: 'limited', spendLimit: 10_000_000n });
    const c = client(key);
    const r = await c.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'Prove that the square root of two is irrational.' }] });
    const cost = tokenCost(r.usage!.prompt_tokens, r.usage!.completion_tokens, { inputPerMTok: '1', outputPerMTok: '2' });
    // the gateway's own quota check counts the charge at once; the key's row gets it behind the answer
    await expect.poll(async () => (await listApiKeys(database.db)).find((k) => k.id === record.id)!.spent).toBe(cost);
    expect(cost).toBeGreaterThanOrEqual(10_000_000n);
    const e = await c.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'again' }] }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.RateLimitError);
    expect((e as APIError).code).toBe('insufficient_quota');
    expect((e as APIError).message).toMatch(/spend limit/);
  });

  it('refuses a missing, an invalid and a revoked key with 401 (a revocation within gateway.keyCacheMs)', async () => {
    const none = await fetch(`${baseURL}/models`);
    expect(none.status).toBe(401);
    expect(((await none.json() as Json)).error.code).toBe('missing_api_key');
    const e = await client('fugu-sk-not-a-real-key').chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: 'hi' }] }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((e as APIError).code).toBe('invalid_api_key');
    const { key } = await createApiKey(database.db, { name: 'soon-revoked' });
    expect((await client(key).models.list()).data.length).toBeGreaterThan(0);
    await revokeApiKey(database.db, 'soon-revoked');
    // the gateway reuses the key's record for gateway.keyCacheMs (1 s by default), then reads it again
    expect(config.gateway.keyCacheMs).toBe(1000);
    const refused = () => client(key).models.list().then(() => 'accepted', (x: unknown) => (x instanceof OpenAI.AuthenticationError && /revoked/.test(x.message) ? 'refused' : String(x)));
    await expect.poll(refused, { timeout: 10_000, interval: 100 }).toBe('refused');
  });
});

describe('bad requests in OpenAI error format', () => {
  const post = (body: string, headers: Record<string, string> = {}) =>
    fetch(`${baseURL}/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${fullKey}`, 'content-type': 'application/json', ...headers }, body });

  it('invalid JSON: 400', async () => {
    const res = await post('{"model": "fugu", "messages": [');
    expect(res.status).toBe(400);
    const { error } = (await res.json() as Json);
    expect(error.type).toBe('invalid_request_error');
    expect(error.code).toBe('invalid_json');
  });

  it('a bad field: 400 naming it', async () => {
    const res = await post(JSON.stringify({ model: 'fugu', messages: [{ role: 'user', content: 'hi' }], temperature: 'hot' }));
    expect(res.status).toBe(400);
    const { error } = (await res.json() as Json);
    expect(error.param).toBe('temperature');
    expect(error.message).toMatch(/^temperature: /);
    const res2 = await post(JSON.stringify({ model: 'fugu', messages: [{ role: 'robot', content: 'hi' }] }));
    expect(((await res2.json() as Json)).error.param).toBe('messages[0].role');
    const res3 = await post(JSON.stringify({ model: 'fugu', messages: [{ role: 'tool', tool_call_id: 'nope', content: 'x' }] }));
    expect(((await res3.json() as Json)).error.param).toBe('messages[0].tool_call_id');
  });

  it('unknown model: 404 model_not_found', async () => {
    const e = await client().chat.completions.create({ model: 'gpt-17', messages: [{ role: 'user', content: 'hi' }] }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.NotFoundError);
    expect((e as APIError).code).toBe('model_not_found');
    expect((e as APIError).param).toBe('model');
  });

  it('body too large: 413', async () => {
    const res = await post(JSON.stringify({ model: 'fugu', messages: [{ role: 'user', content: 'x'.repeat(100 * 1024) }] }));
    expect(res.status).toBe(413);
    expect(((await res.json() as Json)).error.code).toBe('request_too_large');
  });
});

describe('operations', () => {
  it('serves health, readiness and metrics', async () => {
    const origin = baseURL.replace(/\/v1$/, '');
    expect((await fetch(`${origin}/healthz`)).status).toBe(200);
    expect(await (await (await fetch(`${origin}/readyz`)).json() as Json)).toEqual({ ready: true });
    const text = await (await fetch(`${origin}/metrics`)).text();
    expect(text).toMatch(/fugu_gateway_requests_total\{route="\/v1\/chat\/completions",status="200",worker="beta"\} \d+/);
    expect(text).toMatch(/fugu_gateway_routing_ms_count \d+/);
    expect(text).toMatch(/fugu_gateway_fallbacks_total\{worker="flaky"\} \d+/);
  });

  it('puts the queue dashboard behind the admin key', async () => {
    const origin = baseURL.replace(/\/v1$/, '');
    const denied = await fetch(`${origin}/admin/queues/api/queues`);
    expect(denied.status).toBe(401);
    expect((await fetch(`${origin}/admin/queues/api/queues`, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    const basic = Buffer.from(`admin:${adminKey}`).toString('base64');
    const ok = await fetch(`${origin}/admin/queues/api/queues`, { headers: { authorization: `Basic ${basic}` } });
    expect(ok.status).toBe(200);
    const body = (await ok.json() as Json);
    expect(body.queues.map((q: { name: string }) => q.name)).toContain(providerCallQueue('openai'));
    const page = await fetch(`${origin}/admin/queues`, { headers: { authorization: `Bearer ${adminKey}` } });
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/<html/i);
  });
});

describe('provider failure and router unavailability policies', () => {
  /** Another gateway over the same pool, with configuration overrides and its own route client. */
  async function otherGateway(env: Record<string, string>, rc: InProcessRouteClient = routeClient, withRedis = false): Promise<{ url: string; close(): Promise<void> }> {
    const cfg = loadConfig({ ...serviceEnv(config), ...env });
    const gw = await buildGateway({ config: cfg, pool, routeClient: rc, db: database.db, env: {}, log: quiet, replayStore: () => replay, ...(withRedis && { redis }) });
    await gw.listen({ port: 0, host: '127.0.0.1' });
    return { url: `http://127.0.0.1:${(gw.server.address() as { port: number }).port}/v1`, close: () => gw.close() };
  }

  it('with fallback none, a failing worker is a 502 naming it', async () => {
    const gw = await otherGateway({ FUGU_GATEWAY_FALLBACK: 'none', FUGU_GATEWAY_AUTH: 'none' });
    try {
      const e = await new OpenAI({ apiKey: 'unused', baseURL: gw.url, maxRetries: 0 }).chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: VOLCANO }] }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(OpenAI.InternalServerError);
      expect((e as APIError).status).toBe(502);
      expect((e as APIError).message).toMatch(/flaky/);
      expect((e as APIError).message).toMatch(/the flaky server broke/);
    } finally {
      await gw.close();
    }
  });

  it('a worker that keeps failing is cooled down for routing on every gateway sharing the Redis: the next-best answers without trying it', async () => {
    const env = { FUGU_GATEWAY_AUTH: 'none', FUGU_GATEWAY_COOLDOWN_FAILS: '2', FUGU_GATEWAY_COOLDOWN_MS: '60000', FUGU_QUEUE_PREFIX: `fugucd${randomBytes(4).toString('hex')}` };
    const a = await otherGateway(env, routeClient, true);
    const b = await otherGateway(env, routeClient, true);
    try {
      const ask = (url: string) => new OpenAI({ apiKey: 'unused', baseURL: url, maxRetries: 0 }).chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: VOLCANO }] }).withResponse();
      const before = stubs.flaky!.requests.length;
      // two failures on gateway A: each request tried flaky first, then fell back
      for (let i = 0; i < 2; i++) expect((await ask(a.url)).response.headers.get('x-fugu-fallback-from')).toBe('flaky');
      expect(stubs.flaky!.requests.length).toBe(before + 2);
      // gateway B skips it (once the cooldown has reached it)
      await expect.poll(async () => (await ask(b.url)).response.headers.get('x-fugu-cooled-down')).toBe('flaky');
      const last = await ask(b.url);
      expect(last.response.headers.get('x-fugu-fallback-from')).toBeNull();
      expect(['alpha', 'beta', 'gamma']).toContain(last.data.model);
      expect(stubs.flaky!.requests.length).toBe(before + 2);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("learns the router's workers from its decisions when not told them at start", async () => {
    const gw = await otherGateway({});
    try {
      const { key } = await createApiKey(database.db, { name: 'narrow-2', allowedWorkers: ['gamma', 'recorded'] });
      const c = new OpenAI({ apiKey: key, baseURL: gw.url, maxRetries: 0 });
      expect((await c.chat.completions.create({ model: 'fugu', messages: TURN1 })).model).toBe('gamma');
      expect((await c.chat.completions.create({ model: 'fugu', messages: TURN3 })).model).toBe('gamma');
      expect((await c.chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: KNOWN_QUESTION }] })).model).toBe('gamma');
    } finally {
      await gw.close();
    }
  });

  it('a stream that breaks after its first byte ends with an error event, no fallback', async () => {
    const staller = await startOpenAIStub({ defaultReply: { type: 'stall-mid-stream', text: 'the beginning of an answer' } });
    const cfg = loadConfig({ ...serviceEnv(config), FUGU_GATEWAY_AUTH: 'none', FUGU_GATEWAY_CALL_TIMEOUT_MS: '500' });
    const gw = await buildGateway({ config: cfg, pool: { name: 'stall', workers: [worker('staller', staller), worker('gamma', stubs.gamma!)] }, routeClient, env: {}, log: quiet });
    await gw.listen({ port: 0, host: '127.0.0.1' });
    try {
      const before = stubs.gamma!.requests.length;
      const stream = await new OpenAI({ apiKey: 'unused', baseURL: `http://127.0.0.1:${(gw.server.address() as { port: number }).port}/v1`, maxRetries: 0 }).chat.completions.create({
        model: 'staller',
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
      });
      let text = '';
      const e = await (async () => {
        for await (const ch of stream) text += ch.choices[0]?.delta.content ?? '';
      })().catch((x: unknown) => x);
      expect(text.length).toBeGreaterThan(0);
      expect(e).toBeInstanceOf(APIError);
      expect((e as APIError).message).toMatch(/staller/);
      expect(stubs.gamma!.requests.length).toBe(before);
    } finally {
      await gw.close();
      await staller.close();
    }
  });

  it('without a router: 503, or the configured fallback worker', async () => {
    // a deployment nothing was published to: the router has no checkpoint
    const cfg = loadConfig({ ...serviceEnv(config), FUGU_ROUTER_DEPLOYMENT: 'unpublished' });
    const rc = await InProcessRouteClient.create({ config: cfg, db: database.db, subscribe: false });
    const a = await otherGateway({ FUGU_GATEWAY_AUTH: 'none' }, rc);
    const b = await otherGateway({ FUGU_GATEWAY_AUTH: 'none', FUGU_GATEWAY_FALLBACK_WORKER: 'gamma' }, rc);
    try {
      const e = await new OpenAI({ apiKey: 'unused', baseURL: a.url, maxRetries: 0 }).chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: 'hi' }] }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(APIError);
      expect((e as APIError).status).toBe(503);
      expect((e as APIError).code).toBe('router_unavailable');
      expect((await fetch(a.url.replace(/\/v1$/, '/readyz'))).status).toBe(503);
      const r = await new OpenAI({ apiKey: 'unused', baseURL: b.url, maxRetries: 0 }).chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: 'hi' }] });
      expect(r.model).toBe('gamma');
    } finally {
      await a.close();
      await b.close();
      await rc.close();
    }
  });
});

describe('pool mode: the gateway process routing through the route queue', () => {
  let gateway: ChildProcess | undefined;
  let routerWorker: RouterWorkerProcess | undefined;
  afterAll(async () => {
    gateway?.kill('SIGKILL');
    await routerWorker?.kill9().catch(() => {});
  });

  it('starts when the deployed checkpoint has a worker the pool lacks: fugu answers with the pool\'s default worker and says why (it exited before, issue 28)', async () => {
    const poolFile = path.join(home, 'short-pool.yaml');
    await writeWorkerPool(poolFile, { name: 'short', workers: pool.workers.filter((w) => w.name !== 'gamma' && w.provider !== 'replay') });
    const g = await forkGateway({ ...serviceEnv(config), FUGU_LOG_LEVEL: 'warn', FUGU_GATEWAY_POOL: poolFile, FUGU_GATEWAY_PORT: '0' });
    try {
      const reason = /^the published router \(deployment "fugu", checkpoint anchor-\w+\) was trained on other workers than pool "short"'s: router checkpoint anchor-\w+ chooses among \[alpha, beta, gamma, flaky\], but the gateway's pool "short" has no worker "gamma"/;
      expect((g.app.ready as { defaultRouting?: { worker: string; reason: string } }).defaultRouting).toEqual({ worker: 'alpha', reason: expect.stringMatching(reason) });
      const { data, response } = await new OpenAI({ apiKey: fullKey, baseURL: g.url, maxRetries: 0 }).chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: 'What is 2 + 2?' }] }).withResponse();
      expect([response.headers.get('x-fugu-routing'), response.headers.get('x-fugu-worker')]).toEqual(['default', 'alpha']);
      expect((data as unknown as { fugu: Record<string, unknown> }).fugu).toMatchObject({ worker: 'alpha', routing: 'default', routing_reason: expect.stringMatching(reason) });
    } finally {
      await g.app.term();
    }
  });

  it('routes the conversation through a router-worker process, and answers 503 once no router worker is alive', async () => {
    routerWorker = await startRouterWorkerProcess(config);
    const poolFile = path.join(home, 'gateway-pool.yaml');
    // the pool file: the same stub workers (replay workers need a dataset, so not this one)
    await writeWorkerPool(poolFile, { name: 'gateway-test', workers: pool.workers.filter((w) => w.provider !== 'replay') });
    gateway = fork(gatewayMain, [], {
      env: {
        PATH: process.env.PATH,
        ...serviceEnv(config),
        FUGU_LOG_LEVEL: 'warn',
        FUGU_GATEWAY_MODE: 'pool',
        FUGU_GATEWAY_POOL: poolFile,
        FUGU_GATEWAY_PORT: '0',
        FUGU_ROUTER_TIMEOUT_MS: '2000',
      },
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    let stderr = '';
    gateway.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const port = await new Promise<number>((resolve, reject) => {
      gateway!.on('message', (m: { type?: string; port?: number }) => m?.type === 'ready' && resolve(m.port!));
      gateway!.once('exit', (code) => reject(new Error(`gateway exited during start (code ${code}): ${stderr}`)));
    });
    const c = new OpenAI({ apiKey: fullKey, baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 });
    const t1 = await c.chat.completions.create({ model: 'fugu', messages: TURN1, tools });
    const t2 = await c.chat.completions.create({ model: 'fugu', messages: TURN2, tools });
    const t3 = await c.chat.completions.create({ model: 'fugu', messages: TURN3, tools });
    expect([t1.model, t2.model, t3.model]).toEqual(['beta', 'gamma', 'alpha']);

    await routerWorker.term();
    routerWorker = undefined;
    // once its heartbeat expires, requests fail fast with a clear 503
    let last: unknown;
    for (let i = 0; i < 100; i++) {
      last = await c.chat.completions.create({ model: 'fugu', messages: TURN1 }).catch((x: unknown) => x);
      if (last instanceof APIError && /no router worker is alive/.test(last.message)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(last).toBeInstanceOf(APIError);
    expect((last as APIError).status).toBe(503);
    expect((last as APIError).message).toMatch(/no router worker is alive/);

    gateway.kill('SIGTERM');
    const code = await new Promise<number | null>((r) => gateway!.once('exit', (c2) => r(c2)));
    expect(code).toBe(0);
    gateway = undefined;
  });
});
