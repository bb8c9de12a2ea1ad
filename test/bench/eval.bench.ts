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
//
// Growth (issue 18, figure 2): BENCH_GROWTH=K runs `fugu eval` at BENCH_REPETITIONS and at K
// times as many (BENCH_REPETITIONS=4 BENCH_GROWTH=10: 219,888 and 2,198,880 calls), no baseline,
// and prints each process's peak RSS while the run was at 10%, 50% and 100% of its calls (progress
// read from the run's row); memory is flat when the large run's peaks are within 10% of the small.
// BENCH_GROWTH=1 runs the same batch twice: the ratio is then the measure's own run-to-run spread.
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Cluster } from 'ioredis';
import pg from 'pg';
import { growthTable, note, onLiveHeap, rssMiB, windows, type Windows } from './growth.ts';
import { cpuS, serviceCpu } from './proc.ts';
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

type Proc = { child: ChildProcess; peak: number; cpu: number; exited: Promise<number | null> };

function start(script: string, env: Record<string, string>, stdio: 'inherit' | 'ignore' | 'pipe' = 'ignore', execArgv: string[] = []): Proc {
  const child = fork(script, [], { env: { ...process.env, ...env }, execArgv: [...process.execArgv, ...execArgv], stdio: ['ignore', stdio, stdio === 'inherit' ? 'inherit' : 'ignore', 'ipc'] });
  const p: Proc = { child, peak: 0, cpu: 0, exited: new Promise((r) => child.once('exit', (code) => r(code))) };
  const timer = setInterval(() => { p.peak = Math.max(p.peak, peakMiB(child.pid) || 0); p.cpu = Math.max(p.cpu, cpuS(child.pid)); }, 100);
  void p.exited.then(() => clearInterval(timer));
  return p;
}

const ready = (p: Proc) => new Promise<void>((resolve, reject) => {
  p.child.on('message', (m: { type?: string }) => { if (m?.type === 'ready') resolve(); });
  void p.exited.then((c) => reject(new Error(`a worker exited during start (code ${c})`)));
});

async function stopAll(ps: Proc[]): Promise<void> {
  for (const p of ps) p.peak = Math.max(p.peak, peakMiB(p.child.pid) || 0);
  for (const p of ps) p.cpu = Math.max(p.cpu, cpuS(p.child.pid));
  for (const p of ps) p.child.kill('SIGTERM');
  await Promise.all(ps.map((p) => p.exited));
}

const MODES = (process.env.BENCH_REDIS ?? 'one') === 'both' ? (['one', 'cluster'] as const) : ([process.env.BENCH_REDIS ?? 'one'] as Array<'one' | 'cluster'>);
for (const m of MODES) if (m !== 'one' && m !== 'cluster') throw new Error(`BENCH_REDIS must be one, cluster or both, not ${JSON.stringify(m)}`);
const MASTERS = Number(process.env.BENCH_CLUSTER_MASTERS ?? 3);
const REPLICAS = Number(process.env.BENCH_CLUSTER_REPLICAS ?? 0);
const SHARDS = Number(process.env.BENCH_SHARDS ?? MASTERS);

/** CPU seconds a phase spent, by process kind. */
type Cpu = { workers: number; producer: number; redis: number; postgres: number };
type Result = { label: string; calls: number; evalS: number; noopS: number; producerPeak: number; workerPeaks: number[]; noopProducerPeak: number; noopPeaks: number[]; summary: string; evalCpu: Cpu; noopCpu: Cpu };

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
  const s0 = serviceCpu();
  const t0 = performance.now();
  const cli = fork(cliMain, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  const cliProc: Proc = { child: cli, peak: 0, cpu: 0, exited: new Promise((r) => cli.once('exit', (c) => r(c))) };
  const timer = setInterval(() => { cliProc.peak = Math.max(cliProc.peak, peakMiB(cli.pid) || 0); cliProc.cpu = Math.max(cliProc.cpu, cpuS(cli.pid)); }, 100);
  let out = '';
  cli.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
  const code = await cliProc.exited;
  clearInterval(timer);
  const evalS = (performance.now() - t0) / 1000;
  if (code !== 0) throw new Error(`fugu eval exited with ${code}`);
  const s1 = serviceCpu();
  await stopAll(workers);
  const evalCpu: Cpu = { workers: workers.reduce((n, w) => n + w.cpu, 0), producer: cliProc.cpu, redis: s1.redis - s0.redis, postgres: s1.postgres - s0.postgres };
  const calls = Number(/of (\d+); spend/.exec(out)?.[1] ?? NaN);

  // 2. the baseline: as many no-op jobs, same processes and concurrency, over as many queues
  // (in the provider shards' slots) as the batch had shards
  const queues = shards === 1 ? ['bench-noop'] : providerCallQueues('replay', shards).map((q) => `bench-noop${q}`);
  const noopEnv = { ...env, BENCH_QUEUES: queues.join(','), FUGU_WORKER_CONCURRENCY: String(Math.ceil(Number(CONCURRENCY) / queues.length)) };
  const noop = Array.from({ length: WORKERS }, () => start(here('./noop-worker.ts'), noopEnv));
  await Promise.all(noop.map(ready));
  log(`${label}: baseline: ${calls} no-op jobs on ${WORKERS} worker(s), ${queues.length} queue(s)`);
  const s2 = serviceCpu();
  const t1 = performance.now();
  const producer = start(here('./noop-enqueue.ts'), { ...noopEnv, BENCH_JOBS: String(calls) }, 'inherit');
  if ((await producer.exited) !== 0) throw new Error('the baseline producer failed');
  const noopS = (performance.now() - t1) / 1000;
  const s3 = serviceCpu();
  await stopAll(noop);
  const noopCpu: Cpu = { workers: noop.reduce((n, w) => n + w.cpu, 0), producer: producer.cpu, redis: s3.redis - s2.redis, postgres: s3.postgres - s2.postgres };
  const summary = out.split('\n').filter((l) => /^(split|all|train|test) /.test(l)).join('\n');
  return { label, calls, evalS, noopS, producerPeak: cliProc.peak, workerPeaks: workers.map((w) => w.peak), noopProducerPeak: producer.peak, noopPeaks: noop.map((w) => w.peak), summary, evalCpu, noopCpu };
}

type Growth = { calls: number; secs: number; peaks: Windows[]; live?: Windows[] };

// BENCH_TRACE_GC=1 (growth only): the workers run with --trace-gc, and the bench reports their live
// heap after each full (mark-compact) collection beside their RSS: RSS keeps what V8 once grew
// its heap to, the heap after a full collection is what the process still holds
const TRACE_GC = process.env.BENCH_TRACE_GC === '1';

/** `fugu eval` at `reps` repetitions on one Redis, sampling each process's RSS against the run's progress. */
let growthRuns = 0;
async function growthRun(db: { url: string }, reps: number): Promise<Growth> {
  const runId = `bench-growth-${reps}-${++growthRuns}`;
  const env = {
    FUGU_REDIS_URL: redisUrl, FUGU_DATABASE_URL: db.url, FUGU_QUEUE_PREFIX: prefix, FUGU_WORKER_CONCURRENCY: CONCURRENCY,
    FUGU_WORKER_PORT: '0', FUGU_LOG_LEVEL: 'warn', FUGU_HOME: `/tmp/${prefix}`,
  };
  let frac = 0;
  const workers = Array.from({ length: WORKERS }, () => start(providerWorkerMain, env, TRACE_GC ? 'pipe' : 'ignore', TRACE_GC ? ['--trace-gc'] : []));
  const live = workers.map((_, i) => windows(`provider-worker ${i + 1}`));
  workers.forEach((w, i) => onLiveHeap(w.child.stdout, (mib) => note(live[i]!, frac, mib)));
  await Promise.all(workers.map(ready));
  const args = ['eval', '--dataset', 'llmrouter', '--pool', 'llmrouter', '--repetitions', String(reps), '--local-workers', '0', '--run-id', runId, ...(SAMPLE ? ['--sample', SAMPLE] : [])];
  const t0 = performance.now();
  const cli = fork(cliMain, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const exited = new Promise<number | null>((r) => cli.once('exit', (c) => r(c)));
  const procs = [{ name: 'fugu eval', pid: () => cli.pid }, ...workers.map((w, i) => ({ name: `provider-worker ${i + 1}`, pid: () => w.child.pid }))];
  const peaks = procs.map((p) => windows(p.name));
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  let calls = 0;
  let shown = 0;
  let running = true;
  const sampler = (async () => {
    while (running) {
      const r = await client.query<{ d: number; t: number }>('select done_calls + failed_calls as d, total_calls as t from eval_runs where id = $1', [runId]).catch(() => undefined);
      const row = r?.rows[0];
      if (row && row.t > 0) {
        frac = row.d / row.t;
        calls = row.t;
      }
      for (const [i, p] of procs.entries()) note(peaks[i]!, frac, rssMiB(p.pid()));
      if (performance.now() - shown > 15_000) {
        shown = performance.now();
        log(`growth: ${reps} repetitions: ${(frac * 100).toFixed(0)}% of ${calls} calls, ${((frac * calls) / ((performance.now() - t0) / 1000)).toFixed(0)} calls/s`);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  const code = await exited;
  const secs = (performance.now() - t0) / 1000;
  running = false;
  await sampler;
  await client.end();
  await stopAll(workers);
  if (code !== 0) throw new Error(`fugu eval exited with ${code}`);
  return { calls, secs, peaks, ...(TRACE_GC && { live }) };
}

const GROWTH = process.env.BENCH_GROWTH ? Number(process.env.BENCH_GROWTH) : undefined;
if (GROWTH !== undefined && !(Number.isInteger(GROWTH) && GROWTH >= 1)) throw new Error(`BENCH_GROWTH must be a positive integer, not ${JSON.stringify(process.env.BENCH_GROWTH)}`);

const db = await createTestDatabase('fugu_bench');
if (GROWTH !== undefined) {
  try {
    const small = await growthRun(db, Number(REPS));
    const large = await growthRun(db, Number(REPS) * GROWTH);
    let out = `\nfugu eval over the LLMRouter replay pool (simulated answers from recorded outcomes), ${WORKERS} provider worker(s) at concurrency ${CONCURRENCY}, one Redis\n`;
    out += `calls        wall s   calls/s\n`;
    for (const r of [small, large]) out += `${String(r.calls).padEnd(10)} ${r.secs.toFixed(1).padStart(8)} ${(r.calls / r.secs).toFixed(0).padStart(9)}\n`;
    const rss = growthTable('peak RSS   process', { n: small.calls, windows: small.peaks }, { n: large.calls, windows: large.peaks });
    const worst = rss.worst;
    out += GROWTH === 1
      ? `\n${rss.text}\nthe same batch twice: largest peak-RSS ratio of the second run to the first ${worst.toFixed(3)} (the measure's own spread)\n`
      : `\n${rss.text}\nlargest peak-RSS ratio, ${large.calls} calls against ${small.calls}: ${worst.toFixed(3)} (flat: at most 1.10) -> ${worst <= 1.1 ? 'flat' : 'GROWS'}\n`;
    if (small.live && large.live) {
      const live = growthTable('live heap after a full GC (largest)', { n: small.calls, windows: small.live }, { n: large.calls, windows: large.live });
      out += `\n${live.text}largest live-heap ratio: ${live.worst.toFixed(3)}\n`;
    }
    out += `load average: ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}\n`;
    process.stdout.write(out);
    process.exitCode = worst <= 1.1 ? 0 : 1;
  } finally {
    const redis = createRedis(redisUrl, 'producer');
    await deleteKeys(redis, `${prefix}:*`).catch(() => {});
    redis.disconnect();
    await db.drop();
  }
  process.exit();
}
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
  // where the CPU went (2 shared cores: the rate is the machine's CPU divided by the CPU a call costs)
  process.stdout.write(`\nCPU ms per 1,000 calls (this machine's Redis and Postgres included; the workers' and producer's own):\n`);
  const cpuRows = [['', 'workers', 'producer', 'redis', 'postgres', 'total']];
  for (const r of results) {
    for (const [what, c] of [['fugu eval', r.evalCpu], ['no-op', r.noopCpu]] as const) {
      const per = (x: number) => ((x * 1e6) / r.calls).toFixed(0);
      cpuRows.push([`${what}, ${r.label}`, per(c.workers), per(c.producer), per(c.redis), per(c.postgres), per(c.workers + c.producer + c.redis + c.postgres)]);
    }
  }
  const cw = cpuRows[0]!.map((_, j) => Math.max(...cpuRows.map((r) => r[j]!.length)));
  for (const r of cpuRows) process.stdout.write(`${r.map((c, j) => (j === 0 ? c.padEnd(cw[j]!) : c.padStart(cw[j]!))).join('  ')}\n`);
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
