// The Batch API with the real `openai` client's `files` and `batches` methods against the gateway
// process (`node apps/gateway/src/main.ts` on the LLMRouter replay pool, the router deployed) and
// a provider-worker process (issue 18, figures 1 and 7): a batch completes and every output line
// equals the answer of the same request on /v1/chat/completions (same worker for `fugu`), one
// chat_calls row per line, the key charged their cost; bad lines go to the error file with their
// line numbers and custom_ids while the rest run; a cancel stops new calls and leaves a consistent
// partial output; bad requests are clear OpenAI-format errors, and another key's file or batch is
// a 404. BATCH_TEST_LINES sets the size of the first batch (default 500; 10,000 for the figure).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI, { APIError, toFile } from 'openai';
import { sql } from 'kysely';
import { parseUsd } from '@fugu/core';
import { listApiKeys } from '@fugu/db';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { waitFor } from '../support/eval-env.ts';
import { runCli } from '../support/es-env.ts';
import { batchEnded, batchLine as line, fileLines, jsonl, startBatchStack, uploadBatchFile, type BatchStack } from '../support/batch-stack.ts';

const N = Number(process.env.BATCH_TEST_LINES ?? 500);
// the gateway's upload limit here (FUGU_FILES_MAX_BYTES)
const LIMIT = Math.max(4_000_000, N * 1000);
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

let stack: BatchStack;
let baseURL: string;
let workers: string[];
let prompts: string[];
let full: BatchStack['full'];
let narrow: BatchStack['narrow'];

const client = (apiKey = full.key) => new OpenAI({ apiKey, baseURL, maxRetries: 0, timeout: 60_000 });
const upload = (text: string, apiKey = full.key) => uploadBatchFile(client(apiKey), text);
const finished = (id: string, apiKey = full.key) => batchEnded(client(apiKey), id);
const contentLines = (fileId: string | null | undefined, apiKey = full.key) => fileLines(client(apiKey), fileId);
const spent = async (id: string) => (await listApiKeys(stack.env.database.db)).find((k) => k.id === id)!.spent;
async function refused(p: Promise<unknown>): Promise<APIError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof APIError) return e;
    throw e;
  }
  throw new Error('expected a refusal');
}

beforeAll(async () => {
  stack = await startBatchStack();
  ({ workers, prompts, full, narrow } = stack);
  await stack.startWorker();
  // small limits, so the tests reach them: the upload size, in-flight lines per batch
  baseURL = (await stack.startGateway({ FUGU_FILES_MAX_BYTES: String(LIMIT), FUGU_BATCH_MAX_IN_FLIGHT: '400' })).url;
}, 120_000);

afterAll(async () => {
  await stack?.close();
});

describe('the Batch API', () => {
  it(`runs ${N} lines over the replay pool: every output line is the answer /v1/chat/completions gives, one call row per line, the key charged`, { timeout: 900_000 }, async () => {
    const lines = Array.from({ length: N }, (_, i) => line(`req-${i}`, { model: i % 3 === 0 ? workers[i % workers.length]! : 'fugu', messages: [{ role: 'user', content: prompts[i % prompts.length]! }], max_tokens: 64 }));
    const file = await upload(jsonl(lines));
    expect(file).toMatchObject({ object: 'file', purpose: 'batch', filename: 'batch.jsonl', status: 'processed' });
    expect(await client().files.retrieve(file.id)).toMatchObject({ id: file.id, bytes: file.bytes });
    const before = await spent(full.id);
    const created = await client().batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { run: 'figure-1' } });
    expect(created).toMatchObject({ object: 'batch', status: 'validating', input_file_id: file.id, request_counts: { total: N, completed: 0, failed: 0 }, metadata: { run: 'figure-1' } });
    const done = await finished(created.id);
    if (done.error_file_id) process.stderr.write(`errors: ${JSON.stringify((await contentLines(done.error_file_id)).slice(0, 3))}\n`);
    expect(done).toMatchObject({ status: 'completed', request_counts: { total: N, completed: N, failed: 0 }, error_file_id: null });
    for (const t of ['in_progress_at', 'finalizing_at', 'completed_at'] as const) expect(done[t]).toBeGreaterThanOrEqual(created.created_at);
    expect((await client().batches.list()).data.map((b) => b.id)).toContain(created.id);

    const out = await contentLines(done.output_file_id);
    expect(out.map((o) => o.custom_id)).toEqual(lines.map((l) => l.custom_id));
    // every line's request on /v1/chat/completions (8 at a time): the same worker, text and usage
    let next = 0;
    await Promise.all(Array.from({ length: 8 }, async () => {
      for (let i = next++; i < N; i = next++) {
        const o = out[i];
        expect(o.response.status_code).toBe(200);
        const direct = await client().chat.completions.create(lines[i]!.body as never);
        expect({ model: o.response.body.model, content: o.response.body.choices[0].message.content, usage: [o.response.body.usage.prompt_tokens, o.response.body.usage.completion_tokens] }, `line ${i + 1}`)
          .toEqual({ model: direct.model, content: direct.choices[0]!.message.content, usage: [direct.usage!.prompt_tokens, direct.usage!.completion_tokens] });
      }
    }));
    // one call row per line; the key paid for them (and for the direct requests above)
    const calls = (await sql<{ n: string; cost: string }>`select count(*) as n, coalesce(sum(cost), 0)::text as cost from chat_calls where key like ${`${created.id}.%`}`.execute(stack.env.database.db)).rows[0]!;
    expect(Number(calls.n)).toBe(N);
    const directCost = async () => parseUsd((await sql<{ cost: string }>`select coalesce(sum(cost), 0)::text as cost from requests where api_key_id = ${full.id}`.execute(stack.env.database.db)).rows[0]!.cost);
    // (the direct requests' rows are written behind their answers)
    await expect.poll(async () => (await spent(full.id)) - before - (await directCost()), { timeout: 10_000 }).toBe(parseUsd(calls.cost));
  });

  it('puts bad lines in the error file with their line numbers and custom_ids, and runs the rest', { timeout: 120_000 }, async () => {
    const good = (id: string, model = workers[0]!) => line(id, { model, messages: [{ role: 'user', content: prompts[5]! }] });
    const text = jsonl([
      good('ok-1'),
      '{"custom_id": "broken", "method": "POST", ',
      line('unknown-model', { model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }),
      good('outside-pool', workers[5]!),
      good('ok-1'),
      good('ok-2', 'fugu'),
      line('no-messages', { model: workers[1]! }),
      { custom_id: 'wrong-url', method: 'POST', url: '/v1/embeddings', body: { model: 'fugu', input: 'x' } },
    ]);
    const file = await upload(text, narrow.key);
    const b = await finished((await client(narrow.key).batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' })).id, narrow.key);
    expect(b).toMatchObject({ status: 'completed', request_counts: { total: 8, completed: 2, failed: 6 } });
    const out = await contentLines(b.output_file_id, narrow.key);
    expect(out.map((o) => [o.custom_id, o.response.status_code])).toEqual([['ok-1', 200], ['ok-2', 200]]);
    // fugu on a key of three workers routes among them
    expect(workers.slice(0, 3)).toContain(out[1].response.body.model);
    const errs = await contentLines(b.error_file_id, narrow.key);
    expect(errs.map((e) => [e.line, e.custom_id, e.error.code])).toEqual([
      [2, null, 'invalid_json_line'],
      [3, 'unknown-model', 'model_not_found'],
      [4, 'outside-pool', 'model_not_found'],
      [5, 'ok-1', 'duplicate_custom_id'],
      [7, 'no-messages', 'invalid_value'],
      [8, 'wrong-url', 'invalid_value'],
    ]);
    expect(errs[0].error.message).toMatch(/^line 2: not valid JSON/);
    expect(errs[3].error.message).toMatch(/custom_id "ok-1" is used by line 1 already/);
    expect(errs.every((e) => e.response === null)).toBe(true);
  });

  it('a cancel mid-way stops new calls and leaves a consistent partial output', { timeout: 300_000 }, async () => {
    const n = 3000;
    const lines = Array.from({ length: n }, (_, i) => line(`c-${i}`, { model: workers[i % workers.length]!, messages: [{ role: 'user', content: prompts[(i * 13) % prompts.length]! }] }));
    const file = await upload(jsonl(lines));
    const b = await client().batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    await waitFor('some lines answered', async () => (await client().batches.retrieve(b.id)).request_counts!.completed >= 50, 120_000, 50);
    const c = await client().batches.cancel(b.id);
    expect(['cancelling', 'cancelled']).toContain(c.status);
    const end = await finished(b.id);
    expect(end.status).toBe('cancelled');
    const rows = async () => Number((await sql<{ n: string }>`select count(*) as n from chat_calls where key like ${`${b.id}.%`}`.execute(stack.env.database.db)).rows[0]!.n);
    const atEnd = await rows();
    expect(atEnd).toBeLessThan(n);
    // no call after the end
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await rows()).toBe(atEnd);
    const out = await contentLines(end.output_file_id);
    const errs = await contentLines(end.error_file_id);
    // each custom_id once in all, answered ones in the output with their call, the rest cancelled
    expect(out.length).toBe(atEnd);
    expect(end.request_counts).toMatchObject({ total: n, completed: atEnd });
    expect([...out, ...errs].map((o) => o.custom_id).sort()).toEqual(lines.map((l) => l.custom_id).sort());
    expect(new Set(errs.map((e) => e.error.code))).toEqual(new Set(['batch_cancelled']));
    // a finished batch cannot be cancelled
    const again = await refused(client().batches.cancel(b.id));
    expect([again.status, again.code]).toEqual([409, 'batch_not_cancellable']);
  });

  it('fugu batch submit --wait, results, fugu status and fugu report: the same batch from the command line', { timeout: 180_000 }, async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'fugu-batch-cli-'));
    const file = path.join(dir, 'requests.jsonl');
    const lines = Array.from({ length: 40 }, (_, i) => line(`cli-${i}`, { model: i % 2 ? 'fugu' : workers[i % workers.length]!, messages: [{ role: 'user', content: prompts[i + 100]! }] }));
    await writeFile(file, jsonl([...lines, '{"custom_id": 1}']));
    const conn = { FUGU_GATEWAY_URL: baseURL, FUGU_API_KEY: full.key };
    const sub = await runCli(stack.env.config, ['batch', 'submit', file, '--wait', '--metadata', 'team=cli', '--json'], conn);
    expect(sub.code, sub.stderr).toBe(0);
    const b = JSON.parse(sub.stdout);
    expect(b).toMatchObject({ status: 'completed', request_counts: { total: 41, completed: 40, failed: 1 }, metadata: { team: 'cli' } });
    const res = await runCli(stack.env.config, ['batch', 'results', b.id, '--out', path.join(dir, 'out.jsonl'), '--errors', path.join(dir, 'err.jsonl')], conn);
    expect(res.code, res.stderr).toBe(0);
    const out = (await readFile(path.join(dir, 'out.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
    expect(out.map((o) => o.custom_id)).toEqual(lines.map((l) => l.custom_id));
    expect(JSON.parse((await readFile(path.join(dir, 'err.jsonl'), 'utf8')).trim())).toMatchObject({ line: 41, error: { code: 'invalid_value', param: 'custom_id' } });
    // the batch's row in fugu status (per worker) and fugu report
    const st = await runCli(stack.env.config, ['status', b.id, '--json']);
    expect(st.code, st.stderr).toBe(0);
    const s = JSON.parse(st.stdout);
    expect(s.batch).toMatchObject({ id: b.id, status: 'completed', completed: 40, failed: 1 });
    expect(s.workers.reduce((t: number, w: Json) => t + w.completed, 0)).toBe(40);
    expect(s.workers.find((w: Json) => w.worker === null)).toMatchObject({ lines: 1, failed: 1 });
    const rep = await runCli(stack.env.config, ['report', b.id, '--out', path.join(dir, 'batch.html')]);
    expect(rep.code, rep.stderr).toBe(0);
    const html = await readFile(path.join(dir, 'batch.html'), 'utf8');
    expect(html).toContain(b.id);
    expect(html).toMatch(/replay workers/);
    // a missing file and a refused batch: clear messages, exit 2
    const missing = await runCli(stack.env.config, ['batch', 'submit', path.join(dir, 'nope.jsonl')], conn);
    expect([missing.code, missing.stderr]).toEqual([2, expect.stringMatching(/no such file/)]);
    const foreign = await runCli(stack.env.config, ['batch', 'status', b.id], { ...conn, FUGU_API_KEY: narrow.key });
    expect([foreign.code, foreign.stderr]).toEqual([2, expect.stringMatching(/404 No such batch/)]);
  });

  it('refuses bad requests with OpenAI-format errors; another key\'s file or batch is a 404', { timeout: 120_000 }, async () => {
    const mine = await upload(jsonl([line('a', { model: workers[0]!, messages: [{ role: 'user', content: prompts[1]! }] })]));
    const expectError = (e: APIError, status: number, code: string, param: string | null, message: RegExp) => {
      expect({ status: e.status, code: e.code, param: (e as Json).param ?? null }).toEqual({ status, code, param });
      expect((e.error as Json).message).toMatch(message);
    };
    // a file over the limit
    const big = await refused(upload('x'.repeat(LIMIT + 10)));
    expectError(big, 413, 'file_too_large', 'file', /larger than \d+ bytes/);
    // a batch naming a missing or another key's file
    expectError(await refused(client().batches.create({ input_file_id: 'file-nope', endpoint: '/v1/chat/completions', completion_window: '24h' })), 404, 'file_not_found', 'input_file_id', /No such file: file-nope/);
    expectError(await refused(client(narrow.key).batches.create({ input_file_id: mine.id, endpoint: '/v1/chat/completions', completion_window: '24h' })), 404, 'file_not_found', 'input_file_id', /No such file/);
    // unsupported endpoint or window
    expectError(await refused(client().batches.create({ input_file_id: mine.id, endpoint: '/v1/embeddings', completion_window: '24h' })), 400, 'invalid_value', 'endpoint', /not supported for batches/);
    expectError(await refused(client().batches.create({ input_file_id: mine.id, endpoint: '/v1/chat/completions', completion_window: '1h' as '24h' })), 400, 'invalid_value', 'completion_window', /"1h" is not supported/);
    // another key's file and batch: 404, never their content
    expectError(await refused(client(narrow.key).files.retrieve(mine.id)), 404, 'file_not_found', 'file_id', /No such File object/);
    expectError(await refused(client(narrow.key).files.content(mine.id)), 404, 'file_not_found', 'file_id', /No such File object/);
    expectError(await refused(client(narrow.key).files.delete(mine.id)), 404, 'file_not_found', 'file_id', /No such File object/);
    const b = await client().batches.create({ input_file_id: mine.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    expectError(await refused(client(narrow.key).batches.retrieve(b.id)), 404, 'batch_not_found', 'batch_id', /No such batch/);
    expectError(await refused(client(narrow.key).batches.cancel(b.id)), 404, 'batch_not_found', 'batch_id', /No such batch/);
    expect((await client(narrow.key).batches.list()).data.map((x) => x.id)).not.toContain(b.id);
    // a running batch's input cannot be deleted; an ended one's can
    await finished(b.id);
    expect(await client().files.delete(mine.id)).toMatchObject({ id: mine.id, deleted: true });
    expectError(await refused(client().files.retrieve(mine.id)), 404, 'file_not_found', 'file_id', /No such File object/);
    // the wrong purpose
    expectError(await refused(client().files.create({ file: await toFile(Buffer.from('{}\n'), 'x.jsonl'), purpose: 'assistants' })), 400, 'invalid_value', 'purpose', /"assistants" is not supported/);
  });
});
