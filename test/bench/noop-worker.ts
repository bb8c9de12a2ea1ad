// The baseline of bench:eval: a process with the provider worker's BullMQ settings (connection,
// concurrency) whose jobs do nothing.
import { startNoopWorker } from '../../apps/provider-worker/src/worker.ts';

const w = startNoopWorker({
  redis: process.env.FUGU_REDIS_URL!,
  prefix: process.env.FUGU_QUEUE_PREFIX!,
  queue: process.env.BENCH_QUEUE!,
  concurrency: Number(process.env.FUGU_WORKER_CONCURRENCY ?? 64),
});
await w.waitUntilReady();
process.send?.({ type: 'ready' });
process.on('SIGTERM', () => void w.close().then(() => process.exit(0)));
