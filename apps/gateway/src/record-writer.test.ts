// The record writer and its journal, on real Postgres and Redis: a sealed row is in the journal
// before seal resolves and leaves it once written; a sweep writes only entries past the grace
// time, once, and drops what it cannot read; without Redis the rows are still written.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { createApiKey, getChatCalls, getRequest, listApiKeys, type ChatCallRecord, type NewRequestRow } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { createLogger } from '@fugu/telemetry';
import { journalKey, RecordWriter } from './record-writer.ts';

const redisUrl = process.env.FUGU_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const quiet = createLogger({ name: 'record-writer-test', level: 'silent' });
let t: TestDatabase;
let redis: Redis;
let keyId: string;
const keys: string[] = [];

beforeAll(async () => {
  t = await createTestDatabase();
  redis = new Redis(redisUrl);
  keyId = (await createApiKey(t.db, { name: 'journal' })).record.id;
});
afterAll(async () => {
  if (keys.length > 0) await redis?.del(...keys);
  redis?.disconnect();
  await t?.drop();
});

const newKey = (): string => {
  const k = journalKey(`fugurw${randomBytes(4).toString('hex')}`, t.url);
  keys.push(k);
  return k;
};
const row = (id: string, cost: bigint): NewRequestRow => ({
  id, requestId: id, apiKeyId: keyId, route: '/v1/chat/completions', model: 'alpha', worker: 'alpha', stream: false, topProbs: null, fallbacks: [],
  tokensIn: 1, tokensOut: 2, cost, routingMs: null, providerMs: 1, totalMs: 2, status: 200, errorCode: null,
});
const call = (k: string): ChatCallRecord => ({
  key: k, origin: 'gateway', workerId: null, worker: 'alpha', provider: 'openai-compatible', model: 'alpha-model', requestHash: 'h', status: 'ok',
  response: { text: 'hi' }, tokensIn: 1, tokensOut: 2, cost: '0.000000000003', latencyMs: 1, attempts: 1, cached: false, error: null,
});
const spent = async () => (await listApiKeys(t.db)).find((k) => k.id === keyId)!.spent;

describe('RecordWriter', () => {
  it('names the journal by the queue prefix and the database', () => {
    expect(journalKey('fugu', 'postgres://u:secret@db:5432/fugu_prod?sslmode=require')).toBe('fugu:gateway:records:fugu_prod');
  });

  it('journals a sealed row before seal resolves, writes it, and empties the journal', async () => {
    const key = newKey();
    const w = new RecordWriter(t.db, quiet, { redis, key });
    const before = await spent();
    w.call(call('rw-call-1'));
    w.charge(keyId, 5n);
    const sealed = w.seal(row('r_rw1', 5n));
    await sealed;
    // in the journal (unless the write already committed and deleted it): the row is in one place or the other
    const inJournal = (await redis.xrange(key, '-', '+')).some(([, f]) => f[1]!.includes('r_rw1'));
    const inDb = (await getRequest(t.db, 'r_rw1')) !== undefined;
    expect(inJournal || inDb).toBe(true);
    expect(w.unwritten(keyId) === 5n || inDb).toBe(true);
    await w.flush();
    expect(await getRequest(t.db, 'r_rw1')).toMatchObject({ cost: 5n });
    expect((await getChatCalls(t.db, ['rw-call-1'])).length).toBe(1);
    expect(await spent()).toBe(before + 5n);
    expect(w.unwritten(keyId)).toBe(0n);
    await expect.poll(() => redis.xlen(key)).toBe(0);
  });

  it('with a linger, a call row and its request row queued a few ms apart are one statement (one transaction: the same xmin); without, two', async () => {
    const xmins = async (n: string) => {
      const r = await sql<{ x: string }>`select xmin::text as x from requests where id = ${`r_${n}`} union all select xmin::text from chat_calls where key = ${`c-${n}`}`.execute(t.db);
      return new Set(r.rows.map((x) => x.x)).size;
    };
    for (const [lingerMs, statements] of [[200, 1], [0, 2]] as const) {
      const w = new RecordWriter(t.db, quiet, { redis, key: newKey() }, { lingerMs });
      const n = `linger-${lingerMs}`;
      w.call(call(`c-${n}`));
      await new Promise((r) => setTimeout(r, 20));
      await w.seal(row(`r_${n}`, 1n));
      await w.flush();
      expect(await xmins(n)).toBe(statements);
    }
  });

  it('sweeps entries past the grace time once, leaves younger ones, and drops unreadable ones', async () => {
    const key = newKey();
    const dead = { rows: [{ ...row('r_rw_dead', 7n), createdAt: new Date() }], calls: [call('rw-call-dead')] };
    const json = JSON.stringify(dead, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v));
    const old = Date.now() - 60_000;
    await redis.xadd(key, `${old}-0`, 'v', json);
    await redis.xadd(key, `${old}-1`, 'v', json); // the same records twice: written once
    await redis.xadd(key, `${old}-2`, 'v', '{not json');
    await redis.xadd(key, '*', 'v', JSON.stringify({ rows: [{ ...row('r_rw_young', 9n), cost: '9n', createdAt: new Date() }] }));
    const before = await spent();
    const w = new RecordWriter(t.db, quiet, { redis, key, graceMs: 30_000 });
    expect(await w.sweep()).toBe(2);
    expect(await getRequest(t.db, 'r_rw_dead')).toMatchObject({ cost: 7n });
    expect(await getRequest(t.db, 'r_rw_young')).toBeUndefined();
    expect((await getChatCalls(t.db, ['rw-call-dead'])).length).toBe(1);
    expect(await spent()).toBe(before + 7n);
    // only the young entry is left; sweeping again writes nothing
    expect((await redis.xrange(key, '-', '+')).map(([id]) => id.startsWith(String(old)))).toEqual([false]);
    expect(await w.sweep()).toBe(0);
    expect(await spent()).toBe(before + 7n);
  });

  it('writes the rows without a journal (no Redis), and while Redis fails', async () => {
    const plain = new RecordWriter(t.db, quiet);
    await plain.seal(row('r_rw_plain', 0n));
    await plain.flush();
    expect(await getRequest(t.db, 'r_rw_plain')).toBeDefined();

    const down = new Redis('redis://127.0.0.1:1', { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
    down.on('error', () => {});
    const w = new RecordWriter(t.db, quiet, { redis: down, key: newKey() });
    await w.seal(row('r_rw_down', 0n));
    await w.flush();
    expect(await getRequest(t.db, 'r_rw_down')).toBeDefined();
    down.disconnect();
  });
});
