import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Queue, UnrecoverableError } from 'bullmq';
import { ConfigError, PROVIDERS, ServiceUnavailableError } from '@fugu/core';
import { assertRedis, createRedis } from './connection.ts';
import { chatCallJobSchema, InvalidJobError, parseJob, providerCallJobSchema, routeJobSchema } from './contracts.ts';
import { allQueueNames, callJobId, conductQueue, esEvalQueue, esFaninQueue, grpoFaninQueue, providerCallQueue, providerCallQueueFor, providerCallQueues, queueKeys, routeQueue, shardOf } from './names.ts';
import { hashTagOf, keySlot } from './slots.ts';
import { enqueueStream } from './producer.ts';
import { TokenBucket } from './token-bucket.ts';

const redisUrl = process.env.FUGU_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = `fugu-test-${randomBytes(4).toString('hex')}`;
const redis = createRedis(redisUrl, 'producer');
afterAll(async () => {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
});

describe('job contracts', () => {
  const good = { v: 1, runId: 'run_1', itemId: 3, workerId: 2, repetition: 0, provider: 'replay' };
  it('accepts a valid payload', () => {
    expect(parseJob(providerCallJobSchema, good, 'q')).toEqual(good);
  });
  it('rejects a bad payload naming the field, as an unrecoverable error', () => {
    const e = (() => { try { parseJob(providerCallJobSchema, { ...good, itemId: 'x' }, 'provider-call.replay', 'j1'); } catch (err) { return err; } })();
    expect(e).toBeInstanceOf(InvalidJobError);
    expect(e).toBeInstanceOf(UnrecoverableError);
    expect((e as Error).message).toMatch(/invalid provider-call.replay job j1: field itemId/);
    expect(() => parseJob(providerCallJobSchema, { ...good, apiKey: 'sk-x' }, 'q')).toThrow(/Unrecognized key/);
    expect(() => parseJob(providerCallJobSchema, { ...good, provider: 'cohere' }, 'q')).toThrow(/field provider/);
  });
  it('chat-call jobs carry ids only: the stored request is in Postgres', () => {
    const job = { v: 1, id: 'conv-7.step-2', workerId: 3, provider: 'openai' };
    expect(parseJob(chatCallJobSchema, job, 'q')).toEqual(job);
    expect(() => parseJob(chatCallJobSchema, { ...job, messages: [{ role: 'user', content: 'hi' }] }, 'q')).toThrow(/Unrecognized key/);
    expect(() => parseJob(chatCallJobSchema, { ...job, apiKey: 'sk-x' }, 'q')).toThrow(/Unrecognized key/);
    expect(() => parseJob(chatCallJobSchema, { ...job, id: 'a:b' }, 'q')).toThrow(/field id/);
    expect(() => parseJob(chatCallJobSchema, { ...job, workerId: 0 }, 'q')).toThrow(/field workerId/);
  });
  it('checks route jobs: text, allowed workers, lambda and deadline', () => {
    const route = { v: 1, text: 'What is 2 + 2?', allowed: ['a'], lambda: 0.5, deadline: Date.now() + 1000 };
    expect(parseJob(routeJobSchema, route, routeQueue)).toEqual(route);
    expect(() => parseJob(routeJobSchema, { ...route, text: '' }, routeQueue)).toThrow(/field text/);
    expect(() => parseJob(routeJobSchema, { ...route, lambda: -1 }, routeQueue)).toThrow(/field lambda/);
    expect(() => parseJob(routeJobSchema, { ...route, deadline: undefined }, routeQueue)).toThrow(/field deadline/);
    expect(allQueueNames()).toContain(routeQueue);
  });
  it('names queues and job ids without characters BullMQ rejects', () => {
    expect(providerCallQueue('openai-compatible')).toBe('{provider-call.openai-compatible}');
    expect(callJobId('run_1', 1, 2, 3)).not.toContain(':');
    expect(queueKeys('fugu', providerCallQueue('openai')).wait).toBe('fugu:{provider-call.openai}:wait');
    for (const q of allQueueNames(4)) expect(q).not.toContain(':');
  });
});

describe('Redis Cluster slots', () => {
  it('hashes as the Redis Cluster spec says (test/integration/redis-cluster.test.ts asks a real cluster)', () => {
    // CRC16-XModem's check value, and the spec's hash-tag examples
    expect(keySlot('123456789')).toBe(0x31c3 % 16384);
    expect(keySlot('{user1000}.following')).toBe(keySlot('{user1000}.followers'));
    expect(hashTagOf('{user1000}.following')).toBe('user1000');
    expect(hashTagOf('foo{}{bar}')).toBe('foo{}{bar}');
    expect(hashTagOf('foo{{bar}}zap')).toBe('{bar');
    expect(hashTagOf('foo{bar}{zap}')).toBe('bar');
  });
  it("puts every key of a queue in one slot, and a flow's parent and child queues together", () => {
    const suffixes = ['wait', 'active', 'meta', 'events', 'delayed', 'prioritized', 'marker', 'job-1', 'job-1:lock', 'job-1:dependencies'];
    for (const q of allQueueNames(3)) expect(new Set(suffixes.map((s) => keySlot(`fugu:${q}:${s}`))).size).toBe(1);
    expect(keySlot(`fugu:${esFaninQueue}:x`)).toBe(keySlot(`fugu:${esEvalQueue}:x`));
    expect(keySlot(`fugu:${grpoFaninQueue}:x`)).toBe(keySlot(`fugu:${conductQueue}:x`));
    expect(new Set([routeQueue, esEvalQueue, conductQueue, ...PROVIDERS.map((p) => providerCallQueue(p))].map(keySlot)).size).toBe(3 + PROVIDERS.length);
  });
  it('spreads the shards of a provider queue evenly over the slot range, one range each', () => {
    for (const n of [2, 3, 4, 6, 16]) {
      const slots = providerCallQueues('replay', n).map(keySlot);
      slots.forEach((s, i) => expect(Math.floor((s * n) / 16384), `shard ${i} of ${n}`).toBe(i));
    }
    expect(providerCallQueues('replay', 1)).toEqual([providerCallQueue('replay')]);
    expect(providerCallQueues('replay', 3)).toHaveLength(3);
    expect(new Set(providerCallQueues('replay', 3)).size).toBe(3);
    expect(() => providerCallQueues('replay', 0)).toThrow(/FUGU_PROVIDER_QUEUE_SHARDS/);
    expect(() => providerCallQueue('replay', 3, 3)).toThrow(/shard 3 of 3/);
  });
  it('sends a job id to the same shard every time, and spreads ids over the shards', () => {
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 4000; i++) {
      const id = callJobId('run_x', i, 1 + (i % 7), 0);
      const s = shardOf(id, 4);
      expect(shardOf(id, 4)).toBe(s);
      expect(providerCallQueueFor('openai', id, 4)).toBe(providerCallQueue('openai', s, 4));
      counts[s]!++;
    }
    for (const c of counts) expect(c).toBeGreaterThan(800);
    expect(providerCallQueueFor('openai', 'any', 1)).toBe(providerCallQueue('openai'));
  });
});

describe('connections', () => {
  it('names FUGU_REDIS_URL when Redis is unreachable', async () => {
    const e = await assertRedis('redis://127.0.0.1:1').catch((err: unknown) => err);
    expect(e).toBeInstanceOf(ServiceUnavailableError);
    expect((e as Error).message).toMatch(/cannot reach Redis at redis:\/\/127.0.0.1:1.*set FUGU_REDIS_URL/);
    await expect(assertRedis(redisUrl)).resolves.toBeUndefined();
  });
  it('names FUGU_REDIS_URL when no seed node of a cluster answers, and refuses a malformed URL', async () => {
    const e = await assertRedis('redis+cluster://127.0.0.1:1,127.0.0.1:2').catch((err: unknown) => err);
    expect(e).toBeInstanceOf(ServiceUnavailableError);
    expect((e as Error).message).toMatch(/cannot reach the Redis Cluster at redis\+cluster:\/\/127.0.0.1:1,127.0.0.1:2.*--redis-cluster.*set FUGU_REDIS_URL/);
    // a single Redis is not a cluster: its answer to CLUSTER INFO is an error
    const single = new URL(redisUrl);
    await expect(assertRedis(`redis+cluster://${single.host}`)).rejects.toThrow(/Redis Cluster/);
    await expect(assertRedis('redis://a:1,b:2')).rejects.toBeInstanceOf(ConfigError);
    expect(() => createRedis('redis+cluster://h1:70000', 'worker')).toThrow(/seed node 1 \("h1:70000"\) has no valid port/);
  });
});

describe('token bucket', () => {
  it('grants up to capacity, then says how long to wait', async () => {
    const b = new TokenBucket(redis, `${prefix}:tb`, 6000); // 100 tokens a second
    const t0 = performance.now();
    expect(await b.take(5000)).toBe(0);
    expect(await b.take(1000)).toBe(0);
    const wait = await b.take(500);
    // the bucket was empty after 6000; it refilled for at most the time these calls took (however
    // slow the machine), so the wait is 5000 ms less at most that long
    const refillMs = performance.now() - t0;
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(5000);
    expect(wait).toBeGreaterThanOrEqual(Math.floor(5000 - refillMs) - 1);
  });
});

describe('enqueueStream', () => {
  it('adds every job once in chunks, across queues, and re-adding the same ids is harmless', async () => {
    const queues = new Map<string, Queue>();
    const q = (name: string) => {
      let x = queues.get(name);
      if (!x) queues.set(name, (x = new Queue(name, { connection: redis, prefix })));
      return x;
    };
    function* jobs() {
      for (let i = 1; i <= 2500; i++) {
        yield { queue: i % 2 ? 'a' : 'b', name: 'call', data: { i }, opts: { jobId: `j-${i}` } };
      }
    }
    const chunks: number[] = [];
    expect(await enqueueStream(q, jobs(), { chunkSize: 1000, onChunk: (n) => { chunks.push(n); } })).toBe(2500);
    expect(chunks).toEqual([1000, 1000, 500]);
    await enqueueStream(q, jobs(), { chunkSize: 1000 });
    expect(await q('a').getWaitingCount()).toBe(1250);
    expect(await q('b').getWaitingCount()).toBe(1250);
    for (const x of queues.values()) await x.close();
  });
});
