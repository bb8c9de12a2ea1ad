// fugu-ultra with the Vercel AI SDK's Responses API tool loop (issue 27, 4a): `generateText` with
// `openai.responses('fugu-ultra')` sends the whole input again each step, with the
// function_call and function_call_output items and no previous_response_id. The signed call ids
// name the workflow and its key, so the loop continues the workflow whether or not the response
// was stored (store: false). Stub OpenAI-compatible workers, real Postgres and Redis.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import OpenAI from 'openai';
import { generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { sql } from 'kysely';
import type { FastifyInstance } from 'fastify';
import type { WorkerPool } from '@fugu/core';
import { loadConfig, type FuguConfig } from '@fugu/config';
import { createApiKey, getWorkflows, savePool } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { poolContentHash } from '@fugu/evaluation';
import { startOpenAIStub, type OpenAIStub, type RecordedRequest, type StubReply } from '@fugu/providers/testing';
import { createLogger } from '@fugu/telemetry';
import { startUltraGateway, stubWorker } from '../support/ultra-gateway.ts';
import { testRedisUrl } from '../support/eval-env.ts';
import { publishUltraAndTell } from '../support/ultra-publish.ts';

const isAggregator = (req: RecordedRequest): boolean => JSON.stringify(req.body?.messages ?? []).includes('Work already done by other agents');
function replyAs(name: string) {
  return (req: RecordedRequest): StubReply => {
    const last = req.body.messages.at(-1);
    // a step bounded to 5 tokens is cut
    if ((req.body.max_completion_tokens ?? req.body.max_tokens) === 5) return { type: 'text', text: `${name} was cut`, finish: 'length', usage: { input: 20, output: 5 } };
    if (isAggregator(req)) return { type: 'text', text: `${name} aggregated`, usage: { input: 40, output: 2 } };
    if (last.role === 'tool') return { type: 'text', text: `${name} read ${last.content}`, usage: { input: 30, output: 4 } };
    return { type: 'tool-calls', calls: [{ id: `own_${name}`, name: 'get_weather', arguments: `{"city":"${name === 'alpha' ? 'Paris' : 'Lyon'}"}` }], usage: { input: 20, output: 3 } };
  };
}

let database: TestDatabase;
let home: string;
const stubs: Record<string, OpenAIStub> = {};
let app: FastifyInstance;
let url: string;
let key: string;
let config: FuguConfig;

beforeAll(async () => {
  database = await createTestDatabase();
  home = await mkdtemp(path.join(tmpdir(), 'fugu-ultra-clients-'));
  config = loadConfig({ FUGU_REDIS_URL: testRedisUrl(), FUGU_DATABASE_URL: database.url, FUGU_QUEUE_PREFIX: `fuguuc${randomBytes(4).toString('hex')}`, FUGU_HOME: home, FUGU_LOG_LEVEL: 'silent' });
  for (const n of ['alpha', 'beta']) stubs[n] = await startOpenAIStub({ defaultReply: replyAs(n) });
  const pool: WorkerPool = { name: 'ultra-clients', workers: ['alpha', 'beta'].map((n) => stubWorker(n, stubs[n]!)) };
  const stored = await savePool(database.db, pool, poolContentHash(pool));
  ({ app, url } = await startUltraGateway({ config, db: database.db, pool, stored, secret: randomBytes(32), log: createLogger({ name: 'ultra-clients-test', level: 'silent' }) }));
  await publishUltraAndTell(config, database.db, { name: 'fugu-ultra', conductor: 'fixed:moa:2', pool: pool.name, options: {} });
  key = (await createApiKey(database.db, { name: 'clients' })).key;
});

afterAll(async () => {
  await app?.close();
  await Promise.all(Object.values(stubs).map((s) => s.close()));
  await database?.drop();
  if (home) await rm(home, { recursive: true, force: true });
});

describe('fugu-ultra: the Vercel AI SDK\'s Responses API tool loop', () => {
  for (const store of [false, true]) {
    it(`runs to its final answer (store: ${store}): one workflow, each agent its own result`, async () => {
      const before = stubs.alpha!.requests.length + stubs.beta!.requests.length;
      const openai = createOpenAI({ apiKey: key, baseURL: url });
      const ran: string[] = [];
      const r = await generateText({
        model: openai.responses('fugu-ultra'),
        prompt: `Compare the weather in Paris and Lyon (store ${store}).`,
        tools: {
          get_weather: tool({
            description: 'The weather in a city',
            inputSchema: jsonSchema<{ city: string }>({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }),
            execute: async ({ city }) => {
              ran.push(city);
              return `${city}: 14 C`;
            },
          }),
        },
        stopWhen: stepCountIs(5),
        providerOptions: { openai: { store } },
      });
      expect(r.text).toBe('alpha aggregated');
      expect(r.steps).toHaveLength(2);
      expect(ran.sort()).toEqual(['Lyon', 'Paris']);
      // the second step continued the first step's workflow: 2 proposers x 2 turns + the aggregator
      expect(stubs.alpha!.requests.length + stubs.beta!.requests.length - before).toBe(5);
      const rows = await sql<{ id: string }>`select id from workflows where question like ${`%(store ${store}).`}`.execute(database.db);
      expect(rows.rows).toHaveLength(1);
      const [row] = await getWorkflows(database.db, [Number(rows.rows[0]!.id)]);
      expect([row!.status, row!.finalAnswer]).toEqual(['done', 'alpha aggregated']);
      const proposer = stubs.alpha!.requests.filter((q) => q.body.messages.at(-1).role === 'tool').at(-1)!;
      expect(proposer.body.messages.at(-1)).toEqual({ role: 'tool', tool_call_id: 'own_alpha', content: expect.stringContaining('Paris: 14 C') });
    });
  }
});

describe('fugu-ultra: one set of stop rules on every path', () => {
  it('a step cut at the deployment\'s maxTokensPerStep ends a served workflow budget-tokens, as a batch or eval workflow ends (was: the next step ran on the cut answer)', async () => {
    await publishUltraAndTell(config, database.db, { name: 'fugu-ultra', conductor: 'fixed:moa:2', pool: 'ultra-clients', options: { workflow: { maxTokensPerStep: 5 } } });
    try {
      const before = stubs.alpha!.requests.length + stubs.beta!.requests.length;
      const r = await new OpenAI({ apiKey: key, baseURL: url, maxRetries: 0 }).chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: 'Say a lot.' }] });
      expect((r as unknown as { fugu: { finish_reason: string } }).fugu.finish_reason).toBe('budget-tokens');
      expect(r.choices[0]!.finish_reason).toBe('length');
      // the proposers were cut: the aggregator never ran
      expect(stubs.alpha!.requests.length + stubs.beta!.requests.length - before).toBe(2);
    } finally {
      await publishUltraAndTell(config, database.db, { name: 'fugu-ultra', conductor: 'fixed:moa:2', pool: 'ultra-clients', options: {} });
    }
  });

  it("the workflow's temperature is the llm: Conductor's, as in a batch or eval workflow; the steps get the client's (was: every served step got the Conductor's)", async () => {
    await publishUltraAndTell(config, database.db, { name: 'fugu-ultra', conductor: 'fixed:single:alpha', pool: 'ultra-clients', options: { workflow: { temperature: 1.7 } } });
    try {
      const client = new OpenAI({ apiKey: key, baseURL: url, maxRetries: 0 });
      const sent = async (temperature?: number): Promise<unknown> => {
        const before = stubs.alpha!.requests.length;
        await client.chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: `Temperature ${temperature ?? 'unset'}.` }], ...(temperature !== undefined && { temperature }) });
        expect(stubs.alpha!.requests.length - before).toBe(1);
        return stubs.alpha!.requests.at(-1)!.body?.temperature;
      };
      expect(await sent()).toBeUndefined();
      expect(await sent(0.2)).toBe(0.2);
    } finally {
      await publishUltraAndTell(config, database.db, { name: 'fugu-ultra', conductor: 'fixed:moa:2', pool: 'ultra-clients', options: {} });
    }
  });
});

describe('fugu-ultra: an Idempotency-Key keys the request', () => {
  it('the same key again gets the stored answer, charged once; another key runs a new workflow', async () => {
    const client = new OpenAI({ apiKey: key, baseURL: url, maxRetries: 0 });
    const ask = (idem: string) => client.chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: 'Keyed by the client.' }] }, { headers: { 'Idempotency-Key': idem } }).withResponse();
    const before = stubs.alpha!.requests.length + stubs.beta!.requests.length;
    const first = await ask('idem-1');
    const calls = stubs.alpha!.requests.length + stubs.beta!.requests.length - before;
    expect(first.response.headers.get('idempotent-replayed')).toBeNull();
    const again = await ask('idem-1');
    expect(again.response.headers.get('idempotent-replayed')).toBe('true');
    expect(again.response.headers.get('x-fugu-workflow')).toBe(first.response.headers.get('x-fugu-workflow'));
    expect(again.data.choices[0]!.message).toEqual(first.data.choices[0]!.message);
    // no agent called again, and the replay costs nothing
    expect(stubs.alpha!.requests.length + stubs.beta!.requests.length - before).toBe(calls);
    expect((again.data.usage as unknown as { cost: number }).cost).toBe(0);
    const other = await ask('idem-2');
    expect(other.response.headers.get('x-fugu-workflow')).not.toBe(first.response.headers.get('x-fugu-workflow'));
  });
});

describe('fugu-ultra: the Vercel AI SDK\'s streamed chat tool loop', () => {
  it('streamText over openai.chat runs the tool loop to its final answer, streamed', async () => {
    const openai = createOpenAI({ apiKey: key, baseURL: url });
    const ran: string[] = [];
    const r = streamText({
      model: openai.chat('fugu-ultra'),
      prompt: 'Compare the weather in Paris and Lyon (streamed).',
      tools: {
        get_weather: tool({
          description: 'The weather in a city',
          inputSchema: jsonSchema<{ city: string }>({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }),
          execute: async ({ city }) => {
            ran.push(city);
            return `${city}: 14 C`;
          },
        }),
      },
      stopWhen: stepCountIs(5),
    });
    let text = '';
    for await (const delta of r.textStream) text += delta;
    expect(text).toBe('alpha aggregated');
    expect((await r.steps).length).toBe(2);
    expect(ran.sort()).toEqual(['Lyon', 'Paris']);
  });
});
