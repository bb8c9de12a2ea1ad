// Whether a real server answers at a Redis, Redis Cluster or Postgres URL.
import pg from 'pg';
import { InputError } from '@fugu/core';
import { isClusterUrl, parseRedisUrl, redactUrl } from '@fugu/config';
import { clusterInfo, redisPing } from './resp.ts';

/**
 * True when a real server answers at `url`: for redis:// (or rediss://) a PING gets PONG
 * (after AUTH when the URL carries credentials); for a Redis Cluster (redis+cluster://) a seed
 * node says cluster_state:ok (every slot served); for postgres:// a connection runs `select 1`.
 */
export async function isReachable(url: string, timeoutMs = 2_000): Promise<boolean> {
  if (isClusterUrl(url)) {
    const target = parseRedisUrl(url);
    if (target.kind !== 'cluster') return false;
    for (const n of target.nodes) {
      const info = await clusterInfo({ ...n, tls: target.tls, ...(target.username !== undefined && { username: target.username }), ...(target.password !== undefined && { password: target.password }) }, timeoutMs);
      if (info?.cluster_state === 'ok') return true;
    }
    return false;
  }
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new InputError(`not a URL: ${redactUrl(url)}`, { field: 'url' });
  }
  if (u.protocol === 'redis:' || u.protocol === 'rediss:') return redisPing(u, timeoutMs);
  if (u.protocol === 'postgres:' || u.protocol === 'postgresql:') return postgresSelect1(url, timeoutMs);
  throw new InputError(`unsupported URL scheme ${u.protocol} (expected redis://, rediss:// or postgres://)`, { field: 'url' });
}

async function postgresSelect1(url: string, timeoutMs: number): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
  client.on('error', () => undefined);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs + 500);
  });
  const attempt = (async () => {
    try {
      await client.connect();
      await client.query('select 1');
      return true;
    } catch {
      return false;
    }
  })();
  try {
    return await Promise.race([attempt, timeout]);
  } finally {
    clearTimeout(timer);
    await client.end().catch(() => undefined);
  }
}
