// fugu-ultra under faults (issue 27, section 2), with gateway processes (`node apps/gateway/src/main.ts`)
// and the real `openai` client:
//   a. a gateway killed -9 while 20 workflows are mid-step: every client's retry is answered by
//      another gateway within the lease (409 with Retry-After until then), no call that had
//      completed is made again, the one in flight at most once more, shared memory holds each
//      tool result once, and the key is charged exactly what the rows say;
//   b. a client that gives up (its SDK's timeout, then its own retry): the workflow finishes on
//      the server, the retry gets the stored answer, the aborted request's row says 499 with the
//      cost, and the key is charged once;
//   c. a worker down: its step's call is retried with backoff; down for longer, the 502 names the
//      failing step (from 0) and its worker, and the same request sent again continues from that
//      step without paying again for the steps that answered;
//   d. a rolling deploy: state saved as the previous release writes it (v1) is continued.
// Stub OpenAI-compatible servers play the workers; real Postgres and Redis. The sizes are the
// tests'; docs/benchmarks.md's figures are the same tests at the issue's sizes:
// FUGU_FAULT_WORKFLOWS=50 (a), FUGU_FAULT_ABORTS=100 (b), FUGU_FAULT_DOWN_WORKFLOWS=50 with
// FUGU_FAULT_DOWN_MS=5000 (c); each prints its figure.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import OpenAI, { APIError } from 'openai';
import { sql } from 'kysely';
import { loadConfig, serviceEnv, type FuguConfig } from '@fugu/config';
import { createApiKey, getUltraSession, publishUltraDeployment } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { writeWorkerPool } from '@fugu/datasets';
import { startOpenAIStub, WEATHER_TOOL, type OpenAIStub, type RecordedRequest, type StubReply } from '@fugu/providers/testing';
import { testRedisUrl } from '../support/eval-env.ts';
import { forkGateway, type AppProcess } from '../support/app-process.ts';
import { paidPico, spentPico, workflowCalls } from '../support/paid.ts';

const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { name: WEATHER_TOOL.name, description: WEATHER_TOOL.description!, parameters: WEATHER_TOOL.parameters } }];
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;
type Msg = OpenAI.ChatCompletionMessageParam;

// how the stub workers behave, set by each test: a continuation's delay, and workers that answer 503
const delayMs: Record<string, number> = { alpha: 0, beta: 0 };
const down = new Set<string>();
const aggregator = (req: RecordedRequest): boolean => JSON.stringify(req.body?.messages ?? []).includes('Work already done by other agents');
const continuation = (req: RecordedRequest): boolean => req.body?.messages?.at(-1)?.role === 'tool';
function replyAs(name: string) {
  return async (req: RecordedRequest): Promise<StubReply> => {
    if (down.has(name)) return { type: 'error', status: 503, message: `${name} is down` };
    if (aggregator(req)) return { type: 'text', text: `${name} aggregated`, usage: { input: 40, output: 2 } };
    if (continuation(req)) {
      if (delayMs[name]) await new Promise((r) => setTimeout(r, delayMs[name]));
      return { type: 'text', text: `${name} read ${req.body.messages.at(-1).content}`, usage: { input: 30, output: 4 } };
    }
    return { type: 'tool-calls', calls: [{ id: `own_${name}`, name: 'get_weather', arguments: `{"city":"${name}"}` }], usage: { input: 20, output: 3 } };
  };
}

let database: TestDatabase;
let home: string;
let config: FuguConfig;
const stubs: Record<string, OpenAIStub> = {};
let poolFile: string;
let key: string;
let keyId: string;
const gateways: AppProcess[] = [];
const secret = randomBytes(32).toString('hex');

async function startGateway(): Promise<{ url: string; app: AppProcess }> {
  const g = await forkGateway({ ...serviceEnv(config), FUGU_LOG_LEVEL: 'warn', FUGU_GATEWAY_POOL: poolFile, FUGU_GATEWAY_PORT: '0', FUGU_GATEWAY_AUTH: 'keys', FUGU_ULTRA_ID_SECRET: secret });
  gateways.push(g.app);
  return g;
}

const continuations = (name: string): RecordedRequest[] => stubs[name]!.requests.filter((r) => r.body?.messages && continuation(r));
const count = async (q: ReturnType<typeof sql<{ n: number }>>): Promise<number> => (await q.execute(database.db)).rows[0]!.n;

/** A workflow's first request: the two proposers' tool calls; returns the history with their results appended. */
async function toolRound(url: string, question: string): Promise<{ wf: number; history: Msg[] }> {
  const history: Msg[] = [{ role: 'user', content: question }];
  const first = await new OpenAI({ apiKey: key, baseURL: url, maxRetries: 0 }).chat.completions.create({ model: 'fugu-ultra', messages: history, tools });
  const calls = first.choices[0]!.message.tool_calls!;
  expect(calls).toHaveLength(2);
  history.push(first.choices[0]!.message as never, ...calls.map((c) => ({ role: 'tool' as const, tool_call_id: c.id, content: `weather for ${(c as Json).function.arguments}` })));
  return { wf: (first as Json).fugu.workflow as number, history };
}

beforeAll(async () => {
  database = await createTestDatabase();
  home = await mkdtemp(path.join(tmpdir(), 'fugu-ultra-durable-'));
  config = loadConfig({ FUGU_REDIS_URL: testRedisUrl(), FUGU_DATABASE_URL: database.url, FUGU_QUEUE_PREFIX: `fuguud${randomBytes(4).toString('hex')}`, FUGU_HOME: home });
  for (const name of ['alpha', 'beta']) stubs[name] = await startOpenAIStub({ defaultReply: replyAs(name) });
  poolFile = path.join(home, 'pool.yaml');
  await writeWorkerPool(poolFile, {
    name: 'ultra-durable',
    workers: ['alpha', 'beta'].map((n) => ({ name: n, provider: 'openai-compatible' as const, model: `${n}-model`, baseUrl: stubs[n]!.baseURL, settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' } })),
  });
  await publishUltraDeployment(database.db, { name: 'fugu-ultra', conductor: 'fixed:moa:2', pool: 'ultra-durable', options: {} });
  const k = await createApiKey(database.db, { name: 'ultra-durable' });
  key = k.key;
  keyId = k.record.id;
});

afterAll(async () => {
  for (const g of gateways) await g.kill9();
  await Promise.all(Object.values(stubs).map((s) => s.close()));
  await database?.drop();
  if (home) await rm(home, { recursive: true, force: true });
});

describe('fugu-ultra under faults', () => {
  let b: { url: string; app: AppProcess };

  it('a gateway killed -9 with workflows mid-step (20; FUGU_FAULT_WORKFLOWS): each retry is answered by another gateway; nothing completed is paid twice; shared memory has no duplicate', async () => {
    const a = await startGateway();
    b = await startGateway();
    const n = Number(process.env.FUGU_FAULT_WORKFLOWS ?? 20);
    const rounds = await Promise.all(Array.from({ length: n }, (_, i) => toolRound(a.url, `Compare the weather, case ${i}.`)));
    // alpha's continuations answer at once, beta's are still running when the gateway dies
    delayMs.beta = 60_000;
    const onA = new OpenAI({ apiKey: key, baseURL: a.url, maxRetries: 0 });
    const lost = rounds.map((r) => onA.chat.completions.create({ model: 'fugu-ultra', messages: r.history, tools }).then(() => 'answered', () => 'lost'));
    const alphaDone = sql<{ n: number }>`select count(*)::int as n from chat_calls where key like any(${rounds.map((r) => `wf${r.wf}.s0.t2%`)}::text[]) and status = 'ok'`;
    await expect.poll(async () => (await count(alphaDone)) === n && continuations('beta').length === n, { timeout: 60_000 }).toBe(true);
    await a.app.kill9();
    expect(await Promise.all(lost)).toEqual(Array(n).fill('lost'));
    delayMs.beta = 0;

    // until the dead holder's lease ends: a 409 that says when to come back
    const busy = await fetch(`${b.url}/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fugu-ultra', messages: rounds[0]!.history, tools }),
    });
    // (on a machine so slow that the lease had lapsed already, this request takes the workflow over)
    if (busy.status !== 200) {
      expect(busy.status).toBe(409);
      const retryAfter = Number(busy.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(6);
      expect(((await busy.json()) as Json).error.code).toBe('workflow_busy');
    }

    // the clients retry on B (the SDK honours Retry-After)
    const t0 = performance.now();
    const onB = new OpenAI({ apiKey: key, baseURL: b.url, maxRetries: 3 });
    const answers = await Promise.all(rounds.map((r) => onB.chat.completions.create({ model: 'fugu-ultra', messages: r.history, tools })));
    console.log(`kill -9 with ${n} workflows mid-step: all answered ${((performance.now() - t0) / 1000).toFixed(1)} s after the clients retried`);
    expect(answers.map((x) => x.choices[0]!.message.content)).toEqual(Array(n).fill('alpha aggregated'));
    expect(answers.map((x) => (x as Json).fugu.workflow)).toEqual(rounds.map((r) => r.wf));
    // alpha's continuation had completed: never made again; beta's was in flight: once more each
    expect(continuations('alpha')).toHaveLength(n);
    expect(continuations('beta')).toHaveLength(2 * n);
    const okRows = sql<{ n: number }>`select count(*)::int as n from chat_calls where key like any(${workflowCalls(rounds.map((r) => r.wf))}::text[]) and status = 'ok'`;
    // per workflow: 2 proposers x 2 turns + the aggregator, one ok row each
    await expect.poll(() => count(okRows)).toBe(5 * n);
    // shared memory: each tool result once
    const memory = await sql<{ n: number; calls: number }>`select count(*)::int as n, count(distinct call_id)::int as calls from ultra_tool_log where workflow_id = any(${rounds.map((r) => r.wf)}::bigint[])`.execute(database.db);
    expect(memory.rows[0]).toEqual({ n: 2 * n, calls: 2 * n });
    // the key paid what the rows say its calls cost, each once
    await expect.poll(async () => (await spentPico(database.db, keyId)) === (await paidPico(database.db, ['wf%']))).toBe(true);
  });

  it('clients that give up (their SDK times out, then retries): each retry gets the stored answer; each aborted row says 499 with the cost; charged once', async () => {
    const k = Number(process.env.FUGU_FAULT_ABORTS ?? 3);
    const rounds = await Promise.all(Array.from({ length: k }, (_, i) => toolRound(b.url, `A client with little patience, ${i}.`)));
    delayMs.beta = 5_000;
    // the SDK's own retry after its 2 s timeout: 409 (Retry-After) while the first attempt's turn runs, then the stored answer
    const client = new OpenAI({ apiKey: key, baseURL: b.url, timeout: 2_000, maxRetries: 5 });
    const answers = await Promise.all(rounds.map((r) => client.chat.completions.create({ model: 'fugu-ultra', messages: r.history, tools }).withResponse()));
    delayMs.beta = 0;
    expect(answers.map((a) => a.data.choices[0]!.message.content)).toEqual(Array(k).fill('alpha aggregated'));
    expect(answers.map((a) => a.response.headers.get('idempotent-replayed'))).toEqual(Array(k).fill('true'));
    rounds.forEach((_, i) => expect(continuations('beta').filter((q) => JSON.stringify(q.body.messages).includes(`little patience, ${i}.`))).toHaveLength(1));
    for (const r of rounds) {
      const rows = () => sql<{ status: number; error_code: string | null; cost: string }>`select status, error_code, cost::text as cost from requests where workflow_id = ${r.wf} order by created_at`.execute(database.db).then((x) => x.rows);
      const paid = await paidPico(database.db, [`wf${r.wf}.s0.t2%`, `wf${r.wf}.s1.t2%`, `wf${r.wf}.s2.%`]);
      await expect.poll(async () => (await rows()).some((x) => x.status === 499)).toBe(true);
      const aborted = (await rows()).find((x) => x.status === 499)!;
      expect(aborted.error_code).toBe('client_closed');
      expect(BigInt(Math.round(Number(aborted.cost) * 1e12))).toBe(paid);
    }
    await expect.poll(async () => (await spentPico(database.db, keyId)) === (await paidPico(database.db, ['wf%']))).toBe(true);
    console.log(`${k} results requests aborted by the SDK's timeout: ${k} answers recovered by its retry, each charged once (the key's spend equals its calls' rows)`);
  });

  it('a worker down: its call is retried; down for longer, the 502 names the step and worker, and the same request again continues from it', async () => {
    // down for a moment: each step's call is tried again and every workflow answers
    const m = Number(process.env.FUGU_FAULT_DOWN_WORKFLOWS ?? 3);
    const downMs = Number(process.env.FUGU_FAULT_DOWN_MS ?? 600);
    const short = await Promise.all(Array.from({ length: m }, (_, i) => toolRound(b.url, `A worker that hiccups, ${i}.`)));
    down.add('beta');
    setTimeout(() => down.delete('beta'), downMs);
    const client = new OpenAI({ apiKey: key, baseURL: b.url, maxRetries: 0 });
    const answers = await Promise.all(short.map((r) => client.chat.completions.create({ model: 'fugu-ultra', messages: r.history, tools })));
    expect(answers.map((a) => a.choices[0]!.message.content)).toEqual(Array(m).fill('alpha aggregated'));
    let retried = 0;
    for (const r of short) {
      const triesOf = () => sql<{ status: string }>`select status from chat_calls where key like ${`wf${r.wf}.s1.t2%`} order by key`.execute(database.db);
      // (the answered call's row is written behind the answer)
      await expect.poll(async () => (await triesOf()).rows.some((t) => t.status === 'ok')).toBe(true);
      const tries = await triesOf();
      expect(tries.rows.length).toBeGreaterThan(1);
      expect(tries.rows.filter((t) => t.status === 'ok')).toHaveLength(1);
      retried += tries.rows.length - 1;
    }
    console.log(`beta down ${downMs} ms during ${m} workflows: ${m} completed, none ended, ${retried} calls retried`);

    // down for good: a 502 naming beta's step, numbered as the fugu object numbers it
    const long = await toolRound(b.url, 'A worker that is down.');
    down.add('beta');
    const noRetry = new OpenAI({ apiKey: key, baseURL: b.url, maxRetries: 0 });
    const e = await noRetry.chat.completions.create({ model: 'fugu-ultra', messages: long.history, tools }).then(() => undefined, (x: unknown) => x as APIError);
    expect(e?.status).toBe(502);
    expect(e?.message).toMatch(new RegExp(`workflow ${long.wf}: step 1 \\(beta\\) failed: .*send the same request again to continue from this step`));
    const alphaCalls = continuations('alpha').length;
    down.delete('beta');
    const resumed = await noRetry.chat.completions.create({ model: 'fugu-ultra', messages: long.history, tools });
    expect(resumed.choices[0]!.message.content).toBe('alpha aggregated');
    expect((resumed as Json).fugu.workflow).toBe(long.wf);
    // alpha's step had answered: not called again
    expect(continuations('alpha')).toHaveLength(alphaCalls);
    expect((await getUltraSession(database.db, long.wf))!.status).toBe('done');
  });

  it('a rolling deploy: a workflow saved by the previous release (state v1) is continued; a state of an unknown version is a 409 naming both', async () => {
    const r = await toolRound(b.url, 'Saved by the previous release.');
    const s = (await getUltraSession(database.db, r.wf))!;
    // the previous release's state: v1, without the call tries, stored answers and resume mark,
    // saved as its save does (the next version); continued by a replica of this release
    const { replies: _r, resume: _s, ...rest } = s.state as Json;
    const v1 = { ...rest, v: 1, agents: rest.agents.map(({ attempt: _a, ...agent }: Json) => agent) };
    await sql`update ultra_sessions set state = ${JSON.stringify(v1)}::jsonb, version = version + 1 where workflow_id = ${r.wf}`.execute(database.db);
    const c = await startGateway();
    const client = new OpenAI({ apiKey: key, baseURL: c.url, maxRetries: 0 });
    const done = await client.chat.completions.create({ model: 'fugu-ultra', messages: r.history, tools });
    expect(done.choices[0]!.message.content).toBe('alpha aggregated');

    const r3 = await toolRound(b.url, 'Saved by a later release.');
    await sql`update ultra_sessions set state = jsonb_set(state, '{v}', '3'), version = version + 1 where workflow_id = ${r3.wf}`.execute(database.db);
    const e = await client.chat.completions.create({ model: 'fugu-ultra', messages: r3.history, tools }).then(() => undefined, (x: unknown) => x as APIError);
    expect(e?.status).toBe(409);
    expect(e?.message).toMatch(/state v3; this one reads v1 and v2/);
  });
});
