// fugu-ultra's interactive state is durable: gateway processes (`node apps/gateway/src/main.ts`,
// the container's command) killed with SIGKILL between a tool call and its result lose nothing.
// Gateway A answers a workflow's first request with the agents' tool calls and is killed -9;
// gateway B, a fresh process with nothing in memory, takes the results: each goes to the agent
// that made the call, the dependent step runs, the workflow finishes once. Every agent turn is
// exactly one chat_calls row. Stub providers play the workers; real Postgres and Redis.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import OpenAI from 'openai';
import { sql } from 'kysely';
import { loadConfig, serviceEnv, type FuguConfig } from '@fugu/config';
import { createApiKey, getWorkflowSteps, getWorkflows, publishUltraDeployment } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { writeWorkerPool } from '@fugu/datasets';
import { startOpenAIStub, WEATHER_TOOL, type OpenAIStub, type RecordedRequest, type StubReply } from '@fugu/providers/testing';
import { testRedisUrl } from '../support/eval-env.ts';
import { forkGateway, type AppProcess } from '../support/app-process.ts';

const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { name: WEATHER_TOOL.name, description: WEATHER_TOOL.description!, parameters: WEATHER_TOOL.parameters } }];
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const aggregator = (req: RecordedRequest): boolean => JSON.stringify(req.body?.messages ?? []).includes('Work already done by other agents');
function replyAs(name: string) {
  return (req: RecordedRequest): StubReply => {
    const last = (req.body?.messages ?? []).at(-1);
    if (aggregator(req)) return { type: 'text', text: `${name} aggregated`, usage: { input: 40, output: 2 } };
    if (last?.role === 'tool') return { type: 'text', text: `${name} read ${last.content}`, usage: { input: 30, output: 4 } };
    return { type: 'tool-calls', calls: [{ id: `own_${name}`, name: 'get_weather', arguments: `{"city":"${name}"}` }], usage: { input: 20, output: 3 } };
  };
}

let database: TestDatabase;
let home: string;
let config: FuguConfig;
const stubs: Record<string, OpenAIStub> = {};
let poolFile: string;
let key: string;
const gateways: AppProcess[] = [];
const secret = randomBytes(32).toString('hex');

async function startGateway(): Promise<{ url: string; app: AppProcess }> {
  const g = await forkGateway({ ...serviceEnv(config), FUGU_LOG_LEVEL: 'warn', FUGU_GATEWAY_POOL: poolFile, FUGU_GATEWAY_PORT: '0', FUGU_GATEWAY_AUTH: 'keys', FUGU_ULTRA_ID_SECRET: secret });
  gateways.push(g.app);
  return g;
}

beforeAll(async () => {
  database = await createTestDatabase();
  home = await mkdtemp(path.join(tmpdir(), 'fugu-ultra-fault-'));
  config = loadConfig({ FUGU_REDIS_URL: testRedisUrl(), FUGU_DATABASE_URL: database.url, FUGU_QUEUE_PREFIX: `fuguuf${randomBytes(4).toString('hex')}`, FUGU_HOME: home });
  for (const name of ['alpha', 'beta']) stubs[name] = await startOpenAIStub({ defaultReply: replyAs(name) });
  poolFile = path.join(home, 'pool.yaml');
  await writeWorkerPool(poolFile, {
    name: 'ultra-fault',
    workers: ['alpha', 'beta'].map((n) => ({ name: n, provider: 'openai-compatible' as const, model: `${n}-model`, baseUrl: stubs[n]!.baseURL, settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' } })),
  });
  await publishUltraDeployment(database.db, { name: 'fugu-ultra', conductor: 'fixed:moa:2', pool: 'ultra-fault', options: {} });
  key = (await createApiKey(database.db, { name: 'ultra-fault' })).key;
});

afterAll(async () => {
  for (const g of gateways) await g.kill9();
  await Promise.all(Object.values(stubs).map((s) => s.close()));
  await database?.drop();
  if (home) await rm(home, { recursive: true, force: true });
});

describe('fugu-ultra: a gateway killed -9 between a tool call and its result', () => {
  it('another gateway process takes the results; every agent gets its own; the workflow finishes once, one call row per agent turn', async () => {
    const a = await startGateway();
    const history: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Compare the weather of two cities.' }];
    const first = await new OpenAI({ apiKey: key, baseURL: a.url, maxRetries: 0 }).chat.completions.create({ model: 'fugu-ultra', messages: history, tools });
    const calls = first.choices[0]!.message.tool_calls!;
    expect(calls).toHaveLength(2);
    const wf = (first as Json).fugu.workflow as number;
    await a.app.kill9();
    expect(a.app.child.signalCode).toBe('SIGKILL');

    const b = await startGateway();
    history.push(first.choices[0]!.message as never, ...calls.map((c) => ({ role: 'tool' as const, tool_call_id: c.id, content: `result for ${(c as Json).function.arguments}` })));
    const done = await new OpenAI({ apiKey: key, baseURL: b.url, maxRetries: 0 }).chat.completions.create({ model: 'fugu-ultra', messages: history, tools });
    expect(done.choices[0]!.message.content).toBe('alpha aggregated');
    expect((done as Json).fugu.workflow).toBe(wf);
    // each proposer got its own result under its own call id
    for (const n of ['alpha', 'beta']) {
      const again = stubs[n]!.requests.filter((r) => r.body?.messages?.at(-1)?.role === 'tool');
      expect(again).toHaveLength(1);
      expect(again[0]!.body.messages.at(-1)).toEqual({ role: 'tool', tool_call_id: `own_${n}`, content: `result for {"city":"${n}"}` });
    }
    const [row] = await getWorkflows(database.db, [wf]);
    expect([row!.status, row!.finishReason, row!.finalAnswer]).toEqual(['done', 'answered', 'alpha aggregated']);
    expect((await getWorkflowSteps(database.db, wf)).map((s) => s.status)).toEqual(['ok', 'ok', 'ok']);
    // five agent turns (two proposers twice, the aggregator once): five calls, one row each
    expect(stubs.alpha!.requests.length + stubs.beta!.requests.length).toBe(5);
    await expect.poll(async () => (await sql<{ n: number }>`select count(*)::int as n from chat_calls where key like ${`wf${wf}.%`}`.execute(database.db)).rows[0]!.n).toBe(5);
    const { rows } = await sql<{ key: string }>`select key from chat_calls where key like ${`wf${wf}.%`} order by key`.execute(database.db);
    expect(rows.map((r) => r.key.replace(/\.v\d+$/, ''))).toEqual([`wf${wf}.s0.t1`, `wf${wf}.s0.t2`, `wf${wf}.s1.t1`, `wf${wf}.s1.t2`, `wf${wf}.s2.t1`]);
  });
});
