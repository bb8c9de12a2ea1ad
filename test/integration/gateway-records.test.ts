// The gateway's records and OpenAI compatibility, with the real `openai` client (figure 6 of
// issue 11): a `requests` row per request (worker, tokens, exact cost), the x-request-id echoed,
// usage.cost, standard parameters reaching an OpenAI-compatible stub, a parameter no worker can
// honour as a 400 naming it, the cost preference (fugu.lambda) and the worker subset
// (fugu.workers); and (figure 3) a gateway call and a call of the evaluation side's pipeline
// to the same stub provider sharing one rate limit, both leaving chat_calls rows.
//
// The anchor checkpoint: `premium` and `cheap` have anchors close to each other (two proofs), a
// soft scale, and premium costs 100x cheap; the prompt below is nearest to premium's anchor with
// cheap close behind, so lambda = 0 chooses premium and a cost preference chooses cheap.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import OpenAI, { APIError } from 'openai';
import { formatUsd, tokenCost, type WorkerPool, type WorkerSpec } from '@fugu/core';
import { loadConfig, serviceEnv, type FuguConfig } from '@fugu/config';
import { createApiKey, getChatCalls, getRequest, listRequests, type RequestRow } from '@fugu/db';
import type { TestDatabase } from '@fugu/db/testing';
import { startAnthropicStub, startOpenAIStub, type AnthropicStub, type OpenAIStub } from '@fugu/providers/testing';
import { createCallPipeline, LimitExceededError } from '@fugu/calls';
import { InProcessRouteClient } from '@fugu/serving';
import { createLogger } from '@fugu/telemetry';
import type { RedisClient } from '@fugu/queue';
import { buildGateway } from '../../apps/gateway/src/server.ts';
import { runCli } from '../support/es-env.ts';
import { startRoutedGateway, type RoutedGateway } from '../support/routed-gateway.ts';

const PREMIUM_ANCHOR = 'Prove that the square root of two is irrational, step by step.';
const CHEAP_ANCHOR = 'Prove that there are infinitely many prime numbers.';
const CLAUDE_ANCHOR = 'Write a short poem about the sea at night.';
const NEAR_BOTH = 'Prove that the square root of three is irrational.';

const PRICES: Record<string, [string, string]> = { premium: ['10', '30'], cheap: ['0.1', '0.3'], claude: ['3', '15'] };
const ANTHROPIC_ENV = 'FUGU_TEST_ANTHROPIC_KEY';
const env = { [ANTHROPIC_ENV]: 'sk-ant-test-0123456789' };

let routed: RoutedGateway | undefined;
let database: TestDatabase;
let config: FuguConfig;
let routeClient: InProcessRouteClient;
let baseURL: string;
let redis: RedisClient;
let key: string;
let keyId: string;
let pool: WorkerPool;
const stubs: { premium?: OpenAIStub; cheap?: OpenAIStub; claude?: AnthropicStub } = {};
const quiet = createLogger({ name: 'gateway-records-test', level: 'silent' });
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const spec = (name: string, provider: WorkerSpec['provider'], baseUrl: string): WorkerSpec => ({
  name,
  provider,
  model: `${name}-model`,
  baseUrl,
  ...(provider === 'anthropic' && { apiKeyEnv: ANTHROPIC_ENV }),
  settings: {},
  prices: { inputPerMTok: PRICES[name]![0], outputPerMTok: PRICES[name]![1] },
});

const client = (apiKey = key) => new OpenAI({ apiKey, baseURL, maxRetries: 0, timeout: 30_000 });

/** The request's row: written after the response went out, so wait for it. */
async function rowOf(requestId: string): Promise<RequestRow> {
  for (let i = 0; i < 200; i++) {
    const r = await getRequest(database.db, requestId);
    if (r) return r;
    await new Promise((res) => setTimeout(res, 25));
  }
  throw new Error(`no requests row for ${requestId}`);
}

/** chat_calls rows of these keys: a gateway call's row is written behind its answer, so wait for all. */
async function callRows(keys: string[]): Promise<Awaited<ReturnType<typeof getChatCalls>>> {
  for (let i = 0; i < 200; i++) {
    const rows = await getChatCalls(database.db, keys);
    if (rows.length === keys.length) return rows;
    await new Promise((res) => setTimeout(res, 25));
  }
  throw new Error(`chat_calls rows missing among ${keys.join(', ')}`);
}

const rid = (tag: string) => `${tag}-${randomBytes(4).toString('hex')}`;

beforeAll(async () => {
  stubs.premium = await startOpenAIStub({ defaultReply: { type: 'text', text: '{"answer": "premium"}', usage: { input: 40, output: 10 } } });
  stubs.cheap = await startOpenAIStub({ defaultReply: { type: 'text', text: '{"answer": "cheap"}', usage: { input: 40, output: 10 } } });
  stubs.claude = await startAnthropicStub({ apiKey: env[ANTHROPIC_ENV], defaultReply: { type: 'text', text: 'a poem', usage: { input: 20, output: 5 } } });
  pool = {
    name: 'records-test',
    workers: [spec('premium', 'openai-compatible', stubs.premium.baseURL), spec('cheap', 'openai-compatible', stubs.cheap.baseURL), spec('claude', 'anthropic', stubs.claude.baseURL)],
  };
  routed = await startRoutedGateway({
    name: 'gwrec',
    pool,
    checkpoint: {
      scale: 10,
      anchors: { premium: PREMIUM_ANCHOR, cheap: CHEAP_ANCHOR, claude: CLAUDE_ANCHOR },
      prices: Object.fromEntries(Object.entries(PRICES).map(([w, [i, o]]) => [w, { input: i, output: o }])),
    },
    redis: true,
    gateway: () => ({ env }),
  });
  ({ database, config, routeClient, baseURL } = routed);
  redis = routed.redis!;
  const k = await createApiKey(database.db, { name: 'records' });
  key = k.key;
  keyId = k.record.id;
}, 120_000);

afterAll(async () => {
  await routed?.close();
  await Promise.all([stubs.premium?.close(), stubs.cheap?.close(), stubs.claude?.close()]);
});

describe('records: request ids, rows, usage.cost', () => {
  it('echoes the client x-request-id and writes one row with worker, tokens, exact cost and the latency split', async () => {
    const id = rid('fig6');
    const { data, response } = await client()
      .chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: PREMIUM_ANCHOR }] }, { headers: { 'x-request-id': id } })
      .withResponse();
    expect(response.headers.get('x-request-id')).toBe(id);
    expect(data.model).toBe('premium');
    const cost = tokenCost(40, 10, { inputPerMTok: '10', outputPerMTok: '30' });
    expect((data.usage as Json).cost).toBe(Number(formatUsd(cost)));
    const row = await rowOf(id);
    expect(row).toMatchObject({ apiKeyId: keyId, model: 'fugu', worker: 'premium', tokensIn: 40, tokensOut: 10, cost, status: 200, errorCode: null, fallbacks: [], stream: false });
    expect(row.topProbs![0]!.worker).toBe('premium');
    expect(row.topProbs!.length).toBe(3);
    expect(row.routingMs).toBeGreaterThan(0);
    expect(row.providerMs).toBeGreaterThan(0);
    expect(row.totalMs).toBeGreaterThanOrEqual(row.providerMs!);
    // the provider call went through the call pipeline: one chat_calls row, keyed by the request row
    const [call] = await callRows([`${row.id}.1`]);
    expect(call).toMatchObject({ origin: 'gateway', worker: 'premium', status: 'ok', tokensIn: 40, tokensOut: 10, cost: formatUsd(cost) });
  });

  it('makes an id when the client sends none or an unsafe one', async () => {
    const plain = await client().chat.completions.create({ model: 'cheap', messages: [{ role: 'user', content: 'hello there' }] }).withResponse();
    const made = plain.response.headers.get('x-request-id')!;
    expect(made).toMatch(/^req_[A-Za-z0-9_-]{16}$/);
    expect((await rowOf(made)).worker).toBe('cheap');
    for (const unsafe of ['has space <script>', 'a'.repeat(200), '"quoted"']) {
      const bad = await fetch(`${baseURL}/models`, { headers: { authorization: `Bearer ${key}`, 'x-request-id': unsafe } });
      expect(bad.headers.get('x-request-id'), unsafe).toMatch(/^req_/);
    }
    // every response carries one, errors and unknown URLs included
    expect((await fetch(`${baseURL}/nope`)).headers.get('x-request-id')).toMatch(/^req_/);
  });

  it('puts usage.cost in the final stream chunk and writes the stream row', async () => {
    const id = rid('stream');
    const stream = await client().chat.completions.create(
      { model: 'cheap', messages: [{ role: 'user', content: 'stream me something' }], stream: true, stream_options: { include_usage: true } },
      { headers: { 'x-request-id': id } },
    );
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const c of stream) chunks.push(c);
    const last = chunks.at(-1)!;
    const cost = tokenCost(40, 10, { inputPerMTok: '0.1', outputPerMTok: '0.3' });
    expect(last.choices).toEqual([]);
    expect((last.usage as Json).cost).toBe(Number(formatUsd(cost)));
    expect(await rowOf(id)).toMatchObject({ worker: 'cheap', stream: true, tokensIn: 40, tokensOut: 10, cost, status: 200 });
  });

  it('writes a row for an error after authentication, with its code; none before it', async () => {
    const id = rid('err');
    const e = await client()
      .chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: 'x' }], temperature: 9 }, { headers: { 'x-request-id': id } })
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    expect(await rowOf(id)).toMatchObject({ status: 400, errorCode: 'invalid_value', worker: null, cost: 0n });
    const anon = rid('anon');
    await client('fugu-sk-wrong').chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: 'x' }] }, { headers: { 'x-request-id': anon } }).catch(() => {});
    await new Promise((r) => setTimeout(r, 200));
    expect(await getRequest(database.db, anon)).toBeUndefined();
  });

  it('fugu requests lists and shows the rows (table and JSON)', async () => {
    const listed = await runCli(config, ['requests', '--key', 'records', '--json', '--limit', '100']);
    expect(listed.code, listed.stderr).toBe(0);
    const rows = JSON.parse(listed.stdout) as Json[];
    expect(rows.length).toBeGreaterThanOrEqual(4);
    expect(rows.every((r) => r.apiKeyId === keyId)).toBe(true);
    expect(rows.some((r) => r.worker === 'premium' && r.cost === formatUsd(tokenCost(40, 10, { inputPerMTok: '10', outputPerMTok: '30' })))).toBe(true);
    const shown = await runCli(config, ['requests', 'show', String(rows[0]!.id)]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(new RegExp(`^id\\s+${String(rows[0]!.id)}$`, 'm'));
    const table = await runCli(config, ['requests', '--since', '1h']);
    expect(table.stdout.split('\n')[0]).toMatch(/^created\s+id\s+status\s+model\s+worker/);
    const bad = await runCli(config, ['requests', '--since', 'yesterday']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--since.*ISO time/);
    const missing = await runCli(config, ['requests', 'show', 'req_nope']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/no request "req_nope"/);
  });
});

describe('access log', () => {
  async function logged(extraEnv: Record<string, string>): Promise<Json[]> {
    const lines: string[] = [];
    const destination = new Writable({ write: (c, _e, cb) => (lines.push(...String(c).split('\n').filter(Boolean)), cb()) });
    const cfg = loadConfig({ ...serviceEnv(config), ...extraEnv });
    const gw = await buildGateway({ config: cfg, pool, routeClient, db: database.db, env, redis, log: createLogger({ name: 'gw', level: 'info', destination }) });
    await gw.listen({ port: 0, host: '127.0.0.1' });
    try {
      const c = new OpenAI({ apiKey: key, baseURL: `http://127.0.0.1:${(gw.server.address() as { port: number }).port}/v1`, maxRetries: 0 });
      await c.chat.completions.create({ model: 'cheap', messages: [{ role: 'user', content: 'the secret plan is bananas' }] }, { headers: { 'x-request-id': 'log-check-1' } });
    } finally {
      await gw.close();
    }
    return lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request');
  }

  it('writes one line per request with its figures, without the key or the message text', async () => {
    const lines = await logged({});
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ reqId: 'log-check-1', method: 'POST', route: '/v1/chat/completions', status: 200, model: 'cheap', worker: 'cheap', tokensIn: 40, tokensOut: 10, cost: formatUsd(tokenCost(40, 10, { inputPerMTok: '0.1', outputPerMTok: '0.3' })) });
    expect(lines[0].ms).toBeGreaterThan(0);
    const text = JSON.stringify(lines);
    expect(text).not.toContain('bananas');
    expect(text).not.toContain(key);
  });

  it('includes the messages only with gateway.logMessages', async () => {
    const lines = await logged({ FUGU_GATEWAY_LOG_MESSAGES: 'true' });
    expect(JSON.stringify(lines[0].messages)).toContain('bananas');
  });
});

describe('OpenAI parameters', () => {
  it('response_format, seed, stop and the rest reach the OpenAI-compatible stub as sent', async () => {
    const before = stubs.cheap!.requestCount;
    const r = await client().chat.completions.create({
      model: 'cheap',
      messages: [{ role: 'user', content: 'Give me a JSON object.' }],
      response_format: { type: 'json_object' },
      seed: 42,
      stop: ['END'],
      frequency_penalty: 0.5,
      presence_penalty: -0.5,
      logit_bias: { '50256': -100 },
      user: 'end-user-7',
      max_completion_tokens: 64,
    });
    expect(JSON.parse(r.choices[0]!.message.content!)).toEqual({ answer: 'cheap' });
    expect(stubs.cheap!.requestCount).toBe(before + 1);
    const sent = stubs.cheap!.lastRequest!.body;
    expect(sent).toMatchObject({ response_format: { type: 'json_object' }, seed: 42, stop: ['END'], frequency_penalty: 0.5, presence_penalty: -0.5, logit_bias: { '50256': -100 }, user: 'end-user-7', max_tokens: 64 });
    expect(stubs.cheap!.received('response_format').at(-1)).toEqual({ type: 'json_object' });
  });

  it('a parameter the called worker cannot honour is a 400 naming it; nothing is sent', async () => {
    const before = stubs.claude!.requestCount;
    const e = await client().chat.completions.create({ model: 'claude', messages: [{ role: 'user', content: CLAUDE_ANCHOR }], seed: 1 }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    expect((e as APIError).param).toBe('seed');
    expect((e as APIError).message).toMatch(/claude.*anthropic/);
    // the router limited to that worker: the same 400
    const e2 = await client()
      .chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: CLAUDE_ANCHOR }], response_format: { type: 'json_object' }, fugu: { workers: ['claude'] } } as never)
      .catch((x: unknown) => x);
    expect((e2 as APIError).status).toBe(400);
    expect((e2 as APIError).param).toBe('response_format');
    expect(stubs.claude!.requestCount).toBe(before);
    // what claude does support reaches it in its own terms
    await client().chat.completions.create({ model: 'claude', messages: [{ role: 'user', content: CLAUDE_ANCHOR }], stop: ['END'], user: 'u-1' });
    expect(stubs.claude!.lastRequest!.body).toMatchObject({ stop_sequences: ['END'], metadata: { user_id: 'u-1' } });
  });

  it('routes only among the workers that can honour the parameters', async () => {
    const plain = await client().chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: CLAUDE_ANCHOR }] });
    expect(plain.model).toBe('claude');
    const seeded = await client().chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: CLAUDE_ANCHOR }], seed: 3 }).withResponse();
    expect(['premium', 'cheap']).toContain(seeded.data.model);
    const row = await rowOf(seeded.response.headers.get('x-request-id')!);
    expect(row.worker).toBe(seeded.data.model);
  });

  it('refuses unknown fields, fields the gateway cannot serve, and logprobs on a stream, naming them', async () => {
    const post = (body: Record<string, unknown>) =>
      fetch(`${baseURL}/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'cheap', messages: [{ role: 'user', content: 'hi' }], ...body }) });
    for (const [body, param] of [
      [{ temperture: 0.2 }, 'temperture'],
      [{ audio: { voice: 'alloy', format: 'mp3' } }, 'audio'],
      [{ modalities: ['text', 'audio'] }, 'modalities'],
      [{ logprobs: true, stream: true }, 'logprobs'],
      [{ top_logprobs: 3 }, 'top_logprobs'],
      [{ fugu: { lamda: 1 } }, 'fugu'],
    ] as const) {
      const res = await post(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(((await res.json()) as Json).error.param, JSON.stringify(body)).toBe(param);
    }
  });
});

describe('fugu extension: cost preference and worker subset', () => {
  it('lambda moves the choice to the cheaper worker near the best', async () => {
    const route = async (lambda: number) =>
      (await (await fetch(`${baseURL}/route`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ text: NEAR_BOTH, lambda }) })).json()) as Json;
    const r0 = await route(0);
    expect(r0.worker).toBe('premium');
    const p = Object.fromEntries(r0.workers.map((w: Json) => [w.name, w.prob]));
    // cheap is near the best: the second most likely
    expect(p.cheap).toBeGreaterThan(p.claude);
    expect(p.cheap).toBeGreaterThan(0.1);
    const best = await client().chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: NEAR_BOTH }] });
    expect(best.model).toBe('premium');
    const thrifty = await client().chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: NEAR_BOTH }], fugu: { lambda: 1 } } as never).withResponse();
    expect(thrifty.data.model).toBe('cheap');
    expect((await rowOf(thrifty.response.headers.get('x-request-id')!)).worker).toBe('cheap');
  });

  it('fugu.workers narrows the router to a subset of the key\'s workers', async () => {
    const r = await client().chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: PREMIUM_ANCHOR }], fugu: { workers: ['cheap', 'claude'] } } as never);
    expect(r.model).toBe('cheap');
    const e = await client().chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: 'x' }], fugu: { workers: ['gpt-17'] } } as never).catch((x: unknown) => x);
    expect((e as APIError).status).toBe(400);
    expect((e as APIError).param).toBe('fugu.workers');
    const e2 = await client().chat.completions.create({ model: 'cheap', messages: [{ role: 'user', content: 'x' }], fugu: { lambda: 1 } } as never).catch((x: unknown) => x);
    expect((e2 as APIError).param).toBe('fugu.lambda');
  });
});

describe('one rate limit for gateway and evaluation calls (libs/calls)', () => {
  it('a gateway call and a pipeline call of the evaluation side to the same stub share the limit; both leave call rows', async () => {
    // one request a minute for worker "cheap", in a namespace of its own; the gateway waits for no limit
    const cfg = loadConfig({
      ...serviceEnv(config),
      FUGU_QUEUE_PREFIX: `fugugwl${randomBytes(4).toString('hex')}`,
      FUGU_WORKER_RATE_LIMITS: JSON.stringify({ cheap: { requestsPerMinute: 1 }, premium: { requestsPerMinute: 1 } }),
      FUGU_GATEWAY_LIMIT_WAIT_MS: '0',
    });
    const gw = await buildGateway({ config: cfg, pool, routeClient, db: database.db, env, redis, log: quiet });
    await gw.listen({ port: 0, host: '127.0.0.1' });
    // the evaluation side: another pipeline, as a provider-worker process has
    const evaluation = createCallPipeline({ db: database.db, redis, config: cfg, env });
    const c = new OpenAI({ apiKey: key, baseURL: `http://127.0.0.1:${(gw.server.address() as { port: number }).port}/v1`, maxRetries: 0 });
    try {
      const cheap = pool.workers.find((w) => w.name === 'cheap')!;
      const premium = pool.workers.find((w) => w.name === 'premium')!;
      const evalKey = `eval-${randomBytes(4).toString('hex')}`;

      // evaluation first: it takes cheap's one request; the gateway's call is refused before the provider
      const cheapBefore = stubs.cheap!.requestCount;
      await evaluation.call({ worker: cheap, request: { messages: [{ role: 'user', content: 'evaluation question 1' }] }, origin: 'chat-call', key: `${evalKey}.a` });
      const id1 = rid('limited');
      const e = await c.chat.completions.create({ model: 'cheap', messages: [{ role: 'user', content: 'gateway question 1' }] }, { headers: { 'x-request-id': id1 } }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(OpenAI.RateLimitError);
      expect((e as APIError).code).toBe('rate_limit_exceeded');
      expect((e as APIError).message).toMatch(/worker "cheap".*shared by every process/);
      expect(stubs.cheap!.requestCount).toBe(cheapBefore + 1);

      // gateway first: it takes premium's one request; the evaluation call is refused
      const premiumBefore = stubs.premium!.requestCount;
      const id2 = rid('first');
      const ok = await c.chat.completions.create({ model: 'premium', messages: [{ role: 'user', content: 'gateway question 2' }] }, { headers: { 'x-request-id': id2 } });
      expect(ok.model).toBe('premium');
      const e2 = await evaluation.call({ worker: premium, request: { messages: [{ role: 'user', content: 'evaluation question 2' }] }, origin: 'chat-call', key: `${evalKey}.b` }).catch((x: unknown) => x);
      expect(e2).toBeInstanceOf(LimitExceededError);
      expect(stubs.premium!.requestCount).toBe(premiumBefore + 1);

      // call rows on both sides: ok and refused
      const r1 = await rowOf(id1);
      const r2 = await rowOf(id2);
      expect(r1).toMatchObject({ status: 429, errorCode: 'rate_limit_exceeded', worker: 'cheap', cost: 0n });
      const rows = await callRows([`${evalKey}.a`, `${evalKey}.b`, `${r1.id}.1`, `${r2.id}.1`]);
      const byKey = Object.fromEntries(rows.map((r) => [r.key, r]));
      expect(byKey[`${evalKey}.a`]).toMatchObject({ origin: 'chat-call', worker: 'cheap', status: 'ok' });
      expect(byKey[`${r1.id}.1`]).toMatchObject({ origin: 'gateway', worker: 'cheap', status: 'error' });
      expect(byKey[`${r2.id}.1`]).toMatchObject({ origin: 'gateway', worker: 'premium', status: 'ok' });
      expect(byKey[`${evalKey}.b`]).toMatchObject({ origin: 'chat-call', worker: 'premium', status: 'error' });
    } finally {
      await gw.close();
      const keys = await redis.keys(`${cfg.queuePrefix}:*`).catch(() => [] as string[]);
      if (keys.length > 0) await redis.del(...keys).catch(() => {});
    }
  });
});

describe('listing', () => {
  it('lists the newest rows of the key first', async () => {
    const rows = await listRequests(database.db, { key: keyId, limit: 3 });
    expect(rows.length).toBe(3);
    expect(rows[0]!.createdAt.getTime()).toBeGreaterThanOrEqual(rows[2]!.createdAt.getTime());
  });
});
