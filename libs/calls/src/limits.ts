// Rate limits shared by every process through Redis: requests per minute and tokens per minute,
// per provider and optionally per worker. All the buckets a call is charged to are checked and
// taken in ONE Lua script (one round trip, atomic across processes): either every bucket has
// enough and all are charged, or none is and the script answers the longest wait.
//
// A requests bucket holds rpm/300 requests (at least 1; a fifth of a second's budget) and refills
// at rpm/60,000 a millisecond, so the limiter's guarantee is: in any window of w ms, at most
// burst + w * rpm / 60,000 requests are granted (the invariant test/integration/rate-limit.test.ts
// checks). A tokens bucket holds a minute's tokens (as the TPM limit of the providers).
import type { FuguConfig, RateLimit } from '@fugu/config';
import type { ProviderKind } from '@fugu/core';
import type { RedisClient } from '@fugu/queue';

const SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = #KEYS
local tokens = {}
local wait = 0
local which = 0
for i = 1, n do
  local capacity = tonumber(ARGV[3 * i - 2])
  local per_ms = tonumber(ARGV[3 * i - 1])
  local want = math.min(tonumber(ARGV[3 * i]), capacity)
  local state = redis.call('HMGET', KEYS[i], 'tokens', 'ts')
  local have = tonumber(state[1]) or capacity
  local ts = tonumber(state[2]) or now
  have = math.min(capacity, have + math.max(0, now - ts) * per_ms)
  tokens[i] = have
  if have < want then
    local w = math.ceil((want - have) / per_ms)
    if w > wait then wait = w; which = i end
  end
end
for i = 1, n do
  local capacity = tonumber(ARGV[3 * i - 2])
  local per_ms = tonumber(ARGV[3 * i - 1])
  local have = tokens[i]
  if wait == 0 then have = have - math.min(tonumber(ARGV[3 * i]), capacity) end
  redis.call('HSET', KEYS[i], 'tokens', have, 'ts', now)
  redis.call('PEXPIRE', KEYS[i], math.ceil(capacity / per_ms) + 1000)
end
return {wait, which, now}
`;

export type LimitScope = 'provider' | 'worker';
export type LimitKind = 'requests' | 'tokens';

/** One bucket a call is charged to. */
export type Bucket = { key: string; scope: LimitScope; kind: LimitKind; capacity: number; perMs: number; perMinute: number };

export type LimitDecision = { wait: 0; now: number; bucket?: undefined } | { wait: number; now: number; bucket: Bucket };

/** The burst of a requests bucket: a fifth of a second's budget, at least one request. */
export const requestBurst = (rpm: number): number => Math.max(1, Math.floor(rpm / 300));

export function bucketsFor(limit: RateLimit | undefined, scope: LimitScope, keyBase: string): Bucket[] {
  const out: Bucket[] = [];
  if (limit?.requestsPerMinute) {
    const rpm = limit.requestsPerMinute;
    out.push({ key: `${keyBase}:requests`, scope, kind: 'requests', capacity: requestBurst(rpm), perMs: rpm / 60_000, perMinute: rpm });
  }
  if (limit?.tokensPerMinute) {
    const tpm = limit.tokensPerMinute;
    out.push({ key: `${keyBase}:tokens`, scope, kind: 'tokens', capacity: tpm, perMs: tpm / 60_000, perMinute: tpm });
  }
  return out;
}

/**
 * The Redis keys of the limits: `<prefix>:{ratelimit.<provider>}:requests|tokens` and
 * `<prefix>:{ratelimit.<provider>}:worker:<name>:...`. A call's buckets are its provider's and its
 * worker's, taken in one script: the hash tag puts them in one Redis Cluster slot (a worker's
 * buckets under its provider's tag), while different providers' limits spread over the nodes.
 */
export const limitKeyBase = {
  provider: (prefix: string, provider: ProviderKind): string => `${prefix}:{ratelimit.${provider}}`,
  worker: (prefix: string, provider: ProviderKind, worker: string): string => `${prefix}:{ratelimit.${provider}}:worker:${worker}`,
};

export class RateLimiter {
  readonly #redis: RedisClient | undefined;
  readonly #config: Pick<FuguConfig, 'queuePrefix' | 'rateLimits' | 'workerRateLimits'>;
  readonly #cache = new Map<string, Bucket[]>();

  constructor(redis: RedisClient | undefined, config: Pick<FuguConfig, 'queuePrefix' | 'rateLimits' | 'workerRateLimits'>) {
    this.#redis = redis;
    this.#config = config;
  }

  /** The buckets of a worker's calls (none: no limit, and no Redis round trip). */
  bucketsOf(worker: { name: string; provider: ProviderKind }): Bucket[] {
    const id = `${worker.provider}\u0000${worker.name}`;
    let b = this.#cache.get(id);
    if (!b) {
      const prefix = this.#config.queuePrefix;
      b = [
        ...bucketsFor(this.#config.rateLimits[worker.provider], 'provider', limitKeyBase.provider(prefix, worker.provider)),
        ...bucketsFor(this.#config.workerRateLimits[worker.name], 'worker', limitKeyBase.worker(prefix, worker.provider, worker.name)),
      ];
      if (b.length > 0 && !this.#redis) throw new Error(`rate limits are configured for worker "${worker.name}" but the call pipeline has no Redis connection`);
      this.#cache.set(id, b);
    }
    return b;
  }

  /** Charges one request of about `tokens` tokens to every bucket, or none (then: how long to wait). */
  async take(buckets: readonly Bucket[], tokens: number): Promise<LimitDecision> {
    if (buckets.length === 0) return { wait: 0, now: Date.now() };
    const args: Array<string | number> = [];
    for (const b of buckets) args.push(b.capacity, b.perMs, b.kind === 'requests' ? 1 : Math.max(0, Math.ceil(tokens)));
    const [wait, which, now] = (await this.#redis!.eval(SCRIPT, buckets.length, ...buckets.map((b) => b.key), ...args)) as [number, number, number];
    if (Number(wait) <= 0) return { wait: 0, now: Number(now) };
    return { wait: Number(wait), now: Number(now), bucket: buckets[Number(which) - 1]! };
  }
}
