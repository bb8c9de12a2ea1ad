// The Batch API with the real `openai` client's `files` and `batches` methods against the gateway
// process (`node apps/gateway/src/main.ts` on the LLMRouter replay pool, the router deployed) and
// a provider-worker process (issue 18, figures 1 and 7): a batch completes and every output line
// equals the answer of the same request on /v1/chat/completions (same worker for `fugu`), one
// chat_calls row per line, the key charged their cost; bad lines go to the error file with their
// line numbers and custom_ids while the rest run; a cancel stops new calls and leaves a consistent
// partial output; bad requests are clear OpenAI-format errors, and another key's file or batch is
// a 404. BATCH_TEST_LINES sets the size of the first batch (default 1,000; 10,000 for the figure).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fork } from 'node:child_process';
import path from 'node:path';
import OpenAI, { APIError, toFile } from 'openai';
import { sql } from 'kysely';
import { parseUsd } from '@fugu/core';
import { createApiKey, listApiKeys, publishDeployment } from '@fugu/db';
import { defaultLlmRouterDir, loadLlmRouter } from '@fugu/datasets';
import { resolveWorkerPool } from '@fugu/evaluation';
import { saveAnchorCheckpoint } from '@fugu/serving/testing';
import { serviceEnv } from '@fugu/config';
import { createEvalEnv, startWorkerProcess, waitFor, type EvalEnv } from '../support/eval-env.ts';
import { watchApp, type AppProcess } from '../support/app-process.ts';

const gatewayMain = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../apps/gateway/src/main.ts');
const N = Number(process.env.BATCH_TEST_LINES ?? 1000);
// the gateway's upload limit here (FUGU_FILES_MAX_BYTES)
const LIMIT = Math.max(4_000_000, N * 1000);
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

let env: EvalEnv;
let gateway: AppProcess;
const procs: AppProcess[] = [];
let baseURL: string;
let full: { key: string; id: string };
let narrow: { key: string; id: string };
let workers: string[];
let prompts: string[];

const client = (apiKey = full.key) => new OpenAI({ apiKey, baseURL, maxRetries: 0, timeout: 60_000 });
const jsonl = (lines: unknown[]): string => lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n';
const line = (customId: string, body: Record<string, unknown>) => ({ custom_id: customId, method: 'POST', url: '/v1/chat/completions', body });
const upload = async (text: string, apiKey = full.key) => client(apiKey).files.create({ file: await toFile(Buffer.from(text), 'batch.jsonl'), purpose: 'batch' });
const finished = (id: string, apiKey = full.key, timeoutMs = 600_000) =>
  waitFor(`batch ${id} to end`, async () => {
    const b = await client(apiKey).batches.retrieve(id);
    return ['completed', 'failed', 'cancelled', 'expired'].includes(b.status) && b;
  }, timeoutMs, 250);
const contentLines = async (fileId: string | null | undefined, apiKey = full.key): Promise<Json[]> => {
  if (!fileId) return [];
  const text = await (await client(apiKey).files.content(fileId)).text();
  return text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l));
};
const spent = async (id: string) => (await listApiKeys(env.database.db)).find((k) => k.id === id)!.spent;
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
  env = await createEvalEnv();
  const pool = await resolveWorkerPool('llmrouter', defaultLlmRouterDir());
  workers = pool.workers.map((w) => w.name);
  const ds = await loadLlmRouter(defaultLlmRouterDir());
  prompts = ds.items.filter((i) => i.sourceSplit === 'test').map((i) => i.prompt);
  // a router: one anchor per worker (its first test question), deterministic
  const anchors = Object.fromEntries(workers.map((w, i) => [w, prompts[i * 7]!]));
  const ckpt = await saveAnchorCheckpoint(env.database.db, { home: env.config.home, anchors, id: 'batch-anchors' });
  await publishDeployment(env.database.db, env.config.router.deployment, ckpt.id);
  const f = await createApiKey(env.database.db, { name: 'batch-full' });
  full = { key: f.key, id: f.record.id };
  const n = await createApiKey(env.database.db, { name: 'batch-narrow', allowedWorkers: workers.slice(0, 3) });
  narrow = { key: n.key, id: n.record.id };
  procs.push(await startWorkerProcess(env.config, { FUGU_WORKER_CONCURRENCY: '16' }));
  const child = fork(gatewayMain, [], {
    env: {
      PATH: process.env.PATH, ...serviceEnv(env.config), FUGU_LOG_LEVEL: 'warn', FUGU_GATEWAY_PORT: '0', FUGU_GATEWAY_AUTH: 'keys', FUGU_GATEWAY_POOL: 'llmrouter',
      // small limits, so the tests reach them: the upload size, in-flight lines per batch
      FUGU_FILES_MAX_BYTES: String(LIMIT), FUGU_BATCH_MAX_IN_FLIGHT: '400',
    },
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  gateway = await watchApp(child, 'gateway');
  procs.push(gateway);
  baseURL = `http://127.0.0.1:${gateway.ready.port}/v1`;
}, 120_000);

afterAll(async () => {
  if (process.env.BATCH_TEST_STDERR) process.stderr.write(`gateway stderr:\n${gateway?.stderr().slice(-5000)}\n`);
  for (const p of procs) await p.kill9().catch(() => {});
  await env?.cleanup();
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
    // the same requests on /v1/chat/completions: the same worker, text and usage (a sample of 60 when N is large)
    const step = Math.max(1, Math.floor(N / 60));
    for (let i = 0; i < N; i += step) {
      const o = out[i];
      expect(o.response.status_code).toBe(200);
      const direct = await client().chat.completions.create(lines[i]!.body as never);
      expect({ model: o.response.body.model, content: o.response.body.choices[0].message.content, usage: [o.response.body.usage.prompt_tokens, o.response.body.usage.completion_tokens] }, `line ${i + 1}`)
        .toEqual({ model: direct.model, content: direct.choices[0]!.message.content, usage: [direct.usage!.prompt_tokens, direct.usage!.completion_tokens] });
    }
    // one call row per line; the key paid for them (and for the direct requests above)
    const calls = (await sql<{ n: string; cost: string }>`select count(*) as n, coalesce(sum(cost), 0)::text as cost from chat_calls where key like ${`${created.id}.%`}`.execute(env.database.db)).rows[0]!;
    expect(Number(calls.n)).toBe(N);
    const directCost = async () => parseUsd((await sql<{ cost: string }>`select coalesce(sum(cost), 0)::text as cost from requests where api_key_id = ${full.id}`.execute(env.database.db)).rows[0]!.cost);
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
    const rows = async () => Number((await sql<{ n: string }>`select count(*) as n from chat_calls where key like ${`${b.id}.%`}`.execute(env.database.db)).rows[0]!.n);
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
