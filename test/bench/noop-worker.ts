// The baseline of bench:eval: a process with the provider worker's BullMQ settings (connection,
// concurrency) whose jobs do nothing, on each queue of BENCH_QUEUES (comma list; a sharded
// provider's shards have one each).
import { startNoopWorker } from '../../apps/provider-worker/src/worker.ts';
import { createRedis } from '@fugu/queue';

const connection = createRedis(process.env.FUGU_REDIS_URL!, 'worker');
const ws = process.env.BENCH_QUEUES!.split(',').map((queue) =>
  startNoopWorker({
    redis: connection,
    prefix: process.env.FUGU_QUEUE_PREFIX!,
    queue,
    concurrency: Number(process.env.FUGU_WORKER_CONCURRENCY ?? 64),
  }),
);
await Promise.all(ws.map((w) => w.waitUntilReady()));
process.send?.({ type: 'ready' });
process.on('SIGTERM', () => void Promise.all(ws.map((w) => w.close())).then(() => process.exit(0)));
