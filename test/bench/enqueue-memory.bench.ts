// npm run bench:enqueue-memory — the producer's memory while streaming jobs with addBulk in
// chunks: live heap (after a forced GC at every chunk) and peak RSS for a batch 10x larger than
// the baseline batch, measured in the same run. Flat means the large batch's live heap stays
// within 10% (or 5 MiB) of the small one's.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { createRedis, enqueueStream } from '@fugu/queue';

const redisUrl = process.env.FUGU_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

if (process.env.BENCH_CHILD) {
  const n = Number(process.env.BENCH_CHILD);
  const prefix = process.env.BENCH_PREFIX!;
  const redis = createRedis(redisUrl, 'producer');
  const queue = new Queue('enqueue-memory', { connection: redis, prefix });
  function* jobs() {
    for (let i = 0; i < n; i++) {
      yield { queue: queue.name, name: 'call', data: { v: 1, runId: 'bench', itemId: i + 1, workerId: 1, repetition: 0, provider: 'replay' }, opts: { jobId: `b.${i}`, removeOnComplete: true } };
    }
  }
  const gc = (globalThis as { gc?: () => void }).gc!;
  let heap = 0;
  await enqueueStream(() => queue, jobs(), { chunkSize: 1000, onChunk: () => { gc(); heap = Math.max(heap, process.memoryUsage().heapUsed); } });
  await queue.obliterate({ force: true });
  await queue.close();
  redis.disconnect();
  process.stdout.write(JSON.stringify({ n, heapMiB: heap / 2 ** 20, rssMiB: process.resourceUsage().maxRSS / 1024 }));
} else {
  const run = (n: number) => JSON.parse(execFileSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url)], {
    env: { ...process.env, BENCH_CHILD: String(n), BENCH_PREFIX: `fugumem${randomBytes(3).toString('hex')}` },
  }).toString()) as { n: number; heapMiB: number; rssMiB: number };
  const small = run(Number(process.env.BENCH_SMALL ?? 25_000));
  const large = run(small.n * 10);
  process.stdout.write(`${'jobs'.padStart(8)}  ${'live heap MiB'.padStart(13)}  ${'peak RSS MiB'.padStart(12)}\n`);
  for (const r of [small, large]) process.stdout.write(`${String(r.n).padStart(8)}  ${r.heapMiB.toFixed(1).padStart(13)}  ${r.rssMiB.toFixed(0).padStart(12)}\n`);
  const flat = large.heapMiB <= Math.max(small.heapMiB * 1.1, small.heapMiB + 5);
  process.stdout.write(`\nlive heap, 10x the jobs: ${(large.heapMiB / small.heapMiB).toFixed(2)}x (flat: ${flat ? 'PASS' : 'FAIL'})\n`);
  process.exitCode = flat ? 0 : 1;
}
