// Every Chat Completions and Responses request parameter, for each model kind, with the real
// `openai` client (issue 27, 4b; docs/parameters.md): each is honoured (it reaches the
// OpenAI-compatible stub's request body, or it changes the replay worker's answer) or refused
// with a 400 naming it; never accepted and dropped. Model kinds: `compat`, a worker called by
// name (an OpenAI-compatible stub); `recorded`, a replay worker called by name; `fugu` over both
// (the prompt routes to `recorded`, so a parameter the replay worker cannot honour must move the
// request to `compat`); `fugu` over the replay worker alone (it must refuse what replay cannot
// honour, e.g. tool_choice "required", which answered text with finish_reason stop before);
// `fugu-ultra` (fixed:single:compat: its one step's call is the stub's request).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import OpenAI, { APIError } from 'openai';
import type { WorkerPool } from '@fugu/core';
import { createApiKey, publishUltraDeployment, savePool } from '@fugu/db';
import type { TestDatabase } from '@fugu/db/testing';
import { replayStoreFor } from '@fugu/datasets';
import { poolContentHash } from '@fugu/evaluation';
import { startOpenAIStub, WEATHER_TOOL, type OpenAIStub } from '@fugu/providers/testing';
import { ultraModel } from '../../apps/gateway/src/ultra.ts';
import { REFUSED as CHAT_REFUSED, chatRequestSchema } from '../../apps/gateway/src/wire.ts';
import { REFUSED as RESPONSES_REFUSED, responsesRequestSchema } from '../../apps/gateway/src/responses-wire.ts';
import { stubWorker } from '../support/ultra-gateway.ts';
import { startRoutedGateway, type RoutedGateway } from '../support/routed-gateway.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const QUESTION = 'What is the capital of Australia?';
const RECORDED = 'The capital of Australia is Canberra, not Sydney.';
const OTHER = 'Write a haiku about autumn leaves.';
const chatTools = [{ type: 'function', function: { name: WEATHER_TOOL.name, description: WEATHER_TOOL.description, parameters: WEATHER_TOOL.parameters } }];
const respTools = [{ type: 'function', name: WEATHER_TOOL.name, description: WEATHER_TOOL.description, parameters: WEATHER_TOOL.parameters }];

let routed: RoutedGateway | undefined;
let database: TestDatabase;
let baseURL: string;
let key: string;
let stub: OpenAIStub;

beforeAll(async () => {
  stub = await startOpenAIStub({ defaultReply: { type: 'text', text: 'the stub answers', usage: { input: 10, output: 3 } } });
  const pool: WorkerPool = {
    name: 'parameters-test',
    workers: [stubWorker('compat', stub), { name: 'recorded', provider: 'replay', model: 'recorded-model', settings: {}, prices: { inputPerMTok: '0', outputPerMTok: '0' } }],
  };
  const replay = replayStoreFor([{ id: 'au', task: 'qa', prompt: QUESTION, recorded: { recorded: { score: 1, answer: RECORDED, tokensIn: 9, tokensOut: 12 } } }], 'recorded');
  routed = await startRoutedGateway({
    name: 'params',
    pool,
    checkpoint: { anchors: { compat: OTHER, recorded: QUESTION } },
    gateway: async ({ database: { db }, config, log }) => {
      const stored = await savePool(db, pool, poolContentHash(pool));
      await publishUltraDeployment(db, { name: 'fugu-ultra', conductor: 'fixed:single:compat', pool: pool.name, options: {} });
      return {
        replayStore: (name) => (name === 'recorded' ? replay : undefined),
        extraModels: [
          (ctx) => ultraModel(ctx, {
            db, poolId: stored.poolId, workers: stored.workers,
            deps: { writer: { db, config, pipeline: undefined as never, log }, secret: randomBytes(32), log },
          }),
        ],
      };
    },
  });
  ({ database, baseURL } = routed);
  key = (await createApiKey(database.db, { name: 'all' })).key;
});

afterAll(async () => {
  await routed?.close();
  await stub?.close();
});

const client = () => new OpenAI({ apiKey: key, baseURL, maxRetries: 0, timeout: 30_000 });

type Kind = 'compat' | 'recorded' | 'fugu' | 'fugu-replay' | 'fugu-ultra';
const KINDS: Kind[] = ['compat', 'recorded', 'fugu', 'fugu-replay', 'fugu-ultra'];
const modelOf = (k: Kind): string => (k === 'fugu-replay' ? 'fugu' : k);

/** An answer (its text, the model that answered, the stub's request when one was made) or a refusal. */
type Outcome = { ok: true; text: string; model: string; sent: Json | undefined; headers: Headers } | { ok: false; status: number; param: string | null | undefined; message: string };

async function run(kind: Kind, endpoint: 'chat' | 'responses', fragment: Json): Promise<Outcome> {
  const before = stub.requests.length;
  const fugu = kind === 'fugu-replay' ? { ...fragment.fugu, workers: ['recorded'] } : fragment.fugu;
  const body: Json = { model: modelOf(kind), ...(endpoint === 'chat' ? { messages: [{ role: 'user', content: QUESTION }] } : { input: QUESTION }), ...fragment, ...(fugu && { fugu }) };
  try {
    let text = '';
    let model = '';
    let headers: Headers;
    if (endpoint === 'chat') {
      if (body.stream) {
        const { data, response } = await client().chat.completions.create(body).withResponse();
        headers = response.headers;
        for await (const c of data as unknown as AsyncIterable<Json>) {
          model = c.model;
          text += c.choices[0]?.delta?.content ?? '';
          if (c.usage) text += `|usage:${c.usage.completion_tokens}`;
        }
      } else {
        const { data, response } = await client().chat.completions.create(body).withResponse();
        headers = response.headers;
        text = (data as Json).choices[0].message.content ?? '';
        model = (data as Json).model;
      }
    } else if (body.stream) {
      const { data, response } = await client().responses.create(body).withResponse();
      headers = response.headers;
      for await (const e of data as unknown as AsyncIterable<Json>) {
        if (e.type === 'response.output_text.delta') text += e.delta;
        if (e.type === 'response.completed') model = e.response.model;
      }
    } else {
      const { data, response } = await client().responses.create(body).withResponse();
      headers = response.headers;
      text = (data as Json).output_text;
      model = (data as Json).model;
    }
    const calls = stub.requests.slice(before).filter((r) => r.body?.messages);
    return { ok: true, text, model, sent: calls.at(-1)?.body, headers };
  } catch (e) {
    if (!(e instanceof APIError)) throw e;
    return { ok: false, status: e.status ?? 0, param: (e as APIError & { param?: string }).param, message: e.message };
  }
}

/**
 * One parameter's case. `sent`: what the stub must receive when a request reaches it (the field
 * in the adapter's wire terms); `replay`: what the replay worker does (`cut`: honoured, the
 * answer changes; `ok`: accepted, asking nothing a recording cannot give, or a hint; `refused`);
 * `ultra: 'refused'`: fugu-ultra refuses it; `all: 'refused'`: every model refuses it (the
 * gateway cannot serve it); `as`: the param a refusal names, when not `name`; `only`: the kinds
 * that take it (else every kind), `others`: what the rest do.
 */
type Case = {
  name: string;
  body: Json;
  sent?: Json;
  replay?: 'cut' | 'ok' | 'refused';
  ultra?: 'refused';
  all?: 'refused';
  as?: string;
  check?: (o: Extract<Outcome, { ok: true }>, kind: Kind) => void;
  only?: Kind[];
};

const CHAT: Case[] = [
  { name: 'temperature', body: { temperature: 0.3 }, sent: { temperature: 0.3 }, replay: 'refused' },
  { name: 'top_p', body: { top_p: 0.5 }, sent: { top_p: 0.5 }, replay: 'refused' },
  { name: 'max_tokens', body: { max_tokens: 3 }, sent: { max_tokens: 3 }, replay: 'cut' },
  { name: 'max_completion_tokens', body: { max_completion_tokens: 3 }, sent: { max_tokens: 3 }, replay: 'cut' },
  { name: 'reasoning_effort', body: { reasoning_effort: 'low' }, sent: { reasoning_effort: 'low' }, replay: 'refused' },
  { name: 'tools', body: { tools: chatTools }, sent: { tools: [{ type: 'function', function: { name: WEATHER_TOOL.name } }] }, replay: 'ok' },
  { name: 'tool_choice', body: { tools: chatTools, tool_choice: 'required' }, sent: { tool_choice: 'required' }, replay: 'refused' },
  { name: 'parallel_tool_calls', body: { tools: chatTools, parallel_tool_calls: false }, sent: { parallel_tool_calls: false }, replay: 'ok' },
  { name: 'stop', body: { stop: [', not'] }, sent: { stop: [', not'] }, replay: 'cut' },
  { name: 'seed', body: { seed: 7 }, sent: { seed: 7 }, replay: 'refused' },
  { name: 'frequency_penalty', body: { frequency_penalty: 0.5 }, sent: { frequency_penalty: 0.5 }, replay: 'refused' },
  { name: 'presence_penalty', body: { presence_penalty: -0.5 }, sent: { presence_penalty: -0.5 }, replay: 'refused' },
  { name: 'logit_bias', body: { logit_bias: { '50256': -100 } }, sent: { logit_bias: { '50256': -100 } }, replay: 'refused' },
  { name: 'logprobs', body: { logprobs: true }, sent: { logprobs: true }, replay: 'refused', ultra: 'refused' },
  { name: 'top_logprobs', body: { logprobs: true, top_logprobs: 2 }, sent: { top_logprobs: 2 }, replay: 'refused', ultra: 'refused', as: 'logprobs' },
  { name: 'response_format', body: { response_format: { type: 'json_object' } }, sent: { response_format: { type: 'json_object' } }, replay: 'refused' },
  { name: 'verbosity', body: { verbosity: 'low' }, sent: { verbosity: 'low' }, replay: 'refused' },
  { name: 'user', body: { user: 'u-1' }, sent: { user: 'u-1' }, replay: 'ok' },
  { name: 'safety_identifier', body: { safety_identifier: 's-1' }, sent: { user: 's-1' }, replay: 'ok' },
  { name: 'service_tier', body: { service_tier: 'flex' }, sent: { service_tier: 'flex' }, replay: 'ok' },
  { name: 'store', body: { store: true }, sent: { store: true }, replay: 'ok' },
  { name: 'metadata', body: { metadata: { run: '1' } }, sent: { metadata: { run: '1' } }, replay: 'ok' },
  { name: 'prompt_cache_key', body: { prompt_cache_key: 'pk' }, sent: { prompt_cache_key: 'pk' }, replay: 'ok' },
  { name: 'n', body: { n: 2 }, all: 'refused' },
  { name: 'n', body: { n: 1 }, replay: 'ok' },
  { name: 'modalities', body: { modalities: ['audio'] }, all: 'refused' },
  { name: 'modalities', body: { modalities: ['text'] }, replay: 'ok' },
  { name: 'stream', body: { stream: true }, replay: 'ok', check: (o) => expect(o.text.length).toBeGreaterThan(0) },
  { name: 'stream_options', body: { stream: true, stream_options: { include_usage: true } }, replay: 'ok', check: (o) => expect(o.text).toMatch(/\|usage:\d+$/) },
  ...Object.keys(CHAT_REFUSED).map((name): Case => ({ name, body: { [name]: name === 'functions' ? [{ name: 'f' }] : name === 'function_call' ? 'auto' : { type: 'x' } }, all: 'refused' })),
  { name: 'fugu', body: { fugu: { workers: ['compat', 'recorded'] } }, replay: 'ok' },
  { name: 'fugu.lambda', body: { fugu: { lambda: 0.5 } }, replay: 'ok', only: ['fugu', 'fugu-replay'] },
  ...['conversation', 'shared_memory', 'merge_tool_calls'].map((k): Case => ({
    name: `fugu.${k}`,
    body: { fugu: { [k]: k === 'conversation' ? `conv-${randomBytes(3).toString('hex')}` : false } },
    only: ['fugu-ultra'],
    check: (o) => (k === 'conversation' ? expect(o.headers.get('x-fugu-conversation')).toMatch(/^conv-/) : undefined),
  })),
];

const RESPONSES: Case[] = [
  { name: 'temperature', body: { temperature: 0.3 }, sent: { temperature: 0.3 }, replay: 'refused' },
  { name: 'top_p', body: { top_p: 0.5 }, sent: { top_p: 0.5 }, replay: 'refused' },
  { name: 'max_output_tokens', body: { max_output_tokens: 3 }, sent: { max_tokens: 3 }, replay: 'cut' },
  { name: 'reasoning.effort', body: { reasoning: { effort: 'low' } }, sent: { reasoning_effort: 'low' }, replay: 'refused' },
  // "auto" (Codex sends it): no reasoning item comes back, as the model gives none; a summary asked for is refused
  { name: 'reasoning.summary', body: { reasoning: { summary: 'auto' } }, replay: 'ok' },
  { name: 'reasoning.summary', body: { reasoning: { summary: 'detailed' } }, all: 'refused' },
  { name: 'tools', body: { tools: respTools }, sent: { tools: [{ type: 'function', function: { name: WEATHER_TOOL.name } }] }, replay: 'ok' },
  // a custom (freeform) tool and a namespace's tool, as Codex declares them: functions for the worker
  {
    name: 'tools',
    body: { tools: [{ type: 'custom', name: 'apply_patch', description: 'Edit files.', format: { type: 'grammar', syntax: 'lark', definition: 'start: "x"' } }] },
    sent: { tools: [{ type: 'function', function: { name: 'apply_patch', parameters: { type: 'object', required: ['input'] } } }] },
    replay: 'ok',
  },
  {
    name: 'tools',
    body: { tools: [{ type: 'namespace', name: 'agents', description: 'Sub-agents.', tools: [{ type: 'function', name: 'spawn', parameters: { type: 'object', properties: {} } }] }] },
    sent: { tools: [{ type: 'function', function: { name: 'agents__spawn' } }] },
    replay: 'ok',
  },
  { name: 'tools', body: { tools: [{ type: 'web_search' }] }, all: 'refused', as: 'tools[0].type' },
  { name: 'tool_choice', body: { tools: respTools, tool_choice: 'required' }, sent: { tool_choice: 'required' }, replay: 'refused' },
  { name: 'parallel_tool_calls', body: { tools: respTools, parallel_tool_calls: false }, sent: { parallel_tool_calls: false }, replay: 'ok' },
  { name: 'text.format', body: { text: { format: { type: 'json_object' } } }, sent: { response_format: { type: 'json_object' } }, replay: 'refused' },
  { name: 'text.verbosity', body: { text: { verbosity: 'low' } }, sent: { verbosity: 'low' }, replay: 'refused' },
  { name: 'user', body: { user: 'u-1' }, sent: { user: 'u-1' }, replay: 'ok' },
  { name: 'safety_identifier', body: { safety_identifier: 's-1' }, sent: { user: 's-1' }, replay: 'ok' },
  { name: 'service_tier', body: { service_tier: 'flex' }, sent: { service_tier: 'flex' }, replay: 'ok' },
  { name: 'prompt_cache_key', body: { prompt_cache_key: 'pk' }, sent: { prompt_cache_key: 'pk' }, replay: 'ok' },
  { name: 'instructions', body: { instructions: 'Be brief.' }, replay: 'ok', check: (o, k) => (k === 'compat' ? expect(o.sent.messages[0]).toEqual({ role: 'system', content: 'Be brief.' }) : undefined) },
  { name: 'store', body: { store: false }, replay: 'ok' },
  { name: 'metadata', body: { metadata: { run: '1' } }, replay: 'ok' },
  // a hint kept with the request's row, not sent to the worker (Codex's turn, session and thread ids)
  { name: 'client_metadata', body: { client_metadata: { turn_id: 't-1' } }, replay: 'ok', check: (o, k) => (k === 'compat' ? expect(o.sent.client_metadata).toBeUndefined() : undefined) },
  { name: 'stream', body: { stream: true }, replay: 'ok', check: (o) => expect(o.text.length).toBeGreaterThan(0) },
  { name: 'stream_options', body: { stream: true, stream_options: { include_obfuscation: false } }, replay: 'ok' },
  { name: 'truncation', body: { truncation: 'auto' }, all: 'refused' },
  { name: 'truncation', body: { truncation: 'disabled' }, replay: 'ok' },
  // Codex asks for the encrypted reasoning of reasoning items; there are none to include
  { name: 'include', body: { include: ['reasoning.encrypted_content'] }, replay: 'ok' },
  { name: 'include', body: { include: ['message.output_text.logprobs'] }, all: 'refused', as: 'include[0]' },
  { name: 'include', body: { include: [] }, replay: 'ok' },
  { name: 'background', body: { background: true }, all: 'refused' },
  { name: 'previous_response_id', body: { previous_response_id: `resp_${'ab'.repeat(24)}` }, all: 'refused' },
  ...Object.keys(RESPONSES_REFUSED).map((name): Case => ({ name, body: { [name]: name === 'max_tool_calls' || name === 'top_logprobs' ? 2 : name === 'conversation' || name === 'prompt_cache_retention' ? 'c' : { x: 1 } }, all: 'refused' })),
  { name: 'fugu', body: { fugu: { workers: ['compat', 'recorded'] } }, replay: 'ok' },
  // a Responses conversation is its chain: every model refuses the chat extension's
  { name: 'fugu.conversation', body: { fugu: { conversation: 'conv-1' } }, all: 'refused' },
  { name: 'fugu.shared_memory', body: { fugu: { shared_memory: false } }, only: ['fugu-ultra'] },
];

/** What `kind` must do with `c`: refuse it (naming what), or honour it (how to tell). */
function expected(c: Case, kind: Kind): 'refused' | 'stub' | 'cut' | 'ok' {
  if (c.all) return 'refused';
  if (c.only && !c.only.includes(kind)) return 'refused';
  switch (kind) {
    case 'compat':
      return c.sent ? 'stub' : 'ok';
    case 'recorded':
    case 'fugu-replay':
      return c.replay ?? 'ok';
    case 'fugu':
      // the router keeps the replay worker it prefers when it can honour the request, else moves to compat
      return c.replay === 'refused' ? 'stub' : (c.replay ?? 'ok');
    case 'fugu-ultra':
      return c.ultra ? 'refused' : c.sent ? 'stub' : 'ok';
  }
}

async function walk(endpoint: 'chat' | 'responses', cases: Case[]): Promise<void> {
  const plain = await run('recorded', endpoint, {});
  expect(plain).toMatchObject({ ok: true, text: RECORDED });
  const failures: string[] = [];
  for (const c of cases) {
    for (const kind of KINDS) {
      const want = expected(c, kind);
      const o = await run(kind, endpoint, c.body);
      const at = `${endpoint} ${JSON.stringify(c.body)} on ${kind}: expected ${want}, got ${JSON.stringify(o.ok ? { model: o.model, text: o.text } : o)}`;
      try {
        if (want === 'refused') {
          expect(o.ok, at).toBe(false);
          if (!o.ok) {
            expect(o.status, at).toBe(400);
            expect(o.param === c.as || o.param === c.name || o.param === `${c.name}` || (c.as === undefined && o.param?.startsWith(`${c.name}.`)), at).toBe(true);
          }
          continue;
        }
        expect(o.ok, at).toBe(true);
        if (!o.ok) continue;
        if (want === 'stub') {
          expect(o.sent, at).toMatchObject(c.sent);
          if (kind === 'fugu') expect(o.model, at).toBe('compat');
        }
        if (want === 'cut') {
          expect(o.model, at).toBe('recorded');
          expect(o.text, at).not.toBe(RECORDED);
          expect(RECORDED.startsWith(o.text), at).toBe(true);
        }
        c.check?.(o, kind);
      } catch (e) {
        failures.push((e as Error).message.split('\n')[0]!);
      }
    }
  }
  expect(failures).toEqual([]);
}

describe('every request parameter is honoured or refused, for every model kind', () => {
  it('covers every field the endpoints know or refuse', () => {
    const chat = new Set(CHAT.map((c) => c.name.split('.')[0]!));
    for (const k of [...Object.keys(chatRequestSchema.shape), ...Object.keys(CHAT_REFUSED)]) if (k !== 'model' && k !== 'messages') expect(chat.has(k), `chat ${k}`).toBe(true);
    const resp = new Set(RESPONSES.map((c) => c.name.split('.')[0]!));
    for (const k of [...Object.keys(responsesRequestSchema.shape), ...Object.keys(RESPONSES_REFUSED)]) if (k !== 'model' && k !== 'input') expect(resp.has(k), `responses ${k}`).toBe(true);
  });

  it('Chat Completions', { timeout: 120_000 }, async () => {
    await walk('chat', CHAT);
  });

  it('Responses', { timeout: 120_000 }, async () => {
    await walk('responses', RESPONSES);
  });
});
