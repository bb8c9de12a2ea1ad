// The Anthropic Messages API end to end (docs/anthropic-api.md): the real `@anthropic-ai/sdk`
// client against the gateway built in process (buildGateway on a free port), real Postgres (API
// keys, request rows, fugu-ultra's workflows), the shipped scripted workers (answering at once)
// with `fugu` routing by the pool's default, fugu-ultra on the default Conductor (fixed:moa:2),
// and a stub OpenAI-compatible worker whose requests show what the translation sends a worker.
//
// A JSON answer, a stream (its events in Anthropic's order, its final message the JSON answer's
// content), tool loops to their final answers on fugu and fugu-ultra, keys by x-api-key and by
// Bearer, refusals naming the field, count_tokens, the request rows, and 300 fuzzed bodies.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import Anthropic, { APIError } from '@anthropic-ai/sdk';
import type { FastifyInstance } from 'fastify';
import { rng, type WorkerPool } from '@fugu/core';
import { loadConfig, type FuguConfig } from '@fugu/config';
import { createApiKey, listApiKeys, listRequests, savePool } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { poolContentHash } from '@fugu/evaluation';
import { startOpenAIStub, type OpenAIStub, type RecordedRequest, type StubReply } from '@fugu/providers/testing';
import { createLogger } from '@fugu/telemetry';
import { buildGateway } from '../../apps/gateway/src/server.ts';
import { RecordWriter } from '../../apps/gateway/src/record-writer.ts';
import { ultraModel } from '../../apps/gateway/src/ultra.ts';
import { noRouter, stubWorker } from '../support/ultra-gateway.ts';
import { instantScriptedWorkers } from '../support/scripted-pool.ts';
import { testRedisUrl } from '../support/eval-env.ts';
import { Fuzzer, sendFuzzCases } from '../support/body-fuzzer.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const QUESTION = 'Should I take an umbrella in Paris today? Check the weather.';
const WEATHER: Anthropic.Tool = {
  name: 'get_weather', description: 'Current weather of a city', input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

let database: TestDatabase;
let home: string;
let config: FuguConfig;
let stub: OpenAIStub;
let pool: WorkerPool;
let app: FastifyInstance;
let records: RecordWriter;
let root: string;
let key: string;

/** The stub worker: a tool call when it is offered tools and a user message is last, else a text naming what it got. */
function stubReply(req: RecordedRequest): StubReply {
  const msgs: Json[] = req.body?.messages ?? [];
  const last = msgs.at(-1);
  if (req.body?.tools && last?.role === 'user') return { type: 'tool-calls', calls: [{ id: 'call_stubby_1', name: 'get_weather', arguments: '{"city":"Paris"}' }], usage: { input: 20, output: 5 } };
  if (last?.role === 'tool') return { type: 'text', text: `stubby read ${last.content}`, usage: { input: 30, output: 4 } };
  return { type: 'text', text: 'answer from stubby', usage: { input: 10, output: 3 } };
}

const client = (apiKey: string = key) => new Anthropic({ apiKey, baseURL: root, maxRetries: 0, timeout: 60_000 });
const post = (route: string, body: unknown, headers: Record<string, string> = { 'x-api-key': key }) =>
  fetch(`${root}${route}`, { method: 'POST', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });

/** The SSE events of a response as written: `event:` name and parsed `data:`. */
async function sseEvents(res: Response): Promise<Array<{ event: string; data: Json }>> {
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((b) => b.trim().length > 0)
    .map((b) => {
      const lines = b.split('\n');
      return { event: lines.find((l) => l.startsWith('event: '))!.slice(7), data: JSON.parse(lines.find((l) => l.startsWith('data: '))!.slice(6)) };
    });
}

/** The API error a request ends with (an answer fails the test). */
async function refused(p: Promise<unknown>): Promise<APIError> {
  const r = await p.then(() => undefined, (e: unknown) => e);
  if (!(r instanceof APIError)) throw new Error(`expected an API error, got ${r === undefined ? 'an answer' : String(r)}`);
  return r;
}

const picos = (usd: number): bigint => BigInt(Math.round(usd * 1e12));

beforeAll(async () => {
  database = await createTestDatabase();
  home = await mkdtemp(path.join(tmpdir(), 'fugu-anthropic-'));
  config = loadConfig({ FUGU_REDIS_URL: testRedisUrl(), FUGU_DATABASE_URL: database.url, FUGU_QUEUE_PREFIX: `fuguanth${randomBytes(4).toString('hex')}`, FUGU_HOME: home, FUGU_LOG_LEVEL: 'silent' });
  stub = await startOpenAIStub({ defaultReply: stubReply });
  // the scripted workers first (fugu-ultra's default Conductor, fixed:moa:2, takes the first two), the stub last
  pool = { name: 'anthropic-test', workers: [...(await instantScriptedWorkers()), stubWorker('stubby', stub)] };
  const stored = await savePool(database.db, pool, poolContentHash(pool));
  const log = createLogger({ name: 'anthropic-test', level: 'silent' });
  records = new RecordWriter(database.db, log);
  app = await buildGateway({
    config, pool, routeClient: noRouter, defaultRouting: { worker: 'sim-medium', reason: 'no router is published in this test' }, db: database.db, writer: records, env: {}, log,
    extraModels: [
      (ctx) => ultraModel(ctx, {
        db: database.db, poolId: stored.poolId, workers: stored.workers, invalidations: false,
        deps: { writer: { db: database.db, config, pipeline: undefined as never, log }, secret: randomBytes(32), log },
      }),
    ],
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  root = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  key = (await createApiKey(database.db, { name: 'anthropic' })).key;
});

afterAll(async () => {
  await app?.close();
  await stub?.close();
  await database?.drop();
  if (home) await rm(home, { recursive: true, force: true });
});

describe('POST /v1/messages through the Anthropic SDK', () => {
  it('a JSON answer: a message with a text block, end_turn, usage (cache fields 0), the worker as its model; request-id is x-request-id', async () => {
    const { data, response } = await client().messages.create({ model: 'fugu', max_tokens: 2000, messages: [{ role: 'user', content: 'Who won the most gold medals in the Olympics?' }] }).withResponse();
    expect(data).toMatchObject({ type: 'message', role: 'assistant', model: 'sim-medium', stop_reason: 'end_turn', stop_sequence: null });
    expect(data.id).toMatch(/^msg_/);
    expect(data.content).toEqual([{ type: 'text', text: expect.stringMatching(/^\[scripted sim-medium\] On .*gold, medals, olympics/), citations: null }]);
    expect(data.usage).toMatchObject({ input_tokens: expect.any(Number), output_tokens: expect.any(Number), cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });
    expect(data.usage.input_tokens).toBeGreaterThan(0);
    expect((data.usage as Json).cost).toBeGreaterThan(0);
    expect((data as Json).fugu).toMatchObject({ worker: 'sim-medium', routing: 'default', simulation: expect.stringMatching(/^scripted/) });
    expect(response.headers.get('request-id')).toBe(response.headers.get('x-request-id'));
    expect((data as Json)._request_id).toBe(response.headers.get('request-id'));
    expect(response.headers.get('x-fugu-worker')).toBe('sim-medium');
  });

  it('what a worker is sent: system blocks joined, a system turn, tool_use and tool_result as tool calls and a tool message, stop_sequences, metadata.user_id as user, temperature, top_p', async () => {
    const seen = stub.requests.length;
    const m = await client().messages.create({
      model: 'stubby', max_tokens: 64, temperature: 0.3, top_p: 0.8, stop_sequences: ['END'], metadata: { user_id: 'end-user-7' },
      system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }, { type: 'text', text: 'Use metric units.' }],
      tools: [WEATHER],
      messages: [
        { role: 'user', content: [{ type: 'text', text: QUESTION }] },
        { role: 'assistant', content: [{ type: 'text', text: 'Checking.' }, { type: 'tool_use', id: 'call_a', name: 'get_weather', input: { city: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_a', content: [{ type: 'text', text: 'rain, 12 C' }], cache_control: { type: 'ephemeral' } }] },
      ],
    } as Json);
    expect(m.content).toEqual([{ type: 'text', text: 'stubby read rain, 12 C', citations: null }]);
    expect(stub.requests.length).toBe(seen + 1);
    const body = stub.requests.at(-1)!.body;
    expect(body.messages).toEqual([
      { role: 'system', content: 'Be brief.\n\nUse metric units.' },
      { role: 'user', content: QUESTION },
      { role: 'assistant', content: 'Checking.', tool_calls: [{ id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_a', content: 'rain, 12 C' },
    ]);
    expect(body).toMatchObject({ max_tokens: 64, temperature: 0.3, top_p: 0.8, stop: ['END'], user: 'end-user-7', tools: [{ type: 'function', function: { name: 'get_weather', parameters: WEATHER.input_schema } }] });
  });

  it('a stream: Anthropic\'s events in order (ping included), and the SDK\'s final message has the JSON answer\'s content, stop reason and usage', async () => {
    const params = { model: 'fugu', max_tokens: 2000, messages: [{ role: 'user' as const, content: 'What is a heat pump and how does it heat a house?' }] };
    const json = await client().messages.create(params);
    const res = await post('/v1/messages', { ...params, stream: true });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('request-id')).toMatch(/^req_/);
    const events = await sseEvents(res);
    const names = events.map((e) => e.event);
    const deltas = names.filter((n) => n === 'content_block_delta').length;
    expect(deltas).toBeGreaterThan(1);
    expect(names).toEqual(['message_start', 'ping', 'content_block_start', ...Array(deltas).fill('content_block_delta'), 'content_block_stop', 'message_delta', 'message_stop']);
    for (const e of events) expect(e.data.type).toBe(e.event);
    expect(events[0]!.data.message).toMatchObject({ type: 'message', role: 'assistant', model: 'sim-medium', content: [], stop_reason: null, usage: { output_tokens: 0 } });
    expect(events.at(-2)!.data).toMatchObject({ delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { input_tokens: json.usage.input_tokens, output_tokens: json.usage.output_tokens } });

    const stream = client().messages.stream(params);
    let text = '';
    stream.on('text', (t) => (text += t));
    const final = await stream.finalMessage();
    expect(final.content).toEqual(json.content);
    expect(text).toBe((json.content[0] as Anthropic.TextBlock).text);
    expect({ stop: final.stop_reason, input: final.usage.input_tokens, output: final.usage.output_tokens }).toEqual({ stop: json.stop_reason, input: json.usage.input_tokens, output: json.usage.output_tokens });
  });

  it('a streamed tool call: a tool_use block with its input as input_json_delta; the final message equals the JSON answer\'s content', async () => {
    const params = { model: 'stubby', max_tokens: 100, tools: [WEATHER], messages: [{ role: 'user' as const, content: QUESTION }] };
    const json = await client().messages.create(params);
    expect(json.stop_reason).toBe('tool_use');
    expect(json.content).toEqual([{ type: 'tool_use', id: 'call_stubby_1', name: 'get_weather', input: { city: 'Paris' }, caller: { type: 'direct' } }]);
    const events = await sseEvents(await post('/v1/messages', { ...params, stream: true }));
    expect(events.map((e) => e.event)).toEqual(['message_start', 'ping', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']);
    expect(events[3]!.data.delta).toEqual({ type: 'input_json_delta', partial_json: '{"city":"Paris"}' });
    const final = await client().messages.stream(params).finalMessage();
    expect(final.content).toEqual(json.content);
    expect(final.stop_reason).toBe('tool_use');
  });

  it('client.beta.messages (?beta=true, anthropic-beta) is the same endpoint', async () => {
    const m = await client().beta.messages.create({ model: 'sim-small', max_tokens: 50, messages: [{ role: 'user', content: 'Name a prime number.' }], betas: ['interleaved-thinking-2025-05-14'] });
    expect(m.content[0]).toMatchObject({ type: 'text', text: expect.stringMatching(/^\[scripted sim-small\]/) });
  });
});

/** The SDK's tool loop: the model until it answers without a tool_use, each call answered `result(input)`. */
async function toolLoop(c: Anthropic, model: string, question: string, result: (input: Json) => string, opts: { stream?: boolean } = {}) {
  const messages: Anthropic.MessageParam[] = [{ role: 'user', content: question }];
  const answers: Array<{ message: Anthropic.Message; headers: Headers }> = [];
  for (let round = 0; round < 6; round++) {
    const params = { model, max_tokens: 2000, tools: [WEATHER], messages };
    let message: Anthropic.Message;
    let headers: Headers;
    if (opts.stream && round > 0) {
      const s = c.messages.stream(params);
      message = await s.finalMessage();
      headers = (await s.withResponse()).response.headers;
    } else {
      const r = await c.messages.create(params).withResponse();
      [message, headers] = [r.data, r.response.headers];
    }
    answers.push({ message, headers });
    messages.push({ role: 'assistant', content: message.content as Anthropic.ContentBlockParam[] });
    const uses = message.content.filter((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use');
    if (message.stop_reason !== 'tool_use') return { answers, messages };
    messages.push({ role: 'user', content: uses.map((u) => ({ type: 'tool_result' as const, tool_use_id: u.id, content: result(u.input) })) });
  }
  throw new Error('the tool loop did not end');
}

describe('tool loops to their final answers', () => {
  it('fugu: the scripted worker calls get_weather, reads its result and answers', async () => {
    const { answers } = await toolLoop(client(), 'fugu', QUESTION, () => 'rain, 12 C');
    expect(answers).toHaveLength(2);
    expect(answers[0]!.message.content).toEqual([{ type: 'tool_use', id: expect.stringMatching(/^call_/), name: 'get_weather', input: { city: 'Paris' }, caller: { type: 'direct' } }]);
    expect(answers[1]!.message.stop_reason).toBe('end_turn');
    expect((answers[1]!.message.content[0] as Anthropic.TextBlock).text).toMatch(/^From the tool results \(get_weather gave "rain, 12 C"\): \[scripted sim-medium\]/);
  });

  it('fugu-ultra: its agents\' call is a tool_use with fugu\'s signed id; the tool_result continues the same workflow to its final answer (streamed)', async () => {
    const { answers } = await toolLoop(client(), 'fugu-ultra', QUESTION, () => 'rain, 12 C', { stream: true });
    expect(answers).toHaveLength(2);
    const [first, done] = answers;
    expect(first!.message.stop_reason).toBe('tool_use');
    // both proposers ask the same thing: one call (merged), with fugu's signed id
    expect(first!.message.content).toEqual([{ type: 'tool_use', id: expect.stringMatching(/^call_fu_/), name: 'get_weather', input: { city: 'Paris' }, caller: { type: 'direct' } }]);
    expect(first!.message.model).toBe('fugu-ultra');
    expect((first!.message as Json).fugu).toMatchObject({ status: 'tools', topology: 'parallel', conductor: 'fixed:moa:2' });
    expect(done!.message.stop_reason).toBe('end_turn');
    expect((done!.message.content[0] as Anthropic.TextBlock).text).toMatch(/\[scripted sim-small\]/);
    expect(done!.headers.get('x-fugu-workflow')).toBe(first!.headers.get('x-fugu-workflow'));
  });

  it('fugu-ultra, Claude Code\'s shape: a system turn after the tool results (a mid-conversation system turn) still continues the workflow', async () => {
    const system = { role: 'system', content: 'The following deferred tools are now available: WebFetch' };
    const messages: Json[] = [{ role: 'user', content: [{ type: 'text', text: QUESTION }] }, { role: 'system', content: [{ type: 'text', text: '# Environment' }] }];
    const first = await post('/v1/messages', { model: 'fugu-ultra', max_tokens: 2000, tools: [WEATHER], messages });
    const m1 = (await first.json()) as Json;
    expect(m1.stop_reason).toBe('tool_use');
    messages.push({ role: 'assistant', content: m1.content });
    messages.push({ role: 'user', content: m1.content.filter((b: Json) => b.type === 'tool_use').map((b: Json) => ({ type: 'tool_result', tool_use_id: b.id, content: 'rain, 12 C' })) }, system);
    const done = await post('/v1/messages', { model: 'fugu-ultra', max_tokens: 2000, tools: [WEATHER], messages });
    const m2 = (await done.json()) as Json;
    expect(m2).toMatchObject({ stop_reason: 'end_turn', fugu: { status: 'done' } });
    expect(done.headers.get('x-fugu-workflow')).toBe(first.headers.get('x-fugu-workflow'));
  });

  it('fugu-ultra: a tool_result for an id it never issued is a 400 naming the block', async () => {
    const e = await refused(client().messages.create({
      model: 'fugu-ultra', max_tokens: 100, tools: [WEATHER],
      messages: [
        { role: 'user', content: QUESTION },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_not_fugus', name: 'get_weather', input: { city: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_not_fugus', content: 'rain' }] },
      ],
    }));
    expect(e.status).toBe(400);
    expect((e.error as Json).error).toEqual({ type: 'invalid_request_error', message: expect.stringMatching(/^messages\.2\.content\.0\.tool_use_id: tool_call_id "toolu_not_fugus" answers no call that fugu-ultra made/) });
  });
});

describe('keys, refusals, count_tokens', () => {
  it('a key by x-api-key or by Authorization: Bearer; a wrong or missing key is a 401 authentication_error with a request-id', async () => {
    const bearer = new Anthropic({ apiKey: null, authToken: key, baseURL: root, maxRetries: 0 });
    const m = await bearer.messages.create({ model: 'sim-small', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] });
    expect(m.type).toBe('message');
    const wrong = await refused(client('fugu-sk-wrong').messages.create({ model: 'fugu', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }));
    expect(wrong.status).toBe(401);
    expect(wrong).toBeInstanceOf(Anthropic.AuthenticationError);
    expect(wrong.error).toMatchObject({ type: 'error', error: { type: 'authentication_error', message: expect.stringMatching(/invalid API key/) } });
    expect(wrong.requestID).toMatch(/^req_/);
    const none = await post('/v1/messages', { model: 'fugu', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }, {});
    expect(none.status).toBe(401);
    expect(await none.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error', message: expect.stringMatching(/x-api-key/) } });
  });

  it('bad input is a 400 invalid_request_error naming the field; an unknown model a 404 not_found_error', async () => {
    const cases: Array<[Json, string, RegExp]> = [
      [{ model: 'fugu', messages: [{ role: 'user', content: 'hi' }] }, 'max_tokens', /Field required/],
      [{ model: 'fugu', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'web_search_20250305', name: 'web_search' }] }, 'tools.0.type', /server or built-in tool/],
      [{ model: 'fugu', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }], top_k: 5 }, 'top_k', /not supported by the gateway/],
      [{ model: 'fugu', max_tokens: 10, messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'get_weather', input: {} }] }, { role: 'user', content: [{ type: 'text', text: 'y' }, { type: 'tool_result', tool_use_id: 'nope', content: 'r' }] }] }, 'messages.2.content.1.tool_use_id', /"nope" answers no tool_use block/],
      // the scripted workers cannot reason: fugu has no worker left but the stub... restricted to the scripted ones, none
      [{ model: 'fugu', max_tokens: 5000, thinking: { type: 'enabled', budget_tokens: 2048 }, messages: [{ role: 'user', content: 'hi' }], fugu: { workers: ['sim-small', 'sim-medium'] } }, 'thinking', /no worker this request may use can honour it/],
      [{ model: 'sim-small', max_tokens: 50, output_config: { effort: 'low' }, messages: [{ role: 'user', content: 'hi' }] }, 'output_config.effort', /the worker "sim-small" \(scripted\) cannot honour it/],
      [{ model: 'sim-small', max_tokens: 50, temperature: 0.5, messages: [{ role: 'user', content: 'hi' }] }, 'temperature', /cannot honour it/],
    ];
    for (const [body, field, message] of cases) {
      const res = await post('/v1/messages', body);
      const got = (await res.json()) as Json;
      expect({ status: res.status, type: got.type, error: got.error?.type }, field).toEqual({ status: 400, type: 'error', error: 'invalid_request_error' });
      expect(got.error.message, field).toMatch(new RegExp(`^${field.replaceAll('.', '\\.')}: `));
      expect(got.error.message, field).toMatch(message);
      expect(got.request_id).toBe(res.headers.get('request-id'));
    }
    const e = await refused(client().messages.create({ model: 'claude-sonnet-4-5', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }));
    expect(e).toBeInstanceOf(Anthropic.NotFoundError);
    expect((e.error as Json).error).toMatchObject({ type: 'not_found_error', message: expect.stringMatching(/the model "claude-sonnet-4-5" does not exist .*fugu, sim-small/) });
    const json = await post('/v1/messages', '{"model": "fugu", ');
    expect([json.status, ((await json.json()) as Json).error.type]).toEqual([400, 'invalid_request_error']);
    const nowhere = await post('/v1/messages/nowhere', {});
    expect([nowhere.status, ((await nowhere.json()) as Json).error.type]).toEqual([404, 'not_found_error']);
  });

  it('thinking routes around the workers that cannot reason: fugu goes to the one that can, which is asked for that effort', async () => {
    const seen = stub.requests.length;
    const m = await client().messages.create({ model: 'fugu', max_tokens: 20_000, thinking: { type: 'enabled', budget_tokens: 10_000 }, messages: [{ role: 'user', content: 'Think about it: is 91 prime?' }] });
    expect(m.model).toBe('stubby');
    expect(stub.requests.slice(seen).map((r) => r.body.reasoning_effort)).toEqual(['medium']);
    // adaptive thinking and the default effort ask for nothing: the default worker answers
    const adaptive = await client().messages.create({ model: 'fugu', max_tokens: 200, thinking: { type: 'adaptive' }, output_config: { effort: 'high' }, messages: [{ role: 'user', content: 'Is 91 prime?' }] });
    expect(adaptive.model).toBe('sim-medium');
  });

  it('count_tokens: the gateway\'s estimate of the input, no max_tokens needed, nothing called', async () => {
    const seen = stub.requests.length;
    const r = await client().messages.countTokens({ model: 'stubby', system: 'Be brief.', messages: [{ role: 'user', content: 'x'.repeat(400) }], tools: [WEATHER] });
    expect(r).toEqual({ input_tokens: 3 + 100 + Math.ceil(JSON.stringify([{ name: 'get_weather', description: WEATHER.description, parameters: WEATHER.input_schema }]).length / 4) });
    expect(stub.requests.length).toBe(seen);
    const bad = await refused(client().messages.countTokens({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }));
    expect(bad.status).toBe(404);
  });
});

describe('request rows', () => {
  it('one row per call, its cost the answer\'s usage.cost, charged once; metadata.user_id is the row\'s end user, service_tier among its hints', async () => {
    const own = await createApiKey(database.db, { name: 'rows' });
    const c = client(own.key);
    const costs: bigint[] = [];
    const json = await c.messages.create({ model: 'fugu', max_tokens: 2000, metadata: { user_id: 'user-json' }, service_tier: 'auto', messages: [{ role: 'user', content: 'What is the capital of Peru?' }] });
    costs.push(picos((json.usage as Json).cost));
    const streamed = await c.messages.stream({ model: 'sim-large', max_tokens: 2000, metadata: { user_id: 'user-stream' }, messages: [{ role: 'user', content: 'What is the capital of Chile?' }] }).finalMessage();
    expect(streamed.stop_reason).toBe('end_turn');
    const { answers } = await toolLoop(c, 'fugu-ultra', QUESTION, () => 'sunny');
    for (const a of answers) costs.push(picos((a.message.usage as Json).cost));
    await refused(c.messages.create({ model: 'fugu', max_tokens: 10, messages: [{ role: 'user', content: 'x' }], top_k: 3 } as Json));
    await records.flush();
    const rows = (await listRequests(database.db, { key: own.record.id })).reverse();
    expect(rows.map((r) => [r.route, r.model, r.stream, r.status])).toEqual([
      ['/v1/messages', 'fugu', false, 200],
      ['/v1/messages', 'sim-large', true, 200],
      ['/v1/messages', 'fugu-ultra', false, 200],
      ['/v1/messages', 'fugu-ultra', false, 200],
      ['/v1/messages', null, false, 400],
    ]);
    expect(rows.map((r) => r.endUser)).toEqual(['user-json', 'user-stream', null, null, null]);
    expect(rows.map((r) => r.hints)).toEqual([{ service_tier: 'auto' }, null, null, null, null]);
    expect(rows[0]!.cost).toBe(costs[0]);
    expect([rows[2]!.cost, rows[3]!.cost]).toEqual([costs[1], costs[2]]);
    expect(rows[2]!.workflowId).toBe(rows[3]!.workflowId);
    expect(rows[1]!.cost).toBeGreaterThan(0n);
    expect(rows[4]!.cost).toBe(0n);
    const spent = (await listApiKeys(database.db)).find((k) => k.id === own.record.id)!.spent;
    expect(spent).toBe(rows.reduce((a, r) => a + r.cost, 0n));
  });
});

// ---- fuzzing ----------------------------------------------------------------------------------

describe('fuzzing /v1/messages', () => {
  const N = 300;
  const ERROR_TYPES = new Set(['invalid_request_error', 'authentication_error', 'permission_error', 'not_found_error', 'request_too_large', 'rate_limit_error', 'api_error', 'overloaded_error', 'timeout_error', 'billing_error']);
  let known: Fuzzer['known'];
  let waiting: Json[];

  beforeAll(async () => {
    const first = await client().messages.create({ model: 'fugu-ultra', max_tokens: 200, tools: [WEATHER], messages: [{ role: 'user', content: QUESTION }] });
    const uses = first.content.filter((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use');
    waiting = [{ role: 'user', content: QUESTION }, { role: 'assistant', content: first.content }, { role: 'user', content: uses.map((u) => ({ type: 'tool_result', tool_use_id: u.id, content: 'cloudy' })) }];
    const workflows = (await database.db.selectFrom('workflows').select('id').execute()).map((w) => Number(w.id));
    const conversations = (await database.db.selectFrom('ultra_conversations').select('id').execute()).map((c) => c.id);
    known = { workflows, conversations, callIds: uses.map((u) => u.id), responses: [] };
  });

  const base = (f: Fuzzer): Json =>
    structuredClone(
      f.pick<Json>([
        { model: 'fugu', max_tokens: 200, messages: [{ role: 'user', content: QUESTION }] },
        { model: 'fugu-ultra', max_tokens: 200, system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }], messages: [{ role: 'user', content: [{ type: 'text', text: QUESTION }] }], tools: [WEATHER], tool_choice: { type: 'auto' }, metadata: { user_id: 'u1' } },
        { model: 'fugu', max_tokens: 200, stream: true, messages: [{ role: 'user', content: QUESTION }], thinking: { type: 'adaptive' }, output_config: { effort: 'high' } },
        { model: 'fugu-ultra', max_tokens: 200, messages: waiting, tools: [WEATHER] },
        {
          model: 'fugu', max_tokens: 32000, stream: true, system: [{ type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1' }, { type: 'text', text: 'You are an agent.', cache_control: { type: 'ephemeral' } }],
          messages: [{ role: 'user', content: [{ type: 'text', text: QUESTION }] }, { role: 'system', content: [{ type: 'text', text: '# Environment' }] }],
          tools: [WEATHER, { name: 'Placeholder', input_schema: { type: 'object', properties: {} }, defer_loading: true }], metadata: { user_id: '{"device_id":"d"}' },
          thinking: { type: 'adaptive', display: 'omitted' }, context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] }, output_config: { effort: 'high' },
        },
      ]),
    );

  /** Messages-specific damage: results for random ids, forged calls, refused fields and blocks, edge values. */
  const damage = (f: Fuzzer, b: Json): string => {
    const msgs = Array.isArray(b.messages) ? b.messages : (b.messages = []);
    switch (f.r.int(7)) {
      case 0: {
        const id = f.callId();
        if (f.chance(0.5)) msgs.push({ role: 'assistant', content: [{ type: 'tool_use', id, name: 'get_weather', input: { city: 'Paris' } }] });
        msgs.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: f.pick(['sunny', [{ type: 'text', text: 'x' }], [{ type: 'image', source: { type: 'url', url: 'x' } }], [], 5]), ...(f.chance(0.3) && { is_error: true }) }] });
        return `a result for ${id.slice(0, 40)}`;
      }
      case 1: {
        const [k, v] = f.pick<[string, unknown]>([
          ['top_k', 5], ['container', 'c'], ['mcp_servers', []], ['max_tokens', f.pick([0, -1, 1.5, 2 ** 40, '100'])], ['temperature', f.pick([-1, 1.5, 0])], ['top_p', 2],
          ['thinking', f.pick([{ type: 'enabled', budget_tokens: f.pick([500, 2048, 100_000]) }, { type: 'adaptive' }, { type: 'disabled' }, { type: 'sometimes' }, { type: 'enabled' }])],
          ['output_config', f.pick([{ effort: 'max' }, { effort: 'extreme' }, { format: { type: 'json_schema', schema: { type: 'object' } } }, { format: { type: 'xml' } }])],
          ['tool_choice', f.pick([{ type: 'tool', name: 'nope' }, { type: 'any' }, { type: 'none' }, { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true }, 'auto'])],
          ['stop_sequences', f.pick([[], [''], ['END'], 'END'])], ['metadata', f.pick([{ user_id: 5 }, { user_id: 'x'.repeat(600) }, { session: 'x' }])],
          ['context_management', { edits: [{ type: f.pick(['clear_tool_uses_20250919', 'clear_thinking_20251015']) }] }], ['stream', 'yes'], ['model', f.pick(['', 'claude-opus-4-1', 'FUGU', 'sim-small'])],
          ['service_tier', f.pick(['auto', 'priority'])], ['system', f.pick([[{ type: 'image' }], 5, ''])],
        ]);
        b[k] = v;
        return `${k} ${JSON.stringify(v)?.slice(0, 60)}`;
      }
      case 2:
        b.fugu = f.badFugu();
        return `fugu ${JSON.stringify(b.fugu)?.slice(0, 60)}`;
      case 3:
        b.tools = f.pick([[{ type: 'web_search_20250305', name: 'web_search' }], [{ type: 'bash_20250124', name: 'bash' }], [{ name: 'f' }], [{ name: 'f', input_schema: { type: 'string' } }], 'get_weather', [f.junk()], [{ name: '', input_schema: { type: 'object' } }]]);
        return 'bad tools';
      case 4:
        msgs.push({ role: f.pick(['robot', 'tool', '', 'USER', 'assistant', 'system']), content: f.junk() });
        return 'a message of a bad role or content';
      case 5:
        msgs.push({ role: 'user', content: f.pick([[], [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBOR' } }], [{ type: 'image', source: { type: 'file', file_id: 'x' } }], [{ type: 'document', source: {} }], [{ type: 'text' }], [{ type: 'thinking', thinking: 'x' }], '   ', null]) });
        return 'a user message with odd content';
      default:
        msgs.push({ role: 'assistant', content: f.pick([[{ type: 'tool_use', id: f.callId(), name: 'get_weather', input: f.pick([{}, 'x', null]) }], [{ type: 'thinking', thinking: 'hmm', signature: 's' }], [{ type: 'server_tool_use', id: 'x', name: 'web_search', input: {} }], 'The answer is']) });
        if (f.chance(0.6)) msgs.push({ role: 'user', content: 'and now?' });
        return 'an assistant turn of odd content';
    }
  };

  /** What is wrong with an answer (undefined: nothing): a 5xx, a 4xx without an Anthropic error body, a 200 that is no message or whose stream failed. */
  function problem(s: { status: number; body: string; contentType: string }): string | undefined {
    if (s.status >= 500) return `status ${s.status}: ${s.body.slice(0, 300)}`;
    if (s.status >= 400) {
      let e: Json;
      try {
        e = JSON.parse(s.body);
      } catch {
        return `status ${s.status} without a JSON body: ${s.body.slice(0, 200)}`;
      }
      const ok = e?.type === 'error' && ERROR_TYPES.has(e.error?.type) && typeof e.error?.message === 'string' && e.error.message.length > 0 && Object.keys(e.error).length === 2;
      return ok ? undefined : `status ${s.status} without an Anthropic error body: ${s.body.slice(0, 200)}`;
    }
    if (s.status !== 200) return `status ${s.status}`;
    if (s.contentType.startsWith('text/event-stream')) return /^event: error$/m.test(s.body) || !/^event: message_stop$/m.test(s.body) ? `a stream that failed: ${s.body.slice(-300)}` : undefined;
    return JSON.parse(s.body).type === 'message' ? undefined : `a 200 that is no message: ${s.body.slice(0, 200)}`;
  }

  it(`${N} seeded bad bodies, raw with fetch: no status >= 500, every 4xx an Anthropic error body`, async () => {
    // FUGU_FUZZ_SEED explores other bodies; the test's own are seed 1's
    const f = new Fuzzer(rng('anthropic-messages', process.env.FUGU_FUZZ_SEED ?? '1'), known);
    const list = Array.from({ length: N }, () => {
      const b = base(f);
      const roll = f.r.next();
      if (roll < 0.08) return { label: 'not JSON', body: f.invalidJson(JSON.stringify(b)), contentType: 'application/json' };
      if (roll < 0.1) return { label: 'another content type', body: JSON.stringify(b), contentType: f.pick(['text/plain', 'application/x-www-form-urlencoded']) };
      const what: string[] = [];
      if (roll < 0.55) what.push(damage(f, b));
      for (let i = roll < 0.55 ? f.r.int(2) : 1 + f.r.int(3); i > 0; i--) what.push(f.mutate(b));
      return { label: what.join('; '), body: f.serialise(b), contentType: 'application/json' };
    });
    const { histogram, errors: types, problems } = await sendFuzzCases(list, {
      concurrency: 6, errorField: 'type', problem,
      send: async (c) => {
        const res = await fetch(`${root}/v1/messages`, { method: 'POST', headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': c.contentType }, body: c.body });
        return { status: res.status, body: await res.text(), contentType: res.headers.get('content-type') ?? '' };
      },
    });
    console.log(`fuzz /v1/messages: ${N} bodies; statuses ${JSON.stringify(histogram)}; error types ${JSON.stringify(types)}`);
    expect(problems).toEqual([]);
    expect(Object.values(histogram).reduce((a, n) => a + n, 0)).toBe(N);
    // the bodies reach past the first checks: some answer, and most are refused
    expect(histogram[200] ?? 0).toBeGreaterThan(N / 50);
    expect(histogram[400] ?? 0).toBeGreaterThan(N / 2);
  });
});
