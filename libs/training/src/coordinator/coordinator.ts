// The ES coordinator: drives one run generation by generation. Postgres is the truth, Redis only
// carries work:
//
//   state_g (es_runs.state) --fan-out--> one BullMQ flow: children = (candidate k, replica r)
//   evaluation jobs on `es-eval` (ids + a state hash, never vectors), parent = a fan-in job on
//   `es-fanin` that this process consumes --> every (k, r) has its es_evaluations row
//   --> tell(mean fitness over replicas per candidate) --> ONE transaction: es_runs.state_{g+1},
//   the es_generations record, the best-so-far router checkpoint.
//
// A failing child: `attempts` tries with exponential backoff, then it is dropped from its parent's
// dependencies (ignoreDependencyOnFailure), so the parent is still released and a generation
// never hangs in waiting-children. The fan-in (or the poll below) finds the missing rows and the
// coordinator dispatches them again as a new flow; so does the generation's deadline for
// stragglers. Evaluations are keyed (run, generation, candidate, replica): the first result wins
// and a duplicate inserts nothing. Evaluations are deterministic, so which copy wins does not
// matter.
//
// Resume after kill -9 anywhere: the loop re-reads the state from Postgres, skips what is already
// recorded and dispatches only the missing evaluations; every generation (interrupted or not)
// reads its state back from Postgres, so a resumed run computes exactly what an uninterrupted one
// does.
import { randomBytes } from 'node:crypto';
import { FlowProducer, Worker, type FlowJob, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { decodeWireError, InputError, type WireError } from '@fugu/core';
import { SepCmaEs, type SepCmaEsState } from '@fugu/es';
import {
  commitEsGeneration,
  countEsEvaluations,
  esGenerationFitness,
  getCheckpoint,
  getEsRun,
  getEsState,
  setEsRunStatus,
  type CheckpointRecord,
  type Db,
  type EsGenerationRecord,
} from '@fugu/db';
import { esEvalJobId, esEvalJobSchema, esEvalQueue, esFaninJobId, esFaninJobSchema, esFaninQueue, parseJob, type EsEvalJob, type EsFaninJob } from '@fugu/queue';
import { esCodeVersion, stateVersion, type EsRunConfig } from './run-config.ts';

/** Test hook (FUGU_ES_CRASH_AT=point:generation): the process kills itself with SIGKILL there. */
export type CrashPoint = 'fanout' | 'fanin' | 'commit';

/** Where the coordinator's own time went in a generation (ms; waiting for evaluations excluded):
 *  load = read the state and hash it, dispatch = add the flow(s), poll = count rows while waiting,
 *  fanin = read the rows, tell, build the checkpoint, commit = the transaction. */
export type CoordinatorTimings = { load: number; dispatch: number; poll: number; fanin: number; commit: number };
export type GenerationEvent = EsGenerationRecord & {
  runId: string;
  generations: number;
  bestCheckpointId: string | null;
  /** sum of `timings` */
  coordinatorMs: number;
  timings: CoordinatorTimings;
  /** ms from the end of the previous generation's commit (or the coordinator's start) to the end of this one's */
  cycleMs: number;
};
export type DispatchEvent = { runId: string; generation: number; dispatch: string; jobs: number; bytesPerJob: number; reason: 'start' | 'failed-children' | 'deadline' };

export type CoordinatorOptions = {
  db: Db;
  /** BullMQ connections: `connection` for the producer, `workerConnection` for the fan-in worker (maxRetriesPerRequest null) */
  connection: Redis;
  workerConnection: Redis;
  prefix: string;
  runId: string;
  /** how often Postgres is polled for the generation's rows (the fan-in job wakes the loop sooner) */
  pollMs?: number;
  /** re-dispatches of one generation before the run fails */
  maxDispatches?: number;
  signal?: AbortSignal;
  onGeneration?: (e: GenerationEvent) => void;
  onDispatch?: (e: DispatchEvent) => void;
  /** evaluations recorded so far in the current generation (progress display) */
  onProgress?: (e: { generation: number; done: number; total: number }) => void;
  log?: (msg: string, extra?: Record<string, unknown>) => void;
  crashAt?: { point: CrashPoint; generation: number };
  /** false: skip the code-version check (tests of other things) */
  checkCodeVersion?: boolean;
};

export type CoordinatorResult = { status: 'completed' | 'failed' | 'interrupted'; generation: number; bestCheckpointId: string | null; reason?: string };

export function parseCrashAt(v: string | undefined): CoordinatorOptions['crashAt'] {
  if (!v) return undefined;
  const m = /^(fanout|fanin|commit):(\d+)$/.exec(v);
  if (!m) throw new InputError(`must be fanout|fanin|commit:<generation>, got "${v}"`, { field: 'FUGU_ES_CRASH_AT' });
  return { point: m[1] as CrashPoint, generation: Number(m[2]) };
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });

/** Bytes of one evaluation job's payload (JSON), as BullMQ stores it. */
export const esJobBytes = (job: EsEvalJob): number => Buffer.byteLength(JSON.stringify(job));

export async function runCoordinator(opts: CoordinatorOptions): Promise<CoordinatorResult> {
  const { db, runId } = opts;
  const log = opts.log ?? (() => {});
  const pollMs = opts.pollMs ?? 500;
  const maxDispatches = opts.maxDispatches ?? 20;
  const run = await getEsRun(db, runId);
  if (!run) throw new InputError(`no ES run "${runId}"`, { field: 'run' });
  if (opts.checkCodeVersion !== false && run.codeVersion !== esCodeVersion())
    throw new InputError(`run ${runId} was started by code version ${run.codeVersion}, this is ${esCodeVersion()}: resume it with the code that started it`, { field: 'code_version' });
  const cfg = run.config as unknown as EsRunConfig;
  if (run.status === 'completed') return { status: 'completed', generation: run.generation, bestCheckpointId: run.bestCheckpointId };
  if (run.status !== 'running') await setEsRunStatus(db, runId, 'running');
  const sft = await getCheckpoint(db, run.checkpointId);
  if (!sft) throw new InputError(`the run's checkpoint ${run.checkpointId} is gone`, { field: 'checkpoint' });
  const total = cfg.lambda * cfg.replicas;

  const flow = new FlowProducer({ connection: opts.connection, prefix: opts.prefix });
  // fan-in jobs: wake the loop of the generation they belong to
  const wakers = new Set<(j: EsFaninJob, failures: WireError[]) => void>();
  const fanin = new Worker(
    esFaninQueue,
    async (job: Job) => {
      const data = parseJob(esFaninJobSchema, job.data, esFaninQueue, job.id);
      // the children that failed for good: their failedReason is the evaluator's encoded WireError
      const ignored = Object.values(((await job.getIgnoredChildrenFailures().catch(() => ({}))) ?? {}) as Record<string, string>);
      const failures = ignored.map((r) => decodeWireError(r));
      for (const w of wakers) w(data, failures);
      return { failedChildren: failures.length };
    },
    { connection: opts.workerConnection, prefix: opts.prefix, concurrency: 4, removeOnComplete: { count: 1000 }, removeOnFail: { count: 1000 } },
  );
  fanin.on('error', (e) => log('fan-in worker error', { err: e.message }));

  const crash = (point: CrashPoint, generation: number): void => {
    if (opts.crashAt && opts.crashAt.point === point && opts.crashAt.generation === generation) {
      log(`test hook: kill -9 at ${point} of generation ${generation}`);
      process.kill(process.pid, 'SIGKILL');
    }
  };

  let bestCheckpointId = run.bestCheckpointId;
  let cycleStart = performance.now();
  try {
    for (;;) {
      if (opts.signal?.aborted) return { status: 'interrupted', generation: (await getEsState(db, runId))!.generation, bestCheckpointId };
      const tl = performance.now();
      const cur = (await getEsState(db, runId))!;
      const g = cur.generation;
      if (g >= cfg.generations) {
        await setEsRunStatus(db, runId, 'completed');
        return { status: 'completed', generation: g, bestCheckpointId };
      }
      const started = Date.now();
      const version = stateVersion(cur.state);
      const es = SepCmaEs.fromState(cur.state as unknown as SepCmaEsState);
      if (es.generation !== g) throw new Error(`ES run ${runId}: es_runs.generation ${g} but the state asks generation ${es.generation}`);
      const timings: CoordinatorTimings = { load: performance.now() - tl, dispatch: 0, poll: 0, fanin: 0, commit: 0 };

      // fan-out, and re-dispatch what is missing until every (k, r) has its row
      let dispatches = 0;
      let latest = '';
      let lastDispatchAt = 0;
      let latestFannedIn = false;
      let wake: (() => void) | undefined;
      let failures: WireError[] = [];
      const waker = (j: EsFaninJob, f: WireError[]) => {
        if (j.runId !== runId || j.generation !== g) return;
        if (j.dispatch === latest) latestFannedIn = true;
        failures.push(...f);
        wake?.();
      };
      wakers.add(waker);
      let rows: Array<{ candidate: number; replica: number; fitness: number }> = [];
      try {
        for (let first = true; ; first = false) {
          // while waiting only count (cheap); read the rows when they are all there or to re-dispatch
          const tr = performance.now();
          const done = first ? -1 : await countEsEvaluations(db, runId, g);
          const deadlinePassed = dispatches > 0 && Date.now() - lastDispatchAt > cfg.deadlineMs;
          const redispatch = dispatches === 0 || latestFannedIn || deadlinePassed;
          if (done >= total || done < 0 || redispatch) rows = await esGenerationFitness(db, runId, g);
          timings.poll += performance.now() - tr;
          opts.onProgress?.({ generation: g, done: done < 0 ? rows.length : Math.min(done, total), total });
          if (rows.length >= total) break;
          if (opts.signal?.aborted) return { status: 'interrupted', generation: g, bestCheckpointId };
          if (redispatch) {
            if (dispatches >= maxDispatches) {
              const reason = `generation ${g}: ${total - rows.length} of ${total} evaluations still missing after ${dispatches} dispatches (see the evaluators' logs)`;
              await setEsRunStatus(db, runId, 'failed', reason);
              return { status: 'failed', generation: g, bestCheckpointId, reason };
            }
            const have = new Set(rows.map((r) => `${r.candidate}.${r.replica}`));
            const missing: Array<[number, number]> = [];
            // replica-major: jobs taken together by one evaluator share a replica's minibatch
            for (let r = 0; r < cfg.replicas; r++) for (let k = 0; k < cfg.lambda; k++) if (!have.has(`${k}.${r}`)) missing.push([k, r]);
            const reason = dispatches === 0 ? 'start' : latestFannedIn ? 'failed-children' : 'deadline';
            latest = `d${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
            latestFannedIn = false;
            const td = performance.now();
            const bytes = await dispatch(flow, { runId, generation: g, stateVersion: version, dispatch: latest, missing, attempts: cfg.attempts });
            timings.dispatch += performance.now() - td;
            dispatches++;
            lastDispatchAt = Date.now();
            opts.onDispatch?.({ runId, generation: g, dispatch: latest, jobs: missing.length, bytesPerJob: bytes, reason });
            if (reason !== 'start') log('re-dispatched missing evaluations', { generation: g, jobs: missing.length, reason, failures: failures.slice(0, 3).map((f) => `${f.code}: ${f.message}`) });
            failures = [];
            crash('fanout', g);
            continue;
          }
          await new Promise<void>((resolve) => {
            wake = resolve;
            void sleep(pollMs, opts.signal).then(resolve);
          });
          wake = undefined;
        }
      } finally {
        wakers.delete(waker);
      }

      // fan-in: mean fitness per candidate over its replicas (summed in replica order)
      crash('fanin', g);
      const tf = performance.now();
      const sums = new Array<number>(cfg.lambda).fill(0);
      for (const row of rows) if (row.candidate < cfg.lambda && row.replica < cfg.replicas) sums[row.candidate]! += row.fitness;
      const fitness = sums.map((s) => s / cfg.replicas);
      const sigma = es.sigma;
      es.tell(fitness);
      const best = es.best();
      let checkpoint: CheckpointRecord | undefined;
      if (best && best.generation === g) {
        checkpoint = esCheckpoint(sft, runId, g, best, cfg);
      }
      const record = {
        meanFitness: fitness.reduce((a, b) => a + b, 0) / fitness.length,
        bestFitness: Math.max(...fitness),
        medianFitness: median(fitness),
        bestSoFar: best?.fitness ?? Math.max(...fitness),
        sigma,
        sigmaAfter: es.sigma,
        evaluations: rows.length,
        dispatches,
        wallMs: Date.now() - started,
      };
      const stateAfter = es.state() as unknown as Record<string, unknown>;
      const tc = performance.now();
      timings.fanin = tc - tf;
      const completed = g + 1 >= cfg.generations;
      // the last generation also stores the search mean: the best candidate so far was scored on
      // its own generation's episodes only, so with noisy fitness the mean is the steadier result
      const meanCheckpoint = completed ? esCheckpoint(sft, runId, g, { x: es.mean(), fitness: null }, cfg, 'mean') : undefined;
      await commitEsGeneration(db, { runId, generation: g, stateAfter, record, ...(checkpoint && { checkpoint }), completed, ...(meanCheckpoint && { meanCheckpoint }) });
      if (checkpoint) bestCheckpointId = checkpoint.id;
      const end = performance.now();
      timings.commit = end - tc;
      const coordinatorMs = timings.load + timings.dispatch + timings.poll + timings.fanin + timings.commit;
      opts.onGeneration?.({ ...record, generation: g, committedAt: new Date(), runId, generations: cfg.generations, bestCheckpointId, coordinatorMs, timings, cycleMs: end - cycleStart });
      cycleStart = end;
      crash('commit', g);
    }
  } finally {
    await fanin.close().catch(() => {});
    await flow.close().catch(() => {});
  }
}

/** The checkpoint id of a completed run's final search mean. */
export const esMeanCheckpointId = (runId: string): string => `${runId}-mean`;

/**
 * A point of the search as a router checkpoint, the SFT checkpoint with theta replaced: the best
 * candidate so far (`<run>-best-g<g>`), or the final search mean (`<run>-mean`, fitness null).
 */
export function esCheckpoint(
  sft: CheckpointRecord,
  runId: string,
  generation: number,
  best: { x: Float64Array; fitness: number | null },
  cfg: EsRunConfig,
  kind: 'best' | 'mean' = 'best',
): CheckpointRecord {
  return {
    id: kind === 'best' ? `${runId}-best-g${generation}` : esMeanCheckpointId(runId),
    stage: 'es',
    backboneId: sft.backboneId,
    backbone: sft.backbone,
    workers: sft.workers,
    theta: Float32Array.from(best.x),
    thetaLayout: sft.thetaLayout,
    tau: sft.tau,
    training: { ...sft.training, esRun: runId, generation, task: cfg.task, lambda: cfg.lambda, sigma0: cfg.sigma0, replicas: cfg.replicas, seed: cfg.seed },
    metrics: { fitness: best.fitness, generation, kind },
    parentId: sft.id,
  };
}

async function dispatch(
  flow: FlowProducer,
  d: { runId: string; generation: number; stateVersion: string; dispatch: string; missing: Array<[number, number]>; attempts: number },
): Promise<number> {
  let bytes = 0;
  const children: FlowJob[] = d.missing.map(([k, r]) => {
    const data = parseJob(esEvalJobSchema, { v: 1, runId: d.runId, generation: d.generation, candidate: k, replica: r, stateVersion: d.stateVersion }, esEvalQueue);
    bytes = Math.max(bytes, esJobBytes(data));
    return {
      name: 'eval',
      queueName: esEvalQueue,
      data,
      opts: {
        jobId: esEvalJobId(d.runId, d.generation, k, r, d.dispatch),
        attempts: d.attempts,
        backoff: { type: 'exponential', delay: 1_000, jitter: 0.5 },
        // after the last attempt the parent goes on without this child (the coordinator re-dispatches)
        ignoreDependencyOnFailure: true,
        removeOnComplete: true,
        removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
      },
    };
  });
  const parent = parseJob(esFaninJobSchema, { v: 1, runId: d.runId, generation: d.generation, stateVersion: d.stateVersion, dispatch: d.dispatch }, esFaninQueue);
  await flow.add({
    name: 'fanin',
    queueName: esFaninQueue,
    data: parent,
    opts: { jobId: esFaninJobId(d.runId, d.generation, d.dispatch), removeOnComplete: { count: 1000 }, removeOnFail: { count: 1000 } },
    children,
  });
  return bytes;
}
