// A token bucket in Redis shared by every process of a provider (tokens per minute). One Lua
// script refills and takes atomically; it answers how long to wait when the bucket is short.
import type { RedisClient } from './connection.ts';

const SCRIPT = `
local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local per_ms = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local now = tonumber(redis.call('TIME')[1]) * 1000 + math.floor(tonumber(redis.call('TIME')[2]) / 1000)
local state = redis.call('HMGET', key, 'tokens', 'ts')
local tokens = tonumber(state[1]) or capacity
local ts = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + (now - ts) * per_ms)
local wait = 0
if want > capacity then want = capacity end
if tokens >= want then
  tokens = tokens - want
else
  wait = math.ceil((want - tokens) / per_ms)
end
redis.call('HSET', key, 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', key, math.ceil(capacity / per_ms) + 1000)
return wait
`;

export class TokenBucket {
  readonly #redis: RedisClient;
  readonly #key: string;
  readonly #perMinute: number;
  constructor(redis: RedisClient, key: string, perMinute: number) {
    this.#redis = redis;
    this.#key = key;
    this.#perMinute = perMinute;
  }
  /** Takes n tokens; returns 0 when taken, else the milliseconds until they would be there (nothing taken). */
  async take(n: number): Promise<number> {
    const wait = await this.#redis.eval(SCRIPT, 1, this.#key, this.#perMinute, this.#perMinute / 60_000, Math.max(0, Math.ceil(n)));
    return Number(wait);
  }
}
