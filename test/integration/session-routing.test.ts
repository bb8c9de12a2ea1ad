// Per-turn routing in a client session (issue 30, item 4): a coding session in a harness's shape
// (a task, a tool call, its result, a second tool call, its result, the answer, a follow-up) sent
// turn by turn to `fugu` through the real `openai` client (Chat Completions, as OpenCode speaks it;
// the Responses API, as Codex does) and the real `@anthropic-ai/sdk` client (the Messages API, as
// Claude Code does), each with the session id its harness sends. The router is an anchor router
// over two workers whose anchors are the transcripts of alternate turns, so the turns alternate
// workers only when each turn is routed on its whole transcript (tool results included), newest
// turn first. Asserted per turn: the row's session, the worker the router chooses for the same
// transcript (asked independently: the route client on routingText of the turn's messages), that
// worker named by the answer (its `model` and x-fugu-worker), the tool calls and the cost; then
// `fugu requests --session` and `fugu report session:` list the turns in order with their workers
// and costs; a request without a session signal has none.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { formatUsd, tokenCost, type ChatMessage } from '@fugu/core';
import { createApiKey, getRequest, listRequests, type RequestRow } from '@fugu/db';
import { startOpenAIStub, type OpenAIStub, type RecordedRequest, type StubReply } from '@fugu/providers/testing';
import { routingText } from '@fugu/serving';
import { runCli } from '../support/es-env.ts';
import { startRoutedGateway, worker, type RoutedGateway } from '../support/routed-gateway.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const SYSTEM = 'You are a coding agent. Use the tools to read and edit files.';
const TASK = 'The test of parse() in parser.ts fails on an empty line. Find the bug and fix it.';
const READ_ARGS = '{"path":"parser.ts"}';
const FILE = 'export function parse(text) {\n  return text.split("\\n").map(Number);\n}\n';
const EDIT_ARGS = '{"path":"parser.ts","old":".map(Number)","new":".filter(Boolean).map(Number)"}';
const EDITED = 'edited parser.ts: 1 line changed';
const ANSWER = 'Fixed: parse() skips empty lines before converting them.';
const FOLLOW_UP = 'Thanks. In one sentence, why did the test fail?';
const WHY = 'An empty line became 0 instead of being skipped.';
const USAGE = [
  { input: 120, output: 14 },
  { input: 210, output: 30 },
  { input: 260, output: 12 },
  { input: 300, output: 11 },
];
const PRICES: Record<string, [string, string]> = { builder: ['1', '4'], debugger: ['3', '15'] };

/** The canonical messages of turn k (1-based) with the tool-call ids the client sent: what the router must score. */
function transcript(k: number, ids: { read: string; edit: string } = { read: 'r', edit: 'e' }): ChatMessage[] {
  const m: ChatMessage[] = [{ role: 'system', content: SYSTEM }, { role: 'user', content: TASK }];
  if (k >= 2) m.push({ role: 'assistant', content: [{ type: 'tool-call', id: ids.read, name: 'read_file', arguments: READ_ARGS }] }, { role: 'tool', content: [{ type: 'tool-result', toolCallId: ids.read, content: FILE }] });
  if (k >= 3) m.push({ role: 'assistant', content: [{ type: 'tool-call', id: ids.edit, name: 'edit_file', arguments: EDIT_ARGS }] }, { role: 'tool', content: [{ type: 'tool-result', toolCallId: ids.edit, content: EDITED }] });
  if (k >= 4) m.push({ role: 'assistant', content: ANSWER }, { role: 'user', content: FOLLOW_UP });
  return m;
}

/** The stub workers: the next step of the session from the transcript they are sent (Chat Completions, as the gateway sends a worker). */
function stubReply(req: RecordedRequest): StubReply {
  const msgs: Json[] = req.body?.messages ?? [];
  const results = msgs.filter((x) => x.role === 'tool').length;
  const last = msgs.at(-1);
  const model = String(req.body?.model);
  if (last?.role === 'user' && results === 0) return { type: 'tool-calls', calls: [{ id: `call_read_${model}`, name: 'read_file', arguments: READ_ARGS }], usage: USAGE[0]! };
  if (last?.role === 'tool' && results === 1) return { type: 'tool-calls', calls: [{ id: `call_edit_${model}`, name: 'edit_file', arguments: EDIT_ARGS }], usage: USAGE[1]! };
  if (last?.role === 'tool') return { type: 'text', text: ANSWER, usage: USAGE[2]! };
  return { type: 'text', text: WHY, usage: USAGE[3]! };
}

let stub: OpenAIStub;
let gw: RoutedGateway;
let key: string;
let keyId: string;
let openai: OpenAI;
let anthropic: Anthropic;
let origin: string;

/** The worker the router chooses for a transcript, asked apart from the gateway. */
async function chosen(messages: readonly ChatMessage[]): Promise<{ worker: string; prob: number }> {
  const d = await gw.routeClient.route({ text: routingText(messages) });
  return { worker: d.worker, prob: d.probs[d.workers.indexOf(d.worker)]! };
}

const costOf = (worker: string, turn: number): bigint => tokenCost(USAGE[turn - 1]!.input, USAGE[turn - 1]!.output, { inputPerMTok: PRICES[worker]![0], outputPerMTok: PRICES[worker]![1] });

/** The rows of a session once written (behind the answers), oldest first. */
async function sessionRows(session: string, n: number): Promise<RequestRow[]> {
  let rows: RequestRow[] = [];
  await expect.poll(async () => (rows = await listRequests(gw.database.db, { session, order: 'asc' })).length, { timeout: 20_000 }).toBe(n);
  return rows;
}

beforeAll(async () => {
  stub = await startOpenAIStub({ defaultReply: stubReply });
  // the anchors: the transcripts of turns 1 and 3 for the builder, of turns 2 and 4 for the debugger
  const anchors = { builder: [routingText(transcript(1)), routingText(transcript(3))], debugger: [routingText(transcript(2)), routingText(transcript(4))] };
  gw = await startRoutedGateway({
    name: 'session-routing',
    pool: { name: 'session-routing', workers: [worker('builder', stub, PRICES.builder), worker('debugger', stub, PRICES.debugger)] },
    checkpoint: { anchors, prices: { builder: { input: '1', output: '4' }, debugger: { input: '3', output: '15' } } },
  });
  const k = await createApiKey(gw.database.db, { name: 'session-routing' });
  key = k.key;
  keyId = k.record.id;
  origin = gw.baseURL.replace(/\/v1$/, '');
  openai = new OpenAI({ apiKey: key, baseURL: gw.baseURL, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: key, baseURL: origin, maxRetries: 0 });
}, 120_000);

afterAll(async () => {
  await gw?.close();
  await stub?.close();
});

const TOOLS_CHAT: OpenAI.Chat.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } } },
  { type: 'function', function: { name: 'edit_file', description: 'Replace text in a file', parameters: { type: 'object', properties: { path: { type: 'string' }, old: { type: 'string' }, new: { type: 'string' } }, required: ['path', 'old', 'new'] } } },
];

/** What each turn of a session showed the client: the worker its answer named (body and header), its tool calls. */
type Seen = { model: string; header: string | null; calls: Array<{ id: string; name: string }> };

describe('per-turn routing in a session', () => {
  const expected: Array<{ worker: string; prob: number }> = [];

  beforeAll(async () => {
    for (let k = 1; k <= 4; k++) expected.push(await chosen(transcript(k)));
  });

  it('the anchors make the turns alternate workers (the expectation, asked of the router apart from the gateway)', () => {
    expect(expected.map((e) => e.worker)).toEqual(['builder', 'debugger', 'builder', 'debugger']);
  });

  /** The rows of a session against the expectation: session, worker, tool calls, cost; the answers named the worker. */
  function checkTurns(rows: readonly RequestRow[], seen: readonly Seen[], session: string, route: string): void {
    expect(rows.map((r) => r.session)).toEqual([session, session, session, session]);
    expect(rows.map((r) => r.route)).toEqual([route, route, route, route]);
    expect(rows.map((r) => r.worker)).toEqual(expected.map((e) => e.worker));
    expect(seen.map((s) => s.model)).toEqual(expected.map((e) => e.worker));
    expect(seen.map((s) => s.header)).toEqual(expected.map((e) => e.worker));
    expect(rows.map((r) => r.toolCalls)).toEqual([['read_file'], ['edit_file'], null, null]);
    rows.forEach((r, i) => {
      expect(r.cost).toBe(costOf(expected[i]!.worker, i + 1));
      expect(r.topProbs?.[0]).toMatchObject({ worker: expected[i]!.worker });
      expect(r.topProbs![0]!.prob).toBeCloseTo(expected[i]!.prob, 5);
    });
  }

  it('Chat Completions, as OpenCode sends it (x-session-id): each turn routed on its transcript, the row and the answer name the worker', async () => {
    const session = 'ses_opencode0000000000000001';
    const headers = { 'x-session-id': session, 'x-session-affinity': session };
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'system', content: SYSTEM }, { role: 'user', content: TASK }];
    const seen: Seen[] = [];
    const turn = async () => {
      const { data, response } = await openai.chat.completions.create({ model: 'fugu', messages, tools: TOOLS_CHAT }, { headers }).withResponse();
      const calls = (data.choices[0]!.message.tool_calls ?? []).map((c) => ({ id: c.id, name: c.type === 'function' ? c.function.name : '' }));
      seen.push({ model: data.model, header: response.headers.get('x-fugu-worker'), calls });
      return data.choices[0]!.message;
    };
    let m = await turn();
    messages.push(m as OpenAI.Chat.ChatCompletionMessageParam, { role: 'tool', tool_call_id: m.tool_calls![0]!.id, content: FILE });
    m = await turn();
    messages.push(m as OpenAI.Chat.ChatCompletionMessageParam, { role: 'tool', tool_call_id: m.tool_calls![0]!.id, content: EDITED });
    m = await turn();
    expect(m.content).toBe(ANSWER);
    messages.push({ role: 'assistant', content: ANSWER }, { role: 'user', content: FOLLOW_UP });
    m = await turn();
    expect(m.content).toBe(WHY);
    checkTurns(await sessionRows(session, 4), seen, session, '/v1/chat/completions');
  });

  it('the Messages API, as Claude Code sends it (x-claude-code-session-id, metadata.user_id), streamed: the same workers, turn by turn', async () => {
    const session = 'f6a1f33f-46c7-4dd3-a64d-594834ebca7c';
    const metadata = { user_id: JSON.stringify({ device_id: 'd'.repeat(64), account_uuid: '', session_id: session }) };
    const headers = { 'x-claude-code-session-id': session };
    const tools: Anthropic.Tool[] = TOOLS_CHAT.map((t) => ({ name: t.type === 'function' ? t.function.name : '', description: t.type === 'function' ? t.function.description! : '', input_schema: (t as Json).function.parameters }));
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: TASK }];
    const seen: Seen[] = [];
    const turn = async (): Promise<Anthropic.Message> => {
      const stream = anthropic.messages.stream({ model: 'fugu', max_tokens: 1000, system: SYSTEM, messages, tools, metadata }, { headers });
      const { response } = await stream.withResponse();
      const msg = await stream.finalMessage();
      seen.push({ model: msg.model, header: response.headers.get('x-fugu-worker'), calls: msg.content.flatMap((b) => (b.type === 'tool_use' ? [{ id: b.id, name: b.name }] : [])) });
      return msg;
    };
    const useOf = (msg: Anthropic.Message) => msg.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use')!;
    let msg = await turn();
    messages.push({ role: 'assistant', content: [{ type: 'tool_use', id: useOf(msg).id, name: 'read_file', input: JSON.parse(READ_ARGS) }] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: useOf(msg).id, content: FILE }] });
    msg = await turn();
    messages.push({ role: 'assistant', content: [{ type: 'tool_use', id: useOf(msg).id, name: 'edit_file', input: JSON.parse(EDIT_ARGS) }] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: useOf(msg).id, content: EDITED }] });
    msg = await turn();
    expect(msg.content).toEqual([expect.objectContaining({ type: 'text', text: ANSWER })]);
    messages.push({ role: 'assistant', content: ANSWER }, { role: 'user', content: FOLLOW_UP });
    msg = await turn();
    expect(msg.content).toEqual([expect.objectContaining({ type: 'text', text: WHY })]);
    checkTurns(await sessionRows(session, 4), seen, session, '/v1/messages');
  });

  it('the Responses API, as Codex sends it (session-id header, client_metadata, the whole input each turn, store: false)', async () => {
    const session = '01a248fa-d39c-7c01-9246-c702e5d79d75';
    const headers = { 'session-id': session };
    const tools: OpenAI.Responses.FunctionTool[] = TOOLS_CHAT.map((t) => ({ type: 'function', name: (t as Json).function.name, description: (t as Json).function.description, parameters: (t as Json).function.parameters, strict: false }));
    const input: OpenAI.Responses.ResponseInputItem[] = [{ type: 'message', role: 'user', content: TASK }];
    const seen: Seen[] = [];
    const turn = async (): Promise<OpenAI.Responses.Response> => {
      const body = { model: 'fugu', instructions: SYSTEM, input, tools, store: false, prompt_cache_key: session, client_metadata: { session_id: session, thread_id: session } } as OpenAI.Responses.ResponseCreateParamsNonStreaming;
      const { data, response } = await openai.responses.create(body, { headers }).withResponse();
      seen.push({ model: data.model, header: response.headers.get('x-fugu-worker'), calls: data.output.flatMap((o) => (o.type === 'function_call' ? [{ id: o.call_id, name: o.name }] : [])) });
      return data;
    };
    const callOf = (r: OpenAI.Responses.Response) => r.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call')!;
    let r = await turn();
    input.push({ type: 'function_call', call_id: callOf(r).call_id, name: 'read_file', arguments: READ_ARGS }, { type: 'function_call_output', call_id: callOf(r).call_id, output: FILE });
    r = await turn();
    input.push({ type: 'function_call', call_id: callOf(r).call_id, name: 'edit_file', arguments: EDIT_ARGS }, { type: 'function_call_output', call_id: callOf(r).call_id, output: EDITED });
    r = await turn();
    expect(r.output_text).toBe(ANSWER);
    input.push({ type: 'message', role: 'assistant', content: ANSWER }, { type: 'message', role: 'user', content: FOLLOW_UP });
    r = await turn();
    expect(r.output_text).toBe(WHY);
    checkTurns(await sessionRows(session, 4), seen, session, '/v1/responses');
  });

  it('a request without any session signal has no session; x-fugu-session names one for any client; a bad one is a 400 naming it', async () => {
    const { response } = await openai.chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: TASK }] }).withResponse();
    const none = response.headers.get('x-request-id')!;
    await openai.chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: TASK }] }, { headers: { 'x-fugu-session': 'my-script-7' } });
    await expect.poll(async () => (await getRequest(gw.database.db, none))?.session, { timeout: 20_000 }).toBeNull();
    expect((await sessionRows('my-script-7', 1))[0]).toMatchObject({ worker: expected[0]!.worker, apiKeyId: keyId });
    const bad = await fetch(`${gw.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-fugu-session': 'x'.repeat(200) },
      body: JSON.stringify({ model: 'fugu', messages: [{ role: 'user', content: TASK }] }),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as Json).error).toMatchObject({ param: 'x-fugu-session' });
    const secret = await fetch(`${origin}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'fugu', max_tokens: 10, messages: [{ role: 'user', content: TASK }], fugu: { session: key } }),
    });
    expect(secret.status).toBe(400);
    expect(await secret.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringMatching(/fugu\.session.*never a secret/) } });
  });

  it('fugu requests --session and fugu report session: list the turns in order, with the worker and the cost of each', async () => {
    const session = 'ses_opencode0000000000000001';
    const json = await runCli(gw.config, ['requests', '--session', session, '--json']);
    expect(json.code, json.stderr).toBe(0);
    const turns = JSON.parse(json.stdout) as Json[];
    expect(turns.map((t) => [t.turn, t.worker, t.cost, t.toolCalls])).toEqual(
      expected.map((e, i) => [i + 1, e.worker, formatUsd(costOf(e.worker, i + 1)), i === 0 ? ['read_file'] : i === 1 ? ['edit_file'] : []]),
    );
    const table = await runCli(gw.config, ['requests', '--session', session]);
    expect(table.code, table.stderr).toBe(0);
    const lines = table.stdout.split('\n');
    expect(lines[0]).toMatch(new RegExp(`^session ${session}: 4 turns, 3 worker switches, \\$`));
    expect(lines[1]).toMatch(/^turn\s+time\s+API\s+model\s+worker\s+tokens in\/out\s+cost USD\s+status\s+tool calls$/);
    expect(lines.slice(2, 6).map((l) => l.trim().split(/\s+/)[5])).toEqual(expected.map((e) => e.worker));
    const perWorker = (w: string) => [1, 2, 3, 4].filter((k) => expected[k - 1]!.worker === w).reduce((s, k) => s + costOf(w, k), 0n);
    expect(table.stdout).toMatch(new RegExp(`^  builder\\s+2\\s+\\d+/\\d+\\s+${formatUsd(perWorker('builder'), 8).replace('.', '\\.')}$`, 'm'));
    expect(table.stdout).toMatch(new RegExp(`^  debugger\\s+2\\s+\\d+/\\d+\\s+${formatUsd(perWorker('debugger'), 8).replace('.', '\\.')}$`, 'm'));

    const dir = await mkdtemp(path.join(tmpdir(), 'fugu-session-report-'));
    try {
      const out = path.join(dir, 'session.html');
      const report = await runCli(gw.config, ['report', `session:${session}`, '--out', out]);
      expect(report.code, report.stderr).toBe(0);
      expect(report.stdout).toContain(`wrote the report of session ${session} (4 turns)`);
      const html = await readFile(out, 'utf8');
      // the turns table: one row per turn, its worker and its cost, in order
      const body = html.slice(html.indexOf('<table class="turns">'), html.indexOf('</tbody>', html.indexOf('<table class="turns">')));
      const cells = [...body.matchAll(/<tr><td class="num">(\d+)<\/td>.*?<\/span>([a-z]+)(?:<span|<\/td>).*?<td class="num">(\$[0-9.]+)<\/td><td class="num">200/g)].map((m) => [Number(m[1]), m[2], m[3]]);
      expect(cells.map((c) => [c[0], c[1]])).toEqual(expected.map((e, i) => [i + 1, e.worker]));
      expect(html).toContain('Workers by turn');
      const missing = await runCli(gw.config, ['report', 'session:nobody', '--out', path.join(dir, 'x.html')]);
      expect(missing.code).toBe(2);
      expect(missing.stderr).toMatch(/no requests recorded for session "nobody"/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
