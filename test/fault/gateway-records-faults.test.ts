// A gateway killed -9 loses no record (issue 17): every request row, call row and charge of the
// answers it gave is in the record journal (a Redis stream) before the answer's last byte, and a
// later gateway's sweep writes them, once. Gateway A (`node apps/gateway/src/main.ts`, the
// container's command) answers JSON and streamed requests while a transaction holds a lock on
// `requests`, so none of its rows can reach Postgres; it is killed -9 with its batch blocked, the
// blocked statement is ended, and no row is there. Gateway B starts: its sweep writes each
// request's row once, with the cost the client was told, the JSON answers' call rows, and the
// key's spend as the sum of the rows; the journal is empty after. Real Postgres and Redis; a stub
// provider plays the worker.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fork } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import OpenAI from 'openai';
import pg from 'pg';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { tokenCost } from '@fugu/core';
import { loadConfig, serviceEnv, type FuguConfig } from '@fugu/config';
import { createApiKey, getChatCalls, listApiKeys } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { writeWorkerPool } from '@fugu/datasets';
import { startOpenAIStub, type OpenAIStub } from '@fugu/providers/testing';
import { testRedisUrl } from '../support/eval-env.ts';
import { watchApp, type AppProcess } from '../support/app-process.ts';
import { journalKey } from '../../apps/gateway/src/record-writer.ts';

const gatewayMain = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../apps/gateway/src/main.ts');
const PRICES = { inputPerMTok: '3', outputPerMTok: '15' };

let database: TestDatabase;
let home: string;
let config: FuguConfig;
let stub: OpenAIStub;
let poolFile: string;
let key: string;
let keyId: string;
let redis: Redis;
const gateways: AppProcess[] = [];

async function startGateway(): Promise<{ url: string; app: AppProcess }> {
  const child = fork(gatewayMain, [], {
    env: {
      PATH: process.env.PATH, ...serviceEnv(config), FUGU_LOG_LEVEL: 'warn', FUGU_GATEWAY_POOL: poolFile, FUGU_GATEWAY_PORT: '0', FUGU_GATEWAY_AUTH: 'keys',
      // entries older than this are a dead gateway's (the default is 30 s)
      FUGU_GATEWAY_JOURNAL_GRACE_MS: '1000',
    },
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  const app = await watchApp(child, 'gateway');
  gateways.push(app);
  return { url: `http://127.0.0.1:${app.ready.port}/v1`, app };
}

type Row = { request_id: string; status: number; stream: boolean; tokens_in: number; tokens_out: number; cost: string; error_code: string | null };
const rowsOf = async (ids: string[]): Promise<Row[]> =>
  (await sql<Row>`select request_id, status, stream, tokens_in, tokens_out, cost::text as cost, error_code from requests where request_id = any(${ids}::text[]) order by request_id`.execute(database.db)).rows;
const pico = (usd: string): bigint => {
  const [i, f = ''] = usd.split('.');
  return BigInt(i!) * 10n ** 12n + BigInt((f + '0'.repeat(12)).slice(0, 12));
};

beforeAll(async () => {
  database = await createTestDatabase();
  home = await mkdtemp(path.join(tmpdir(), 'fugu-records-fault-'));
  config = loadConfig({ FUGU_REDIS_URL: testRedisUrl(), FUGU_DATABASE_URL: database.url, FUGU_QUEUE_PREFIX: `fugurf${randomBytes(4).toString('hex')}`, FUGU_HOME: home });
  let n = 0;
  // a different usage per call, so each row's cost is its own
  stub = await startOpenAIStub({ defaultReply: () => ({ type: 'text', text: `answer ${++n}`, usage: { input: 100 + n, output: 10 + n } }) });
  poolFile = path.join(home, 'pool.yaml');
  await writeWorkerPool(poolFile, { name: 'records-fault', workers: [{ name: 'alpha', provider: 'openai-compatible', model: 'alpha-model', baseUrl: stub.baseURL, settings: {}, prices: PRICES }] });
  const k = await createApiKey(database.db, { name: 'records-fault' });
  key = k.key;
  keyId = k.record.id;
  redis = new Redis(testRedisUrl());
});

afterAll(async () => {
  for (const g of gateways) await g.kill9();
  await redis?.del(journalKey(config.queuePrefix, config.databaseUrl));
  redis?.disconnect();
  await stub?.close();
  await database?.drop();
  if (home) await rm(home, { recursive: true, force: true });
});

describe('a gateway killed -9 with its records unwritten', () => {
  it('loses none: a later gateway writes each request row, call row and charge once', { timeout: 120_000 }, async () => {
    const journal = journalKey(config.queuePrefix, config.databaseUrl);
    const a = await startGateway();
    const client = (rid: string) => new OpenAI({ apiKey: key, baseURL: a.url, maxRetries: 0, defaultHeaders: { 'x-request-id': rid } });

    // the lock: inserts into `requests` wait (reads of api_keys do not)
    const locker = new pg.Client({ connectionString: database.url });
    await locker.connect();
    await locker.query('begin');
    await locker.query('lock table requests in exclusive mode');

    const told = new Map<string, number>();
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const rid = `json-${i}`;
      const c = await client(rid).chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: `question ${i}` }] });
      told.set(rid, (c.usage as unknown as { cost: number }).cost);
      ids.push(rid);
    }
    for (let i = 0; i < 6; i++) {
      const rid = `stream-${i}`;
      const s = await client(rid).chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: `streamed ${i}` }], stream: true, stream_options: { include_usage: true } });
      let text = '';
      for await (const chunk of s) {
        text += chunk.choices[0]?.delta?.content ?? '';
        if (chunk.usage) told.set(rid, (chunk.usage as unknown as { cost: number }).cost);
      }
      expect(text).toMatch(/^answer \d+$/);
      ids.push(rid);
    }
    // every answer came back, with its cost, while no row could be written
    expect(told.size).toBe(12);
    expect(await redis.xlen(journal)).toBeGreaterThanOrEqual(12);

    await a.app.kill9();
    // the killed gateway's statement, still waiting for the lock, is ended before the lock goes
    await locker.query(`select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and wait_event_type = 'Lock'`);
    await locker.query('rollback');
    await locker.end();
    expect(await rowsOf(ids)).toEqual([]);
    expect((await listApiKeys(database.db)).find((k) => k.id === keyId)!.spent).toBe(0n);

    // a fresh gateway sweeps the dead one's journal
    const b = await startGateway();
    const deadline = Date.now() + 30_000;
    let rows: Row[] = [];
    while (Date.now() < deadline && (rows = await rowsOf(ids)).length < ids.length) await new Promise((r) => setTimeout(r, 200));
    expect(rows.map((r) => r.request_id)).toEqual([...ids].sort());
    for (const r of rows) {
      expect(r).toMatchObject({ status: 200, stream: r.request_id.startsWith('stream-'), error_code: null });
      const cost = pico(r.cost);
      expect(cost).toBe(tokenCost(r.tokens_in, r.tokens_out, PRICES));
      expect(Number(r.cost)).toBeCloseTo(told.get(r.request_id)!, 12);
    }
    const total = rows.reduce((t, r) => t + pico(r.cost), 0n);
    expect((await listApiKeys(database.db)).find((k) => k.id === keyId)!.spent).toBe(total);
    // one call row per provider call: the JSON ones came from the journal, the streams' were written as they ended
    const calls = (await sql<{ key: string }>`select key from chat_calls where origin = 'gateway'`.execute(database.db)).rows;
    expect(calls).toHaveLength(12);
    expect(new Set(calls.map((c) => c.key)).size).toBe(12);
    expect((await getChatCalls(database.db, calls.map((c) => c.key))).every((c) => c.status === 'ok')).toBe(true);
    await expect.poll(() => redis.xlen(journal), { timeout: 10_000 }).toBe(0);

    // the sweep wrote nothing twice (a second sweep of the same entries would find them written), and B records as usual
    const more = new OpenAI({ apiKey: key, baseURL: b.url, maxRetries: 0, defaultHeaders: { 'x-request-id': 'after' } });
    await more.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'after' }] });
    await expect.poll(async () => (await rowsOf(['after'])).length, { timeout: 10_000 }).toBe(1);
    const after = (await rowsOf(['after']))[0]!;
    expect((await listApiKeys(database.db)).find((k) => k.id === keyId)!.spent).toBe(total + pico(after.cost));
    expect(await rowsOf(ids)).toHaveLength(12);
  });
});
