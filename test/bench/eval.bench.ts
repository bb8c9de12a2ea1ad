// npm run bench:eval — end-to-end throughput of an evaluation batch (default: the full LLMRouter
// batch, 6,108 items x 9 replay workers x 4 repetitions = 219,888 calls) beside the throughput
// of the same number of no-op BullMQ jobs on the same number of worker processes with the same
// concurrency, measured in the same run. Prints a table; exits 1 when the ratio is below 0.4.
//
// Options (env): BENCH_WORKERS (processes, default 2), FUGU_WORKER_CONCURRENCY (default 256, as the worker's),
// BENCH_SAMPLE (items, default all), BENCH_REPETITIONS (default 4). Services: FUGU_TEST_REDIS_URL
// and FUGU_TEST_DATABASE_URL (a fresh database is made and dropped), as the tests use.
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { createTestDatabase } from '@fugu/db/testing';
import { createRedis } from '@fugu/queue';
import { providerWorkerMain } from '@fugu/local-services';

const WORKERS = Number(process.env.BENCH_WORKERS ?? 2);
const CONCURRENCY = process.env.FUGU_WORKER_CONCURRENCY ?? '256';
const SAMPLE = process.env.BENCH_SAMPLE;
const REPS = process.env.BENCH_REPETITIONS ?? '4';
const redisUrl = process.env.FUGU_TEST_REDIS_URL ?? process.env.FUGU_REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = `fugubench${randomBytes(3).toString('hex')}`;
const cliMain = fileURLToPath(new URL('../../apps/cli/src/main.ts', import.meta.url));
const here = (f: string) => fileURLToPath(new URL(f, import.meta.url));

const log = (s: string) => process.stderr.write(`bench:eval: ${s}\n`);

/** Peak resident memory (VmHWM) of a live process, in MiB. */
function peakMiB(pid: number | undefined): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

type Proc = { child: ChildProcess; peak: number; exited: Promise<number | null> };

function start(script: string, env: Record<string, string>, stdio: 'inherit' | 'ignore' = 'ignore'): Proc {
  const child = fork(script, [], { env: { ...process.env, ...env }, stdio: ['ignore', stdio, stdio === 'inherit' ? 'inherit' : 'ignore', 'ipc'] });
  const p: Proc = { child, peak: 0, exited: new Promise((r) => child.once('exit', (code) => r(code))) };
  const timer = setInterval(() => { p.peak = Math.max(p.peak, peakMiB(child.pid) || 0); }, 100);
  void p.exited.then(() => clearInterval(timer));
  return p;
}

const ready = (p: Proc) => new Promise<void>((resolve, reject) => {
  p.child.on('message', (m: { type?: string }) => { if (m?.type === 'ready') resolve(); });
  void p.exited.then((c) => reject(new Error(`a worker exited during start (code ${c})`)));
});

async function stopAll(ps: Proc[]): Promise<void> {
  for (const p of ps) p.peak = Math.max(p.peak, peakMiB(p.child.pid) || 0);
  for (const p of ps) p.child.kill('SIGTERM');
  await Promise.all(ps.map((p) => p.exited));
}

const db = await createTestDatabase('fugu_bench');
const env = {
  FUGU_REDIS_URL: redisUrl, FUGU_DATABASE_URL: db.url, FUGU_QUEUE_PREFIX: prefix, FUGU_WORKER_CONCURRENCY: CONCURRENCY,
  FUGU_WORKER_PORT: '0', FUGU_LOG_LEVEL: 'warn', FUGU_HOME: `/tmp/${prefix}`,
};
try {
  // 1. the real batch, end to end: `fugu eval` (its own process) with WORKERS provider workers
  const workers = Array.from({ length: WORKERS }, () => start(providerWorkerMain, env));
  await Promise.all(workers.map(ready));
  log(`${WORKERS} provider worker(s) ready (concurrency ${CONCURRENCY}); running fugu eval`);
  const args = ['eval', '--dataset', 'llmrouter', '--pool', 'llmrouter', '--repetitions', REPS, '--local-workers', '0', '--run-id', 'bench', ...(SAMPLE ? ['--sample', SAMPLE] : [])];
  const t0 = performance.now();
  const cli = fork(cliMain, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  const cliProc: Proc = { child: cli, peak: 0, exited: new Promise((r) => cli.once('exit', (c) => r(c))) };
  const timer = setInterval(() => { cliProc.peak = Math.max(cliProc.peak, peakMiB(cli.pid) || 0); }, 100);
  let out = '';
  cli.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
  const code = await cliProc.exited;
  clearInterval(timer);
  const evalS = (performance.now() - t0) / 1000;
  if (code !== 0) throw new Error(`fugu eval exited with ${code}`);
  await stopAll(workers);
  const calls = Number(/of (\d+); spend/.exec(out)?.[1] ?? NaN);

  // 2. the baseline: as many no-op jobs, same processes and concurrency
  const noop = Array.from({ length: WORKERS }, () => start(here('./noop-worker.ts'), { ...env, BENCH_QUEUE: 'bench-noop' }));
  await Promise.all(noop.map(ready));
  log(`baseline: ${calls} no-op jobs on ${WORKERS} worker(s)`);
  const t1 = performance.now();
  const producer = start(here('./noop-enqueue.ts'), { ...env, BENCH_QUEUE: 'bench-noop', BENCH_JOBS: String(calls) }, 'inherit');
  if ((await producer.exited) !== 0) throw new Error('the baseline producer failed');
  const noopS = (performance.now() - t1) / 1000;
  await stopAll(noop);

  const evalRate = calls / evalS;
  const noopRate = calls / noopS;
  const ratio = evalRate / noopRate;
  const rows = [
    ['', 'calls', 'seconds', 'calls/s', 'producer peak MiB', 'worker peak MiB (each)'],
    ['fugu eval (replay, end to end)', String(calls), evalS.toFixed(1), evalRate.toFixed(0), cliProc.peak.toFixed(0), workers.map((w) => w.peak.toFixed(0)).join(' / ')],
    ['no-op BullMQ jobs (baseline)', String(calls), noopS.toFixed(1), noopRate.toFixed(0), producer.peak.toFixed(0), noop.map((w) => w.peak.toFixed(0)).join(' / ')],
  ];
  const widths = rows[0]!.map((_, j) => Math.max(...rows.map((r) => r[j]!.length)));
  process.stdout.write(`\n${out.split('\n').filter((l) => /^(split|all|train|test) /.test(l)).join('\n')}\n\n`);
  for (const r of rows) process.stdout.write(`${r.map((c, j) => (j === 0 ? c.padEnd(widths[j]!) : c.padStart(widths[j]!))).join('  ')}\n`);
  process.stdout.write(`\nratio eval / no-op: ${ratio.toFixed(2)} (target >= 0.40): ${ratio >= 0.4 ? 'PASS' : 'FAIL'}\n`);
  process.exitCode = ratio >= 0.4 ? 0 : 1;
} finally {
  const redis = createRedis(redisUrl, 'producer');
  const keys = await redis.keys(`${prefix}:*`);
  for (let i = 0; i < keys.length; i += 500) await redis.del(...keys.slice(i, i + 500));
  redis.disconnect();
  await db.drop();
}
