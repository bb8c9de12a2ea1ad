// npm run bench:eval — end-to-end throughput of an evaluation batch (default: the full LLMRouter
// batch, 6,108 items x 9 replay workers x 4 repetitions = 219,888 calls) beside the throughput
// of the same number of no-op BullMQ jobs on the same number of worker processes with the same
// concurrency, measured in the same run. Prints a table; exits 1 when the ratio is below 0.4.
//
// Options (env): BENCH_WORKERS (processes, default 2), FUGU_WORKER_CONCURRENCY (default 256, as the worker's),
// BENCH_SAMPLE (items, default all), BENCH_REPETITIONS (default 4). Services: FUGU_TEST_REDIS_URL
// and FUGU_TEST_DATABASE_URL (a fresh database is made and dropped), as the tests use.
//
// Past one Redis: BENCH_REDIS=one (default) | cluster | both. `cluster` starts a local Redis
// Cluster on free ports (the code of `fugu up --redis-cluster`; BENCH_CLUSTER_MASTERS, default 3;
// BENCH_CLUSTER_REPLICAS, default 0) and runs the batch on it with the provider queues in
// BENCH_SHARDS shards (default: one per master); the no-op baseline then spreads its jobs over as
// many queues in the same slots. `both` runs one Redis first, then the cluster, on the same
// sample. The cluster's queues are printed with their slots and the master serving each.
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Cluster } from 'ioredis';
import { createTestDatabase } from '@fugu/db/testing';
import { createRedis, deleteKeys, keySlot, providerCallQueues } from '@fugu/queue';
import { freeClusterPorts, providerWorkerMain, startRedisCluster, stopRedisCluster, redisClusterUrl, type RedisClusterSpec } from '@fugu/local-services';

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

const MODES = (process.env.BENCH_REDIS ?? 'one') === 'both' ? (['one', 'cluster'] as const) : ([process.env.BENCH_REDIS ?? 'one'] as Array<'one' | 'cluster'>);
for (const m of MODES) if (m !== 'one' && m !== 'cluster') throw new Error(`BENCH_REDIS must be one, cluster or both, not ${JSON.stringify(m)}`);
const MASTERS = Number(process.env.BENCH_CLUSTER_MASTERS ?? 3);
const REPLICAS = Number(process.env.BENCH_CLUSTER_REPLICAS ?? 0);
const SHARDS = Number(process.env.BENCH_SHARDS ?? MASTERS);

type Result = { label: string; calls: number; evalS: number; noopS: number; producerPeak: number; workerPeaks: number[]; noopProducerPeak: number; noopPeaks: number[]; summary: string };

/** The cluster's master serving each of these queues' slots, as a table. */
async function slotTable(url: string, queues: string[]): Promise<string> {
  const redis = createRedis(url, 'producer') as Cluster;
  try {
    const slots = (await redis.cluster('SLOTS')).map(([a, b, master]) => ({ a, b, at: master ? `${master[0]}:${master[1]}` : '?' }));
    const masterOf = (slot: number) => slots.find((r) => slot >= r.a && slot <= r.b)?.at ?? '?';
    const rows = queues.map((q) => { const slot = keySlot(`${prefix}:${q}:wait`); return `  ${q.padEnd(44)} slot ${String(slot).padStart(5)}  master ${masterOf(slot)}`; });
    const perNode = new Map<string, number>();
    for (const q of queues) { const n = masterOf(keySlot(`${prefix}:${q}:wait`)); perNode.set(n, (perNode.get(n) ?? 0) + 1); }
    const masters = slots.map((r) => `  master ${r.at}  slots ${r.a}-${r.b}  queues ${perNode.get(r.at) ?? 0}`);
    return `${masters.join('\n')}\n${rows.join('\n')}`;
  } finally {
    redis.disconnect();
  }
}

async function runOnce(db: { url: string }, label: string, redisUrl: string, shards: number): Promise<Result> {
  const env = {
    FUGU_REDIS_URL: redisUrl, FUGU_DATABASE_URL: db.url, FUGU_QUEUE_PREFIX: prefix, FUGU_WORKER_CONCURRENCY: CONCURRENCY,
    FUGU_WORKER_PORT: '0', FUGU_LOG_LEVEL: 'warn', FUGU_HOME: `/tmp/${prefix}`, FUGU_PROVIDER_QUEUE_SHARDS: String(shards),
  };
  // 1. the real batch, end to end: `fugu eval` (its own process) with WORKERS provider workers
  const workers = Array.from({ length: WORKERS }, () => start(providerWorkerMain, env));
  await Promise.all(workers.map(ready));
  log(`${label}: ${WORKERS} provider worker(s) ready (concurrency ${CONCURRENCY}, ${shards} shard(s) per provider queue); running fugu eval`);
  const args = ['eval', '--dataset', 'llmrouter', '--pool', 'llmrouter', '--repetitions', REPS, '--local-workers', '0', '--run-id', `bench-${label}`, ...(SAMPLE ? ['--sample', SAMPLE] : [])];
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

  // 2. the baseline: as many no-op jobs, same processes and concurrency, over as many queues
  // (in the provider shards' slots) as the batch had shards
  const queues = shards === 1 ? ['bench-noop'] : providerCallQueues('replay', shards).map((q) => `bench-noop${q}`);
  const noopEnv = { ...env, BENCH_QUEUES: queues.join(','), FUGU_WORKER_CONCURRENCY: String(Math.ceil(Number(CONCURRENCY) / queues.length)) };
  const noop = Array.from({ length: WORKERS }, () => start(here('./noop-worker.ts'), noopEnv));
  await Promise.all(noop.map(ready));
  log(`${label}: baseline: ${calls} no-op jobs on ${WORKERS} worker(s), ${queues.length} queue(s)`);
  const t1 = performance.now();
  const producer = start(here('./noop-enqueue.ts'), { ...noopEnv, BENCH_JOBS: String(calls) }, 'inherit');
  if ((await producer.exited) !== 0) throw new Error('the baseline producer failed');
  const noopS = (performance.now() - t1) / 1000;
  await stopAll(noop);
  const summary = out.split('\n').filter((l) => /^(split|all|train|test) /.test(l)).join('\n');
  return { label, calls, evalS, noopS, producerPeak: cliProc.peak, workerPeaks: workers.map((w) => w.peak), noopProducerPeak: producer.peak, noopPeaks: noop.map((w) => w.peak), summary };
}

const db = await createTestDatabase('fugu_bench');
let clusterSpec: RedisClusterSpec | undefined;
const results: Result[] = [];
let slots = '';
try {
  for (const mode of MODES) {
    if (mode === 'one') {
      results.push(await runOnce(db, 'one', redisUrl, 1));
      continue;
    }
    const dir = await mkdtemp(path.join(tmpdir(), 'fugu-bench-cluster-'));
    clusterSpec = { dir, masters: MASTERS, replicas: REPLICAS, ports: await freeClusterPorts(MASTERS * (1 + REPLICAS)), aof: true, install: false, log };
    await startRedisCluster(clusterSpec);
    const url = redisClusterUrl(clusterSpec);
    log(`cluster: ${MASTERS} masters x ${REPLICAS} replicas at ${url}`);
    slots = await slotTable(url, [...providerCallQueues('replay', SHARDS), ...(SHARDS === 1 ? ['bench-noop'] : providerCallQueues('replay', SHARDS).map((q) => `bench-noop${q}`))]);
    results.push(await runOnce(db, 'cluster', url, SHARDS));
  }
  const rows = [['', 'calls', 'seconds', 'calls/s', 'producer peak MiB', 'worker peak MiB (each)', 'eval / no-op']];
  for (const r of results) {
    const where = r.label === 'one' ? 'one Redis' : `cluster of ${MASTERS} masters${REPLICAS ? ` (+${REPLICAS} replica each)` : ''}, ${SHARDS} shards`;
    rows.push([`fugu eval (replay, end to end), ${where}`, String(r.calls), r.evalS.toFixed(1), (r.calls / r.evalS).toFixed(0), r.producerPeak.toFixed(0), r.workerPeaks.map((p) => p.toFixed(0)).join(' / '), (r.noopS / r.evalS).toFixed(2)]);
    rows.push([`no-op BullMQ jobs (baseline), ${where}`, String(r.calls), r.noopS.toFixed(1), (r.calls / r.noopS).toFixed(0), r.noopProducerPeak.toFixed(0), r.noopPeaks.map((p) => p.toFixed(0)).join(' / '), '']);
  }
  const widths = rows[0]!.map((_, j) => Math.max(...rows.map((r) => r[j]!.length)));
  process.stdout.write(`\n${results[0]!.summary}\n\n`);
  if (slots) process.stdout.write(`the cluster's queues (prefix ${prefix}):\n${slots}\n\n`);
  for (const r of rows) process.stdout.write(`${r.map((c, j) => (j === 0 ? c.padEnd(widths[j]!) : c.padStart(widths[j]!))).join('  ')}\n`);
  const ratios = results.map((r) => r.noopS / r.evalS);
  const worst = Math.min(...ratios);
  process.stdout.write(`\nratio eval / no-op: ${ratios.map((x, i) => `${results[i]!.label} ${x.toFixed(2)}`).join(', ')} (target >= 0.40): ${worst >= 0.4 ? 'PASS' : 'FAIL'}\n`);
  process.stdout.write(`load average: ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}\n`);
  process.exitCode = worst >= 0.4 ? 0 : 1;
} finally {
  for (const url of [redisUrl, ...(clusterSpec ? [redisClusterUrl(clusterSpec)] : [])]) {
    const redis = createRedis(url, 'producer');
    await deleteKeys(redis, `${prefix}:*`).catch(() => {});
    redis.disconnect();
  }
  if (clusterSpec) {
    await stopRedisCluster(clusterSpec);
    await rm(clusterSpec.dir, { recursive: true, force: true });
  }
  await db.drop();
}
