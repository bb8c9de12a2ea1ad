// QueueRouteClient with no router worker alive: a fast RouterUnavailableError, and one wake job
// (no request text) in the route queue, whatever the number of requests: the depth a KEDA
// ScaledObject that scales the router pool to zero reads (k8s/).
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { loadConfig } from '@fugu/config';
import { queueKeys, routeQueue } from '@fugu/queue';
import { RouterUnavailableError } from './errors.ts';
import { QueueRouteClient, WAKE_JOB_ID } from './queue-client.ts';

const redisUrl = process.env.FUGU_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = `fugu-test-${randomBytes(4).toString('hex')}`;
const redis = new Redis(redisUrl);

afterAll(async () => {
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
});

describe('QueueRouteClient with no router worker alive', () => {
  it('fails at once and leaves exactly one wake job in the route queue', async () => {
    const client = await QueueRouteClient.create({ config: loadConfig({ FUGU_REDIS_URL: redisUrl, FUGU_QUEUE_PREFIX: prefix }) });
    const connection = redis.duplicate();
    const queue = new Queue(routeQueue, { connection, prefix });
    try {
      const results = await Promise.allSettled(Array.from({ length: 20 }, () => client.route({ text: 'What is 2 + 2?' })));
      for (const r of results) expect(r.status === 'rejected' && r.reason instanceof RouterUnavailableError).toBe(true);
      await expect.poll(() => queue.getWaitingCount()).toBe(1);
      // the scaler's key holds it; the job says nothing of the request and is already past its deadline
      expect(await redis.llen(queueKeys(prefix, routeQueue).wait)).toBe(1);
      const job = await queue.getJob(WAKE_JOB_ID);
      expect(job?.data).toEqual({ v: 1, text: 'wake', deadline: 1 });
      await expect(client.route({ text: 'again' })).rejects.toBeInstanceOf(RouterUnavailableError);
      expect(await queue.getWaitingCount()).toBe(1);
    } finally {
      await queue.close();
      connection.disconnect();
      await client.close();
    }
  });
});
