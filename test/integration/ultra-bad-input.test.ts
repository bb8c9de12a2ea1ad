// fugu-ultra and /v1/responses against bad input (issue 17, figure 5): the real `openai` npm
// client and plain fetch against the gateway (buildGateway with the fugu-ultra model), real
// Postgres (API keys, workflows, the interactive state, stored responses) and stub
// OpenAI-compatible workers from @fugu/providers/testing.
//
// Each bad request must be a clear OpenAI error (status, `error.message` naming what is wrong,
// `param` where there is one) and change nothing in Postgres: the workflow that waits for tool
// results still waits, and is continued correctly afterwards.
//
//   1. tools whose schema is invalid, on chat completions and on /v1/responses;
//   2. an `llm:` Conductor (a pool worker, called through a real call pipeline) that writes a
//      valid workflow, then garbage mid-conversation (a 502 conductor_error naming the parse
//      problem, the workflow row failed / parse-error), then a valid one again;
//   3. tool results that answer nothing: a call never made, a malformed id, a tool message that
//      answers no assistant tool call, results for two workflows at once;
//   4. fuzzing: 1,000 mutated request bodies on each route (seeded), sent raw with fetch: no
//      status >= 500, every 4xx an OpenAI error body; the status histogram is printed.
//
// The stubs answer by role: a proposer calls get_weather when tools are given (and answers with
// what it read after its result), an agent that is shown other agents' work aggregates, and the
// `writer` worker, asked as the Conductor, writes the workflow its question asks for.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import OpenAI, { APIError } from 'openai';
import { sql } from 'kysely';
import type { FastifyInstance } from 'fastify';
import { rng, type WorkerPool } from '@fugu/core';
import { loadConfig, type FuguConfig } from '@fugu/config';
import { createCallPipeline } from '@fugu/calls';
import { createApiKey, getWorkflows, savePool, type StoredWorker } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { poolContentHash } from '@fugu/evaluation';
import { createChatModel } from '@fugu/providers';
import { startOpenAIStub, WEATHER_TOOL, type OpenAIStub, type RecordedRequest, type StubReply } from '@fugu/providers/testing';
import { createLogger } from '@fugu/telemetry';
import { signToolCallId } from '@fugu/ultra';
import { startUltraGateway, stubWorker } from '../support/ultra-gateway.ts';
import { paidPico, spentPico, workflowCalls } from '../support/paid.ts';
import type { RecordWriter } from '../../apps/gateway/src/record-writer.ts';
import { testRedisUrl } from '../support/eval-env.ts';
import { publishUltraAndTell } from '../support/ultra-publish.ts';
import { Fuzzer, sendFuzzCases } from '../support/body-fuzzer.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { name: WEATHER_TOOL.name, description: WEATHER_TOOL.description!, parameters: WEATHER_TOOL.parameters } }];
const respTools: OpenAI.Responses.FunctionTool[] = [{ type: 'function', name: WEATHER_TOOL.name, description: WEATHER_TOOL.description!, parameters: WEATHER_TOOL.parameters, strict: false }];
const QUESTION = 'Should I take an umbrella in Paris today?';
const AGGREGATED = 'alpha aggregated the proposals';

const CONDUCTOR_MARK = 'You coordinate a team of AI workers';
const REJECT_FINAL = 'REJECT-FINAL';
const GOOD_WORKFLOW = 'Two workers: one answers, the other checks.\nmodel id = [0, 1]\nsubtasks = ["Answer the question.", "Check the answer you are shown and give the final one."]\naccess list = [[], "all"]';
const PROSE = 'I would rather answer this myself: take an umbrella.';
const SHORT_LISTS = 'model id = [0, 1]\nsubtasks = ["Look it up."]\naccess list = [[], "all"]';

const isAggregator = (req: RecordedRequest): boolean => JSON.stringify(req.body?.messages ?? []).includes('Work already done by other agents');
const textOf = (m: Json): string => (typeof m?.content === 'string' ? m.content : (m?.content ?? []).map((p: Json) => p.text ?? '').join(''));

/** The agents' stubs (see the header). */
function agentReply(name: string, req: RecordedRequest): StubReply {
  const msgs: Json[] = req.body?.messages ?? [];
  const last = msgs.at(-1);
  // a provider that refuses a tool's schema (what OpenAI answers a schema it cannot use)
  if ((req.body?.tools ?? []).some((t: Json) => t.function?.name === 'provider_rejects')) {
    return { type: 'error', status: 400, message: "Invalid schema for function 'provider_rejects': In context=(), 'required' is required to be supplied" };
  }
  if (isAggregator(req)) {
    // a final step the provider refuses, after the proposers have answered (and been paid)
    if (JSON.stringify(req.body?.messages ?? []).includes(REJECT_FINAL)) return { type: 'error', status: 400, message: 'this final step is refused' };
    return { type: 'text', text: `${name} aggregated the proposals` };
  }
  if (req.body?.tools && last?.role === 'user') {
    return { type: 'tool-calls', calls: [{ id: `own_${name}`, name: 'get_weather', arguments: JSON.stringify({ city: name === 'alpha' ? 'Paris' : 'Lyon' }) }] };
  }
  if (last?.role === 'tool') return { type: 'text', text: `${name} read ${textOf(last)}` };
  return { type: 'text', text: `${name} proposes without tools` };
}

/** The writer: asked as the Conductor, a valid workflow unless its question asks for garbage; else an agent. */
function writerReply(req: RecordedRequest): StubReply {
  const msgs: Json[] = req.body?.messages ?? [];
  if (!JSON.stringify(msgs[0] ?? '').includes(CONDUCTOR_MARK)) return agentReply('writer', req);
  const question = textOf(msgs.at(-1));
  if (question.includes('GARBLE-PROSE')) return { type: 'text', text: PROSE };
  if (question.includes('GARBLE-LISTS')) return { type: 'text', text: SHORT_LISTS };
  return { type: 'text', text: GOOD_WORKFLOW };
}

let database: TestDatabase;
let home: string;
let config: FuguConfig;
let pool: WorkerPool;
let stored: { poolId: number; workers: StoredWorker[] };
const stubs: Record<string, OpenAIStub> = {};
let app: FastifyInstance;
let records: RecordWriter;
let baseURL: string;
let fullKey: string;
let fullKeyId: string;
const secret = randomBytes(32);
const quiet = createLogger({ name: 'ultra-bad-input-test', level: 'silent' });

const client = (apiKey = fullKey) => new OpenAI({ apiKey, baseURL, maxRetries: 0, timeout: 30_000 });
const publish = (conductor: string, options: Record<string, unknown> = {}) => publishUltraAndTell(config, database.db, { name: 'fugu-ultra', conductor, pool: pool.name, options });
const stubCalls = (): Record<string, number> => Object.fromEntries(Object.entries(stubs).map(([n, s]) => [n, s.requests.length]));

beforeAll(async () => {
  database = await createTestDatabase();
  home = await mkdtemp(path.join(tmpdir(), 'fugu-ultra-bad-'));
  config = loadConfig({
    FUGU_REDIS_URL: testRedisUrl(), FUGU_DATABASE_URL: database.url, FUGU_QUEUE_PREFIX: `fuguub${randomBytes(4).toString('hex')}`, FUGU_HOME: home, FUGU_LOG_LEVEL: 'silent',
    // every Conductor call reaches the writer's stub (no answer from the response cache)
    FUGU_RESPONSE_CACHE: 'false',
  });
  stubs.alpha = await startOpenAIStub({ defaultReply: (req) => agentReply('alpha', req) });
  stubs.beta = await startOpenAIStub({ defaultReply: (req) => agentReply('beta', req) });
  stubs.writer = await startOpenAIStub({ defaultReply: writerReply });
  pool = { name: 'ultra-bad-input', workers: [stubWorker('alpha', stubs.alpha), stubWorker('beta', stubs.beta), stubWorker('writer', stubs.writer)] };
  stored = await savePool(database.db, pool, poolContentHash(pool));
  // the llm: Conductor is a pool worker called through the writer's pipeline (the agents go through the gateway's)
  const pipeline = createCallPipeline({ db: database.db, config, log: quiet, models: (w) => createChatModel(w, {}) });
  ({ app, url: baseURL, records } = await startUltraGateway({ config, db: database.db, pool, stored, secret, log: quiet, pipeline }));
  const full = await createApiKey(database.db, { name: 'full' });
  fullKey = full.key;
  fullKeyId = full.record.id;
});

afterAll(async () => {
  await app?.close().catch(() => {});
  await Promise.all(Object.values(stubs).map((s) => s.close()));
  await database?.drop();
  if (home) await rm(home, { recursive: true, force: true });
});

/** The API error a request must end with (a request that succeeds fails the test). */
async function refused(p: Promise<unknown>): Promise<APIError & { param?: string | null }> {
  const r = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(r instanceof APIError)) throw new Error(`expected an API error, got ${r === undefined ? 'an answer' : String(r)}`);
  return r as APIError & { param?: string | null };
}

/** A refusal as the bad input names it: status, code, param, and a message that starts with the param (when there is one) and says what is wrong. */
function expectRefusal(e: APIError & { param?: string | null }, want: { status: number; code: string; param: string | null; message: RegExp }, what = ''): void {
  expect({ status: e.status, code: e.code, param: e.param ?? null }, what).toEqual({ status: want.status, code: want.code, param: want.param });
  expect((e.error as Json)?.type, what).toBe(want.status >= 500 ? 'server_error' : 'invalid_request_error');
  // the body's message (the client's own prefixes the status)
  expect((e.error as Json)?.message, what).toMatch(want.message);
}

/**
 * What fugu-ultra keeps in Postgres: every workflow (status, finish), every interactive session
 * (status, version, state, deadline), the step rows, the conversations' turn counters, the tool
 * memory, the call rows and the stored responses. A refused request changes none of it.
 */
async function snapshot(): Promise<Json> {
  // the chat_calls rows of the answers received so far are written behind them: wait for those writes
  await records.flush();
  const db = database.db;
  const count = async (table: 'workflow_steps' | 'ultra_tool_log' | 'chat_calls' | 'responses') => Number((await db.selectFrom(table).select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
  return {
    workflows: await db.selectFrom('workflows').select(['id', 'status', 'finish_reason', 'final_answer']).orderBy('id').execute(),
    sessions: (await db.selectFrom('ultra_sessions').select(['workflow_id', 'status', 'version', 'state', 'deadline_at', 'updated_at']).orderBy('workflow_id').execute()).map((s) => ({ ...s, state: JSON.stringify(s.state) })),
    conversations: await db.selectFrom('ultra_conversations').select(['id', 'turns']).orderBy('id').execute(),
    steps: await count('workflow_steps'),
    toolLog: await count('ultra_tool_log'),
    chatCalls: await count('chat_calls'),
    responses: await count('responses'),
  };
}

/** What the full key has spent (picodollars), its rows written. */
const spent = async (): Promise<bigint> => {
  await records.flush();
  return spentPico(database.db, fullKeyId);
};
/** The calls of workflows (their rows' cost, picodollars): what they paid. */
const paidBy = (wfs: number[]): Promise<bigint> => paidPico(database.db, workflowCalls(wfs));

const sessionOf = async (wf: number) => database.db.selectFrom('ultra_sessions').select(['status', 'version']).where('workflow_id', '=', wf as never).executeTakeFirstOrThrow();

// ---- 1. tools whose schema is invalid ----------------------------------------------------------

describe('fugu-ultra: tools whose schema is invalid', () => {
  const weather = { name: 'get_weather', description: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } };
  // [what is wrong, the tools, the param named, the message]
  const chatCases: Array<[string, unknown, string, RegExp]> = [
    ['parameters a string', [{ type: 'function', function: { ...weather, parameters: '{"type": "object"}' } }], 'tools[0].function.parameters', /^tools\[0\]\.function\.parameters: .*expected record, received string/i],
    ['parameters an array', [{ type: 'function', function: { ...weather, parameters: [{ type: 'object' }] } }], 'tools[0].function.parameters', /^tools\[0\]\.function\.parameters: .*expected record, received array/i],
    ['parameters a number, second tool', [{ type: 'function', function: weather }, { type: 'function', function: { ...weather, name: 'other', parameters: 7 } }], 'tools[1].function.parameters', /^tools\[1\]\.function\.parameters: .*expected record, received number/i],
    ['a schema that is not of an object', [{ type: 'function', function: { ...weather, parameters: { type: 'string' } } }], 'tools[0].function.parameters.type', /^tools\[0\]\.function\.parameters\.type: must be "object" \(a function's parameters are a JSON Schema object of named arguments\), got "string"$/],
    ['a tool without a name', [{ type: 'function', function: { description: 'weather', parameters: weather.parameters } }], 'tools[0].function.name', /^tools\[0\]\.function\.name: is required/],
    ['an empty name', [{ type: 'function', function: { ...weather, name: '' } }], 'tools[0].function.name', /^tools\[0\]\.function\.name: .*(>=1|at least 1|too small)/i],
    ['a name that is not a string', [{ type: 'function', function: { ...weather, name: 42 } }], 'tools[0].function.name', /^tools\[0\]\.function\.name: .*expected string, received number/i],
    ['a tool type other than function', [{ type: 'retrieval', function: weather }], 'tools[0].type', /^tools\[0\]\.type: .*"function"/],
    ['no function object', [{ type: 'function' }], 'tools[0].function', /^tools\[0\]\.function: is required/],
    ['tools not a list', { type: 'function', function: weather }, 'tools', /^tools: .*expected array, received object/i],
  ];
  const respCases: Array<[string, unknown, string, RegExp]> = [
    ['parameters a string', [{ type: 'function', ...weather, parameters: 'object' }], 'tools[0].parameters', /^tools\[0\]\.parameters: .*expected record, received string/i],
    ['parameters an array', [{ type: 'function', ...weather, parameters: [] }], 'tools[0].parameters', /^tools\[0\]\.parameters: .*expected record, received array/i],
    ['a schema that is not of an object', [{ type: 'function', ...weather, parameters: { type: 'array', items: { type: 'string' } } }], 'tools[0].parameters.type', /^tools\[0\]\.parameters\.type: must be "object" .*got "array"$/],
    ['a tool without a name', [{ type: 'function', description: 'weather', parameters: weather.parameters }], 'tools[0].name', /^tools\[0\]\.name: is required/],
    ['an empty name, second tool', [{ type: 'function', ...weather }, { type: 'function', ...weather, name: '' }], 'tools[1].name', /^tools\[1\]\.name: .*(>=1|at least 1|too small)/i],
    ['a built-in tool', [{ type: 'web_search' }], 'tools[0].type', /^tools\[0\]\.type: the built-in tool "web_search" is not supported/],
    ['a built-in tool the gateway cannot run', [{ type: 'local_shell' }], 'tools[0].type', /^tools\[0\]\.type: /],
    ['a tool without a type', [{ ...weather }], 'tools[0].type', /^tools\[0\]\.type: is required \("function", "custom" or "namespace"\)/],
  ];

  it('chat completions: each is a 400 naming the field, on a continuation and on a new question; the waiting workflow still waits and then continues', async () => {
    await publish('fixed:moa:2');
    const first = await client().chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }], tools });
    const wf = (first as Json).fugu.workflow as number;
    const calls = first.choices[0]!.message.tool_calls!;
    expect(calls).toHaveLength(2);
    const history: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'user', content: QUESTION },
      first.choices[0]!.message as OpenAI.ChatCompletionMessageParam,
      ...calls.map((c) => ({ role: 'tool' as const, tool_call_id: c.id, content: (c as Json).function.arguments.includes('Paris') ? 'Paris: rain' : 'Lyon: dry' })),
    ];
    const before = await snapshot();
    const seen = stubCalls();
    for (const [what, bad, param, message] of chatCases) {
      for (const messages of [history, [{ role: 'user' as const, content: 'And in Lyon?' }]]) {
        const e = await refused(client().chat.completions.create({ model: 'fugu-ultra', messages, tools: bad as never }));
        expectRefusal(e, { status: 400, code: 'invalid_value', param, message }, what);
      }
    }
    expect(await snapshot()).toEqual(before);
    expect(stubCalls()).toEqual(seen);
    expect(await sessionOf(wf)).toMatchObject({ status: 'tools' });
    // the results, now with valid tools: the workflow goes on and answers
    const done = await client().chat.completions.create({ model: 'fugu-ultra', messages: history, tools });
    expect(done.choices[0]!.message.content).toBe(AGGREGATED);
    expect((done as Json).fugu.workflow).toBe(wf);
    const [row] = await getWorkflows(database.db, [wf]);
    expect([row!.status, row!.finishReason, row!.finalAnswer]).toEqual(['done', 'answered', AGGREGATED]);
  });

  it('/v1/responses with model fugu-ultra: each is a 400 naming the field; the waiting workflow still waits and then continues', async () => {
    const first = await client().responses.create({ model: 'fugu-ultra', input: QUESTION, tools: respTools });
    const wf = (first as Json).fugu.workflow as number;
    const calls = first.output.filter((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call');
    expect(calls).toHaveLength(2);
    const outputs = calls.map((c) => ({ type: 'function_call_output' as const, call_id: c.call_id, output: c.arguments.includes('Paris') ? 'Paris: rain' : 'Lyon: dry' }));
    const before = await snapshot();
    const seen = stubCalls();
    for (const [what, bad, param, message] of respCases) {
      const cont = await refused(client().responses.create({ model: 'fugu-ultra', previous_response_id: first.id, input: outputs, tools: bad as never }));
      expectRefusal(cont, { status: 400, code: 'invalid_value', param, message }, what);
      const fresh = await refused(client().responses.create({ model: 'fugu-ultra', input: 'And in Lyon?', tools: bad as never }));
      expectRefusal(fresh, { status: 400, code: 'invalid_value', param, message }, what);
    }
    expect(await snapshot()).toEqual(before);
    expect(stubCalls()).toEqual(seen);
    expect(await sessionOf(wf)).toMatchObject({ status: 'tools' });
    const done = await client().responses.create({ model: 'fugu-ultra', previous_response_id: first.id, input: outputs, tools: respTools });
    expect(done.output_text).toBe(AGGREGATED);
    expect((done as Json).fugu.workflow).toBe(wf);
    const [row] = await getWorkflows(database.db, [wf]);
    expect([row!.status, row!.finishReason]).toEqual(['done', 'answered']);
  });
});

// ---- 3. tool results that answer nothing ------------------------------------------------------

describe('fugu-ultra: tool results that answer no call', () => {
  type Waiting = { wf: number; conversation: string; question: string; message: OpenAI.ChatCompletionMessage; calls: OpenAI.ChatCompletionMessageToolCall[] };
  let a: Waiting;
  let b: Waiting;
  const start = async (question: string): Promise<Waiting> => {
    const r = await client().chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: question }], tools });
    const x = (r as Json).fugu;
    expect(x.status).toBe('tools');
    return { wf: x.workflow, conversation: x.conversation, question, message: r.choices[0]!.message, calls: r.choices[0]!.message.tool_calls! };
  };
  const resultFor = (c: OpenAI.ChatCompletionMessageToolCall): string => ((c as Json).function.arguments.includes('Paris') ? 'Paris: rain' : 'Lyon: dry');
  /** The waiting workflow's question, an assistant message with these calls, and a result for each. */
  const answering = (w: Waiting, calls: OpenAI.ChatCompletionMessageToolCall[]): OpenAI.ChatCompletionMessageParam[] => [
    { role: 'user', content: w.question },
    { role: 'assistant', content: null, tool_calls: calls },
    ...calls.map((c) => ({ role: 'tool' as const, tool_call_id: c.id, content: resultFor(c) })),
  ];
  const withId = (c: OpenAI.ChatCompletionMessageToolCall, id: string): OpenAI.ChatCompletionMessageToolCall => ({ ...c, id });
  const send = (messages: OpenAI.ChatCompletionMessageParam[]) => refused(client().chat.completions.create({ model: 'fugu-ultra', messages, tools }));

  beforeAll(async () => {
    await publish('fixed:moa:2');
    a = await start(QUESTION);
    b = await start('Is it windy in Lyon?');
    expect(b.wf).not.toBe(a.wf);
  });

  it('refuses each with a 400 naming the message, and changes nothing; both workflows then continue', async () => {
    const before = await snapshot();
    const seen = stubCalls();
    const [c0, c1] = [a.calls[0]!, a.calls[1]!];

    // a call never made: a well-formed id with a sequence number the workflow never issued, as a client can forge it (no valid signature)
    const forged = `call_fu_${a.wf}_0_99_${'A'.repeat(22)}`;
    expectRefusal(await send(answering(a, [c0, c1, withId(c0, forged)])), { status: 400, code: 'invalid_tool_call_id', param: 'messages[4].tool_call_id', message: /^tool_call_id "call_fu_\d+_0_99_A{22}" was not issued to this API key \(or was altered\)/ }, 'forged');
    // ... and signed with the gateway's own secret (what only a bug could produce): still a call this workflow never made
    const neverIssued = signToolCallId(secret, fullKeyId, a.conversation, { workflowId: a.wf, step: 0, seq: 99 });
    expectRefusal(await send(answering(a, [c0, c1, withId(c0, neverIssued)])), {
      status: 400, code: 'invalid_tool_call_id', param: 'messages[4].tool_call_id', message: new RegExp(`^tool_call_id "${neverIssued}" answers no call workflow ${a.wf} made`),
    }, 'never issued');
    // a step the workflow does not have
    const noStep = signToolCallId(secret, fullKeyId, a.conversation, { workflowId: a.wf, step: 7, seq: 1 });
    expectRefusal(await send(answering(a, [c0, c1, withId(c0, noStep)])), {
      status: 400, code: 'invalid_tool_call_id', param: 'messages[4].tool_call_id', message: new RegExp(`^tool_call_id "${noStep}" answers no call workflow ${a.wf} made`),
    }, 'no such step');
    // a workflow that does not exist
    const noWorkflow = `call_fu_999999999999999_0_1_${'B'.repeat(22)}`;
    expectRefusal(await send(answering(a, [withId(c0, noWorkflow)])), { status: 400, code: 'invalid_tool_call_id', param: 'messages[2].tool_call_id', message: /was not issued to this API key/ }, 'no workflow');
    // malformed ids
    for (const bad of ['call_fu_12_x', `call_fu_${a.wf}_0_1_short`, `CALL_FU_${a.wf}_0_1_${'C'.repeat(22)}`, 'call_abc']) {
      expectRefusal(await send(answering(a, [c0, withId(c1, bad)])), {
        status: 400, code: 'invalid_tool_call_id', param: 'messages[3].tool_call_id', message: /answers no call that fugu-ultra made \(its ids start with call_fu_\)/,
      }, bad);
    }
    // a tool message whose tool_call_id answers no assistant tool call of the messages
    expectRefusal(await send([...answering(a, [c0, c1]), { role: 'tool', tool_call_id: 'call_orphan', content: 'sunny' }]), {
      status: 400, code: 'invalid_value', param: 'messages[4].tool_call_id', message: /^messages\[4\]\.tool_call_id: "call_orphan" answers no tool call of an earlier assistant message/,
    }, 'orphan');
    expectRefusal(await send([{ role: 'user', content: a.question }, { role: 'tool', tool_call_id: c0.id, content: 'sunny' }]), {
      status: 400, code: 'invalid_value', param: 'messages[1].tool_call_id', message: /answers no tool call of an earlier assistant message/,
    }, 'no assistant message');
    // results for two workflows in one request
    expectRefusal(await send(answering(a, [...a.calls, ...b.calls])), {
      status: 400, code: 'invalid_tool_call_id', param: 'messages[4].tool_call_id', message: new RegExp(`^tool_call_id "${b.calls[0]!.id}" belongs to another workflow than "${c0.id}"`),
    }, 'two workflows');
    // one call answered twice
    expectRefusal(await send([...answering(a, [c0, c1]), { role: 'tool', tool_call_id: c1.id, content: 'again' }]), {
      status: 400, code: 'invalid_tool_call_id', param: 'messages[4].tool_call_id', message: /is answered twice/,
    }, 'twice');

    expect(await snapshot()).toEqual(before);
    expect(stubCalls()).toEqual(seen);
    expect(await sessionOf(a.wf)).toMatchObject({ status: 'tools' });
    expect(await sessionOf(b.wf)).toMatchObject({ status: 'tools' });

    // both workflows go on with their own results
    for (const w of [a, b]) {
      const done = await client().chat.completions.create({ model: 'fugu-ultra', messages: answering(w, w.calls), tools });
      expect((done as Json).fugu.workflow).toBe(w.wf);
      expect(done.choices[0]!.message.content).toBe(AGGREGATED);
      const [row] = await getWorkflows(database.db, [w.wf]);
      expect([row!.status, row!.finishReason]).toEqual(['done', 'answered']);
    }
  });

  it('/v1/responses: an output that answers no function_call, or results of two workflows, is a 400 naming the input item', async () => {
    const r1 = await client().responses.create({ model: 'fugu-ultra', input: QUESTION, tools: respTools });
    const r2 = await client().responses.create({ model: 'fugu-ultra', input: 'Is it windy in Lyon?', tools: respTools });
    const callsOf = (r: OpenAI.Responses.Response) => r.output.filter((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call');
    const out = (c: { call_id: string }) => ({ type: 'function_call_output' as const, call_id: c.call_id, output: 'dry' });
    const before = await snapshot();
    const seen = stubCalls();
    expectRefusal(await refused(client().responses.create({ model: 'fugu-ultra', previous_response_id: r1.id, tools: respTools, input: [...callsOf(r1).map(out), out({ call_id: 'call_orphan' })] })), {
      status: 400, code: 'invalid_value', param: 'input[2].call_id', message: /^input\[2\]\.call_id: "call_orphan" answers no function_call or custom_tool_call earlier in this conversation/,
    }, 'orphan output');
    // r2's calls, given as items of this request (one assistant message with r1's), then the results of all four
    const foreign = callsOf(r2).map(({ call_id, name, arguments: args }) => ({ type: 'function_call' as const, call_id, name, arguments: args }));
    const e = await refused(client().responses.create({ model: 'fugu-ultra', previous_response_id: r1.id, tools: respTools, input: [...foreign, ...callsOf(r1).map(out), ...callsOf(r2).map(out)] }));
    expectRefusal(e, { status: 400, code: 'invalid_tool_call_id', param: 'input[4].call_id', message: /belongs to another workflow than/ }, 'two workflows');
    // a forged id, as a function_call of this request and its output
    const forged = `call_fu_${(r1 as Json).fugu.workflow}_1_42_${'D'.repeat(22)}`;
    const f = await refused(client().responses.create({
      model: 'fugu-ultra', previous_response_id: r1.id, tools: respTools,
      input: [...callsOf(r1).map(out), { type: 'function_call', call_id: forged, name: 'get_weather', arguments: '{}' }, out({ call_id: forged })],
    }));
    expectRefusal(f, { status: 400, code: 'invalid_tool_call_id', param: 'input[3].call_id', message: /was not issued to this API key \(or was altered\)/ }, 'forged');
    expect(await snapshot()).toEqual(before);
    expect(stubCalls()).toEqual(seen);
    const done = await client().responses.create({ model: 'fugu-ultra', previous_response_id: r1.id, tools: respTools, input: callsOf(r1).map(out) });
    expect(done.output_text).toBe(AGGREGATED);
  });
});

// ---- 2. a Conductor that writes garbage mid-conversation --------------------------------------

describe('fugu-ultra: an llm: Conductor that writes an unparseable workflow mid-conversation', () => {
  const conductorCalls = () => stubs.writer!.requests.filter((r) => JSON.stringify(r.body?.messages?.[0] ?? '').includes(CONDUCTOR_MARK));
  const rowOf = async (key: string) => database.db.selectFrom('workflows').selectAll().where('key', '=', key).executeTakeFirstOrThrow();

  it('chat completions: turn 1 answers; turns 2 and 3 are 502 conductor_error naming the parse problem, their rows failed / parse-error; turn 4 answers in the same conversation', async () => {
    await publish('llm:writer');
    const c = client();
    const { data: t1, response } = await c.chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }] }).withResponse();
    const conversation = response.headers.get('x-fugu-conversation')!;
    expect(conversation).toMatch(/^conv_/);
    expect(t1.choices[0]!.message.content).toBe('beta aggregated the proposals');
    expect((t1 as Json).fugu.steps.map((s: Json) => [s.worker, s.access])).toEqual([['alpha', 'none'], ['beta', 'all']]);
    expect((t1 as Json).fugu.conductor).toBe('llm:writer');
    expect(conductorCalls()).toHaveLength(1);
    const history: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: QUESTION }, { role: 'assistant', content: t1.choices[0]!.message.content }];
    const sessions = await database.db.selectFrom('ultra_sessions').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow();
    const spentBefore = await spent();

    // turn 2: prose instead of the three lists
    const e2 = await refused(c.chat.completions.create({ model: 'fugu-ultra', messages: [...history, { role: 'user', content: 'And tomorrow? GARBLE-PROSE' }], fugu: { conversation } } as never));
    expectRefusal(e2, { status: 502, code: 'conductor_error', param: null, message: /^the Conductor \(llm:writer\) wrote no valid workflow: model id: no `model id = \[\.\.\.\]` list found$/ }, 'prose');
    const r2 = await rowOf(`ultra.${fullKeyId}/${conversation}.2`);
    expect([r2.status, r2.finish_reason, r2.parse_ok, r2.completion]).toEqual(['failed', 'parse-error', false, PROSE]);
    expect(r2.parse_error).toEqual({ list: 'model id', message: 'model id: no `model id = [...]` list found' });

    // turn 3, streamed: lists of different lengths (a 502 before the first byte, as JSON)
    const e3 = await refused(c.chat.completions.create({ model: 'fugu-ultra', messages: [...history, { role: 'user', content: 'And the day after? GARBLE-LISTS' }], stream: true, fugu: { conversation } } as never));
    expectRefusal(e3, { status: 502, code: 'conductor_error', param: null, message: /wrote no valid workflow: subtasks, step 2 \(1-based; index 1 in the lists\): 1 entries but model id has 2/ }, 'short lists');
    const r3 = await rowOf(`ultra.${fullKeyId}/${conversation}.3`);
    expect([r3.status, r3.finish_reason, r3.completion]).toEqual(['failed', 'parse-error', SHORT_LISTS]);
    expect(r3.parse_error).toMatchObject({ list: 'subtasks', step: 2 });
    // no interactive state for a workflow that never ran, no agent called
    expect(await database.db.selectFrom('ultra_sessions').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).toEqual(sessions);
    expect(await database.db.selectFrom('workflow_steps').selectAll().where('workflow_id', 'in', [r2.id, r3.id]).execute()).toEqual([]);
    // the Conductor's calls that wrote them were paid: the key is charged them (JSON and stream alike)
    // (written behind the answers: the call rows, the request rows and the key's spend with them)
    await expect.poll(async () => [(await spent()) - spentBefore, await paidBy([Number(r2.id), Number(r3.id)])].map(String)).toSatisfy(([s, p]) => s === p && BigInt(p!) > 0n);

    // turn 4: a good answer again, in the same conversation; the agents read the conversation so far
    stubs.alpha!.requests.splice(0);
    const t4 = await c.chat.completions.create({ model: 'fugu-ultra', messages: [...history, { role: 'user', content: 'Then what about Lyon?' }], fugu: { conversation } } as never);
    expect(t4.choices[0]!.message.content).toBe('beta aggregated the proposals');
    expect((t4 as Json).fugu.conversation).toBe(conversation);
    const r4 = await rowOf(`ultra.${fullKeyId}/${conversation}.4`);
    expect([r4.status, r4.finish_reason, r4.parse_ok]).toEqual(['done', 'answered', true]);
    expect(Number(r4.id)).toBe((t4 as Json).fugu.workflow);
    expect(JSON.stringify(stubs.alpha!.requests[0]!.body.messages)).toContain(QUESTION);
    expect(conductorCalls()).toHaveLength(4);
    expect((await database.db.selectFrom('ultra_conversations').select('turns').where('id', '=', conversation).where('api_key_id', '=', fullKeyId).executeTakeFirstOrThrow()).turns).toBe(4);
  });

  it('/v1/responses: a garbled turn is a 502 that stores nothing; the chain goes on from the last good response', async () => {
    const c = client();
    const r1 = await c.responses.create({ model: 'fugu-ultra', input: QUESTION });
    expect(r1.output_text).toBe('beta aggregated the proposals');
    const stored = await snapshot();
    const e = await refused(c.responses.create({ model: 'fugu-ultra', previous_response_id: r1.id, input: 'And tomorrow? GARBLE-PROSE' }));
    expectRefusal(e, { status: 502, code: 'conductor_error', param: null, message: /wrote no valid workflow: model id: no `model id = \[\.\.\.\]` list found/ }, 'prose');
    expect((await snapshot()).responses).toBe(stored.responses);
    const failed = await rowOf(`ultra.${fullKeyId}/${r1.id}.2`);
    expect([failed.status, failed.finish_reason]).toEqual(['failed', 'parse-error']);
    const r3 = await c.responses.create({ model: 'fugu-ultra', previous_response_id: r1.id, input: 'Then what about Lyon?' });
    expect(r3.output_text).toBe('beta aggregated the proposals');
    expect((r3 as Json).fugu.conversation).toBe(r1.id);
    const ok = await rowOf(`ultra.${fullKeyId}/${r1.id}.3`);
    expect([ok.status, ok.finish_reason]).toEqual(['done', 'answered']);
  });
});

describe("fugu-ultra: an llm: Conductor that writes garbage on a new conversation's first turn", () => {
  it('a 502; the turn made its conversation and its workflow row, failed / parse-error, in one statement; no state', async () => {
    await publish('llm:writer');
    // (a new conversation's workflow takes an id reserved ahead: not after every id there is)
    const firstTurns = () => database.db.selectFrom('workflows').selectAll().where('key', 'like', `ultra.${fullKeyId}/conv_%.1`).execute();
    const before = new Set((await firstTurns()).map((r) => r.id));
    const e = await refused(client().chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: 'A first question. GARBLE-PROSE' }] }));
    expectRefusal(e, { status: 502, code: 'conductor_error', param: null, message: /wrote no valid workflow: model id: no `model id = \[\.\.\.\]` list found/ }, 'prose');
    const rows = (await firstTurns()).filter((r) => !before.has(r.id));
    expect(rows).toHaveLength(1);
    const row = rows[0]!;
    expect([row.status, row.finish_reason, row.parse_ok, row.completion]).toEqual(['failed', 'parse-error', false, PROSE]);
    expect(row.started_at).not.toBeNull();
    expect(row.finished_at).not.toBeNull();
    const conversation = row.key.slice(`ultra.${fullKeyId}/`.length, -'.1'.length);
    expect((await database.db.selectFrom('ultra_conversations').select('turns').where('id', '=', conversation).where('api_key_id', '=', fullKeyId).executeTakeFirstOrThrow()).turns).toBe(1);
    expect(await database.db.selectFrom('ultra_sessions').select('workflow_id').where('workflow_id', '=', String(row.id) as never).executeTakeFirst()).toBeUndefined();
  });
});

// ---- a workflow that fails after some of its calls --------------------------------------------

describe('fugu-ultra: a workflow whose final step fails', () => {
  it('is a 400 naming the step, and the key is charged the steps that answered (JSON, a stream, /v1/responses)', async () => {
    await publish('fixed:moa:2');
    const question = `Should I take an umbrella? ${REJECT_FINAL}`;
    // (a served turn of a new conversation takes its id from a block reserved ahead: ids are not in time order)
    const workflowsSince = async (after: Date) => (await database.db.selectFrom('workflows').select(['id', 'status']).where('created_at', '>', after).orderBy('created_at').execute()).map((w) => ({ id: Number(w.id), status: w.status }));
    const last = (await sql<{ t: Date }>`select clock_timestamp() as t`.execute(database.db)).rows[0]!.t;
    const spentBefore = await spent();

    const e = await refused(client().chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: question }] }));
    expectRefusal(e, { status: 400, code: 'provider_bad_request', param: null, message: /^workflow \d+: step 2 \((alpha|beta)\): the worker's provider refused the request: .*this final step is refused/ }, 'json');
    // streamed: the failure comes after the first byte (the workflow written), as the stream's error
    const s = await client().chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: question }], stream: true });
    const streamed = await (async () => {
      try {
        for await (const _ of s);
      } catch (err) {
        return err as APIError;
      }
      throw new Error('the stream did not fail');
    })();
    expect(streamed.message).toMatch(/step 2 \((alpha|beta)\): the worker's provider refused the request/);
    const r = await refused(client().responses.create({ model: 'fugu-ultra', input: question }));
    expectRefusal(r, { status: 400, code: 'provider_bad_request', param: null, message: /step 2 .*this final step is refused/ }, 'responses');

    const wfs = await workflowsSince(last);
    expect(wfs.map((w) => w.status)).toEqual(['failed', 'failed', 'failed']);
    // each paid for its two proposers (the refused step has a row, at no cost)
    // (the call rows, the request rows and the key's spend with them are written behind the answers)
    await expect.poll(async () => [(await spent()) - spentBefore, await paidBy(wfs.map((w) => w.id))].map(String)).toSatisfy(([s, p]) => s === p && BigInt(p!) > 0n);
    // ... and each request's row carries its own workflow's
    const rows = await sql<{ workflow_id: string; pico: string }>`
      select workflow_id::text, (cost * 1000000000000)::bigint::text as pico from requests where workflow_id = any(${wfs.map((w) => w.id)}::bigint[]) order by requests.workflow_id`.execute(database.db);
    expect(rows.rows.map((x) => [Number(x.workflow_id), BigInt(x.pico)])).toEqual(await Promise.all([...wfs].sort((a, b) => a.id - b.id).map(async (w) => [w.id, await paidBy([w.id])])));
  });
});

// ---- what the fuzzing found, one by one --------------------------------------------------------

describe('fugu-ultra: the inputs the fuzzing found a 5xx for', () => {
  const post = (route: string, body: string) =>
    fetch(`${baseURL}${route}`, { method: 'POST', headers: { authorization: `Bearer ${fullKey}`, 'content-type': 'application/json' }, body });
  const errorOf = async (res: Response): Promise<{ status: number; error: Json }> => ({ status: res.status, error: ((await res.json()) as Json).error });

  it('a NUL character, an unpaired surrogate or nesting past 64 levels: a 400 naming the place, nothing stored (was a 500 from Postgres, a 502 stack overflow)', async () => {
    await publish('fixed:moa:2');
    const before = await snapshot();
    const seen = stubCalls();
    const cases: Array<[string, string, string, RegExp]> = [
      ['/chat/completions', '{"model":"fugu-ultra","messages":[{"role":"user","content":"nul\\u0000byte"}]}', 'messages[0].content', /contains a NUL character/],
      ['/chat/completions', '{"model":"fugu-ultra","messages":[{"role":"user","content":"lone \\ud83d"}]}', 'messages[0].content', /contains an unpaired UTF-16 surrogate \(\\ud83d\): not valid Unicode text/],
      ['/responses', '{"model":"fugu-ultra","input":"\\udfff"}', 'input', /unpaired UTF-16 surrogate \(\\udfff\)/],
      ['/responses', '{"model":"fugu-ultra","input":"hi","metadata":{"a":"lone \\ud800 surrogate"}}', 'metadata.a', /unpaired UTF-16 surrogate/],
      [
        '/chat/completions',
        `{"model":"fugu-ultra","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","required":${'['.repeat(3000)}${']'.repeat(3000)}}}}]}`,
        `tools[0].function.parameters.required${'[0]'.repeat(59)}`,
        /is nested more than 64 levels deep/,
      ],
    ];
    for (const [route, body, param, message] of cases) {
      const { status, error } = await errorOf(await post(route, body));
      expect({ status, param: error.param, code: error.code }, param).toEqual({ status: 400, param, code: 'invalid_value' });
      expect(error.message).toMatch(message);
    }
    expect(await snapshot()).toEqual(before);
    expect(stubCalls()).toEqual(seen);
  });

  it('a stored response\'s id with a NUL character: a 404 (was a 500 from Postgres); a URL the router cannot read: an OpenAI error body (was Fastify\'s own)', async () => {
    const call = async (method: string, url: string) => {
      const res = await fetch(`${baseURL}${url}`, { method, headers: { authorization: `Bearer ${fullKey}` } });
      return { status: res.status, body: (await res.json()) as Json };
    };
    for (const [method, url] of [['GET', '/responses/resp_%00'], ['DELETE', '/responses/%00'], ['GET', '/responses/resp_%00x/input_items']]) {
      const { status, body } = await call(method!, url!);
      expect({ status, code: body.error?.code, param: body.error?.param }, url).toEqual({ status: 404, code: 'response_not_found', param: 'response_id' });
    }
    const bad = await call('GET', '/responses/resp_%ED%A0%80');
    expect(bad).toEqual({ status: 400, body: { error: { message: expect.stringMatching(/^the request URL is invalid: .*is not a valid url component/), type: 'invalid_request_error', param: null, code: 'invalid_url' } } });
    const long = await call('GET', `/responses/resp_${'a'.repeat(5000)}`);
    expect(long).toMatchObject({ status: 414, body: { error: { type: 'invalid_request_error', param: null, code: 'url_too_long' } } });
  });

  it('another key\'s conversation id: a conversation of this key\'s own, nothing of theirs read or changed (was a 400 telling the id was in use)', async () => {
    await publish('fixed:moa:2');
    const other = await createApiKey(database.db, { name: 'conversation-owner' });
    const theirs = await client(other.key).chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }] });
    const conversation = (theirs as Json).fugu.conversation as string;
    const turns = (key: string) => database.db.selectFrom('ultra_conversations').select('turns').where('id', '=', conversation).where('api_key_id', '=', key).executeTakeFirst();
    const mine = await client().chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }], fugu: { conversation } } as never);
    expect((mine as Json).fugu.conversation).toBe(conversation);
    expect([await turns(other.record.id), await turns(fullKeyId)]).toEqual([{ turns: 1 }, { turns: 1 }]);
  });

  it('a seed past 32 bits: a 400 naming seed, nothing stored (was a 500: the workflows row\'s seed is an integer)', async () => {
    const before = await snapshot();
    for (const seed of [2 ** 31, -(2 ** 31) - 1, 2 ** 53 - 1]) {
      const e = await refused(client().chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }], seed }));
      expectRefusal(e, { status: 400, code: 'invalid_value', param: 'seed', message: new RegExp(`^seed: ${seed} is out of range for fugu-ultra: a workflow's seed is a 32-bit integer`) }, String(seed));
    }
    expect(await snapshot()).toEqual(before);
    const ok = await client().chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }], seed: 2 ** 31 - 1 });
    const [row] = await getWorkflows(database.db, [(ok as Json).fugu.workflow]);
    expect(row!.seed).toBe(2 ** 31 - 1);
  });

  it('fugu.workers too few for the fixed topology: a 400 naming fugu.workers, nothing stored (was a 502 conductor_error)', async () => {
    const before = await snapshot();
    const e = await refused(client().chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }], fugu: { workers: ['alpha'] } } as never));
    expectRefusal(e, { status: 400, code: 'invalid_value', param: 'fugu.workers', message: /^fugu\.workers: the workers this request allows \(alpha\) cannot run "fugu-ultra"'s Conductor: .*fixed:moa:2.*the pool has only 1 workers/ }, 'fugu.workers');
    const r = await refused(client().responses.create({ model: 'fugu-ultra', input: QUESTION, fugu: { workers: ['beta'] } } as never));
    expectRefusal(r, { status: 400, code: 'invalid_value', param: 'fugu.workers', message: /\(beta\) cannot run/ }, 'responses');
    // a key whose own workers are too few: named as the model's problem
    const narrow = await createApiKey(database.db, { name: 'narrow', allowedWorkers: ['beta'] });
    const k = await refused(client(narrow.key).chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }] }));
    expectRefusal(k, { status: 400, code: 'invalid_value', param: 'model', message: /^this API key's workers \(beta\) cannot run "fugu-ultra"'s Conductor/ }, 'key');
    expect(await snapshot()).toEqual(before);
    // two workers run it
    const ok = await client().chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }], fugu: { workers: ['beta', 'writer'] } } as never);
    expect((ok as Json).fugu.steps.map((s: Json) => s.worker)).toEqual(['beta', 'writer', 'beta']);
  });

  it('a tool the worker\'s provider refuses (its 400): a 400 provider_bad_request naming the step and the provider\'s reason (was a 502 provider_error)', async () => {
    await publish('fixed:moa:2');
    const tools = [{ type: 'function' as const, function: { name: 'provider_rejects', parameters: { type: 'object', properties: { a: { type: 'string' } } } } }];
    const e = await refused(client().chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }], tools }));
    expectRefusal(e, { status: 400, code: 'provider_bad_request', param: null, message: /^workflow \d+: step [01] \((alpha|beta|writer)\): the worker's provider refused the request: .*Invalid schema for function 'provider_rejects'/ }, 'chat');
    const r = await refused(client().responses.create({ model: 'fugu-ultra', input: QUESTION, tools: [{ type: 'function', name: 'provider_rejects', parameters: { type: 'object' }, strict: false }] }));
    expectRefusal(r, { status: 400, code: 'provider_bad_request', param: null, message: /the worker's provider refused the request/ }, 'responses');
  });

  it('a message too long for a fixed Conductor (it repeats the message in every subtask): a 400 naming the message (was a 502 conductor_error)', async () => {
    const long = `${'x'.repeat(80_000)} - is that a question?`;
    const e = await refused(client().chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'hello' }, { role: 'user', content: long }] }));
    expectRefusal(e, {
      status: 400, code: 'context_length_exceeded', param: 'messages[2].content',
      message: /^the message \(80022 characters\) is too long for fugu-ultra's Conductor \(fixed:moa:2\): its workflow repeats the message in every step's subtask, \d+ characters, past the 200000/,
    }, 'chat');
    const r = await refused(client().responses.create({ model: 'fugu-ultra', input: [{ role: 'user', content: 'hi' }, { role: 'user', content: long }] }));
    expectRefusal(r, { status: 400, code: 'context_length_exceeded', param: 'input[1].content', message: /is too long for fugu-ultra's Conductor/ }, 'responses');
    // the attempt is recorded as what happened
    const row = await database.db.selectFrom('workflows').select(['status', 'finish_reason']).where('question', '=', long).orderBy('id', 'desc').executeTakeFirstOrThrow();
    expect([row.status, row.finish_reason]).toEqual(['failed', 'parse-error']);
    // a long message an llm: Conductor does not repeat is served
    await publish('llm:writer');
    const ok = await client().chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: long }] });
    expect(ok.choices[0]!.message.content).toBe('beta aggregated the proposals');
  });
});

// ---- 4. fuzzing -------------------------------------------------------------------------------

type Sent = { status: number; body: string; contentType: string };
type FuzzCase = { label: string; body: string; contentType: string };

describe('fugu-ultra: fuzzing chat completions and /v1/responses', () => {
  const N = 1000;
  let known: Fuzzer['known'];
  // a waiting workflow of each route, whose real results some bodies carry
  let chatWaiting: OpenAI.ChatCompletionMessageParam[];
  let respWaiting: { id: string; outputs: Array<{ type: 'function_call_output'; call_id: string; output: string }> };

  beforeAll(async () => {
    await publish('fixed:moa:2');
    const first = await client().chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }], tools });
    const calls = first.choices[0]!.message.tool_calls!;
    chatWaiting = [{ role: 'user', content: QUESTION }, first.choices[0]!.message as OpenAI.ChatCompletionMessageParam, ...calls.map((c) => ({ role: 'tool' as const, tool_call_id: c.id, content: 'cloudy' }))];
    const r = await client().responses.create({ model: 'fugu-ultra', input: QUESTION, tools: respTools });
    const rCalls = r.output.filter((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call');
    respWaiting = { id: r.id, outputs: rCalls.map((c) => ({ type: 'function_call_output', call_id: c.call_id, output: 'cloudy' })) };
    const workflows = (await database.db.selectFrom('workflows').select('id').execute()).map((w) => Number(w.id));
    const conversations = (await database.db.selectFrom('ultra_conversations').select('id').execute()).map((c) => c.id);
    // another key's conversation id: a fugu.conversation naming it is a conversation of this key's own
    const other = await createApiKey(database.db, { name: 'other' });
    const theirs = await client(other.key).chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }] });
    conversations.push((theirs as Json).fugu.conversation);
    known = { workflows, conversations, callIds: [...calls.map((c) => c.id), ...rCalls.map((c) => c.call_id)], responses: [r.id, 'resp_' + '0'.repeat(48)] };
  });

  const chatBase = (f: Fuzzer): Json =>
    structuredClone(
      f.pick<Json>([
        { model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }] },
        { model: 'fugu-ultra', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: QUESTION }], tools, tool_choice: 'auto', temperature: 0.5, max_tokens: 100, seed: 7 },
        { model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }], stream: true, stream_options: { include_usage: true } },
        { model: 'fugu-ultra', messages: chatWaiting, tools },
        { model: 'fugu-ultra', messages: [{ role: 'user', content: QUESTION }, { role: 'assistant', content: 'Take one.' }, { role: 'user', content: 'And tomorrow?' }], fugu: { conversation: f.pick(known.conversations), shared_memory: false } },
      ]),
    );

  /** Chat-specific damage: tool results with random ids, tool messages without a call, a bad fugu object, edge values. */
  const chatDamage = (f: Fuzzer, b: Json): string => {
    const msgs = Array.isArray(b.messages) ? b.messages : (b.messages = []);
    switch (f.r.int(7)) {
      case 0: {
        const id = f.callId();
        msgs.push({ role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name: 'get_weather', arguments: '{}' } }] }, { role: 'tool', tool_call_id: id, content: 'sunny' });
        return `a result for ${id.slice(0, 40)}`;
      }
      case 1:
        msgs.splice(f.r.int(msgs.length + 1), 0, { role: 'tool', tool_call_id: f.callId(), content: 'orphan' });
        return 'a tool message without its call';
      case 2:
        b.fugu = f.badFugu();
        return `fugu ${JSON.stringify(b.fugu)?.slice(0, 60)}`;
      case 3: {
        const [k, v] = f.pick<[string, unknown]>([
          ['seed', f.pick([2 ** 31, -(2 ** 31) - 1, 2 ** 53, 1.5, -1])], ['temperature', f.pick([-1, 3, 0])], ['max_tokens', f.pick([0, -5, 2 ** 40])], ['n', 2], ['stream', 'yes'],
          ['logprobs', true], ['top_logprobs', 5], ['tool_choice', f.pick(['sometimes', { type: 'function', function: { name: 'nope' } }])], ['response_format', { type: 'xml' }], ['stop', ['a', 'b', 'c', 'd', 'e']],
          ['messages', []], ['model', f.pick(['', 'fugu-ultra ', 'FUGU-ULTRA', 'gamma'])], ['parallel_tool_calls', false],
        ]);
        b[k] = v;
        return `${k} ${JSON.stringify(v)}`;
      }
      case 4:
        msgs.push({ role: f.pick(['robot', 'function', 'tool', '', 'USER']), content: f.junk() });
        return 'a message of a bad role';
      case 5:
        msgs.push({ role: 'user', content: f.pick([[], [{ type: 'image_url', image_url: { url: 'data:,' } }], [{ type: 'text' }], [{ type: 'audio', text: 'x' }], '   ', null]) });
        return 'a user message with odd content';
      default:
        msgs.push({ role: 'assistant', content: null, tool_calls: [{ id: f.callId(), type: 'function', function: { name: 'get_weather', arguments: '{}' } }] }, { role: 'user', content: 'and now?' });
        return 'a forged call in the history';
    }
  };

  const respBase = (f: Fuzzer): Json =>
    structuredClone(
      f.pick<Json>([
        { model: 'fugu-ultra', input: QUESTION },
        { model: 'fugu-ultra', input: [{ role: 'user', content: QUESTION }], instructions: 'Be brief.', tools: respTools, temperature: 0.2, max_output_tokens: 200, store: false },
        { model: 'fugu-ultra', input: QUESTION, stream: true },
        { model: 'fugu-ultra', previous_response_id: respWaiting.id, input: respWaiting.outputs, tools: respTools },
        { model: 'fugu-ultra', input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: QUESTION }] }], metadata: { a: 'b' }, text: { format: { type: 'text' } } },
      ]),
    );

  const respDamage = (f: Fuzzer, b: Json): string => {
    const input = Array.isArray(b.input) ? b.input : (b.input = [{ role: 'user', content: typeof b.input === 'string' ? b.input : QUESTION }]);
    switch (f.r.int(7)) {
      case 0: {
        const id = f.callId();
        if (f.chance(0.5)) input.push({ type: 'function_call', call_id: id, name: 'get_weather', arguments: '{}' });
        input.push({ type: 'function_call_output', call_id: id, output: f.pick(['sunny', [{ type: 'input_text', text: 'x' }], [{ type: 'output_text', text: 'x' }]]) });
        return `an output for ${id.slice(0, 40)}`;
      }
      case 1:
        b.previous_response_id = f.pick([...known.responses, '', 'resp_x', f.text()]);
        return 'previous_response_id';
      case 2:
        b.fugu = f.badFugu();
        return `fugu ${JSON.stringify(b.fugu)?.slice(0, 60)}`;
      case 3: {
        const [k, v] = f.pick<[string, unknown]>([
          ['truncation', 'auto'], ['include', ['reasoning.encrypted_content']], ['background', true], ['conversation', 'conv_1'], ['prompt', { id: 'p' }], ['store', 'no'],
          ['reasoning', f.pick([{ summary: 'auto' }, { effort: 'max' }])], ['text', f.pick([{ format: { type: 'xml' } }, { format: { type: 'json_schema', name: 'x' } }])],
          ['metadata', Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v']))], ['max_output_tokens', f.pick([0, -1, 1.5])], ['tool_choice', f.pick([{ type: 'web_search' }, { type: 'function', name: 'nope' }, 'maybe'])],
          ['top_logprobs', 3], ['temperature', 9], ['input', f.pick(['', [], 42])], ['model', f.pick(['', 'fugu-ultra\n'])],
        ]);
        b[k] = v;
        return `${k} ${JSON.stringify(v)?.slice(0, 60)}`;
      }
      case 4:
        input.push({ type: f.pick(['reasoning', 'item_reference', 'web_search_call', 'foo', 'function_call']), id: 'x' });
        return 'an item of a bad type';
      case 5:
        input.push({ role: f.pick(['user', 'assistant', 'tool', 'robot']), content: f.pick([[{ type: 'input_image', image_url: 'x' }], [{ type: 'output_text' }], [], f.junk()]) });
        return 'a message with odd content';
      default:
        b.tools = f.pick([[{ type: 'function' }], [{ type: 'mcp', server_label: 'x' }], 'get_weather', [{ type: 'function', name: 'f', parameters: 'x' }], [f.junk()]]);
        return 'bad tools';
    }
  };

  /** N cases of one route: mostly mutated valid bodies, some not JSON, a few of another content type. */
  const cases = (seed: string, base: (f: Fuzzer) => Json, damage: (f: Fuzzer, b: Json) => string): FuzzCase[] => {
    // FUGU_FUZZ_SEED explores other bodies; the test's own are seed 1's
    const f = new Fuzzer(rng('ultra-bad-input', process.env.FUGU_FUZZ_SEED ?? '1', seed), known);
    return Array.from({ length: N }, (): FuzzCase => {
      const b = base(f);
      const roll = f.r.next();
      if (roll < 0.08) return { label: 'not JSON', body: f.invalidJson(JSON.stringify(b)), contentType: 'application/json' };
      if (roll < 0.1) return { label: 'another content type', body: JSON.stringify(b), contentType: f.pick(['text/plain', 'application/x-www-form-urlencoded']) };
      const what: string[] = [];
      if (roll < 0.55) what.push(damage(f, b));
      for (let i = roll < 0.55 ? f.r.int(2) : 1 + f.r.int(3); i > 0; i--) what.push(f.mutate(b));
      return { label: what.join('; '), body: f.serialise(b), contentType: 'application/json' };
    });
  };

  async function send(route: string, c: FuzzCase): Promise<Sent> {
    const res = await fetch(`${baseURL}${route}`, { method: 'POST', headers: { authorization: `Bearer ${fullKey}`, 'content-type': c.contentType }, body: c.body });
    return { status: res.status, body: await res.text(), contentType: res.headers.get('content-type') ?? '' };
  }

  /** What is wrong with an answer (undefined: nothing): a 5xx, a 4xx without an OpenAI error body, a 200 that is no answer or whose stream failed. */
  function problem(route: string, s: Sent): string | undefined {
    if (s.status >= 500) return `status ${s.status}: ${s.body.slice(0, 300)}`;
    if (s.status >= 400) {
      let e: Json;
      try {
        e = JSON.parse(s.body).error;
      } catch {
        return `status ${s.status} without a JSON body: ${s.body.slice(0, 200)}`;
      }
      const ok = e && typeof e.message === 'string' && e.message.length > 0 && typeof e.type === 'string' && 'param' in e && (e.param === null || typeof e.param === 'string') && 'code' in e && (e.code === null || typeof e.code === 'string');
      return ok ? undefined : `status ${s.status} without an OpenAI error body: ${s.body.slice(0, 200)}`;
    }
    if (s.status !== 200) return `status ${s.status}`;
    if (s.contentType.startsWith('text/event-stream')) {
      const failed = route === '/chat/completions' ? /^data: \{"error"/m.test(s.body) || !s.body.includes('data: [DONE]') : /^event: (error|response\.failed)$/m.test(s.body) || !/^event: response\.(completed|incomplete)$/m.test(s.body);
      return failed ? `a stream that failed: ${s.body.slice(-300)}` : undefined;
    }
    const object = JSON.parse(s.body).object;
    return object === (route === '/chat/completions' ? 'chat.completion' : 'response') ? undefined : `a 200 that is no answer: ${s.body.slice(0, 200)}`;
  }

  for (const [route, seed] of [['/chat/completions', 'chat'], ['/responses', 'responses']] as const) {
    it(`${route}: ${N} seeded bad bodies, raw with fetch: no status >= 500, every 4xx an OpenAI error body`, async () => {
      const list = route === '/chat/completions' ? cases(seed, chatBase, chatDamage) : cases(seed, respBase, respDamage);
      const t0 = Date.now();
      const { histogram, errors: codes, problems } = await sendFuzzCases(list, { concurrency: 8, errorField: 'code', send: (c) => send(route, c), problem: (s) => problem(route, s) });
      console.log(`fuzz ${route}: ${list.length} bodies in ${Date.now() - t0} ms; statuses ${JSON.stringify(histogram)}; error codes ${JSON.stringify(codes)}`);
      expect(problems).toEqual([]);
      expect(Object.values(histogram).reduce((a, n) => a + n, 0)).toBe(N);
      // the bodies reach past the first checks: some answer, and most are refused
      expect(histogram[200] ?? 0).toBeGreaterThan(N / 50);
      expect(histogram[400] ?? 0).toBeGreaterThan(N / 2);
    });
  }
});
