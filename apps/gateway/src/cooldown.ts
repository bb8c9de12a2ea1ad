// Worker cooldowns for `fugu`'s routing (LiteLLM's cooldown): a worker whose calls fail with a
// retryable error (429, 5xx, a timeout, a refused connection) `fails` times within `ms` is cooled
// down for `ms`: the router's choices skip it (the next-best takes its place) until then, on every
// gateway that shares the Redis, instead of each request trying it first and paying the fallback's
// latency. The state is two kinds of key under the queue prefix: a failure count per worker
// (`<prefix>:gateway:fails:<worker>`, expiring `ms` after its first failure) and one sorted set of
// the cooled workers by the time their cooldown ends (`<prefix>:gateway:cooldown`). Each gateway
// reads the set at most every `refreshMs` (a cooldown reaches the other gateways that late).
import type { RedisClient } from '@fugu/queue';
import type { Logger } from '@fugu/telemetry';

export type Cooldowns = {
  /** a retryable failure of `worker`'s call */
  failed(worker: string): void;
  /** the workers cooled down now */
  cooling(): Promise<ReadonlySet<string>>;
};

export function redisCooldowns(redis: RedisClient, prefix: string, o: { fails: number; ms: number; log?: Logger; refreshMs?: number }): Cooldowns {
  const setKey = `${prefix}:gateway:cooldown`;
  const failKey = (w: string) => `${prefix}:gateway:fails:${w}`;
  const refreshMs = o.refreshMs ?? 500;
  let cached: { at: number; until: Map<string, number> } = { at: -Infinity, until: new Map() };
  const warn = (e: unknown) => o.log?.warn({ err: (e as Error).message }, 'worker cooldowns: Redis did not answer (no cooldown)');

  async function read(): Promise<Map<string, number>> {
    const now = Date.now();
    if (now - cached.at < refreshMs) return cached.until;
    try {
      const flat = await redis.zrangebyscore(setKey, now, '+inf', 'WITHSCORES');
      const until = new Map<string, number>();
      for (let i = 0; i < flat.length; i += 2) until.set(flat[i]!, Number(flat[i + 1]));
      cached = { at: now, until };
      if (flat.length === 0) void redis.zremrangebyscore(setKey, '-inf', now).catch(warn);
    } catch (e) {
      warn(e);
      cached = { at: now, until: cached.until };
    }
    return cached.until;
  }

  return {
    failed(worker) {
      void (async () => {
        const [[, n]] = (await redis.multi().incr(failKey(worker)).pexpire(failKey(worker), o.ms, 'NX').exec()) as [[unknown, number]];
        if (n < o.fails) return;
        const until = Date.now() + o.ms;
        await redis.zadd(setKey, until, worker);
        await redis.del(failKey(worker));
        // this gateway skips it at once; the others within refreshMs
        cached.until.set(worker, until);
        o.log?.warn({ worker, failures: n, cooldownMs: o.ms }, 'worker cooled down: its calls keep failing');
      })().catch(warn);
    },
    async cooling() {
      const until = await read();
      const now = Date.now();
      return new Set([...until].filter(([, t]) => t > now).map(([w]) => w));
    },
  };
}

/**
 * The order to try `candidates` in: the cooled-down ones last (all cooled: as they were), and
 * which were moved.
 */
export function skipCooled(candidates: readonly string[], cooled: ReadonlySet<string>): { candidates: string[]; cooled: string[] } {
  const hot = candidates.filter((w) => cooled.has(w));
  if (hot.length === 0 || hot.length === candidates.length) return { candidates: [...candidates], cooled: [] };
  return { candidates: [...candidates.filter((w) => !cooled.has(w)), ...hot], cooled: hot };
}
