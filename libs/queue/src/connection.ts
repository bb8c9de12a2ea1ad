// Redis connections for BullMQ. Workers (and QueueEvents) retry forever while Redis is away
// (maxRetriesPerRequest: null, as BullMQ requires); producers fail fast so a CLI or an HTTP
// handler gets an error instead of hanging.
//
// FUGU_REDIS_URL names one Redis (redis://) or a Redis Cluster by its seed nodes
// (redis+cluster://h1:p1,h2:p2; @fugu/config redis-url.ts): then the connection is an ioredis
// Cluster, which BullMQ takes as it takes a Redis. Every queue name carries a hash tag
// (names.ts), so each queue's keys share a slot.
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { ServiceUnavailableError } from '@fugu/core';
import { parseRedisUrl, redactRedisUrl, type RedisTarget } from '@fugu/config';

export type RedisRole = 'worker' | 'producer';

/** A connection to the queues' Redis: one server, or a Redis Cluster. */
export type RedisClient = Redis | Cluster;

const retryStrategy = (times: number): number => Math.min(1000 * 2 ** Math.min(times, 5), 20_000) * (0.5 + Math.random() / 2);

function clusterOptions(target: Extract<RedisTarget, { kind: 'cluster' }>, node: RedisOptions, cluster: ClusterOptions): ClusterOptions {
  return {
    ...cluster,
    redisOptions: {
      ...node,
      ...(target.username !== undefined && { username: target.username }),
      ...(target.password !== undefined && { password: target.password }),
      ...(target.tls && { tls: {} }),
    },
  };
}

/**
 * A connection for `role`: a Redis, or a Cluster for a redis+cluster:// URL. `extra` applies to
 * each node's connection (a Cluster passes it on as its redisOptions).
 */
export function createRedis(url: string, role: RedisRole, extra: RedisOptions = {}): RedisClient {
  const target = parseRedisUrl(url);
  const common: RedisOptions = { lazyConnect: false, connectTimeout: 5_000, retryStrategy, ...extra };
  const perRole: RedisOptions =
    role === 'worker' ? { maxRetriesPerRequest: null, enableReadyCheck: true } : { maxRetriesPerRequest: 1, enableOfflineQueue: true };
  let redis: RedisClient;
  if (target.kind === 'single') {
    redis = new Redis(url, { ...common, ...perRole });
  } else {
    const { retryStrategy: _r, lazyConnect: _l, enableOfflineQueue: _o, ...node } = { ...common, ...perRole };
    redis = new Cluster(
      target.nodes,
      clusterOptions(target, node, {
        // connected by its first command (BullMQ connects its own): a Cluster connected at once
        // fails a command sent while it first learns the slots ("Connection is closed") now and
        // then; one connected by a command holds it until the slots are known
        lazyConnect: true,
        clusterRetryStrategy: retryStrategy,
        enableOfflineQueue: true,
        enableReadyCheck: true,
        // a failover moves slots: ask the cluster again rather than failing the command
        retryDelayOnFailover: 200,
        retryDelayOnClusterDown: 300,
        retryDelayOnTryAgain: 200,
        // a producer's command fails after about a failover's worth of redirections
        maxRedirections: role === 'worker' ? 64 : 16,
        slotsRefreshTimeout: 2_000,
      }),
    );
  }
  // errors surface through commands; an 'error' event without a listener would crash the process
  redis.on('error', () => {});
  return redis;
}

/** Whether a connection is to a Redis Cluster. */
export const isCluster = (redis: RedisClient): redis is Cluster => (redis as Cluster).isCluster === true;

/** The master connections of a cluster (one entry for a single Redis): where SCAN, KEYS and FLUSH must go. */
export const masterNodes = (redis: RedisClient): Redis[] => (isCluster(redis) ? redis.nodes('master') : [redis]);

/** Deletes every key matching `pattern` (SCAN on each master, DEL in slot-safe batches). Returns how many. */
export async function deleteKeys(redis: RedisClient, pattern: string): Promise<number> {
  let n = 0;
  for (const node of masterNodes(redis)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      // one key per DEL: keys of one batch may be in different slots
      if (keys.length > 0) n += (await Promise.all(keys.map((k) => node.del(k)))).reduce((a, b) => a + b, 0);
    } while (cursor !== '0');
  }
  return n;
}

/** Checks that Redis (or every slot of a cluster) answers; throws one clear line naming FUGU_REDIS_URL when it does not. */
export async function assertRedis(url: string, opts: { timeoutMs?: number; variable?: string } = {}): Promise<void> {
  const variable = opts.variable ?? 'FUGU_REDIS_URL';
  const target = parseRedisUrl(url, variable);
  const timeout = opts.timeoutMs ?? 3_000;
  const fail = (e: unknown, what = 'cannot reach Redis'): ServiceUnavailableError =>
    new ServiceUnavailableError(
      'redis',
      `${what} at ${redactRedisUrl(url)} (${(e as { code?: string }).code ?? (e as Error).message}): start it with \`fugu up\`${target.kind === 'cluster' ? ' (--redis-cluster N)' : ''} or set ${variable}`,
      { cause: e },
    );
  if (target.kind === 'single') {
    const redis = new Redis(url, { lazyConnect: true, connectTimeout: timeout, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
    redis.on('error', () => {});
    try {
      await redis.connect();
      await redis.ping();
    } catch (e) {
      throw fail(e);
    } finally {
      redis.disconnect();
    }
    return;
  }
  const cluster = new Cluster(
    target.nodes,
    clusterOptions(target, { connectTimeout: timeout, maxRetriesPerRequest: 0 }, { lazyConnect: true, clusterRetryStrategy: () => null, enableOfflineQueue: false, slotsRefreshTimeout: timeout }),
  );
  cluster.on('error', () => {});
  try {
    try {
      await cluster.connect();
    } catch (e) {
      throw fail(e, 'cannot reach the Redis Cluster');
    }
    // every slot served (cluster_state:ok), asked of a master
    const info = await cluster.nodes('master')[0]!.cluster('INFO').catch((e: unknown) => {
      throw fail(e, 'cannot ask the Redis Cluster for its state');
    });
    const state = /cluster_state:(\w+)/.exec(String(info))?.[1];
    if (state !== 'ok') throw fail(new Error(`cluster_state:${state ?? '?'}`), 'the Redis Cluster does not serve every slot');
  } finally {
    cluster.disconnect();
  }
}
