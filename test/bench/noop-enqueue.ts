// The baseline's producer: streams N no-op jobs with the same job options and chunking as
// `fugu eval` over the queues of BENCH_QUEUES (round robin), then waits until they have none left.
import { Queue } from 'bullmq';
import { createRedis, enqueueStream } from '@fugu/queue';

const n = Number(process.env.BENCH_JOBS);
const redis = createRedis(process.env.FUGU_REDIS_URL!, 'producer');
const queues = new Map(process.env.BENCH_QUEUES!.split(',').map((name) => [name, new Queue(name, { connection: redis, prefix: process.env.FUGU_QUEUE_PREFIX! })]));
const names = [...queues.keys()];
function* jobs() {
  for (let i = 0; i < n; i++) {
    yield {
      queue: names[i % names.length]!,
      name: 'call',
      data: { v: 1, runId: 'bench', itemId: i + 1, workerId: 1, repetition: 0, provider: 'replay' },
      opts: { jobId: `bench.${i}`, attempts: 6, backoff: { type: 'exponential', delay: 1000, jitter: 0.5 }, removeOnComplete: true },
    };
  }
}
await enqueueStream((name) => queues.get(name)!, jobs(), { chunkSize: 1000 });
for (;;) {
  let left = 0;
  for (const q of queues.values()) left += Object.values(await q.getJobCounts('waiting', 'active', 'delayed', 'prioritized')).reduce((a, b) => a + b, 0);
  if (left === 0) break;
  await new Promise((r) => setTimeout(r, 250)); // as often as `fugu eval` looks
}
for (const q of queues.values()) await q.close();
redis.disconnect();
