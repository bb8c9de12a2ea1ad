// What KEDA will read is what BullMQ has pending: the production ScaledObjects' redis triggers,
// evaluated as KEDA's redis scaler does (TYPE, then LLEN for a list, ZCARD for a zset, 0 for a
// missing key) and summed by their scalingModifiers formula, against real BullMQ queues on a real
// Redis holding plain, prioritized, delayed and active jobs. Only plain + prioritized may count.
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { configMap, render, type ScaledObjectSpec } from './policy.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const redisUrl = process.env.FUGU_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = `fugu-keda-${randomBytes(4).toString('hex')}`;
const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });

afterAll(async () => {
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
});

/** KEDA's redis scaler on one key (pkg/scalers/redis_scaler.go: list, set, hash, zset; none = 0). */
async function kedaLength(key: string): Promise<number> {
  const type = await redis.type(key);
  switch (type) {
    case 'list':
    case 'none':
      return redis.llen(key);
    case 'zset':
      return redis.zcard(key);
    default:
      throw new Error(`KEDA's redis scaler cannot count ${key} (a ${type})`);
  }
}

describe('KEDA scalers on real BullMQ queues', () => {
  const objects = render(path.join(root, 'k8s/overlays/production'));
  const manifestPrefix = configMap(objects).FUGU_QUEUE_PREFIX!;
  const scaledObjects = objects.filter((o) => o.kind === 'ScaledObject');

  it.each(scaledObjects.map((o) => [o.metadata.name, o.spec as unknown as ScaledObjectSpec] as const))('%s: the formula over its triggers equals the pending jobs', async (_name, spec) => {
    // the same keys under this test's prefix
    const keyOf = (listName: string) => {
      expect(listName.startsWith(`${manifestPrefix}:`), listName).toBe(true);
      return `${prefix}:${listName.slice(manifestPrefix.length + 1)}`;
    };
    const queues = [...new Set(spec.triggers.map((t) => t.metadata.listName!.slice(manifestPrefix.length + 1).replace(/:[^:]+$/, '')))];
    const connection = redis.duplicate();
    let pending = 0;
    try {
      for (const [i, name] of queues.entries()) {
        const q = new Queue(name, { connection, prefix });
        await q.addBulk(Array.from({ length: 3 + i }, (_, k) => ({ name: 'plain', data: { k } })));
        await q.addBulk(Array.from({ length: 2 }, (_, k) => ({ name: 'prioritized', data: { k }, opts: { priority: 1 + k } })));
        await q.add('delayed', {}, { delay: 60_000 }); // a retry waiting for its backoff: not backlog
        pending += 3 + i + 2;
        // one job in a worker's hands: not backlog either
        const workerConnection = redis.duplicate();
        const w = new Worker(name, () => new Promise(() => {}), { connection: workerConnection, prefix, autorun: false });
        expect(await w.getNextJob('keda-test')).toBeDefined();
        pending -= 1;
        await w.close(true);
        workerConnection.disconnect();
        await q.close();
      }
    } finally {
      connection.disconnect();
    }
    const values = new Map<string, number>();
    for (const t of spec.triggers) values.set(t.name!, await kedaLength(keyOf(t.metadata.listName!)));
    const formula = spec.advanced!.scalingModifiers!.formula!;
    const total = formula.split('+').reduce((sum, term) => sum + values.get(term.trim())!, 0);
    expect(total).toBe(pending);
  });
});
