import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Queue, UnrecoverableError } from 'bullmq';
import { ServiceUnavailableError } from '@fugu/core';
import { assertRedis, createRedis } from './connection.ts';
import { chatCallJobSchema, InvalidJobError, parseJob, providerCallJobSchema, routeJobSchema } from './contracts.ts';
import { allQueueNames, callJobId, providerCallQueue, queueKeys, routeQueue } from './names.ts';
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
    expect(providerCallQueue('openai-compatible')).toBe('provider-call.openai-compatible');
    expect(callJobId('run_1', 1, 2, 3)).not.toContain(':');
    expect(queueKeys('fugu', 'provider-call.openai').wait).toBe('fugu:provider-call.openai:wait');
  });
});

describe('connections', () => {
  it('names FUGU_REDIS_URL when Redis is unreachable', async () => {
    const e = await assertRedis('redis://127.0.0.1:1').catch((err: unknown) => err);
    expect(e).toBeInstanceOf(ServiceUnavailableError);
    expect((e as Error).message).toMatch(/cannot reach Redis at redis:\/\/127.0.0.1:1.*set FUGU_REDIS_URL/);
    await expect(assertRedis(redisUrl)).resolves.toBeUndefined();
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
