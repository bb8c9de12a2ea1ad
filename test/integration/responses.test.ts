// The Responses API end to end (docs/responses-api.md): the real `openai` npm client
// (responses.create / retrieve / stream / delete / inputItems.list) against the gateway built in
// process, with the real router in process (an anchor checkpoint published as the deployment),
// real Postgres (API keys, stored responses, request rows), stub providers from
// @fugu/providers/testing as OpenAI-compatible workers, and one extra model kind registered as a
// ModelHandler the way fugu-ultra is (extension object, extra usage fields, progress events).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI, { APIError } from 'openai';
import { tokenCost, type WorkerPool } from '@fugu/core';
import { createApiKey, getStoredResponse, listRequests } from '@fugu/db';
import type { TestDatabase } from '@fugu/db/testing';
import type { ChatRequest } from '@fugu/providers';
import { startOpenAIStub, WEATHER_TOOL, type OpenAIStub } from '@fugu/providers/testing';
import type { AnswerEvent, ModelHandler } from '../../apps/gateway/src/models.ts';
import { replyAs, startRoutedGateway, worker, type RoutedGateway } from '../support/routed-gateway.ts';

const WEATHER = "What's the weather in Paris right now?";
const PROOF = 'Prove that the square root of two is irrational, step by step.';
const VOLCANO = 'Tell me about the volcanoes of Iceland and their eruptions.';

const tools: OpenAI.Responses.FunctionTool[] = [
  { type: 'function', name: WEATHER_TOOL.name, description: WEATHER_TOOL.description!, parameters: WEATHER_TOOL.parameters, strict: false },
];

/** A model kind beside the router and the workers, as fugu-ultra registers: an extension object, extra usage fields, progress events while it streams. */
const ultraSeen: Array<{ req: ChatRequest; conversation: string | undefined; newConversation: string | undefined }> = [];
const ULTRA_COST = 5_000_000n;
const ultraLike: ModelHandler = {
  id: 'ultra-like',
  ownedBy: 'fugu',
  visibleTo: () => true,
  complete: async (input) => {
    ultraSeen.push({ req: input.req, conversation: input.conversation, newConversation: input.newConversation });
    return {
      result: { text: 'workflow answer', content: [{ type: 'text', text: 'workflow answer' }], toolCalls: [], usage: { inputTokens: 7, outputTokens: 3 }, finishReason: 'stop', model: 'ultra-like' },
      worker: 'alpha',
      model: 'ultra-like',
      cost: ULTRA_COST,
      headers: { 'x-fugu-workflow': '42' },
      extension: { workflow: { id: 42, steps: 2 } },
      usageExtra: { conductor_tokens: 4, worker_tokens: 6 },
    };
  },
  stream: async (input) => {
    ultraSeen.push({ req: input.req, conversation: input.conversation, newConversation: input.newConversation });
    const breaks = JSON.stringify(input.req.messages).includes('BREAK');
    async function* events(): AsyncGenerator<AnswerEvent> {
      yield { type: 'progress', progress: { step: 1, worker: 'alpha', status: 'started' } };
      yield { type: 'text-delta', text: 'workflow ' };
      if (breaks) throw new Error('the workflow broke off');
      yield { type: 'progress', progress: { step: 1, status: 'done' } };
      yield { type: 'text-delta', text: 'answer' };
      yield { type: 'finish', finishReason: 'stop', usage: { inputTokens: 7, outputTokens: 3 }, model: 'ultra-like' };
    }
    const it = events();
    return {
      worker: 'alpha',
      model: 'ultra-like',
      headers: { 'x-fugu-workflow': '42' },
      events: it,
      first: await it.next(),
      cost: async () => ULTRA_COST,
      extension: () => ({ workflow: { id: 42, steps: 2 } }),
      usageExtra: () => ({ conductor_tokens: 4, worker_tokens: 6 }),
    };
  },
};

let routed: RoutedGateway | undefined;
let database: TestDatabase;
let baseURL: string;
let fullKey: string;
let otherKey: string;
let fullKeyId: string;
const stubs: Record<string, OpenAIStub> = {};
let pool: WorkerPool;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const client = (apiKey = fullKey) => new OpenAI({ apiKey, baseURL, maxRetries: 0, timeout: 30_000 });
const post = (body: unknown, apiKey = fullKey) =>
  fetch(`${baseURL}/responses`, { method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
/** The messages a stub's last request carried, as {role, content[, tool fields]}. */
const lastMessages = (stub: OpenAIStub): Json[] => stub.requests.at(-1)!.body.messages;

/** A response's SSE events as written: `event:` name and parsed `data:`. */
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

/** A response without the fields the openai client computes itself (output_text; output_parsed from the stream helper). */
const withoutOutputText = (r: Json): Json => {
  const { output_text: _text, output_parsed: _parsed, ...rest } = r;
  return rest;
};

beforeAll(async () => {
  for (const name of ['alpha', 'beta', 'gamma']) stubs[name] = await startOpenAIStub({ defaultReply: replyAs(name) });
  pool = { name: 'responses-test', workers: [worker('alpha', stubs.alpha!), worker('beta', stubs.beta!), worker('gamma', stubs.gamma!, ['1', '2'])] };
  routed = await startRoutedGateway({
    name: 'resp',
    pool,
    checkpoint: { anchors: { alpha: PROOF, beta: WEATHER, gamma: VOLCANO } },
    gateway: () => ({ extraModels: [() => ultraLike] }),
  });
  ({ database, baseURL } = routed);
  const full = await createApiKey(database.db, { name: 'full' });
  fullKey = full.key;
  fullKeyId = full.record.id;
  otherKey = (await createApiKey(database.db, { name: 'other' })).key;
});

afterAll(async () => {
  await routed?.close();
  await Promise.all(Object.values(stubs).map((s) => s.close()));
});

describe('POST /v1/responses', () => {
  it('answers a text input from a worker called by name: message output, usage with the exact cost, a request row', async () => {
    const { data, response } = await client().responses.create({ model: 'gamma', input: 'Hello there', instructions: 'Be brief.' }).withResponse();
    expect(data.id).toMatch(/^resp_[0-9a-f]{48}$/);
    expect(data.object).toBe('response');
    expect(data.status).toBe('completed');
    expect(data.model).toBe('gamma');
    expect(response.headers.get('x-fugu-worker')).toBe('gamma');
    expect(data.output).toEqual([{ id: expect.stringMatching(/^msg_/), type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'answer from gamma', annotations: [] }] }]);
    expect(data.output_text).toBe('answer from gamma');
    expect(data.error).toBeNull();
    expect(data.incomplete_details).toBeNull();
    expect(data.instructions).toBe('Be brief.');
    expect((data as Json).store).toBe(true);
    expect(data.previous_response_id).toBeNull();
    const u = data.usage! as OpenAI.Responses.ResponseUsage & { cost: number };
    expect(u.input_tokens).toBeGreaterThan(0);
    expect(u.total_tokens).toBe(u.input_tokens + u.output_tokens);
    const cost = tokenCost(u.input_tokens, u.output_tokens, { inputPerMTok: '1', outputPerMTok: '2' });
    expect(u.cost).toBe(Number(cost) / 1e12);
    // the worker got the instructions as a system message first, then the input
    const sent = stubs.gamma!.requests.at(-1)!.body;
    expect(sent.model).toBe('gamma-model');
    expect(sent.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hello there' },
    ]);
    // one requests row, like a chat completion's
    const requestId = response.headers.get('x-request-id')!;
    let row;
    for (let i = 0; i < 50 && !row; i++) {
      row = (await listRequests(database.db, { key: 'full', limit: 100 })).find((r) => r.requestId === requestId);
      if (!row) await new Promise((r) => setTimeout(r, 20));
    }
    expect(row).toMatchObject({ route: '/v1/responses', model: 'gamma', worker: 'gamma', status: 200, tokensIn: u.input_tokens, tokensOut: u.output_tokens, cost, apiKeyId: fullKeyId });
  });

  it('routes model "fugu" and names the worker that answered', async () => {
    const { data, response } = await client().responses.create({ model: 'fugu', input: WEATHER }).withResponse();
    expect(data.model).toBe('beta');
    expect(data.output_text).toBe('answer from beta');
    expect(response.headers.get('x-fugu-checkpoint')).toMatch(/^anchor-/);
    expect(stubs.beta!.requests.at(-1)!.body.messages).toEqual([{ role: 'user', content: WEATHER }]);
    const other = await client().responses.create({ model: 'fugu', input: PROOF });
    expect(other.model).toBe('alpha');
  });

  it('passes the sampling parameters and text.format to the worker and echoes them', async () => {
    const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };
    const r = await client().responses.create({
      model: 'alpha',
      input: [{ role: 'developer', content: 'Answer in JSON.' }, { role: 'user', content: [{ type: 'input_text', text: 'Where is the ' }, { type: 'input_text', text: 'Eiffel tower?' }] }],
      text: { format: { type: 'json_schema', name: 'place', schema, strict: true } },
      temperature: 0.3,
      top_p: 0.9,
      max_output_tokens: 50,
      metadata: { ticket: 't-1' },
      safety_identifier: 'user-7',
    });
    const sent = stubs.alpha!.requests.at(-1)!.body;
    expect(sent.messages).toEqual([
      { role: 'system', content: 'Answer in JSON.' },
      { role: 'user', content: 'Where is the Eiffel tower?' },
    ]);
    expect(sent.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'place', schema, strict: true } });
    expect([sent.temperature, sent.top_p, sent.max_tokens, sent.user]).toEqual([0.3, 0.9, 50, 'user-7']);
    // store and metadata are the gateway's, not the worker's
    expect(sent.store).toBeUndefined();
    expect(sent.metadata).toBeUndefined();
    expect(r.text).toEqual({ format: { type: 'json_schema', name: 'place', schema, strict: true }, verbosity: null });
    expect([r.temperature, r.top_p, r.max_output_tokens]).toEqual([0.3, 0.9, 50]);
    expect(r.metadata).toEqual({ ticket: 't-1' });
  });

  it('is incomplete (max_output_tokens) when the worker stops at its token limit', async () => {
    stubs.gamma!.enqueue({ type: 'text', text: 'the beginning of', finish: 'length' });
    const r = await client().responses.create({ model: 'gamma', input: 'Write a long story.', max_output_tokens: 16 });
    expect(r.status).toBe('incomplete');
    expect(r.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(r.output).toEqual([{ id: expect.stringMatching(/^msg_/), type: 'message', status: 'incomplete', role: 'assistant', content: [{ type: 'output_text', text: 'the beginning of', annotations: [] }] }]);
  });
});

describe('previous_response_id', () => {
  it('continues the stored chain: earlier turns in order, instructions not carried over', async () => {
    const c = client();
    const r1 = await c.responses.create({ model: 'gamma', instructions: 'Talk like a pirate.', input: 'My name is Ada.' });
    const r2 = await c.responses.create({ model: 'gamma', previous_response_id: r1.id, input: [{ role: 'user', content: 'What is my name?' }] });
    expect(r2.previous_response_id).toBe(r1.id);
    expect(r2.instructions).toBeNull();
    expect(lastMessages(stubs.gamma!)).toEqual([
      { role: 'user', content: 'My name is Ada.' },
      { role: 'assistant', content: 'answer from gamma' },
      { role: 'user', content: 'What is my name?' },
    ]);
    // a third turn on another worker, with its own instructions first
    const r3 = await c.responses.create({ model: 'alpha', previous_response_id: r2.id, instructions: 'Answer in French.', input: 'And my age?' });
    expect(lastMessages(stubs.alpha!)).toEqual([
      { role: 'system', content: 'Answer in French.' },
      { role: 'user', content: 'My name is Ada.' },
      { role: 'assistant', content: 'answer from gamma' },
      { role: 'user', content: 'What is my name?' },
      { role: 'assistant', content: 'answer from gamma' },
      { role: 'user', content: 'And my age?' },
    ]);
    // the conversation's identity is the root of the chain; no key material in the row
    const row = await getStoredResponse(database.db, r3.id, fullKeyId);
    expect(row).toMatchObject({ id: r3.id, previousResponseId: r2.id, conversationId: r1.id, keyId: fullKeyId, model: 'alpha', worker: 'alpha', instructions: 'Answer in French.' });
    expect(JSON.stringify(row)).not.toContain(fullKey);
    expect((await getStoredResponse(database.db, r1.id, fullKeyId))!.conversationId).toBe(r1.id);
  });

  it('a function tool round trip: the call, then its output bound to the call on the next turn', async () => {
    const c = client();
    const t1 = await c.responses.create({ model: 'beta', input: WEATHER, tools });
    expect(t1.status).toBe('completed');
    expect(t1.output).toEqual([{ id: expect.stringMatching(/^fc_/), type: 'function_call', status: 'completed', arguments: '{"city":"Paris"}', call_id: 'call_beta', name: 'get_weather' }]);
    expect(t1.tools).toEqual([{ type: 'function', name: 'get_weather', description: WEATHER_TOOL.description, parameters: WEATHER_TOOL.parameters, strict: false }]);
    expect(stubs.beta!.requests.at(-1)!.body.tools).toEqual([{ type: 'function', function: { name: 'get_weather', description: WEATHER_TOOL.description, parameters: WEATHER_TOOL.parameters } }]);

    const t2 = await c.responses.create({ model: 'beta', previous_response_id: t1.id, tools, input: [{ type: 'function_call_output', call_id: 'call_beta', output: '18 degrees Celsius and sunny' }] });
    expect(t2.output_text).toBe('answer from beta');
    expect(lastMessages(stubs.beta!)).toEqual([
      { role: 'user', content: WEATHER },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_beta', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_beta', content: '18 degrees Celsius and sunny' },
    ]);
  });

  it('takes a whole tool conversation as input items, without a stored response', async () => {
    const r = await client().responses.create({
      model: 'gamma',
      store: false,
      input: [
        { role: 'user', content: WEATHER },
        { type: 'function_call', call_id: 'call_x', name: 'get_weather', arguments: '{"city":"Paris"}' },
        { type: 'function_call_output', call_id: 'call_x', output: [{ type: 'input_text', text: 'rainy' }] },
        { type: 'message', id: 'msg_prior', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'It is rainy.', annotations: [] }] },
        { role: 'user', content: 'Thanks!' },
      ],
    });
    expect((r as Json).store).toBe(false);
    expect(lastMessages(stubs.gamma!)).toEqual([
      { role: 'user', content: WEATHER },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_x', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_x', content: 'rainy' },
      { role: 'assistant', content: 'It is rainy.' },
      { role: 'user', content: 'Thanks!' },
    ]);
  });
});

describe('streaming', () => {
  it("writes OpenAI's events in order with sequence numbers, and the final response equals GET", async () => {
    const stream = await client().responses.create({ model: 'gamma', input: 'Stream me something.', stream: true });
    const events: Json[] = [];
    for await (const e of stream) events.push(e);
    const types = events.map((e) => e.type);
    const deltas = events.filter((e) => e.type === 'response.output_text.delta');
    expect(deltas.length).toBeGreaterThan(1);
    expect(types).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      ...deltas.map(() => 'response.output_text.delta'),
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const [created, , added, partAdded] = events;
    expect(created.response).toMatchObject({ status: 'in_progress', output: [], model: 'gamma', usage: null });
    expect(added.item).toEqual({ id: expect.stringMatching(/^msg_/), type: 'message', status: 'in_progress', role: 'assistant', content: [] });
    expect(partAdded).toMatchObject({ item_id: added.item.id, output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
    expect(deltas.every((d) => d.item_id === added.item.id && d.output_index === 0 && d.content_index === 0 && Array.isArray(d.logprobs))).toBe(true);
    expect(deltas.map((d) => d.delta).join('')).toBe('answer from gamma');
    expect(events.find((e) => e.type === 'response.output_text.done').text).toBe('answer from gamma');
    const completed = events.at(-1).response;
    expect(completed.status).toBe('completed');
    expect(completed.output[0]).toEqual({ ...added.item, status: 'completed', content: [{ type: 'output_text', text: 'answer from gamma', annotations: [] }] });
    expect(completed.usage.total_tokens).toBe(completed.usage.input_tokens + completed.usage.output_tokens);
    expect(completed.usage.cost).toBe(Number(tokenCost(completed.usage.input_tokens, completed.usage.output_tokens, { inputPerMTok: '1', outputPerMTok: '2' })) / 1e12);
    expect(withoutOutputText(await client().responses.retrieve(completed.id))).toEqual(completed);
  });

  it('streams a function call with the stream helper; its final response equals GET', async () => {
    const stream = client().responses.stream({ model: 'beta', input: WEATHER, tools });
    const types: string[] = [];
    stream.on('event', (e) => types.push(e.type));
    const final = await stream.finalResponse();
    expect(types).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    // the helper adds output_text, output_parsed and parsed_arguments (the client's own fields)
    const { parsed_arguments: _parsed, ...call } = final.output[0] as OpenAI.Responses.ParsedResponseFunctionToolCall;
    expect(call).toEqual({ id: expect.stringMatching(/^fc_/), type: 'function_call', status: 'completed', arguments: '{"city":"Paris"}', call_id: 'call_beta', name: 'get_weather' });
    expect(withoutOutputText(await client().responses.retrieve(final.id))).toEqual({ ...withoutOutputText(final), output: [call] });
  });

  it('a stream that breaks after its first byte ends with an error event and response.failed, and is not stored', async () => {
    const res = await post({ model: 'ultra-like', input: 'BREAK please', stream: true });
    expect(res.status).toBe(200);
    const events = await sseEvents(res);
    expect(events.every((e) => e.event === e.data.type)).toBe(true);
    expect(events.map((e) => e.event)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'error',
      'response.failed',
    ]);
    expect(events.map((e) => e.data.sequence_number)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(events[5]!.data.message).toMatch(/the workflow broke off/);
    const failed = events[6]!.data.response;
    expect(failed.status).toBe('failed');
    expect(failed.error).toEqual({ code: 'server_error', message: expect.stringMatching(/the workflow broke off/) });
    expect(failed.output[0]).toMatchObject({ type: 'message', status: 'incomplete', content: [{ type: 'output_text', text: 'workflow ' }] });
    // the openai client raises the error event
    const stream = await client().responses.create({ model: 'ultra-like', input: 'BREAK again', stream: true });
    const e = await (async () => {
      for await (const _ of stream) {
        // drain
      }
    })().catch((x: unknown) => x);
    expect(e).toBeInstanceOf(APIError);
    expect((e as APIError).message).toMatch(/the workflow broke off/);
    const get = await client().responses.retrieve(failed.id).catch((x: unknown) => x);
    expect(get).toBeInstanceOf(OpenAI.NotFoundError);
  });
});

describe('another model kind (fugu-ultra works the same way)', () => {
  it('puts the extension object, the extra usage fields and the headers on the response', async () => {
    const { data, response } = await client().responses.create({ model: 'ultra-like', input: 'Plan it.', instructions: 'Be thorough.' }).withResponse();
    const r = data as typeof data & { fugu: unknown; usage: Record<string, unknown> };
    expect(r.model).toBe('ultra-like');
    expect(r.output_text).toBe('workflow answer');
    expect(r.fugu).toEqual({ workflow: { id: 42, steps: 2 } });
    expect(r.usage).toMatchObject({ input_tokens: 7, output_tokens: 3, total_tokens: 10, cost: 0.000005, conductor_tokens: 4, worker_tokens: 6 });
    expect(response.headers.get('x-fugu-workflow')).toBe('42');
    expect(ultraSeen.at(-1)!.req.messages).toEqual([
      { role: 'system', content: 'Be thorough.' },
      { role: 'user', content: 'Plan it.' },
    ]);
    // the response names the model's own name; the row keeps the worker that answered
    expect(await getStoredResponse(database.db, r.id, fullKeyId)).toMatchObject({ model: 'ultra-like', worker: 'alpha' });
  });

  it("hands the model the conversation's identity: the chain's first response", async () => {
    const r1 = await client().responses.create({ model: 'ultra-like', input: 'First.' });
    // a new chain: the id a new conversation takes, no constraint (its input may continue a workflow by its call ids)
    expect(ultraSeen.at(-1)!.newConversation).toBe(r1.id);
    expect(ultraSeen.at(-1)!.conversation).toBeUndefined();
    const r2 = await client().responses.create({ model: 'gamma', previous_response_id: r1.id, input: 'Second.' });
    await client().responses.create({ model: 'ultra-like', previous_response_id: r2.id, input: 'Third.' });
    expect(ultraSeen.at(-1)!.conversation).toBe(r1.id);
    expect(ultraSeen.at(-1)!.req.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user']);
  });

  it('streams through the stream helper with progress events left out', async () => {
    const stream = client().responses.stream({ model: 'ultra-like', input: 'Plan it, streaming.' });
    const types: string[] = [];
    stream.on('event', (e) => types.push(e.type));
    const final = (await stream.finalResponse()) as unknown as OpenAI.Responses.Response & { fugu: unknown; usage: Record<string, unknown> };
    expect(final.output_text).toBe('workflow answer');
    expect(types.filter((t) => !t.startsWith('response.'))).toEqual([]);
    expect(types.filter((t) => t === 'response.output_text.delta')).toHaveLength(2);
    expect(final.fugu).toEqual({ workflow: { id: 42, steps: 2 } });
    expect(final.usage).toMatchObject({ conductor_tokens: 4, worker_tokens: 6, cost: 0.000005 });
  });
});

describe('stored responses: scope, store false, delete, input items', () => {
  it('store: false keeps nothing: GET is 404 and continuing it is 400', async () => {
    const r = await client().responses.create({ model: 'gamma', input: 'Forget this.', store: false });
    expect((r as Json).store).toBe(false);
    expect(await getStoredResponse(database.db, r.id, fullKeyId)).toBeUndefined();
    const get = await client().responses.retrieve(r.id).catch((x: unknown) => x);
    expect(get).toBeInstanceOf(OpenAI.NotFoundError);
    const next = await client().responses.create({ model: 'gamma', input: 'And then?', previous_response_id: r.id }).catch((x: unknown) => x);
    expect(next).toBeInstanceOf(OpenAI.BadRequestError);
    expect((next as APIError).param).toBe('previous_response_id');
    expect((next as APIError).code).toBe('previous_response_not_found');
    expect((next as APIError).message).toContain(`Previous response with id '${r.id}' not found.`);
  });

  it("another key can neither read, delete nor continue a key's response", async () => {
    const r = await client().responses.create({ model: 'gamma', input: 'Mine only.' });
    const before = stubs.gamma!.requests.length;
    const get = await client(otherKey).responses.retrieve(r.id).catch((x: unknown) => x);
    expect(get).toBeInstanceOf(OpenAI.NotFoundError);
    const del = await client(otherKey).responses.delete(r.id).catch((x: unknown) => x);
    expect(del).toBeInstanceOf(OpenAI.NotFoundError);
    const items = await client(otherKey).responses.inputItems.list(r.id).catch((x: unknown) => x);
    expect(items).toBeInstanceOf(OpenAI.NotFoundError);
    const next = await client(otherKey).responses.create({ model: 'gamma', input: 'Go on.', previous_response_id: r.id }).catch((x: unknown) => x);
    expect(next).toBeInstanceOf(OpenAI.BadRequestError);
    expect((next as APIError).param).toBe('previous_response_id');
    expect((next as APIError).message).toContain(`Previous response with id '${r.id}' not found.`);
    expect(stubs.gamma!.requests.length).toBe(before);
    // still the owner's
    expect((await client().responses.retrieve(r.id)).id).toBe(r.id);
  });

  it("lists a response's own input items and deletes it", async () => {
    const r1 = await client().responses.create({ model: 'gamma', input: 'zero' });
    const r = await client().responses.create({
      model: 'gamma',
      previous_response_id: r1.id,
      input: [{ role: 'user', content: 'one' }, { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'two' }] }],
    });
    const texts = (page: OpenAI.Responses.ResponseItem[]) => page.map((it) => ((it as OpenAI.Responses.ResponseInputMessageItem).content[0] as OpenAI.Responses.ResponseInputText).text);
    const desc = await client().responses.inputItems.list(r.id);
    expect(texts(desc.data)).toEqual(['two', 'one']);
    expect(desc.data[0]).toEqual({ id: expect.stringMatching(/^msg_/), type: 'message', status: 'completed', role: 'user', content: [{ type: 'input_text', text: 'two' }] });
    const asc = await client().responses.inputItems.list(r.id, { order: 'asc', limit: 1 });
    expect(texts(asc.data)).toEqual(['one']);
    expect(asc.has_more).toBe(true);
    const after = await client().responses.create({ model: 'gamma', previous_response_id: r.id, input: 'three' });
    await client().responses.delete(r.id);
    const get = await client().responses.retrieve(r.id).catch((x: unknown) => x);
    expect(get).toBeInstanceOf(OpenAI.NotFoundError);
    // a deleted link breaks the chain that continues it: a 400 naming the missing response
    const next = await client().responses.create({ model: 'gamma', previous_response_id: after.id, input: 'four' }).catch((x: unknown) => x);
    expect(next).toBeInstanceOf(OpenAI.BadRequestError);
    expect((next as APIError).param).toBe('previous_response_id');
    expect((next as APIError).message).toContain(`Previous response with id '${r.id}' not found`);
  });
});

// What Codex CLI 0.169 sends (`codex exec` with a model_providers entry, wire_api = "responses"),
// read from its requests to a gateway: hints and metadata (client_metadata with its turn, session
// and thread ids, prompt_cache_key), reasoning summary "auto", include of encrypted reasoning,
// store false, stream, function tools, a namespace of functions (its sub-agent tools), and, when a
// model catalog gives it apply_patch_tool_type "freeform", apply_patch as a custom tool.
describe("Codex CLI's requests", () => {
  const PATCH_GRAMMAR = 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\nend_patch: "*** End Patch" LF?\n%import common.LF\n';
  const PATCH = '*** Begin Patch\n*** Update File: greeting.txt\n@@\n-Hello, world\n+Hello, fugu\n*** End Patch\n';
  const codexTools = [
    { type: 'function', name: 'exec_command', description: 'Runs a command in a PTY.', strict: false, parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'], additionalProperties: false } },
    { type: 'custom', name: 'apply_patch', description: 'Use the `apply_patch` tool to edit files.', format: { type: 'grammar', syntax: 'lark', definition: PATCH_GRAMMAR } },
    {
      type: 'namespace', name: 'multi_agent_v1', description: 'Tools for spawning and managing sub-agents.',
      tools: [{ type: 'function', name: 'spawn_agent', description: 'Spawn a sub-agent.', strict: false, parameters: { type: 'object', properties: { message: { type: 'string' } }, additionalProperties: false } }],
    },
  ] as unknown as OpenAI.Responses.Tool[];
  const clientMetadata = { turn_id: '019a-turn', session_id: '019a-session', thread_id: '019a-thread', 'x-codex-window-id': '019a-session:0' };
  const codexTurn = (input: OpenAI.Responses.ResponseInput, more: Record<string, unknown> = {}) =>
    ({
      model: 'beta',
      input,
      tools: codexTools,
      tool_choice: 'auto',
      parallel_tool_calls: true,
      reasoning: { summary: 'auto' },
      store: false,
      stream: true,
      include: ['reasoning.encrypted_content'],
      prompt_cache_key: '019a-session',
      client_metadata: clientMetadata,
      metadata: { harness: 'codex' },
      safety_identifier: 'codex-user-1',
      ...more,
    }) as unknown as OpenAI.Responses.ResponseCreateParamsStreaming;
  const EDIT = "In greeting.txt, change the line 'Hello, world' to 'Hello, fugu'.";
  const turn1: OpenAI.Responses.ResponseInput = [
    { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'You are a coding agent running in the Codex CLI.' }] },
    { type: 'message', role: 'user', content: [{ type: 'input_text', text: EDIT }] },
  ];

  it("accepts a turn as Codex sends it, offers its custom tool as a function of one string input and its namespace's as <namespace>__<name>, and streams the worker's call back as a custom_tool_call", async () => {
    stubs.beta!.enqueue({ type: 'tool-calls', calls: [{ id: 'call_patch', name: 'apply_patch', arguments: JSON.stringify({ input: PATCH }) }] });
    const { data: stream, response } = await client().responses.create(codexTurn(turn1)).withResponse();
    const events: Json[] = [];
    for await (const e of stream) events.push(e);
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.custom_tool_call_input.delta',
      'response.custom_tool_call_input.done',
      'response.output_item.done',
      'response.completed',
    ]);
    const call = { id: expect.stringMatching(/^ctc_/), type: 'custom_tool_call', status: 'completed', call_id: 'call_patch', name: 'apply_patch', input: PATCH };
    expect(events[5].item).toEqual(call);
    const done = events.at(-1).response;
    expect(done.output).toEqual([call]);
    expect([done.store, done.reasoning, done.prompt_cache_key, done.safety_identifier, done.metadata]).toEqual([false, { effort: null, summary: 'auto' }, '019a-session', 'codex-user-1', { harness: 'codex' }]);
    expect(done.tools.map((t: Json) => t.type)).toEqual(['function', 'custom', 'namespace']);
    // what the worker was asked: three functions; the hints only where its provider takes them (the prompt cache key, the end user)
    const sent = stubs.beta!.requests.at(-1)!.body;
    expect(sent.tools.map((t: Json) => t.function.name)).toEqual(['exec_command', 'apply_patch', 'multi_agent_v1__spawn_agent']);
    expect(sent.tools[1].function.parameters).toEqual({
      type: 'object', required: ['input'], additionalProperties: false, properties: { input: { type: 'string', description: expect.stringContaining(PATCH_GRAMMAR) } },
    });
    expect([sent.prompt_cache_key, sent.user, sent.client_metadata, sent.metadata, sent.reasoning_effort]).toEqual(['019a-session', 'codex-user-1', undefined, undefined, undefined]);
    // the request's row keeps the end user and the hints as sent
    const requestId = response.headers.get('x-request-id')!;
    await expect.poll(async () => (await listRequests(database.db, { key: 'full', limit: 200 })).find((r) => r.requestId === requestId)).toMatchObject({
      route: '/v1/responses', worker: 'beta', status: 200, endUser: 'codex-user-1',
      hints: { client_metadata: clientMetadata, prompt_cache_key: '019a-session', metadata: { harness: 'codex' } },
    });
  });

  it("takes the next turn's whole input back (store false): the custom call and its output, a namespaced function call and its output, bound to their calls", async () => {
    const input = [
      ...turn1,
      { type: 'custom_tool_call', call_id: 'call_patch', name: 'apply_patch', input: PATCH, status: 'completed' },
      { type: 'custom_tool_call_output', call_id: 'call_patch', output: 'Success. Updated the following files:\nM greeting.txt\n' },
      { type: 'function_call', call_id: 'call_agent', name: 'spawn_agent', namespace: 'multi_agent_v1', arguments: '{"message":"review it"}' },
      { type: 'function_call_output', call_id: 'call_agent', output: 'agent 7 started' },
    ] as unknown as OpenAI.Responses.ResponseInput;
    const stream = await client().responses.create(codexTurn(input));
    let final: Json;
    for await (const e of stream) if (e.type === 'response.completed') final = e.response;
    expect(final.output_text ?? final.output[0].content[0].text).toBe('answer from beta');
    expect(lastMessages(stubs.beta!)).toEqual([
      { role: 'system', content: 'You are a coding agent running in the Codex CLI.' },
      { role: 'user', content: EDIT },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_patch', type: 'function', function: { name: 'apply_patch', arguments: JSON.stringify({ input: PATCH }) } }] },
      { role: 'tool', tool_call_id: 'call_patch', content: 'Success. Updated the following files:\nM greeting.txt\n' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_agent', type: 'function', function: { name: 'multi_agent_v1__spawn_agent', arguments: '{"message":"review it"}' } }] },
      { role: 'tool', tool_call_id: 'call_agent', content: 'agent 7 started' },
    ]);
  });

  it('a JSON (not streamed) answer names a namespaced call by its namespace and name; model fugu routes it like any other', async () => {
    stubs.beta!.enqueue({ type: 'tool-calls', calls: [{ id: 'call_agent', name: 'multi_agent_v1__spawn_agent', arguments: '{"message":"go"}' }] });
    const r = await client().responses.create({ ...codexTurn([{ role: 'user', content: WEATHER }]), model: 'fugu', stream: false } as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming);
    expect(r.model).toBe('beta');
    expect(r.output).toEqual([{ id: expect.stringMatching(/^fc_/), type: 'function_call', status: 'completed', call_id: 'call_agent', name: 'spawn_agent', namespace: 'multi_agent_v1', arguments: '{"message":"go"}' }]);
  });

  it("refuses, naming the field, what the gateway's workers cannot do: Codex's web search, a reasoning summary it cannot give, other includes", async () => {
    const before = stubs.beta!.requests.length;
    const refusal = async (more: Record<string, unknown>) => {
      const e = await client().responses.create(codexTurn(turn1, more)).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(OpenAI.BadRequestError);
      return { param: (e as APIError).param, message: (e as APIError).message };
    };
    const web = await refusal({ tools: [...codexTools, { type: 'web_search', external_web_access: false }] });
    expect(web.param).toBe('tools[3].type');
    expect(web.message).toMatch(/web_search = "disabled"/);
    expect((await refusal({ reasoning: { summary: 'detailed' } })).param).toBe('reasoning.summary');
    expect((await refusal({ include: ['reasoning.encrypted_content', 'file_search_call.results'] })).param).toBe('include[1]');
    expect((await refusal({ tools: [{ type: 'local_shell' }] })).param).toBe('tools[0].type');
    expect(stubs.beta!.requests.length).toBe(before);
  });
});

describe('bad requests: 400 naming the field', () => {
  const errorOf = async (body: unknown): Promise<{ status: number; error: Json }> => {
    const res = await post(body);
    return { status: res.status, error: ((await res.json()) as Json).error };
  };

  it('refuses built-in tools, unknown fields, unknown item kinds, images and bad values', async () => {
    const before = Object.values(stubs).reduce((n, s) => n + s.requests.length, 0);
    const cases: Array<[unknown, string]> = [
      [{ model: 'gamma', input: 'hi', tools: [{ type: 'web_search' }] }, 'tools[0].type'],
      [{ model: 'gamma', input: 'hi', tools: [...tools, { type: 'file_search', vector_store_ids: ['vs_1'] }] }, 'tools[1].type'],
      [{ model: 'gamma', input: 'hi', frobnicate: true }, 'frobnicate'],
      [{ model: 'gamma', input: 'hi', conversation: 'conv_1' }, 'conversation'],
      [{ model: 'gamma', input: [{ type: 'reasoning', summary: [] }] }, 'input[0].type'],
      [{ model: 'gamma', input: [{ role: 'user', content: [{ type: 'input_text', text: 'look' }, { type: 'input_image', image_url: 'https://x/y.png' }] }] }, 'input[0].content[1].type'],
      [{ model: 'gamma', input: [{ role: 'robot', content: 'hi' }] }, 'input[0].role'],
      [{ model: 'gamma', input: 'hi', temperature: 'hot' }, 'temperature'],
      [{ model: 'gamma', input: 'hi', text: { format: { type: 'json_schema', schema: {} } } }, 'text.format.name'],
      [{ model: 'gamma', input: 'hi', tool_choice: { type: 'function', name: 'nope' }, tools }, 'tool_choice.name'],
      [{ model: 'gamma' }, 'input'],
      [{ model: 'gamma', input: '' }, 'input'],
      [{ model: 'gamma', input: [{ type: 'function_call', call_id: 'c1', arguments: '{}' }] }, 'input[0].name'],
      [{ model: 'gamma', input: [{ role: 'user', content: [{ type: 'input_text' }] }] }, 'input[0].content[0].text'],
      [{ model: 'gamma', input: [{ role: 'assistant', content: [{ type: 'input_text', text: 'x' }] }] }, 'input[0].content[0].type'],
      [{ model: 'gamma', input: 'hi', include: ['message.output_text.logprobs'] }, 'include[0]'],
    ];
    for (const [body, param] of cases) {
      const { status, error } = await errorOf(body);
      expect({ param: error.param, status }).toEqual({ param, status: 400 });
      expect(error.message.startsWith(`${param}: `)).toBe(true);
      expect(error.type).toBe('invalid_request_error');
    }
    expect(Object.values(stubs).reduce((n, s) => n + s.requests.length, 0)).toBe(before);
  });

  it('a function_call_output whose call_id answers no call is a 400 naming it, with the openai client too', async () => {
    const e = await client()
      .responses.create({ model: 'gamma', input: [{ role: 'user', content: 'hi' }, { type: 'function_call_output', call_id: 'call_nowhere', output: 'x' }] })
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    expect((e as APIError).param).toBe('input[1].call_id');
    expect((e as APIError).message).toMatch(/call_nowhere/);
  });

  it('an unknown model is a 404 model_not_found', async () => {
    const e = await client().responses.create({ model: 'gpt-17', input: 'hi' }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.NotFoundError);
    expect((e as APIError).code).toBe('model_not_found');
  });
});
