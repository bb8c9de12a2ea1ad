// fugu-ultra behind the OpenAI API, end to end: the real `openai` npm client against the gateway
// (buildGateway with the fugu-ultra model, listening on a free port), real Postgres (API keys,
// workflows, the interactive state, the shared tool memory) and stub providers from
// @fugu/providers/testing as OpenAI-compatible workers. The Conductor is a fixed topology
// (fixed:moa:2: alpha and beta propose on their own, alpha aggregates with both answers), so the
// test knows which agent each request is.
//
// The stubs answer by role: a proposer (no other agent's work in its prompt) calls get_weather
// when tools are given, and after its tool result answers with what it read; the aggregator
// answers with the proposals it was given.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import OpenAI, { APIError } from 'openai';
import type { FastifyInstance } from 'fastify';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { Redis } from 'ioredis';
import { redisHolds } from '@fugu/ultra';
import { formatUsd, parseUsd, tokenCost, type WorkerPool } from '@fugu/core';
import { loadConfig, type FuguConfig } from '@fugu/config';
import { createApiKey, getWorkflowSteps, getWorkflows, listRequests, savePool, type Database, type StoredWorker } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { poolContentHash } from '@fugu/evaluation';
import { startOpenAIStub, WEATHER_TOOL, type OpenAIStub, type RecordedRequest, type StubReply } from '@fugu/providers/testing';
import { createLogger } from '@fugu/telemetry';
import { startUltraGateway, stubWorker } from '../support/ultra-gateway.ts';
import { testRedisUrl } from '../support/eval-env.ts';
import { publishUltraAndTell } from '../support/ultra-publish.ts';

const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { name: WEATHER_TOOL.name, description: WEATHER_TOOL.description!, parameters: WEATHER_TOOL.parameters } }];
const QUESTION = 'Should I take an umbrella in Paris today?';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;
const isAggregator = (req: RecordedRequest): boolean => JSON.stringify(req.body?.messages ?? []).includes('Work already done by other agents');
const textOf = (m: Json): string => (typeof m.content === 'string' ? m.content : (m.content ?? []).map((p: Json) => p.text ?? '').join(''));

/** Each stub's behaviour (see the header); `loops` makes a proposer call the tool again after each result. */
function replyAs(name: string, opts: { loops?: boolean } = {}) {
  return (req: RecordedRequest): StubReply => {
    const msgs: Json[] = req.body?.messages ?? [];
    const last = msgs.at(-1);
    if (isAggregator(req)) return { type: 'text', text: `${name} aggregated the proposals`, usage: { input: 40, output: 5 } };
    if (req.body?.tools && (last?.role === 'user' || (opts.loops && last?.role === 'tool'))) {
      const n = msgs.filter((m) => m.role === 'tool').length;
      return { type: 'tool-calls', calls: [{ id: `own_${name}_${n}`, name: 'get_weather', arguments: JSON.stringify({ city: name === 'alpha' ? 'Paris' : 'Lyon' }) }], text: name === 'alpha' && n === 0 ? 'Checking.' : '', usage: { input: 20, output: 3 } };
    }
    if (last?.role === 'tool') return { type: 'text', text: `${name} read ${textOf(last)}`, usage: { input: 30, output: 4 } };
    return { type: 'text', text: `${name} proposes without tools`, usage: { input: 20, output: 4 } };
  };
}

let database: TestDatabase;
let home: string;
let config: FuguConfig;
let pool: WorkerPool;
let stored: { poolId: number; workers: StoredWorker[] };
const stubs: Record<string, OpenAIStub> = {};
const gateways: FastifyInstance[] = [];
let baseURL: string;
let fullKey: string;
let otherKey: string;
let narrowKey: string;
const secret = randomBytes(32);
const quiet = createLogger({ name: 'ultra-serving-test', level: 'silent' });

async function startGateway(): Promise<string> {
  const { app, url } = await startUltraGateway({ config, db: database.db, pool, stored, secret, log: quiet });
  gateways.push(app);
  return url;
}

const client = (apiKey = fullKey, url = baseURL) => new OpenAI({ apiKey, baseURL: url, maxRetries: 0, timeout: 30_000 });
const publish = (options: Record<string, unknown> = {}, conductor = 'fixed:moa:2') => publishUltraAndTell(config, database.db, { name: 'fugu-ultra', conductor, pool: pool.name, options });
const requestsTo = (name: string) => stubs[name]!.requests.filter((r) => r.body?.messages);

beforeAll(async () => {
  database = await createTestDatabase();
  home = await mkdtemp(path.join(tmpdir(), 'fugu-ultra-gw-'));
  config = loadConfig({
    FUGU_REDIS_URL: testRedisUrl(), FUGU_DATABASE_URL: database.url, FUGU_QUEUE_PREFIX: `fuguug${randomBytes(4).toString('hex')}`, FUGU_HOME: home, FUGU_LOG_LEVEL: 'silent',
  });
  stubs.alpha = await startOpenAIStub({ defaultReply: replyAs('alpha') });
  stubs.beta = await startOpenAIStub({ defaultReply: replyAs('beta') });
  // gamma calls the tool again after every result (the bounds test)
  stubs.gamma = await startOpenAIStub({ defaultReply: replyAs('gamma', { loops: true }) });
  pool = { name: 'ultra-test', workers: [stubWorker('alpha', stubs.alpha, ['1', '2']), stubWorker('beta', stubs.beta, ['0.5', '1.5']), stubWorker('gamma', stubs.gamma, ['0', '0'])] };
  stored = await savePool(database.db, pool, poolContentHash(pool));
  baseURL = await startGateway();
  fullKey = (await createApiKey(database.db, { name: 'full' })).key;
  otherKey = (await createApiKey(database.db, { name: 'other' })).key;
  narrowKey = (await createApiKey(database.db, { name: 'narrow', allowedWorkers: ['beta', 'gamma'] })).key;
});

afterAll(async () => {
  for (const g of gateways) await g.close().catch(() => {});
  await Promise.all(Object.values(stubs).map((s) => s.close()));
  await database?.drop();
  if (home) await rm(home, { recursive: true, force: true });
});

/** The API error a request must end with (a request that succeeds fails the test). */
async function refused(p: Promise<unknown>): Promise<APIError & { param?: string }> {
  const r = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(r instanceof APIError)) throw new Error(`expected an API error, got ${r === undefined ? 'an answer' : String(r)}`);
  return r as APIError & { param?: string };
}

const reset = () => Object.values(stubs).forEach((s) => s.requests.splice(0));

describe('fugu-ultra: one model behind chat completions', () => {
  it('runs the default Conductor until one is published, said in the fugu object with the command (was a 503, issue 28)', async () => {
    const c = await client().chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }] });
    expect((c as Json).fugu).toMatchObject({ conductor: 'fixed:moa:2', conductor_default: expect.stringMatching(/^no Conductor is published as "fugu-ultra": `fugu ultra publish --conductor <spec> --pool \S+` publishes one$/) });
    expect(c.choices[0]!.message.content).toBe('alpha aggregated the proposals');
  });

  it('runs a workflow: the final step answers; header, fugu object and usage name the workflow, its workers and the two kinds of tokens; rows written', async () => {
    await publish();
    reset();
    const { data, response } = await client().chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: QUESTION }] }).withResponse();
    const wf = Number(response.headers.get('x-fugu-workflow'));
    expect(wf).toBeGreaterThan(0);
    expect(response.headers.get('x-fugu-worker')).toBe('alpha'); // the final step's
    expect(data.model).toBe('fugu-ultra');
    expect(data.choices[0]!.message.content).toBe('alpha aggregated the proposals');
    expect(data.choices[0]!.finish_reason).toBe('stop');
    const x = (data as Json).fugu;
    expect(x.workflow).toBe(wf);
    expect(x.topology).toBe('parallel');
    expect(x.steps.map((s: Json) => [s.worker, s.status])).toEqual([['alpha', 'done'], ['beta', 'done'], ['alpha', 'done']]);
    // both proposers' answers reached the aggregator, and the client's system message every agent
    const agg = requestsTo('alpha').find(isAggregator)!;
    expect(JSON.stringify(agg.body.messages)).toContain('beta proposes without tools');
    expect(JSON.stringify(agg.body.messages)).toContain('alpha proposes without tools');
    for (const r of [...requestsTo('alpha'), ...requestsTo('beta')]) expect(r.body.messages[0]).toEqual({ role: 'system', content: 'Be brief.' });
    // usage: a fixed Conductor spends nothing; the workers' tokens and cost are the three calls'
    const u = data.usage as Json;
    expect(u.conductor).toEqual({ prompt_tokens: 0, completion_tokens: 0, cost: 0 });
    expect(u.workers.prompt_tokens).toBe(20 + 20 + 40);
    expect(u.workers.completion_tokens).toBe(4 + 4 + 5);
    const cost = tokenCost(60, 9, pool.workers[0]!.prices) + tokenCost(20, 4, pool.workers[1]!.prices);
    expect(u.cost).toBe(Number(formatUsd(cost)));
    expect(u.workers.cost).toBe(u.cost);
    expect(u.prompt_tokens).toBe(80);
    // the workflow's rows: the workflow, its three steps, the request row linked to it
    const [row] = await getWorkflows(database.db, [wf]);
    expect(row!.status).toBe('done');
    expect(row!.finalAnswer).toBe('alpha aggregated the proposals');
    expect(row!.conductor).toBe('fixed:moa:2');
    expect(parseUsd(row!.workerCost)).toBe(cost);
    expect((await getWorkflowSteps(database.db, wf)).map((s) => [s.idx, s.worker, s.status])).toEqual([[0, 'alpha', 'ok'], [1, 'beta', 'ok'], [2, 'alpha', 'ok']]);
    await expect.poll(async () => (await listRequests(database.db, { limit: 10 })).find((r) => r.workflowId === wf)?.model).toBe('fugu-ultra');
  });

  it('streams: progress as extension chunks standard clients pass by, the final step\'s tokens, usage with both kinds', async () => {
    reset();
    const { data: stream, response } = await client()
      .chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }], stream: true, stream_options: { include_usage: true } })
      .withResponse();
    expect(Number(response.headers.get('x-fugu-workflow'))).toBeGreaterThan(0);
    // the final step's worker, as on the JSON reply: known once the workflow is written, before the first byte
    expect(response.headers.get('x-fugu-worker')).toBe('alpha');
    const chunks: Json[] = [];
    for await (const c of stream) chunks.push(c);
    const progress = chunks.filter((c) => c.fugu).map((c) => c.fugu);
    expect(progress.every((p, i) => chunks.filter((c) => c.fugu)[i].choices.length === 0 && typeof p.event === 'string')).toBe(true);
    expect(progress[0]).toMatchObject({ event: 'workflow.written', topology: 'parallel' });
    const started = progress.filter((p) => p.event === 'step.started').map((p) => p.step);
    expect(started.sort()).toEqual([0, 1, 2]);
    // the aggregator starts only after both proposers finished
    const at = (pred: (p: Json) => boolean) => progress.findIndex(pred);
    expect(at((p) => p.event === 'step.started' && p.step === 2)).toBeGreaterThan(at((p) => p.event === 'step.finished' && p.step === 0));
    expect(at((p) => p.event === 'step.started' && p.step === 2)).toBeGreaterThan(at((p) => p.event === 'step.finished' && p.step === 1));
    expect(progress.at(-1)).toMatchObject({ event: 'workflow.finished', finish_reason: 'answered' });
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe('alpha aggregated the proposals');
    // the final step was streamed from its provider (the proposers were not)
    expect(requestsTo('alpha').find(isAggregator)!.body.stream).toBe(true);
    expect(requestsTo('beta').every((r) => !r.body.stream)).toBe(true);
    const usage = chunks.at(-1).usage;
    expect(usage.workers.prompt_tokens).toBe(80);
    expect(usage.conductor.prompt_tokens).toBe(0);
  });

  it('a key with a restricted pool: the workflow uses only its workers', async () => {
    reset();
    const data = await client(narrowKey).chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }] });
    expect((data as Json).fugu.steps.map((s: Json) => s.worker)).toEqual(['beta', 'gamma', 'beta']);
    const { data: streamed, response } = await client(narrowKey).chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }], stream: true }).withResponse();
    expect(response.headers.get('x-fugu-worker')).toBe('beta');
    for await (const _ of streamed);
    expect(requestsTo('alpha')).toHaveLength(0);
    const err = await refused(client(narrowKey).chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }], fugu: { workers: ['alpha'] } } as never));
    expect(err.status).toBe(400);
    expect(err.message).toMatch(/fugu\.workers.*"alpha" is not among this key's workers/);
  });
});

describe('fugu-ultra: multi-agent function calling', () => {
  let first: OpenAI.ChatCompletion;
  let history: OpenAI.ChatCompletionMessageParam[];

  it('agents running at the same time: their tool calls merged into one assistant message with fugu\'s signed ids', async () => {
    reset();
    history = [{ role: 'user', content: QUESTION }];
    first = await client().chat.completions.create({ model: 'fugu-ultra', messages: history, tools });
    const msg = first.choices[0]!;
    expect(msg.finish_reason).toBe('tool_calls');
    const calls = msg.message.tool_calls!;
    expect(calls).toHaveLength(2);
    expect(calls.map((c) => (c as Json).function.arguments).sort()).toEqual(['{"city":"Lyon"}', '{"city":"Paris"}']);
    for (const c of calls) expect(c.id).toMatch(/^call_fu_\d+_[01]_\d+_[A-Za-z0-9_-]{22}$/);
    // the workers' own ids never reach the client
    expect(JSON.stringify(first)).not.toContain('own_');
    expect((first as Json).fugu.status).toBe('tools');
    expect((first as Json).fugu.steps.map((s: Json) => s.status)).toEqual(['tools', 'tools', 'waiting']);
    // the request's tools reached each agent
    expect(requestsTo('alpha')[0]!.body.tools).toEqual(tools);
    expect(requestsTo('beta')[0]!.body.tools).toEqual(tools);
    history.push(msg.message as OpenAI.ChatCompletionMessageParam);
  });

  it('refuses a forged id, another key\'s results and a partial set of results, changing nothing', async () => {
    const calls = first.choices[0]!.message.tool_calls!;
    const forged = calls[0]!.id.replace(/_(\d+)_([A-Za-z0-9_-]{22})$/, (_m, seq: string, sig: string) => `_${Number(seq) + 5}_${sig}`);
    const send = (ids: string[], key = fullKey) =>
      refused(client(key)
        .chat.completions.create({
          model: 'fugu-ultra', tools,
          messages: [...history.slice(0, -1), { ...(history.at(-1) as Json), tool_calls: ids.map((id, i) => ({ ...calls[i % calls.length], id })) }, ...ids.map((id) => ({ role: 'tool' as const, tool_call_id: id, content: 'sunny' }))],
        }));
    const e1 = await send([forged, calls[1]!.id]);
    expect(e1.status).toBe(400);
    expect(e1.message).toMatch(/was not issued to this API key \(or was altered\)/);
    const e2 = await send(calls.map((c) => c.id), otherKey);
    expect(e2.status).toBe(400);
    expect(e2.message).toMatch(/not issued to this API key/);
    const e3 = await send([calls[0]!.id]);
    expect(e3.status).toBe(400);
    expect(e3.message).toMatch(/waits for the result of every tool call.*missing: call_fu_/);
    const e4 = await send(['call_not_ours', calls[1]!.id]);
    expect(e4.status).toBe(400);
    expect(e4.param).toBe('messages[2].tool_call_id');
    // nothing moved: the agents were not called again
    expect(requestsTo('alpha')).toHaveLength(1);
    expect(requestsTo('beta')).toHaveLength(1);
  });

  it('each result goes back to the agent that made the call (another gateway replica takes it), and the dependent step runs; an agent never sees another\'s tool traffic', async () => {
    const other = await startGateway();
    await gateways[0]!.close();
    const calls = first.choices[0]!.message.tool_calls!;
    const resultFor = (c: Json) => (c.function.arguments.includes('Paris') ? 'Paris: 14 C, rain' : 'Lyon: 19 C, dry');
    history.push(...calls.map((c) => ({ role: 'tool' as const, tool_call_id: c.id, content: resultFor(c) })));
    const { data, response } = await client(fullKey, other).chat.completions.create({ model: 'fugu-ultra', messages: history, tools }).withResponse();
    expect(response.headers.get('x-fugu-workflow')).toBe(String((first as Json).fugu.workflow));
    expect(data.choices[0]!.message.content).toBe('alpha aggregated the proposals');
    // alpha's proposer got its own result under its own call id, beta its own
    const alphaAgain = requestsTo('alpha')[1]!.body.messages;
    expect(alphaAgain.at(-2).tool_calls[0].id).toBe('own_alpha_0');
    expect(alphaAgain.at(-1)).toEqual({ role: 'tool', tool_call_id: 'own_alpha_0', content: 'Paris: 14 C, rain' });
    const betaAgain = requestsTo('beta')[1]!.body.messages;
    expect(betaAgain.at(-1)).toEqual({ role: 'tool', tool_call_id: 'own_beta_0', content: 'Lyon: 19 C, dry' });
    expect(JSON.stringify(betaAgain)).not.toContain('Paris: 14 C');
    // the aggregator read the proposers' answers, not their tool calls or results
    const agg = requestsTo('alpha').find(isAggregator)!.body.messages;
    expect(agg.some((m: Json) => m.role === 'tool' || m.tool_calls)).toBe(false);
    expect(JSON.stringify(agg)).toContain('alpha read Paris: 14 C, rain');
    expect(JSON.stringify(agg)).not.toContain('get_weather');
    // the same results sent again (a client that gave up on the answer): the stored answer, no agent called again
    const calledBefore = requestsTo('alpha').length + requestsTo('beta').length;
    const again = await client(fullKey, other).chat.completions.create({ model: 'fugu-ultra', messages: history, tools }).withResponse();
    expect(again.data.choices[0]!.message.content).toBe('alpha aggregated the proposals');
    expect(again.response.headers.get('idempotent-replayed')).toBe('true');
    expect(requestsTo('alpha').length + requestsTo('beta').length).toBe(calledBefore);
    // other results for the same calls are refused
    const changed = history.map((m) => (m.role === 'tool' ? { ...m, content: 'snow' } : m));
    const refusedAgain = await refused(client(fullKey, other).chat.completions.create({ model: 'fugu-ultra', messages: changed, tools }));
    expect(refusedAgain.status).toBe(400);
    expect(refusedAgain.message).toMatch(/already answered/);
    baseURL = other;
    history.push({ role: 'assistant', content: data.choices[0]!.message.content });
  });

  it('a later turn of the conversation starts a new workflow whose agents see the earlier tool results (shared memory), unless turned off', async () => {
    reset();
    history.push({ role: 'user', content: 'And tomorrow?' });
    const data = await client().chat.completions.create({ model: 'fugu-ultra', messages: history, tools });
    expect((data as Json).fugu.conversation).toBe((first as Json).fugu.conversation);
    expect((data as Json).fugu.workflow).not.toBe((first as Json).fugu.workflow);
    const prompt = JSON.stringify(requestsTo('beta')[0]!.body.messages);
    expect(prompt).toContain('Tool results already known in this conversation');
    expect(prompt).toContain('Lyon: 19 C, dry');
    expect(prompt).toContain('Paris: 14 C, rain');
    expect(prompt).toContain(QUESTION);
    reset();
    await client().chat.completions.create({ model: 'fugu-ultra', messages: [...history.slice(0, -1), { role: 'user', content: 'And the day after?' }], tools, fugu: { shared_memory: false } } as never);
    expect(JSON.stringify(requestsTo('beta')[0]!.body.messages)).not.toContain('Lyon: 19 C');
  });
});

describe('fugu-ultra: the same tool round trip streamed, and through the Responses API', () => {
  const resultOf = (args: string) => (args.includes('Paris') ? 'Paris: 14 C, rain' : 'Lyon: 19 C, dry');
  const ownResults = () => {
    // each proposer's second call carries exactly its own result under its own call id
    expect(requestsTo('alpha')[1]!.body.messages.at(-1)).toEqual({ role: 'tool', tool_call_id: 'own_alpha_0', content: 'Paris: 14 C, rain' });
    expect(requestsTo('beta')[1]!.body.messages.at(-1)).toEqual({ role: 'tool', tool_call_id: 'own_beta_0', content: 'Lyon: 19 C, dry' });
    expect(JSON.stringify(requestsTo('beta')[1]!.body.messages)).not.toContain('Paris: 14 C');
    const agg = requestsTo('alpha').find(isAggregator)!.body.messages;
    expect(agg.some((m: Json) => m.role === 'tool' || m.tool_calls)).toBe(false);
    expect(JSON.stringify(agg)).toContain('beta read Lyon: 19 C, dry');
  };

  it('chat completions, streamed: both calls as tool_call deltas, then the final step\'s tokens', async () => {
    await publish();
    reset();
    const h: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: QUESTION }];
    const chunks: Json[] = [];
    for await (const c of await client().chat.completions.create({ model: 'fugu-ultra', messages: h, tools, stream: true })) chunks.push(c);
    const deltas = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
    expect(deltas.map((d: Json) => d.index)).toEqual([0, 1]);
    expect(chunks.find((c) => c.choices[0]?.finish_reason)!.choices[0].finish_reason).toBe('tool_calls');
    // the final step (the aggregator) is not running yet: no text but the proposer's own words, if any
    expect(chunks.filter((c) => c.fugu?.event === 'step.tool_calls').map((c) => c.fugu.step).sort()).toEqual([0, 1]);
    const calls = deltas.map((d: Json) => ({ id: d.id, type: 'function' as const, function: d.function }));
    h.push({ role: 'assistant', content: null, tool_calls: calls }, ...calls.map((c: Json) => ({ role: 'tool' as const, tool_call_id: c.id, content: resultOf(c.function.arguments) })));
    const rest: Json[] = [];
    const resumed = await client().chat.completions.create({ model: 'fugu-ultra', messages: h, tools, stream: true }).withResponse();
    // a resumed workflow's stream names its final step's worker too
    expect(resumed.response.headers.get('x-fugu-worker')).toBe('alpha');
    for await (const c of resumed.data) rest.push(c);
    expect(rest.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe('alpha aggregated the proposals');
    expect(rest[1].fugu).toMatchObject({ event: 'workflow.resumed', results: 2 });
    ownResults();
  });

  it('the Responses API: function_call items with fugu ids, function_call_output with previous_response_id, the final answer; streamed too', async () => {
    reset();
    const rtools: OpenAI.Responses.FunctionTool[] = [{ type: 'function', name: WEATHER_TOOL.name, description: WEATHER_TOOL.description!, parameters: WEATHER_TOOL.parameters, strict: false }];
    const r1 = await client().responses.create({ model: 'fugu-ultra', input: QUESTION, tools: rtools });
    const calls = r1.output.filter((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall[];
    expect(calls).toHaveLength(2);
    for (const c of calls) expect(c.call_id).toMatch(/^call_fu_\d+_[01]_\d+_/);
    expect((r1 as Json).fugu.conversation).toBe(r1.id);
    // the calls answered on another chain, or a chat request naming the chain: refused
    const other = await client().responses.create({ model: 'gamma', input: 'Hello?' });
    const outputs = calls.map((c) => ({ type: 'function_call_output' as const, call_id: c.call_id, output: resultOf(c.arguments) }));
    const foreign = await refused(client().responses.create({
      model: 'fugu-ultra', previous_response_id: other.id, tools: rtools,
      input: [...calls.map((c) => ({ type: 'function_call' as const, call_id: c.call_id, name: c.name, arguments: c.arguments })), ...outputs],
    }));
    expect([foreign.status, foreign.message]).toEqual([400, expect.stringMatching(/belongs to another conversation than "resp_/)]);
    const viaChat = await refused(client().chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }], fugu: { conversation: r1.id } } as never));
    expect([viaChat.status, viaChat.param]).toEqual([400, 'fugu.conversation']);
    expect(requestsTo('alpha')).toHaveLength(1);
    const r2 = await client().responses.create({
      model: 'fugu-ultra', previous_response_id: r1.id, tools: rtools,
      input: calls.map((c) => ({ type: 'function_call_output' as const, call_id: c.call_id, output: resultOf(c.arguments) })),
    });
    expect(r2.output_text).toBe('alpha aggregated the proposals');
    expect((r2 as Json).fugu.workflow).toBe((r1 as Json).fugu.workflow);
    ownResults();
    // usage in the Responses API's names, the nested conductor and workers objects too (never chat's prompt_tokens)
    const responsesUsage = (u: Json) => {
      expect(u.conductor).toEqual({ input_tokens: 0, output_tokens: 0, total_tokens: 0, cost: 0 });
      expect(u.workers).toEqual({ input_tokens: u.input_tokens, output_tokens: u.output_tokens, total_tokens: u.total_tokens, cost: u.cost });
      expect(u.workers.input_tokens).toBeGreaterThan(0);
      expect(JSON.stringify(u)).not.toMatch(/prompt_tokens|completion_tokens/);
    };
    responsesUsage(r2.usage as Json);

    reset();
    const s1 = await client().responses.stream({ model: 'fugu-ultra', input: QUESTION, tools: rtools }).finalResponse();
    const scalls = s1.output.filter((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall[];
    expect(scalls).toHaveLength(2);
    const stream = client().responses.stream({
      model: 'fugu-ultra', previous_response_id: s1.id, tools: rtools,
      input: scalls.map((c) => ({ type: 'function_call_output' as const, call_id: c.call_id, output: resultOf(c.arguments) })),
    });
    let text = '';
    stream.on('response.output_text.delta', (e) => (text += e.delta));
    const s2 = await stream.finalResponse();
    expect(text).toBe('alpha aggregated the proposals');
    expect(s2.output_text).toBe(text);
    ownResults();
    responsesUsage(s2.usage as Json);
    // a streamed response names the final step's worker in its headers, as the JSON one does
    const { data: events, response } = await client().responses.create({ model: 'fugu-ultra', input: QUESTION, stream: true }).withResponse();
    expect(response.headers.get('x-fugu-worker')).toBe('alpha');
    for await (const _ of events);
  });
});

describe('fugu-ultra: bounds', () => {
  it('an agent that keeps calling tools stops at its bound with a clear finish reason', async () => {
    await publish({ maxToolTurnsPerAgent: 1 }, 'fixed:single:gamma');
    const c = client();
    const h: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: QUESTION }];
    const r1 = await c.chat.completions.create({ model: 'fugu-ultra', messages: h, tools });
    expect(r1.choices[0]!.finish_reason).toBe('tool_calls');
    h.push(r1.choices[0]!.message as never, ...r1.choices[0]!.message.tool_calls!.map((t) => ({ role: 'tool' as const, tool_call_id: t.id, content: 'cloudy' })));
    const r2 = await c.chat.completions.create({ model: 'fugu-ultra', messages: h, tools });
    expect(r2.choices[0]!.finish_reason).toBe('stop');
    expect((r2 as Json).fugu.finish_reason).toBe('budget-tool-turns');
    expect((r2 as Json).fugu.steps[0].finish).toBe('budget-tool-turns');
    const [row] = await getWorkflows(database.db, [(r2 as Json).fugu.workflow]);
    expect(row!.finishReason).toBe('budget-tool-turns');
  });

  it('a workflow budget (maxUsd): no step starts once it is spent; the answer is cut with finish reason budget-usd', async () => {
    await publish({ workflow: { maxUsd: '0.00000001' } });
    reset();
    const r = await client().chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }] });
    expect(r.choices[0]!.finish_reason).toBe('length');
    expect(r.choices[0]!.message.content).toBe('');
    expect((r as Json).fugu.finish_reason).toBe('budget-usd');
    expect((r as Json).fugu.steps.map((s: Json) => s.status)).toEqual(['done', 'done', 'skipped']);
    expect(requestsTo('alpha').some(isAggregator)).toBe(false);
    const [row] = await getWorkflows(database.db, [(r as Json).fugu.workflow]);
    expect([row!.status, row!.finishReason, row!.outcome]).toEqual(['done', 'budget-usd', 'unanswered']);
  });

  it('results after the deadline: a clear 400, and the workflow ended tool-timeout (never a hang)', async () => {
    await publish({ toolResultTimeoutMs: 1000 }, 'fixed:single:beta');
    const h: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: QUESTION }];
    const r1 = await client().chat.completions.create({ model: 'fugu-ultra', messages: h, tools });
    const wf = (r1 as Json).fugu.workflow as number;
    await new Promise((r) => setTimeout(r, 1200));
    h.push(r1.choices[0]!.message as never, ...r1.choices[0]!.message.tool_calls!.map((t) => ({ role: 'tool' as const, tool_call_id: t.id, content: 'cloudy' })));
    const err = await refused(client().chat.completions.create({ model: 'fugu-ultra', messages: h, tools }));
    expect(err.status).toBe(400);
    expect(err.message).toMatch(/were due by .*\(tool-timeout\)/);
    const [row] = await getWorkflows(database.db, [wf]);
    expect([row!.status, row!.finishReason]).toEqual(['failed', 'tool-timeout']);
    expect((await getWorkflowSteps(database.db, wf))[0]!.error?.code).toBe('tool-timeout');
  });
});

describe("fugu-ultra: its state's statements", () => {
  it('a gateway whose holds (Redis) do not answer: a results request is a 503 saying so, with Retry-After, and the workflow still waits for its results', async () => {
    await publish({}, 'fixed:moa:2');
    const h: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Is it raining in Paris or in Lyon?' }];
    const r1 = await client().chat.completions.create({ model: 'fugu-ultra', messages: h, tools });
    h.push(r1.choices[0]!.message as never, ...r1.choices[0]!.message.tool_calls!.map((t) => ({ role: 'tool' as const, tool_call_id: t.id, content: 'dry' })));
    const down = new Redis({ port: 1, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    const { app, url } = await startUltraGateway({ config, db: database.db, pool, stored, secret, log: quiet, holds: redisHolds(down, 'fuguholdsdown') });
    try {
      const e = await refused(client(fullKey, url).chat.completions.create({ model: 'fugu-ultra', messages: h, tools }));
      expect([e.status, e.code, e.headers?.get('retry-after')]).toEqual([503, 'service_unavailable', '1']);
      expect(e.message).toMatch(/could not take workflow \d+ for this request: the store of its holds \(Redis\) did not answer/);
    } finally {
      await app.close();
      down.disconnect();
    }
    const r2 = await client().chat.completions.create({ model: 'fugu-ultra', messages: h, tools });
    expect(r2.choices[0]!.message.content).toBe('alpha aggregated the proposals');
  });

  it('a tool round trip on one gateway writes the state twice, once per request, and reads it never (the results request was read and taken by a statement of its own)', async () => {
    await publish({}, 'fixed:moa:2');
    // the gateway's own connections, each statement counted
    const statements: string[] = [];
    const counted = new Kysely<Database>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: database.url, max: 4 }) }), log: (e) => void (e.level === 'query' && statements.push(e.query.sql)) });
    const { app, url } = await startUltraGateway({ config, db: counted, pool, stored, secret, log: quiet });
    try {
      const state = () => statements.filter((s) => /\bultra_sessions\b/.test(s));
      const h: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Is it warmer in Paris or in Lyon?' }];
      const r1 = await client(fullKey, url).chat.completions.create({ model: 'fugu-ultra', messages: h, tools });
      expect(state()).toHaveLength(1);
      statements.splice(0);
      h.push(r1.choices[0]!.message as never, ...r1.choices[0]!.message.tool_calls!.map((t) => ({ role: 'tool' as const, tool_call_id: t.id, content: 'mild' })));
      const r2 = await client(fullKey, url).chat.completions.create({ model: 'fugu-ultra', messages: h, tools });
      expect(r2.choices[0]!.message.content).toBe('alpha aggregated the proposals');
      // its end's one statement: the state saved from the version the gateway kept, the steps, the workflow's end
      expect(state()).toHaveLength(1);
      expect(state()[0]).toMatch(/^\/\* fugu:prepared \*\/ with .*update "ultra_sessions" set/s);
    } finally {
      await app.close();
      await counted.destroy();
    }
  });
});
