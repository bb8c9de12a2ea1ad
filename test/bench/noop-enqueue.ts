// The baseline's producer: streams N no-op jobs with the same job options and chunking as
// `fugu eval`, then waits until the queue has none left.
import { Queue } from 'bullmq';
import { createRedis, enqueueStream } from '@fugu/queue';

const n = Number(process.env.BENCH_JOBS);
const redis = createRedis(process.env.FUGU_REDIS_URL!, 'producer');
const queue = new Queue(process.env.BENCH_QUEUE!, { connection: redis, prefix: process.env.FUGU_QUEUE_PREFIX! });
function* jobs() {
  for (let i = 0; i < n; i++) {
    yield {
      queue: queue.name,
      name: 'call',
      data: { v: 1, runId: 'bench', itemId: i + 1, workerId: 1, repetition: 0, provider: 'replay' },
      opts: { jobId: `bench.${i}`, attempts: 6, backoff: { type: 'exponential', delay: 1000, jitter: 0.5 }, removeOnComplete: true },
    };
  }
}
await enqueueStream(() => queue, jobs(), { chunkSize: 1000 });
for (;;) {
  const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
  if (Object.values(c).every((v) => v === 0)) break;
  await new Promise((r) => setTimeout(r, 250)); // as often as `fugu eval` looks
}
await queue.close();
redis.disconnect();
