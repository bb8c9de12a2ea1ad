// The Batch API on a Redis Cluster through a failover (issue 18, figure 3): the gateway and a
// provider worker on a local cluster of 3 masters with a replica each (the code of
// `fugu up --redis-cluster 3`), the provider queues in 3 shards; the master serving the first
// replay shard is killed -9 mid-batch and its replica promoted. Postgres is the truth: the jobs
// Redis lost are put back by the driver's stall check, a job run twice finds its row, and the
// batch completes with each custom_id once and exactly one chat_calls row per line.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { sql } from 'kysely';
import { keySlot, providerCallQueues } from '@fugu/queue';
import { waitFor } from '../support/eval-env.ts';
import { startRedisClusterInstance, type RedisClusterInstance } from '../support/services.ts';
import { batchEnded, batchLine, fileLines, jsonl, startBatchStack, uploadBatchFile, type BatchStack } from '../support/batch-stack.ts';

let stack: BatchStack;
let cluster: RedisClusterInstance;
beforeAll(async () => {
  [stack, cluster] = await Promise.all([startBatchStack(), startRedisClusterInstance({ masters: 3, replicas: 1 })]);
}, 300_000);
afterAll(async () => {
  await stack?.close();
  await cluster?.stop();
});

describe('a batch on a Redis Cluster', () => {
  it('a master killed -9 mid-batch, its replica promoted: the batch completes, each custom_id once, one call row per line', { timeout: 600_000 }, async () => {
    const onCluster = { FUGU_REDIS_URL: cluster.url, FUGU_PROVIDER_QUEUE_SHARDS: '3' };
    await stack.startWorker({ ...onCluster, FUGU_WORKER_LOCK_MS: '4000' });
    const g = await stack.startGateway({ ...onCluster, FUGU_BATCH_MAX_IN_FLIGHT: '400' });
    const client = new OpenAI({ apiKey: stack.full.key, baseURL: g.url, maxRetries: 2 });
    const n = 1200;
    const { workers, prompts } = stack;
    const lines = Array.from({ length: n }, (_, i) => batchLine(`c-${i}`, { model: workers[i % workers.length]!, messages: [{ role: 'user', content: prompts[(i * 31) % prompts.length]! }] }));
    const b = await client.batches.create({ input_file_id: (await uploadBatchFile(client, jsonl(lines))).id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const rows = async () => Number((await sql<{ n: string }>`select count(*) as n from chat_calls where key like ${`${b.id}.%`}`.execute(stack.env.database.db)).rows[0]!.n);
    await waitFor('lines answered', async () => (await rows()) >= 200, 120_000, 50);
    // the master serving the first replay shard
    const slot = keySlot(`${stack.env.config.queuePrefix}:${providerCallQueues('replay', 3)[0]!}:wait`);
    const victim = (await cluster.nodes()).find((x) => x.role === 'master' && x.slots.some(([a, z]) => slot >= a && slot <= z))!;
    const atKill = await rows();
    await cluster.kill9(victim.port);
    const after = await cluster.waitForFailover(victim.port);
    expect(after.filter((x) => x.role === 'master' && !x.failed)).toHaveLength(3);
    expect(atKill).toBeLessThan(n);
    const end = await batchEnded(client, b.id);
    expect(end).toMatchObject({ status: 'completed', request_counts: { total: n, completed: n, failed: 0 } });
    const out = await fileLines(client, end.output_file_id);
    expect(out.map((o) => o.custom_id)).toEqual(lines.map((l) => l.custom_id));
    const perLine = (await sql<{ n: string; distinct: string }>`select count(*) as n, count(distinct key) as distinct from chat_calls where key like ${`${b.id}.%`}`.execute(stack.env.database.db)).rows[0]!;
    expect([Number(perLine.n), Number(perLine.distinct)]).toEqual([n, n]);
  });
});
