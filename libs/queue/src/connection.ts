// Redis connections for BullMQ. Workers (and QueueEvents) retry forever while Redis is away
// (maxRetriesPerRequest: null, as BullMQ requires); producers fail fast so a CLI or an HTTP
// handler gets an error instead of hanging.
import { Redis, type RedisOptions } from 'ioredis';
import { ServiceUnavailableError } from '@fugu/core';
import { redactUrl } from '@fugu/config';

export type RedisRole = 'worker' | 'producer';

const retryStrategy = (times: number): number => Math.min(1000 * 2 ** Math.min(times, 5), 20_000) * (0.5 + Math.random() / 2);

export function createRedis(url: string, role: RedisRole, extra: RedisOptions = {}): Redis {
  const common: RedisOptions = { lazyConnect: false, connectTimeout: 5_000, retryStrategy, ...extra };
  const redis =
    role === 'worker'
      ? new Redis(url, { ...common, maxRetriesPerRequest: null, enableReadyCheck: true })
      : new Redis(url, { ...common, maxRetriesPerRequest: 1, enableOfflineQueue: true });
  // errors surface through commands; an 'error' event without a listener would crash the process
  redis.on('error', () => {});
  return redis;
}

/** Checks that Redis answers; throws one clear line naming FUGU_REDIS_URL when it does not. */
export async function assertRedis(url: string, opts: { timeoutMs?: number; variable?: string } = {}): Promise<void> {
  const redis = new Redis(url, { lazyConnect: true, connectTimeout: opts.timeoutMs ?? 3_000, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
  redis.on('error', () => {});
  try {
    await redis.connect();
    await redis.ping();
  } catch (e) {
    throw new ServiceUnavailableError(
      'redis',
      `cannot reach Redis at ${redactUrl(url)} (${(e as { code?: string }).code ?? (e as Error).message}): start it with \`fugu up\` or set ${opts.variable ?? 'FUGU_REDIS_URL'}`,
      { cause: e },
    );
  } finally {
    redis.disconnect();
  }
}
