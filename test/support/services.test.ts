// The fault-test harness itself: throwaway servers survive restarts with their data, and kill9
// really takes them down.
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { isReachable } from '@fugu/local-services';
import { startPostgresInstance, startRedisInstance, type PostgresInstance, type RedisInstance } from './services.ts';

async function withRedis<T>(url: string, fn: (r: Redis) => Promise<T>): Promise<T> {
  const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  try {
    await r.connect();
    return await fn(r);
  } finally {
    r.disconnect();
  }
}

async function withPg<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

describe('test/support/services', () => {
  const instances: (RedisInstance | PostgresInstance)[] = [];
  afterAll(async () => {
    await Promise.all(instances.map((i) => i.stop()));
  });

  it('Redis with AOF keeps a key across a graceful restart; kill9 makes it unreachable', async () => {
    const redis = await startRedisInstance({ aof: true });
    instances.push(redis);
    expect(redis.url).toBe(`redis://127.0.0.1:${redis.port}`);
    await withRedis(redis.url, (r) => r.set('fault:key', 'kept'));

    await redis.restart();
    expect(await withRedis(redis.url, (r) => r.get('fault:key'))).toBe('kept');

    await redis.kill9();
    expect(await isReachable(redis.url, 500)).toBe(false);

    // Back on the same port and folder, the AOF replayed.
    await redis.restart();
    expect(await withRedis(redis.url, (r) => r.get('fault:key'))).toBe('kept');
  });

  it('Postgres keeps committed rows across kill9 (crash recovery) and a graceful restart', async () => {
    const db = await startPostgresInstance();
    instances.push(db);
    await withPg(db.url, async (c) => {
      await c.query('create table events (id int primary key)');
      await c.query('insert into events values (1), (2)');
    });

    await db.kill9();
    expect(await isReachable(db.url, 500)).toBe(false);

    await db.restart();
    await db.restart();
    const ids = await withPg(db.url, async (c) => (await c.query<{ id: number }>('select id from events order by id')).rows.map((r) => r.id));
    expect(ids).toEqual([1, 2]);
  });
});
