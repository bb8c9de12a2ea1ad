// fugu-ultra's conversations belong to an API key (issue 27, 4e): a conversation id names one
// conversation per key. The same `fugu.conversation` under two keys is two conversations, each
// with its own turns and its own shared tool memory, and no answer tells one key whether another
// uses an id (was: the first key to use an id took it, and the other got a 400 "no conversation
// ... for this API key"). The Responses API's conversations (previous_response_id chains) stay
// per key too. The real `openai` client against the gateway (buildGateway with fugu-ultra), real
// Postgres, stub workers; the Conductor is fixed:moa:2 (alpha and beta propose, alpha aggregates).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import OpenAI, { APIError } from 'openai';
import type { FastifyInstance } from 'fastify';
import type { WorkerPool } from '@fugu/core';
import { loadConfig, type FuguConfig } from '@fugu/config';
import { createApiKey, publishUltraDeployment, savePool, type StoredWorker } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { poolContentHash } from '@fugu/evaluation';
import { startOpenAIStub, WEATHER_TOOL, type OpenAIStub, type RecordedRequest, type StubReply } from '@fugu/providers/testing';
import { createLogger } from '@fugu/telemetry';
import { startUltraGateway, stubWorker } from '../support/ultra-gateway.ts';
import { testRedisUrl } from '../support/eval-env.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { name: WEATHER_TOOL.name, description: WEATHER_TOOL.description!, parameters: WEATHER_TOOL.parameters } }];
const QUESTION = 'Should I take an umbrella in Paris today?';
const CONVERSATION = 'conv_mine_123';

const isAggregator = (req: RecordedRequest): boolean => JSON.stringify(req.body?.messages ?? []).includes('Work already done by other agents');

/** A proposer calls get_weather when given tools and a user message last, then answers with what it read; the aggregator answers. */
const replyAs = (name: string) => (req: RecordedRequest): StubReply => {
  const msgs: Json[] = req.body?.messages ?? [];
  const last = msgs.at(-1);
  if (isAggregator(req)) return { type: 'text', text: `${name} aggregated the proposals` };
  if (req.body?.tools && last?.role === 'user') return { type: 'tool-calls', calls: [{ id: `own_${name}`, name: 'get_weather', arguments: JSON.stringify({ city: name }) }] };
  return { type: 'text', text: `${name} read the weather` };
};

let database: TestDatabase;
let home: string;
let config: FuguConfig;
let pool: WorkerPool;
let stored: { poolId: number; workers: StoredWorker[] };
const stubs: Record<string, OpenAIStub> = {};
let app: FastifyInstance;
let baseURL: string;
const keys: Record<'a' | 'b', { key: string; id: string }> = {} as never;
const quiet = createLogger({ name: 'ultra-conversation-keys-test', level: 'silent' });

const client = (who: 'a' | 'b') => new OpenAI({ apiKey: keys[who].key, baseURL, maxRetries: 0, timeout: 30_000 });
const prompts = () => [...stubs.alpha!.requests, ...stubs.beta!.requests].filter((r) => r.body?.messages && !isAggregator(r)).map((r) => JSON.stringify(r.body.messages));
const reset = () => Object.values(stubs).forEach((s) => s.requests.splice(0));

beforeAll(async () => {
  database = await createTestDatabase();
  home = await mkdtemp(path.join(tmpdir(), 'fugu-ultra-keys-'));
  config = loadConfig({ FUGU_REDIS_URL: testRedisUrl(), FUGU_DATABASE_URL: database.url, FUGU_QUEUE_PREFIX: `fuguuk${randomBytes(4).toString('hex')}`, FUGU_HOME: home, FUGU_LOG_LEVEL: 'silent' });
  stubs.alpha = await startOpenAIStub({ defaultReply: replyAs('alpha') });
  stubs.beta = await startOpenAIStub({ defaultReply: replyAs('beta') });
  pool = { name: 'ultra-keys', workers: [stubWorker('alpha', stubs.alpha), stubWorker('beta', stubs.beta)] };
  stored = await savePool(database.db, pool, poolContentHash(pool));
  ({ app, url: baseURL } = await startUltraGateway({ config, db: database.db, pool, stored, secret: randomBytes(32), log: quiet }));
  for (const who of ['a', 'b'] as const) {
    const k = await createApiKey(database.db, { name: `tenant-${who}` });
    keys[who] = { key: k.key, id: k.record.id };
  }
  await publishUltraDeployment(database.db, { name: 'fugu-ultra', conductor: 'fixed:moa:2', pool: pool.name, options: {} });
});

afterAll(async () => {
  await app?.close().catch(() => {});
  await Promise.all(Object.values(stubs).map((s) => s.close()));
  await database?.drop();
  if (home) await rm(home, { recursive: true, force: true });
});

/** One turn with tools in the conversation, its tool calls answered with `result`: the final answer. */
async function turnWithTools(who: 'a' | 'b', question: string, result: string): Promise<Json> {
  const c = client(who);
  const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: question }];
  const { data: first, response } = await c.chat.completions.create({ model: 'fugu-ultra', messages, tools, fugu: { conversation: CONVERSATION } } as never).withResponse();
  expect(response.headers.get('x-fugu-conversation')).toBe(CONVERSATION);
  expect((first as Json).fugu.conversation).toBe(CONVERSATION);
  const calls = first.choices[0]!.message.tool_calls!;
  expect(calls).toHaveLength(2);
  messages.push(first.choices[0]!.message as OpenAI.ChatCompletionMessageParam, ...calls.map((k) => ({ role: 'tool' as const, tool_call_id: k.id, content: result })));
  const done = await c.chat.completions.create({ model: 'fugu-ultra', messages, tools, fugu: { conversation: CONVERSATION } } as never);
  expect(done.choices[0]!.message.content).toBe('alpha aggregated the proposals');
  expect((done as Json).fugu.conversation).toBe(CONVERSATION);
  return done;
}

describe('a conversation id under two API keys', () => {
  it('is two conversations: each key\'s turns and shared tool memory its own, the id the same in every answer (was a 400 for the second key)', async () => {
    reset();
    const b1 = await turnWithTools('b', QUESTION, 'B-ONLY: Lyon 19 C');
    // key A names the id key B uses: a conversation of its own, answered as a new id would be
    reset();
    const a1 = await turnWithTools('a', QUESTION, 'A-ONLY: Paris 14 C');
    expect(a1.fugu.workflow).not.toBe(b1.fugu.workflow);
    // A's agents were never shown B's tool results
    expect(prompts().join('\n')).not.toContain('B-ONLY');

    // each key's next turn reads its own memory only
    reset();
    const a2 = await client('a').chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: 'And tomorrow?' }], fugu: { conversation: CONVERSATION } } as never);
    expect((a2 as Json).fugu.conversation).toBe(CONVERSATION);
    expect(prompts().join('\n')).toContain('A-ONLY: Paris 14 C');
    expect(prompts().join('\n')).not.toContain('B-ONLY');
    reset();
    await client('b').chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: 'And tomorrow?' }], fugu: { conversation: CONVERSATION } } as never);
    expect(prompts().join('\n')).toContain('B-ONLY: Lyon 19 C');
    expect(prompts().join('\n')).not.toContain('A-ONLY');

    // two conversations stored under the one id, two turns each; each workflow under its key's
    const rows = await database.db.selectFrom('ultra_conversations').select(['api_key_id', 'turns']).where('id', '=', CONVERSATION).orderBy('api_key_id').execute();
    expect(rows).toEqual([keys.a.id, keys.b.id].sort().map((id) => ({ api_key_id: id, turns: 2 })));
    const sessions = await database.db.selectFrom('ultra_sessions').select(['api_key_id']).where('conversation_id', '=', CONVERSATION).execute();
    expect(sessions.filter((s) => s.api_key_id === keys.a.id)).toHaveLength(2);
    expect(sessions.filter((s) => s.api_key_id === keys.b.id)).toHaveLength(2);
  });

  it('a tool call of the other key\'s conversation is refused as one never issued (the same answer as a forged id)', async () => {
    const c = client('b');
    const first = await c.chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }], tools, fugu: { conversation: CONVERSATION } } as never);
    const calls = first.choices[0]!.message.tool_calls!;
    const answer = (ids: string[]) => client('a').chat.completions.create({
      model: 'fugu-ultra', tools, fugu: { conversation: CONVERSATION },
      messages: [{ role: 'user', content: QUESTION }, { ...(first.choices[0]!.message as Json), tool_calls: calls.map((k, i) => ({ ...k, id: ids[i] })) }, ...ids.map((id) => ({ role: 'tool' as const, tool_call_id: id, content: 'sunny' }))],
    } as never).then(() => undefined, (e: unknown) => e as APIError);
    const theirs = await answer(calls.map((k) => k.id));
    const forged = await answer(calls.map((k) => k.id.replace(/.$/, (ch) => (ch === 'A' ? 'B' : 'A'))));
    expect(theirs?.status).toBe(400);
    expect(theirs?.message.replace(/call_fu_\S+/g, 'ID')).toBe(forged?.message.replace(/call_fu_\S+/g, 'ID'));
  });
});

describe('the Responses API\'s conversations', () => {
  it('a chain continues under its own key only: another key\'s previous_response_id reads as missing, exactly as an unknown id', async () => {
    const r1 = await client('a').responses.create({ model: 'fugu-ultra', input: QUESTION });
    expect((r1 as Json).fugu.conversation).toBe(r1.id);
    const refusal = async (id: string) => {
      const e = await client('b').responses.create({ model: 'fugu-ultra', previous_response_id: id, input: 'And tomorrow?' }).then(() => undefined, (x: unknown) => x as APIError);
      return e && { status: e.status, code: e.code, message: (e.error as Json).message.replace(id, 'ID') };
    };
    const unknown = 'resp_' + 'ab'.repeat(24);
    expect(await refusal(r1.id)).toEqual(await refusal(unknown));
    expect((await refusal(r1.id))?.status).toBe(400);
    // B's own chain is its own conversation; A's goes on
    const b1 = await client('b').responses.create({ model: 'fugu-ultra', input: QUESTION });
    expect((b1 as Json).fugu.conversation).toBe(b1.id);
    const r2 = await client('a').responses.create({ model: 'fugu-ultra', previous_response_id: r1.id, input: 'And tomorrow?' });
    expect((r2 as Json).fugu.conversation).toBe(r1.id);
    const conv = await database.db.selectFrom('ultra_conversations').select(['api_key_id', 'turns']).where('id', '=', r1.id).execute();
    expect(conv).toEqual([{ api_key_id: keys.a.id, turns: 2 }]);
  });
});
