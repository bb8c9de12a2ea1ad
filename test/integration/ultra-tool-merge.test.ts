// fugu-ultra merges identical tool calls (issue 27, 4c): in fixed:moa:3 three isolated proposers
// ask for the same three tools; the client is sent each distinct call once, its result goes back
// to every agent that asked (each under its own call id: isolation holds), and shared memory
// records it once. `fugu.merge_tool_calls: false` sends every agent's call. Real `openai` client,
// stub OpenAI-compatible workers, real Postgres and Redis.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import OpenAI from 'openai';
import { sql } from 'kysely';
import type { FastifyInstance } from 'fastify';
import type { WorkerPool } from '@fugu/core';
import { loadConfig } from '@fugu/config';
import { createApiKey, publishUltraDeployment, savePool } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { poolContentHash } from '@fugu/evaluation';
import { startOpenAIStub, type OpenAIStub, type RecordedRequest, type StubReply } from '@fugu/providers/testing';
import { createLogger } from '@fugu/telemetry';
import { startUltraGateway, stubWorker } from '../support/ultra-gateway.ts';
import { testRedisUrl } from '../support/eval-env.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;
const isAggregator = (req: RecordedRequest): boolean => JSON.stringify(req.body?.messages ?? []).includes('Work already done by other agents');
const tool = (name: string): OpenAI.ChatCompletionTool => ({ type: 'function', function: { name, parameters: { type: 'object', properties: {} } } });
const tools = [tool('get_weather'), tool('get_time')];

/** Every agent asks for the same three calls (one with its arguments' keys in its own order), then answers from the results. */
function replyAs(name: string) {
  return (req: RecordedRequest): StubReply => {
    const last = req.body.messages.at(-1);
    if (last.role === 'tool') return { type: 'text', text: `${name}${isAggregator(req) ? ' aggregated' : ' proposes'}`, usage: { input: 30, output: 4 } };
    return {
      type: 'tool-calls',
      calls: [
        { id: `${name}_1`, name: 'get_weather', arguments: '{"city":"Paris"}' },
        { id: `${name}_2`, name: 'get_weather', arguments: name === 'beta' ? '{ "city": "Lyon", "unit": "C" }' : '{"unit":"C","city":"Lyon"}' },
        { id: `${name}_3`, name: 'get_time', arguments: '{"zone":"UTC"}' },
      ],
      usage: { input: 20, output: 3 },
    };
  };
}

let database: TestDatabase;
let home: string;
const stubs: Record<string, OpenAIStub> = {};
let app: FastifyInstance;
let client: OpenAI;

beforeAll(async () => {
  database = await createTestDatabase();
  home = await mkdtemp(path.join(tmpdir(), 'fugu-ultra-merge-'));
  const config = loadConfig({ FUGU_REDIS_URL: testRedisUrl(), FUGU_DATABASE_URL: database.url, FUGU_QUEUE_PREFIX: `fuguum${randomBytes(4).toString('hex')}`, FUGU_HOME: home, FUGU_LOG_LEVEL: 'silent' });
  for (const n of ['alpha', 'beta', 'gamma']) stubs[n] = await startOpenAIStub({ defaultReply: replyAs(n) });
  const pool: WorkerPool = { name: 'ultra-merge', workers: ['alpha', 'beta', 'gamma'].map((n) => stubWorker(n, stubs[n]!)) };
  const stored = await savePool(database.db, pool, poolContentHash(pool));
  let url: string;
  ({ app, url } = await startUltraGateway({ config, db: database.db, pool, stored, secret: randomBytes(32), log: createLogger({ name: 'ultra-merge-test', level: 'silent' }) }));
  await publishUltraDeployment(database.db, { name: 'fugu-ultra', conductor: 'fixed:moa:3', pool: pool.name, options: {} });
  client = new OpenAI({ apiKey: (await createApiKey(database.db, { name: 'merge' })).key, baseURL: url, maxRetries: 0 });
});

afterAll(async () => {
  await app?.close();
  await Promise.all(Object.values(stubs).map((s) => s.close()));
  await database?.drop();
  if (home) await rm(home, { recursive: true, force: true });
});

/** The tool loop to its final answer: the calls the client ran, per round, and the workflow. */
async function loop(fugu: Record<string, unknown> | undefined): Promise<{ rounds: number[]; answer: string; wf: number }> {
  const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Plan my day in Paris and Lyon.' }];
  const rounds: number[] = [];
  for (;;) {
    const r = await client.chat.completions.create({ model: 'fugu-ultra', messages, tools, ...(fugu && { fugu }) } as never);
    const msg = (r as OpenAI.ChatCompletion).choices[0]!.message;
    if (!msg.tool_calls?.length) return { rounds, answer: msg.content ?? '', wf: (r as Json).fugu.workflow };
    rounds.push(msg.tool_calls.length);
    messages.push(msg as never, ...msg.tool_calls.map((c) => ({ role: 'tool' as const, tool_call_id: c.id, content: `result of ${(c as Json).function.name} ${(c as Json).function.arguments}` })));
  }
}

describe('fugu-ultra: identical tool calls of one answer reach the client once', () => {
  it('fixed:moa:3: 3 proposers x 3 identical calls are 3 client calls, each result back to every agent under its own id; then the aggregator\'s 3', async () => {
    const merged = await loop(undefined);
    expect(merged.answer).toBe('alpha aggregated');
    expect(merged.rounds).toEqual([3, 3]);
    // each proposer got all three results under its own call ids, and never another agent's ids
    for (const n of ['alpha', 'beta', 'gamma']) {
      const cont = stubs[n]!.requests.filter((q) => q.body.messages.at(-1).role === 'tool' && !isAggregator(q));
      expect(cont).toHaveLength(1);
      const results = cont[0]!.body.messages.filter((m: Json) => m.role === 'tool');
      expect(results.map((m: Json) => m.tool_call_id)).toEqual([`${n}_1`, `${n}_2`, `${n}_3`]);
      expect(results.map((m: Json) => m.content)).toEqual(['result of get_weather {"city":"Paris"}', expect.stringMatching(/^result of get_weather .*Lyon/), 'result of get_time {"zone":"UTC"}']);
    }
    // shared memory: each client call once
    const mem = await sql<{ n: number }>`select count(*)::int as n from ultra_tool_log where workflow_id = ${merged.wf}`.execute(database.db);
    expect(mem.rows[0]!.n).toBe(6);

    // merging off: every agent's call reaches the client
    const separate = await loop({ merge_tool_calls: false });
    expect(separate.answer).toBe('alpha aggregated');
    expect(separate.rounds).toEqual([9, 3]);
    const mem2 = await sql<{ n: number }>`select count(*)::int as n from ultra_tool_log where workflow_id = ${separate.wf}`.execute(database.db);
    expect(mem2.rows[0]!.n).toBe(12);
    console.log(`fixed:moa:3 tool loop: the client runs ${merged.rounds.reduce((a, b) => a + b)} calls merged, ${separate.rounds.reduce((a, b) => a + b)} without`);
  });
});
