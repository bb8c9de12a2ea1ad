// Keys inside batches and batch input edge cases (issue 27, items 3a, 3b and 4f), through the
// real `openai` client against the gateway and provider-worker processes (`node
// apps/gateway/src/main.ts`, `node apps/provider-worker/src/main.ts`; real Redis and Postgres). The
// pool is two stub OpenAI-compatible workers whose every call costs the same (100 input and 10
// output tokens at $0.1 / $1 per million: $0.00002), so charges are exact, and whose answers take
// `latencyMs`, so a batch is still running when its key changes. fugu-ultra is `fixed:moa:2` over
// them (three agent calls a line).
// - A key revoked mid-batch: no provider call starts later than the key cache time after the
//   revocation; the lines not started are `key_revoked` in the error file; the calls in flight
//   finish, are answered and charged once; the batch ends `completed`.
// - A key with a spend limit: each line is checked before it starts, as a live request is; the
//   key ends at or past its limit by less than one line's cost; the lines past it are
//   `spend_limit_reached`. The same for fugu-ultra lines (their agents' calls are what they cost).
// - Input: a UTF-8 BOM is accepted, a file of blank lines is refused as an empty one is, invalid
//   UTF-8 is its line's error naming the byte offset, and a line's body errors name `body.<field>`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fork } from 'node:child_process';
import path from 'node:path';
import OpenAI, { APIError, toFile } from 'openai';
import { sql } from 'kysely';
import { serviceEnv } from '@fugu/config';
import { createApiKey, getBatchRow, publishUltraDeployment, revokeApiKey, type BatchRow } from '@fugu/db';
import { writeWorkerPool } from '@fugu/datasets';
import { fileContent } from '@fugu/batch';
import { startOpenAIStub, type OpenAIStub, type RecordedRequest } from '@fugu/providers/testing';
import { createEvalEnv, startWorkerProcess, waitFor, type EvalEnv } from '../support/eval-env.ts';
import { watchApp, type AppProcess } from '../support/app-process.ts';
import { paidPico, spentPico, workflowCalls } from '../support/paid.ts';
import { batchLine, jsonl } from '../support/batch-stack.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const gatewayMain = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../apps/gateway/src/main.ts');
/** what every call costs, picodollars: 100 * 0.1 + 10 * 1 = 20 microdollars */
const CALL = 20_000_000n;
const KEY_CACHE_MS = 1_000;

let env: EvalEnv;
let baseURL: string;
const stubs: OpenAIStub[] = [];
const procs: AppProcess[] = [];
let latencyMs = 0;

const client = (apiKey: string) => new OpenAI({ apiKey, baseURL, maxRetries: 0, timeout: 60_000 });
const requests = (): RecordedRequest[] => stubs.flatMap((s) => s.requests);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const chat = (id: string, model: string, content: string) => batchLine(id, { model, messages: [{ role: 'user', content }] });

async function upload(c: OpenAI, data: string | Buffer) {
  return c.files.create({ file: await toFile(typeof data === 'string' ? Buffer.from(data) : data, 'batch.jsonl'), purpose: 'batch' });
}

/** A batch of this key's file, followed in Postgres (a revoked key cannot read it) until it ends. */
async function runBatch(c: OpenAI, data: string | Buffer, endpoint: '/v1/chat/completions' | '/v1/responses' = '/v1/chat/completions', during?: (id: string) => Promise<void>) {
  const file = await upload(c, data);
  const b = await c.batches.create({ input_file_id: file.id, endpoint, completion_window: '24h' });
  await during?.(b.id);
  const end = await waitFor(`batch ${b.id} to end`, async () => {
    const r = await getBatchRow(env.database.db, b.id);
    return r && ['completed', 'failed', 'cancelled', 'expired'].includes(r.status) && r;
  }, 300_000, 100);
  return { batch: end, out: await stored(end.outputFileId), errors: await stored(end.errorFileId) };
}

/** A file's JSONL lines as Postgres has them. */
async function stored(id: string | null): Promise<Json[]> {
  if (!id) return [];
  const parts: Buffer[] = [];
  for await (const p of fileContent(env.database.db, id)) parts.push(p);
  return Buffer.concat(parts).toString('utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l));
}

const batchCalls = async (b: BatchRow) =>
  (await sql<{ n: number; pico: string }>`select count(*)::int as n, coalesce((sum(cost) * 1000000000000)::bigint, 0)::text as pico from chat_calls where key like ${`${b.id}.%`}`.execute(env.database.db)).rows[0]!;

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
  for (const name of ['alpha', 'beta']) {
    stubs.push(await startOpenAIStub({
      defaultReply: async () => {
        if (latencyMs > 0) await sleep(latencyMs);
        return { type: 'text', text: `${name} answers`, usage: { input: 100, output: 10 } };
      },
    }));
  }
  const poolFile = path.join(env.dir, 'pool.yaml');
  await writeWorkerPool(poolFile, {
    name: 'batch-keys',
    workers: ['alpha', 'beta'].map((n, i) => ({ name: n, provider: 'openai-compatible' as const, model: `${n}-model`, baseUrl: stubs[i]!.baseURL, settings: {}, prices: { inputPerMTok: '0.1', outputPerMTok: '1' } })),
  });
  await publishUltraDeployment(env.database.db, { name: 'fugu-ultra', conductor: 'fixed:moa:2', pool: 'batch-keys', options: {} });
  procs.push(await startWorkerProcess(env.config, { FUGU_WORKER_CONCURRENCY: '8' }));
  const child = fork(gatewayMain, [], {
    env: {
      PATH: process.env.PATH, ...serviceEnv(env.config), FUGU_LOG_LEVEL: 'warn', FUGU_GATEWAY_PORT: '0', FUGU_GATEWAY_AUTH: 'keys', FUGU_GATEWAY_POOL: poolFile,
      FUGU_GATEWAY_KEY_CACHE_MS: String(KEY_CACHE_MS),
    },
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  const gw = await watchApp(child, 'gateway');
  procs.push(gw);
  baseURL = `http://127.0.0.1:${gw.ready.port}/v1`;
}, 120_000);

afterAll(async () => {
  for (const p of procs) await p.kill9().catch(() => {});
  for (const s of stubs) await s.close();
  await env?.cleanup();
});

describe('keys inside batches', () => {
  it('a key revoked 3 s into a 1,200-line batch: no call starts past the key cache time, the rest are key_revoked, the calls in flight are answered and charged once', { timeout: 300_000 }, async () => {
    const db = env.database.db;
    latencyMs = 100;
    for (const s of stubs) s.reset();
    const k = await createApiKey(db, { name: 'revoked-mid-batch' });
    const n = 1200;
    const lines = Array.from({ length: n }, (_, i) => chat(`r-${i}`, i % 2 ? 'alpha' : 'beta', `revocation question ${i}`));
    let revokedAt = 0;
    const { batch, out, errors } = await runBatch(client(k.key), jsonl(lines), '/v1/chat/completions', async () => {
      await waitFor('the first provider call', async () => requests().length > 0, 60_000, 10);
      await sleep(3_000);
      revokedAt = Date.now();
      await revokeApiKey(db, k.record.id);
    });
    const at = requests().map((r) => r.at);
    const late = at.filter((t) => t > revokedAt + KEY_CACHE_MS).length;
    const within = at.filter((t) => t > revokedAt && t <= revokedAt + KEY_CACHE_MS).length;
    process.stderr.write(`figure 3a: ${n} lines, revoked after ${at.filter((t) => t <= revokedAt).length} calls had started; started within the key cache time after: ${within}; started later: ${late}; ${errors.length} lines key_revoked\n`);
    expect(late).toBe(0);
    expect(batch).toMatchObject({ status: 'completed', total: n, completed: out.length, failed: errors.length });
    expect(batch.errors).toEqual([expect.objectContaining({ code: 'key_revoked', message: expect.stringMatching(/revoked-mid-batch.*revoked/) })]);
    // every custom_id once: answered in the output, the lines never started key_revoked
    expect([...out, ...errors].map((o) => o.custom_id).sort()).toEqual(lines.map((l) => l.custom_id).sort());
    expect(errors.length).toBeGreaterThan(n / 2);
    expect(new Set(errors.map((e) => e.error.code))).toEqual(new Set(['key_revoked']));
    expect(errors[0].error.message).toMatch(new RegExp(`^line ${errors[0].line}: not run: the API key "revoked-mid-batch" was revoked`));
    // each answered line one provider call and one row; the key charged their cost, once
    const calls = await batchCalls(batch);
    expect(out.every((o) => o.response.status_code === 200)).toBe(true);
    expect([calls.n, at.length]).toEqual([out.length, out.length]);
    expect([BigInt(calls.pico), batch.charged, await spentPico(db, k.record.id)]).toEqual([CALL * BigInt(out.length), CALL * BigInt(out.length), CALL * BigInt(out.length)]);
    // a revoked key reads nothing (its batch and files stay in Postgres: `fugu status <batch id>`)
    expect((await refused(client(k.key).batches.retrieve(batch.id))).status).toBe(401);
  });

  it('a key with a spend limit: each line is checked before it starts; the key ends past its limit by less than one line, the rest spend_limit_reached', { timeout: 120_000 }, async () => {
    const db = env.database.db;
    latencyMs = 20;
    const limit = 300_000_000n; // $0.0003: 15 lines
    const k = await createApiKey(db, { name: 'capped-chat', spendLimit: limit });
    const n = 50;
    const lines = Array.from({ length: n }, (_, i) => chat(`s-${i}`, i % 2 ? 'alpha' : 'beta', `spend question ${i}`));
    const { batch, out, errors } = await runBatch(client(k.key), jsonl(lines));
    const spent = await spentPico(db, k.record.id);
    process.stderr.write(`figure 3b (chat lines): limit ${limit} pico, spent ${spent} (overspend ${spent - limit} pico, ${Number(spent - limit) / Number(CALL)} lines; a line ${CALL})\n`);
    expect(spent).toBeGreaterThanOrEqual(limit);
    expect(spent - limit).toBeLessThan(CALL);
    expect(batch).toMatchObject({ status: 'completed', completed: out.length, failed: errors.length, charged: spent });
    expect(batch.errors).toEqual([expect.objectContaining({ code: 'spend_limit_reached' })]);
    expect(spent).toBe(CALL * BigInt(out.length));
    expect([...out, ...errors].map((o) => o.custom_id).sort()).toEqual(lines.map((l) => l.custom_id).sort());
    expect(new Set(errors.map((e) => e.error.code))).toEqual(new Set(['spend_limit_reached']));
    expect(errors[0].error.message).toMatch(new RegExp(`^line ${errors[0].line}: not run: the API key "capped-chat" reached its spend limit`));
    // the next batch is refused, as before
    const next = await refused(client(k.key).batches.create({ input_file_id: (await upload(client(k.key), jsonl(lines.slice(0, 1)))).id, endpoint: '/v1/chat/completions', completion_window: '24h' }));
    expect([next.status, next.code]).toEqual([429, 'insufficient_quota']);
  });

  it('two batches of one key at once: the limit holds across them (each counts what the other has started), past it by less than a line each', { timeout: 180_000 }, async () => {
    const db = env.database.db;
    latencyMs = 20;
    const limit = 300_000_000n; // $0.0003: 15 lines
    const k = await createApiKey(db, { name: 'capped-twice', spendLimit: limit });
    const n = 40;
    const linesOf = (tag: string) => Array.from({ length: n }, (_, i) => chat(`${tag}-${i}`, i % 2 ? 'alpha' : 'beta', `twice question ${tag} ${i}`));
    const [a, b] = await Promise.all([runBatch(client(k.key), jsonl(linesOf('a'))), runBatch(client(k.key), jsonl(linesOf('b')))]);
    const spent = await spentPico(db, k.record.id);
    process.stderr.write(`two batches of one key: limit ${limit} pico, spent ${spent} (overspend ${Number(spent - limit) / Number(CALL)} lines; answered ${a.out.length} + ${b.out.length})\n`);
    expect(spent).toBe(CALL * BigInt(a.out.length + b.out.length));
    expect(spent).toBeGreaterThanOrEqual(limit);
    expect(spent - limit).toBeLessThan(2n * CALL);
    for (const r of [a, b]) expect(new Set(r.errors.map((e) => e.error.code))).toEqual(new Set(['spend_limit_reached']));
  });

  it('fugu-ultra lines under a spend limit: their agents\' calls count; the key ends past its limit by less than one line', { timeout: 180_000 }, async () => {
    const db = env.database.db;
    latencyMs = 20;
    // a line is three agent calls (two proposers, the aggregator)
    const LINE = 3n * CALL;
    const limit = (7n * LINE) / 2n;
    const k = await createApiKey(db, { name: 'capped-ultra', spendLimit: limit });
    const n = 12;
    const lines = Array.from({ length: n }, (_, i) => chat(`u-${i}`, 'fugu-ultra', `ultra spend question ${i}`));
    const { batch, out, errors } = await runBatch(client(k.key), jsonl(lines));
    const spent = await spentPico(db, k.record.id);
    const wfs = (await sql<{ id: string }>`select id from workflows where key like ${`${batch.id}.%`}`.execute(db)).rows.map((w) => w.id);
    const paid = await paidPico(db, workflowCalls(wfs));
    process.stderr.write(`figure 3b (fugu-ultra lines): limit ${limit} pico, spent ${spent} (overspend ${spent - limit} pico, ${Number(spent - limit) / Number(LINE)} lines; a line ${LINE})\n`);
    expect(spent).toBe(paid);
    expect(spent).toBeGreaterThanOrEqual(limit);
    expect(spent - limit).toBeLessThan(LINE);
    expect(batch).toMatchObject({ status: 'completed', completed: out.length, failed: errors.length, charged: spent });
    expect(out.every((o) => o.response.status_code === 200 && BigInt(Math.round(o.response.body.usage.cost * 1e12)) === LINE)).toBe(true);
    expect([...out, ...errors].map((o) => o.custom_id).sort()).toEqual(lines.map((l) => l.custom_id).sort());
    expect(new Set(errors.map((e) => e.error.code))).toEqual(new Set(['spend_limit_reached']));
  });
});

describe('batch input edge cases', () => {
  const good = (id: string) => chat(id, 'alpha', `input question ${id}`);

  it('a UTF-8 BOM before the first line is accepted', { timeout: 60_000 }, async () => {
    const k = await createApiKey(env.database.db, { name: 'input-bom' });
    latencyMs = 0;
    const { batch, out, errors } = await runBatch(client(k.key), Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(jsonl([good('bom-1'), good('bom-2')]))]));
    expect(errors).toEqual([]);
    expect(batch).toMatchObject({ status: 'completed', total: 2, completed: 2, failed: 0 });
    expect(out.map((o) => o.custom_id)).toEqual(['bom-1', 'bom-2']);
  });

  it('a file of blank lines is refused as an empty one is', { timeout: 60_000 }, async () => {
    const c = client((await createApiKey(env.database.db, { name: 'input-blank' })).key);
    for (const text of ['\n\n\n', ' \r\n\t\n\n', '\ufeff\n', '']) {
      const file = await upload(c, text);
      const e = await refused(c.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }));
      expect({ status: e.status, code: e.code, param: (e as Json).param }, JSON.stringify(text)).toEqual({ status: 400, code: 'invalid_value', param: 'input_file_id' });
      expect((e.error as Json).message).toMatch(new RegExp(`^input_file_id: file ${file.id} has no requests`));
    }
  });

  it('invalid UTF-8 is its line\'s error, naming the line and the byte offset; the other lines run', { timeout: 60_000 }, async () => {
    const c = client((await createApiKey(env.database.db, { name: 'input-utf8' })).key);
    latencyMs = 0;
    const head = '{"custom_id": "u8-2", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "alpha", "messages": [{"role": "user", "content": "caf';
    const data = Buffer.concat([Buffer.from(jsonl([good('u8-1')])), Buffer.from(head), Buffer.from([0xe9]), Buffer.from('"}]}}\n'), Buffer.from(jsonl([good('u8-3')]))]);
    const { batch, out, errors } = await runBatch(c, data);
    expect(batch).toMatchObject({ status: 'completed', total: 3, completed: 2, failed: 1 });
    expect(out.map((o) => o.custom_id)).toEqual(['u8-1', 'u8-3']);
    expect(errors.map((e) => [e.line, e.custom_id, e.error.code, e.error.param])).toEqual([[2, 'u8-2', 'invalid_utf8', null]]);
    expect(errors[0].error.message).toBe(`line 2: not valid UTF-8 at byte offset ${Buffer.byteLength(head)} of the line (byte 0xe9); a batch file is UTF-8 text`);
  });

  it('a line\'s body errors name body.<field> on both endpoints', { timeout: 60_000 }, async () => {
    const c = client((await createApiKey(env.database.db, { name: 'input-params' })).key);
    latencyMs = 0;
    const chatBatch = await runBatch(c, jsonl([
      good('ok'),
      chat('unknown-model', 'no-such-model', 'hi'),
      batchLine('no-messages', { model: 'alpha' }),
      batchLine('bad-role', { model: 'alpha', messages: [{ role: 'robot', content: 'hi' }] }),
      batchLine('streams', { model: 'alpha', messages: [{ role: 'user', content: 'hi' }], stream: true }),
    ]));
    expect(chatBatch.errors.map((e) => [e.custom_id, e.error.param])).toEqual([
      ['unknown-model', 'body.model'],
      ['no-messages', 'body.messages'],
      ['bad-role', 'body.messages[0].role'],
      ['streams', 'body.stream'],
    ]);
    const responses = (id: string, body: Record<string, unknown>) => ({ custom_id: id, method: 'POST', url: '/v1/responses', body });
    const r = await runBatch(c, jsonl([
      responses('ok', { model: 'alpha', input: 'hi there' }),
      responses('background', { model: 'alpha', input: 'hi', background: true }),
      responses('no-input', { model: 'alpha' }),
      responses('web', { model: 'alpha', input: 'hi', tools: [{ type: 'web_search' }] }),
    ]), '/v1/responses');
    expect(r.errors.map((e) => [e.custom_id, e.error.param])).toEqual([
      ['background', 'body.background'],
      ['no-input', 'body.input'],
      ['web', 'body.tools[0].type'],
    ]);
    expect(r.errors[0].error.message).toMatch(/^line 2: background: /);
  });
});
