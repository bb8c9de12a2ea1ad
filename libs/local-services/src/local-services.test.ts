// `up` / `down` against a temporary FUGU_HOME on free ports: real redis-server and postgres
// processes, never the shared ones on 6379/5432.
import { mkdtemp, rm, chmod, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { down, servicesStatus, up, type ServicesOptions } from './local-services.ts';
import { freePort } from './ports.ts';
import { isReachable } from './reachability.ts';
import { redisPaths } from './redis.ts';
import { freeClusterPorts } from './redis-cluster.ts';

describe('local services', () => {
  let opts: ServicesOptions;

  beforeAll(async () => {
    const home = await mkdtemp(path.join(tmpdir(), 'fugu-home-'));
    // As root, Postgres runs as the `postgres` user, which must be able to reach the folder.
    await chmod(home, 0o755);
    opts = { home, redisPort: await freePort(), pgPort: await freePort(), log: () => undefined, install: false };
  });

  afterAll(async () => {
    if (!opts) return;
    await down(opts).catch(() => undefined);
    await rm(opts.home!, { recursive: true, force: true });
  });

  it('starts both, is idempotent, and stops them', async () => {
    const first = await up(opts);
    expect([...first.started].sort()).toEqual(['postgres', 'redis']);
    expect(first.redisUrl).toBe(`redis://127.0.0.1:${opts.redisPort}`);
    expect(first.databaseUrl).toBe(`postgres://fugu@127.0.0.1:${opts.pgPort}/fugu`);
    expect(await isReachable(first.redisUrl)).toBe(true);
    expect(await isReachable(first.databaseUrl)).toBe(true);

    // Redis: AOF on, every key kept.
    const redis = new Redis(first.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await redis.connect();
      expect(await redis.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
      expect(await redis.config('GET', 'appendfsync')).toEqual(['appendfsync', 'everysec']);
      expect(await redis.config('GET', 'maxmemory-policy')).toEqual(['maxmemory-policy', 'noeviction']);
    } finally {
      redis.disconnect();
    }

    // Postgres: the application role owns its database; durability stays on.
    const client = new pg.Client({ connectionString: first.databaseUrl });
    await client.connect();
    try {
      const { rows } = await client.query<{ user: string; db: string; fsync: string }>(
        "select current_user as user, current_database() as db, current_setting('fsync') as fsync",
      );
      expect(rows[0]).toEqual({ user: 'fugu', db: 'fugu', fsync: 'on' });
      await client.query('create table t (x int)'); // the owner may create tables in public
    } finally {
      await client.end();
    }

    const again = await up(opts);
    expect(again.started).toEqual([]);
    const status = await servicesStatus(opts);
    expect(status.map((s) => [s.name, s.reachable, typeof s.pid])).toEqual([
      ['redis', true, 'number'],
      ['postgres', true, 'number'],
    ]);

    expect([...(await down(opts)).stopped].sort()).toEqual(['postgres', 'redis']);
    expect(await isReachable(first.redisUrl)).toBe(false);
    expect(await isReachable(first.databaseUrl)).toBe(false);
    expect((await down(opts)).stopped).toEqual([]);
    expect((await servicesStatus(opts)).map((s) => s.pid)).toEqual([undefined, undefined]);
  });

  it('starts past a stale pid file and never signals the process it names', async () => {
    const { pidFile } = redisPaths(path.join(opts.home!, 'redis'));
    // A pid file naming a live process that is not our Redis (this test process).
    await writeFile(pidFile, `${process.pid}\n`);
    expect((await down({ ...opts, only: ['redis'] })).stopped).toEqual([]);
    const res = await up({ ...opts, only: ['redis'] });
    expect(res.started).toEqual(['redis']);
    expect(await isReachable(res.redisUrl)).toBe(true);
    expect((await down({ ...opts, only: ['redis'] })).stopped).toEqual(['redis']);
  });

  it('--redis-cluster: starts a local cluster instead of the one Redis, shows its nodes, stops it; a bad shape is refused', async () => {
    const [basePort] = await freeClusterPorts(3);
    const cluster = { ...opts, only: ['redis' as const], redisCluster: { masters: 3, replicas: 0, basePort: basePort! } };
    const r = await up(cluster);
    expect(r.started).toEqual(['redis-cluster']);
    expect(r.redisUrl).toBe(`redis+cluster://127.0.0.1:${basePort},127.0.0.1:${basePort! + 1},127.0.0.1:${basePort! + 2}`);
    expect(await isReachable(r.redisUrl)).toBe(true);
    expect((await up(cluster)).started).toEqual([]);
    // `fugu services` and `fugu down` find it from FUGU_HOME alone
    const status = (await servicesStatus({ ...opts, only: ['redis'] })).find((s) => s.name === 'redis-cluster')!;
    expect(status).toMatchObject({ url: r.redisUrl, reachable: true });
    expect(status.nodes!.map((n) => [n.port, n.role, n.slots.reduce((a, [x, y]) => a + y - x + 1, 0), typeof n.pid])).toEqual([
      [basePort, 'master', 5461, 'number'], [basePort! + 1, 'master', 5462, 'number'], [basePort! + 2, 'master', 5461, 'number'],
    ]);
    await expect(up({ ...cluster, redisCluster: { masters: 4, replicas: 0, basePort: basePort! } })).rejects.toThrow(/holds a cluster of 3 masters x 0 replicas/);
    await expect(up({ ...cluster, redisCluster: { masters: 2 } })).rejects.toThrow(/at least 3 masters/);
    expect((await down({ ...opts, only: ['redis'] })).stopped).toEqual(['redis-cluster']);
    expect(await isReachable(r.redisUrl, 500)).toBe(false);
  });

  it('isReachable says false for a closed port and rejects other schemes', async () => {
    const port = await freePort();
    expect(await isReachable(`redis://127.0.0.1:${port}`, 500)).toBe(false);
    expect(await isReachable(`postgres://fugu@127.0.0.1:${port}/fugu`, 500)).toBe(false);
    await expect(isReachable('http://127.0.0.1:1')).rejects.toBeInstanceOf(InputError);
  });
});
