// The Batch API's other endpoint and model kind (issue 18): batches of `/v1/responses` lines, and
// `fugu-ultra` lines on both endpoints, through the real `openai` client's `files` and `batches`
// against the gateway and provider-worker processes (the LLMRouter replay pool, the router
// deployed, a `fixed:moa:2` Conductor published as fugu-ultra, or an `llm:` one whose endpoint is
// an OpenAI stub; real Redis and Postgres). Every
// output line equals the answer of the same request sent to the endpoint itself (modulo ids and
// times): a /v1/responses line is the `response` object `client.responses.create` returns (same
// worker for `fugu`, text, token counts, cost), a fugu-ultra line the workflow's answer (its
// steps' workers, final text, the Conductor's and the workers' tokens). A fugu-ultra line's
// workflow is keyed by the line, its agents' calls are chat-call jobs (one row each), and its
// cost is charged: the calls of a line a cancel stopped mid-workflow too (an llm: Conductor's
// among them), and those of a line whose workflow failed. What a batch line cannot do on an
// endpoint is that line's error; the rest run.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { sql } from 'kysely';
import { startOpenAIStub, type OpenAIStub } from '@fugu/providers/testing';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runCli } from '../support/es-env.ts';
import { waitFor } from '../support/eval-env.ts';
import type { AppProcess } from '../support/app-process.ts';
import { paidPico, spentPico, workflowCalls } from '../support/paid.ts';
import { batchEnded, batchLine, fileLines, jsonl, startBatchStack, uploadBatchFile, type BatchStack } from '../support/batch-stack.ts';
import { publishUltraAndTell } from '../support/ultra-publish.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

let stack: BatchStack;
let client: OpenAI;
let baseURL: string;
let worker: AppProcess;
let workers: string[];
let prompts: string[];
/** an llm: Conductor's endpoint (`llm:planner`): a workflow of three replay workers, two answer and one combines */
let planner: OpenAIStub;
const PLANNED = 'model id = [0, 1, 2]\nsubtasks = ["Answer the question.", "Answer the question.", "Combine the answers you are shown into the final one."]\naccess list = [[], [], "all"]';

const responsesLine = (customId: string, body: Record<string, unknown>) => ({ custom_id: customId, method: 'POST', url: '/v1/responses', body });

async function runBatch(lines: unknown[], endpoint: '/v1/chat/completions' | '/v1/responses') {
  const file = await uploadBatchFile(client, jsonl(lines));
  const b = await client.batches.create({ input_file_id: file.id, endpoint, completion_window: '24h' });
  const done = await batchEnded(client, b.id, 120_000);
  return { batch: done, out: await fileLines(client, done.output_file_id), errors: await fileLines(client, done.error_file_id) };
}

/**
 * A `response` object without what differs between two calls of one request: ids, times, `store`
 * (a batch line's is not stored), and the `output_text` the openai client adds to what it returns.
 */
function responseShape(r: Json) {
  const { id: _id, created_at: _c, completed_at: _d, store: _s, output_text: _t, output, fugu, ...rest } = r;
  return { ...rest, output: output.map(({ id: _i, ...item }: Json) => item), ...(fugu && { fugu: workflowShape(fugu) }) };
}
/** A chat completion without its id and time. */
function completionShape(c: Json) {
  const { id: _id, created: _c, fugu, ...rest } = c;
  return { ...rest, ...(fugu && { fugu: workflowShape(fugu) }) };
}
/** fugu-ultra's `fugu` object without the workflow's and conversation's ids (each request is a workflow of its own). */
const workflowShape = ({ workflow, conversation, ...rest }: Json) => ({ ...rest, workflow: typeof workflow, conversation: typeof conversation });

beforeAll(async () => {
  stack = await startBatchStack();
  ({ workers, prompts } = stack);
  await publishUltraAndTell(stack.env.config, stack.env.database.db, { name: 'fugu-ultra', conductor: 'fixed:moa:2', pool: 'llmrouter', options: {} });
  worker = await stack.startWorker();
  // (prose instead of the lists for one question of the dataset: a question outside it is refused before the Conductor writes)
  const garble = JSON.stringify(prompts[74]!).slice(1, -1);
  planner = await startOpenAIStub({ defaultReply: (req) => ({ type: 'text', text: JSON.stringify(req.body?.messages ?? []).includes(garble) ? 'I would rather answer myself.' : PLANNED }) });
  const endpoints = [{ name: 'planner', baseUrl: planner.baseURL, model: 'planner-model', apiKeyEnv: 'PLANNER_KEY', prices: { inputPerMTok: '1', outputPerMTok: '2' } }];
  baseURL = (await stack.startGateway({ FUGU_CONDUCTOR_ENDPOINTS: JSON.stringify(endpoints), PLANNER_KEY: 'sk-planner' })).url;
  client = new OpenAI({ apiKey: stack.full.key, baseURL, maxRetries: 0, timeout: 60_000 });
}, 120_000);

afterAll(async () => {
  await stack?.close();
  await planner?.close();
});

describe('Batch API: /v1/responses and fugu-ultra lines', () => {
  it('a /v1/responses batch over the replay pool: every output line is the response /v1/responses returns for it', { timeout: 120_000 }, async () => {
    const n = 24;
    const lines = Array.from({ length: n }, (_, i) => {
      const prompt = prompts[(i * 11) % prompts.length]!;
      const body: Record<string, unknown> =
        i % 4 === 0 ? { model: 'fugu', input: prompt }
        : i % 4 === 1 ? { model: workers[i % workers.length]!, input: [{ role: 'user', content: prompt }], instructions: 'Answer briefly.' }
        : i % 4 === 2 ? { model: workers[i % workers.length]!, input: prompt, max_output_tokens: 64, metadata: { line: String(i + 1) } }
        : { model: 'fugu', input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: prompt }] }], max_output_tokens: 256 };
      return responsesLine(`r-${i}`, body);
    });
    const { batch, out, errors } = await runBatch(lines, '/v1/responses');
    expect(errors).toEqual([]);
    expect(batch).toMatchObject({ status: 'completed', endpoint: '/v1/responses', request_counts: { total: n, completed: n, failed: 0 } });
    expect(out.map((o) => o.custom_id)).toEqual(lines.map((l) => l.custom_id));
    // one chat-call job per line, as on /v1/chat/completions
    const rows = (await sql<{ n: number }>`select count(*)::int as n from chat_calls where key like ${`${batch.id}.%`}`.execute(stack.env.database.db)).rows[0]!.n;
    expect(rows).toBe(n);
    for (const [i, o] of out.entries()) {
      expect(o.response.status_code).toBe(200);
      // a line's status is its direct response's (replay honours max_output_tokens by cutting a longer recorded answer: incomplete)
      expect(o.response.body).toMatchObject({ object: 'response', store: false });
      const direct = await client.responses.create(lines[i]!.body as never);
      expect(responseShape(o.response.body), `line ${i + 1}`).toEqual(responseShape(direct));
    }
  });

  it('fugu-ultra lines on both endpoints: each answer is the workflow /v1/chat/completions (or /v1/responses) runs for it, its agents\' calls one row each, its cost charged', { timeout: 180_000 }, async () => {
    const db = stack.env.database.db;
    const chat = [0, 1, 2, 3].map((i) => batchLine(`u-${i}`, { model: 'fugu-ultra', messages: [{ role: 'user', content: prompts[40 + i]! }] }));
    // a fugu line beside them runs as its one chat-call job
    chat.push(batchLine('f-0', { model: 'fugu', messages: [{ role: 'user', content: prompts[50]! }] }));
    const c = await runBatch(chat, '/v1/chat/completions');
    expect(c.batch).toMatchObject({ status: 'completed', request_counts: { total: 5, completed: 5, failed: 0 } });
    expect(c.out.map((o) => o.custom_id)).toEqual(chat.map((l) => l.custom_id));
    // each fugu-ultra line is one workflow keyed by its line, three agent calls (two proposers, the aggregator), one row each
    const wfs = (await sql<{ id: string; key: string; status: string }>`select id, key, status from workflows where key like ${`${c.batch.id}.%`} order by key`.execute(db)).rows;
    expect(wfs.map((w) => [w.key, w.status])).toEqual([1, 2, 3, 4].map((l) => [`${c.batch.id}.${l}`, 'done']));
    for (const w of wfs) {
      const calls = (await sql<{ n: number; origin: string }>`select count(*)::int as n, min(r.origin) as origin from chat_calls c join chat_requests r on r.id = c.key where c.key like ${`wf${w.id}.%`}`.execute(db)).rows[0]!;
      expect([calls.n, calls.origin]).toEqual([3, 'batch']);
    }
    // the key was charged every line's cost (the fugu line's call, each workflow's Conductor and agents), once
    const cost = (o: Json) => BigInt(Math.round(o.response.body.usage.cost * 1e12));
    const charged = (await sql<{ charged: string }>`select charged::text as charged from batches where id = ${c.batch.id}`.execute(db)).rows[0]!.charged;
    expect(BigInt(charged)).toBe(c.out.reduce((t, o) => t + cost(o), 0n));
    expect(BigInt(charged)).toBeGreaterThan(0n);
    for (const [i, o] of c.out.slice(0, 4).entries()) {
      expect(o.response.status_code).toBe(200);
      expect(o.response.body.fugu).toMatchObject({ workflow: Number(wfs[i]!.id), conversation: `conv_${c.batch.id}.${i + 1}`, topology: 'parallel', status: 'done' });
      const direct = await client.chat.completions.create(chat[i]!.body as never);
      expect(completionShape(o.response.body), `line ${i + 1}`).toEqual(completionShape(direct));
    }

    // the same on /v1/responses
    const resp = [0, 1].map((i) => responsesLine(`ur-${i}`, { model: 'fugu-ultra', input: prompts[60 + i]!, instructions: 'Be thorough.' }));
    const r = await runBatch(resp, '/v1/responses');
    expect(r.batch).toMatchObject({ status: 'completed', request_counts: { total: 2, completed: 2, failed: 0 } });
    for (const [i, o] of r.out.entries()) {
      expect(o.response.body).toMatchObject({ object: 'response', model: 'fugu-ultra', fugu: { topology: 'parallel', status: 'done' } });
      const direct = await client.responses.create(resp[i]!.body as never);
      expect(responseShape(o.response.body), `line ${i + 1}`).toEqual(responseShape(direct));
    }
  });

  it('what a batch line cannot do on /v1/responses is its error, naming the line and the parameter; the rest run', { timeout: 120_000 }, async () => {
    const good = (id: string, extra: Record<string, unknown> = {}) => responsesLine(id, { model: workers[0]!, input: prompts[3]!, ...extra });
    const lines = [
      good('ok-1'),
      good('streams', { stream: true }),
      good('continues', { previous_response_id: 'resp_0123' }),
      good('stores', { store: true }),
      good('background', { background: true }),
      good('web', { tools: [{ type: 'web_search' }] }),
      responsesLine('no-input', { model: 'fugu' }),
      batchLine('wrong-url', { model: 'fugu', messages: [{ role: 'user', content: prompts[3]! }] }),
      responsesLine('ultra-conversation', { model: 'fugu-ultra', input: prompts[4]!, fugu: { conversation: 'conv_mine' } }),
      good('ok-2', { store: false }),
    ];
    const { batch, out, errors } = await runBatch(lines, '/v1/responses');
    expect(batch).toMatchObject({ status: 'completed', request_counts: { total: 10, completed: 2, failed: 8 } });
    expect(out.map((o) => [o.custom_id, o.response.status_code])).toEqual([['ok-1', 200], ['ok-2', 200]]);
    expect(errors.map((e) => [e.line, e.custom_id, e.error.code, e.error.param])).toEqual([
      [2, 'streams', 'invalid_value', 'body.stream'],
      [3, 'continues', 'invalid_value', 'body.previous_response_id'],
      [4, 'stores', 'invalid_value', 'body.store'],
      [5, 'background', 'invalid_value', 'body.background'],
      [6, 'web', 'invalid_value', 'body.tools[0].type'],
      [7, 'no-input', 'invalid_value', 'body.input'],
      [8, 'wrong-url', 'invalid_value', 'url'],
      [9, 'ultra-conversation', 'invalid_value', 'body.fugu.conversation'],
    ]);
    expect(errors[0].error.message).toBe('line 2: stream: a batch line cannot stream (leave stream out)');
    expect(errors[1].error.message).toMatch(/^line 3: previous_response_id: a batch line cannot continue a stored response/);
    expect(errors[2].error.message).toMatch(/^line 4: store: a batch line's response is not stored/);
    expect(errors[4].error.message).toMatch(/^line 6: tools\[0\]\.type: the built-in tool "web_search" is not supported/);
    expect(errors.every((e) => e.response === null)).toBe(true);
  });

  it('fugu-ultra lines a workflow refuses on /v1/chat/completions: the endpoint\'s refusal is the line\'s answer', { timeout: 120_000 }, async () => {
    const lines = [
      batchLine('ok', { model: 'fugu-ultra', messages: [{ role: 'user', content: prompts[70]! }] }),
      // the cost preference is model fugu's: the workflow refuses it, as /v1/chat/completions does
      batchLine('lambda', { model: 'fugu-ultra', messages: [{ role: 'user', content: prompts[71]! }], fugu: { lambda: 0.5 } }),
      batchLine('tool-results', { model: 'fugu-ultra', messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } }] }, { role: 'tool', tool_call_id: 'call_1', content: '1' }] }),
      batchLine('streams', { model: 'fugu-ultra', messages: [{ role: 'user', content: prompts[72]! }], stream: true }),
    ];
    const { batch, out, errors } = await runBatch(lines, '/v1/chat/completions');
    expect(batch).toMatchObject({ status: 'completed', request_counts: { total: 4, completed: 1, failed: 3 } });
    expect(out.map((o) => o.custom_id)).toEqual(['ok']);
    const direct = await client.chat.completions.create(lines[1]!.body as never).catch((e: unknown) => e as Json);
    expect(errors.map((e) => [e.custom_id, e.response?.status_code ?? null, e.error?.code ?? e.response.body.error.code])).toEqual([
      ['lambda', 400, 'invalid_value'],
      ['tool-results', null, 'invalid_value'],
      ['streams', null, 'invalid_value'],
    ]);
    expect(errors[0].response.body).toEqual({ error: { message: direct.error.message, type: direct.error.type, param: 'fugu.lambda', code: 'invalid_value' } });
    expect(errors[1].error).toMatchObject({ param: 'body.messages', message: expect.stringMatching(/^line 3: messages: a batch line cannot send tool results/) });
    expect(errors[2].error.param).toBe('body.stream');
  });

  it("a fugu-ultra line whose llm: Conductor writes no valid workflow: the endpoint's 502 is its error, and the Conductor's call is charged", { timeout: 120_000 }, async () => {
    const db = stack.env.database.db;
    await publishUltraAndTell(stack.env.config, db, { name: 'fugu-ultra', conductor: 'llm:planner', pool: 'llmrouter', options: {} });
    try {
      const lines = [
        batchLine('ok', { model: 'fugu-ultra', messages: [{ role: 'user', content: prompts[73]! }] }),
        batchLine('garbled', { model: 'fugu-ultra', messages: [{ role: 'user', content: prompts[74]! }] }),
      ];
      const { batch, out, errors } = await runBatch(lines, '/v1/chat/completions');
      expect(batch).toMatchObject({ status: 'completed', request_counts: { total: 2, completed: 1, failed: 1 } });
      expect(out.map((o) => o.custom_id)).toEqual(['ok']);
      expect(errors.map((e) => [e.custom_id, e.response.status_code, e.response.body.error.code])).toEqual([['garbled', 502, 'conductor_error']]);
      const wfs = (await sql<{ id: string }>`select id from workflows where key like ${`${batch.id}.%`}`.execute(db)).rows.map((w) => w.id);
      expect(wfs).toHaveLength(2);
      // both lines' calls were paid: the answered one's Conductor and agents, the garbled one's Conductor
      const paid = await paidPico(db, workflowCalls(wfs));
      const okCost = BigInt(Math.round(out[0].response.body.usage.cost * 1e12));
      expect(paid).toBeGreaterThan(okCost);
      expect(BigInt((await sql<{ c: string }>`select charged::text as c from batches where id = ${batch.id}`.execute(db)).rows[0]!.c)).toBe(paid);
    } finally {
      await publishUltraAndTell(stack.env.config, db, { name: 'fugu-ultra', conductor: 'fixed:moa:2', pool: 'llmrouter', options: {} });
    }
  });

  // fixed:moa:2 makes no call of its own; llm:planner's Conductor call is made in the gateway's process (not a chat-call job)
  it.each(['fixed:moa:2', 'llm:planner'])("a fugu-ultra batch (%s) cancelled with lines mid-workflow: the stopped lines' calls are charged, every row's cost once", { timeout: 180_000 }, async (conductor) => {
    const db = stack.env.database.db;
    await publishUltraAndTell(stack.env.config, db, { name: 'fugu-ultra', conductor, pool: 'llmrouter', options: {} });
    const spent = () => spentPico(db, stack.full.id);
    const spentBefore = await spent();
    const lines = Array.from({ length: 40 }, (_, i) => batchLine(`c-${i}`, { model: 'fugu-ultra', messages: [{ role: 'user', content: prompts[90 + i]! }] }));
    const b = await client.batches.create({ input_file_id: (await uploadBatchFile(client, jsonl(lines))).id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    // each workflow and how many of its three agent calls have a row
    const workflows = async () => (await sql<{ id: string; status: string; rows: number }>`
      select w.id, w.status, (select count(*)::int from chat_calls c where c.key like 'wf' || w.id || '.s%') as rows
        from workflows w where w.key like ${`${b.id}.%`}`.execute(db)).rows;
    // the worker stopped, a workflow with some but not all of its three agent calls answered cannot
    // finish (the worker writes the answers): caught mid-workflow, its line is stopped by the cancel
    let stuck: string[] = [];
    const pid = worker.child.pid!;
    try {
      for (let tries = 0; stuck.length === 0; tries++) {
        if (tries === 60) throw new Error('no fugu-ultra line was caught mid-workflow');
        await new Promise((r) => setTimeout(r, 100));
        process.kill(pid, 'SIGSTOP');
        // (a statement the worker sent before it stopped commits)
        await new Promise((r) => setTimeout(r, 500));
        stuck = (await workflows()).filter((w) => w.status === 'running' && w.rows > 0 && w.rows < 3).map((w) => w.id);
        if (stuck.length === 0) process.kill(pid, 'SIGCONT');
      }
      await client.batches.cancel(b.id);
      // the driver stops its running lines: their workflows end without an answer
      await waitFor('the running workflows stopped', async () => (await workflows()).every((w) => w.status !== 'running'), 60_000, 50);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    const end = await batchEnded(client, b.id, 120_000);
    expect(end.status).toBe('cancelled');
    const wfs = await workflows();
    const answered = new Set((await fileLines(client, end.output_file_id)).map((o) => String(o.response.body.fugu.workflow)));
    for (const id of stuck) expect([answered.has(id), wfs.find((w) => w.id === id)!.status]).toEqual([false, 'failed']);
    // every call the batch's workflows made was paid (the agents', an llm: Conductor's), the stopped lines' too
    const paid = await paidPico(db, workflowCalls(wfs.map((w) => w.id)));
    // (the stopped lines' Conductor calls are among them: what a charge of their agents' calls alone misses)
    expect(await paidPico(db, stuck.map((id) => `wf${id}.conductor`)) > 0n).toBe(conductor.startsWith('llm:'));
    const charged = BigInt((await sql<{ c: string }>`select charged::text as c from batches where id = ${b.id}`.execute(db)).rows[0]!.c);
    expect(charged).toBe(paid);
    expect((await spent()) - spentBefore).toBe(paid);
    await publishUltraAndTell(stack.env.config, db, { name: 'fugu-ultra', conductor: 'fixed:moa:2', pool: 'llmrouter', options: {} });
  });

  it('fugu batch submit --endpoint /v1/responses', { timeout: 120_000 }, async () => {
    const file = path.join(await mkdtemp(path.join(tmpdir(), 'fugu-batch-responses-')), 'requests.jsonl');
    await writeFile(file, jsonl([0, 1, 2].map((i) => responsesLine(`cli-${i}`, { model: i === 0 ? 'fugu' : workers[i]!, input: prompts[80 + i]! }))));
    const sub = await runCli(stack.env.config, ['batch', 'submit', file, '--endpoint', '/v1/responses', '--wait', '--json'], { FUGU_GATEWAY_URL: baseURL, FUGU_API_KEY: stack.full.key });
    expect(sub.code, sub.stderr).toBe(0);
    expect(JSON.parse(sub.stdout)).toMatchObject({ status: 'completed', endpoint: '/v1/responses', request_counts: { total: 3, completed: 3, failed: 0 } });
  });
});
