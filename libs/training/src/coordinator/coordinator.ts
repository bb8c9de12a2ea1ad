// The ES coordinator: drives one run generation by generation on the staged loop (loop.ts),
// with the ES driver (es-driver.ts) plugged in. Postgres is the truth, Redis only carries work:
//
//   state_g (es_runs.state) --fan-out--> one BullMQ flow: children = (candidate k, replica r)
//   evaluation jobs on `es-eval` (ids + a state hash, never vectors), parent = a fan-in job on
//   `es-fanin` that this process consumes --> every (k, r) has its es_evaluations row
//   --> tell(mean fitness over replicas per candidate) --> ONE transaction: es_runs.state_{g+1},
//   the es_generations record, the best-so-far router checkpoint.
//
// A failing child: `attempts` tries with exponential backoff, then it is dropped from its parent's
// dependencies (ignoreDependencyOnFailure), so the parent is still released and a generation
// never hangs in waiting-children. The fan-in (or the poll) finds the missing rows and the loop
// dispatches them again as a new flow; so does the generation's deadline for stragglers.
// Evaluations are keyed (run, generation, candidate, replica): the first result wins and a
// duplicate inserts nothing. Evaluations are deterministic, so which copy wins does not matter.
//
// Resume after kill -9 anywhere: the loop re-reads the state from Postgres, skips what is already
// recorded and dispatches only the missing evaluations; every generation (interrupted or not)
// reads its state back from Postgres, so a resumed run computes exactly what an uninterrupted one
// does.
import { InputError } from '@fugu/core';
import { getCheckpoint, getEsRun, setEsRunStatus, type Db, type EsGenerationRecord } from '@fugu/db';
import type { EsEvalJob, RedisClient } from '@fugu/queue';
import { EsDriver } from './es-driver.ts';

export { esCheckpoint, esMeanCheckpointId } from './es-driver.ts';
import { jobBytes, runStagedLoop, type CrashPoint, type LoopTimings } from './loop.ts';
import { esCodeVersion, type EsRunConfig } from './run-config.ts';

/** Test hook (FUGU_ES_CRASH_AT=point:generation): the process kills itself with SIGKILL there. */
export type { CrashPoint } from './loop.ts';

/** Where the coordinator's own time went in a generation (ms; waiting for evaluations excluded):
 *  load = read the state and hash it, dispatch = add the flow(s), poll = count rows while waiting,
 *  fanin = read the rows, tell, build the checkpoint, commit = the transaction. */
export type CoordinatorTimings = LoopTimings;
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
  connection: RedisClient;
  workerConnection: RedisClient;
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

/** Bytes of one evaluation job's payload (JSON), as BullMQ stores it. */
export const esJobBytes = (job: EsEvalJob): number => jobBytes(job);

export async function runCoordinator(opts: CoordinatorOptions): Promise<CoordinatorResult> {
  const { db, runId } = opts;
  const run = await getEsRun(db, runId);
  if (!run) throw new InputError(`no ES run "${runId}"`, { field: 'run' });
  if (opts.checkCodeVersion !== false && run.codeVersion !== esCodeVersion())
    throw new InputError(`run ${runId} was started by code version ${run.codeVersion}, this is ${esCodeVersion()}: resume it with the code that started it`, { field: 'code_version' });
  const cfg = run.config as unknown as EsRunConfig;
  if (run.status === 'completed') return { status: 'completed', generation: run.generation, bestCheckpointId: run.bestCheckpointId };
  if (run.status !== 'running') await setEsRunStatus(db, runId, 'running');
  const sft = await getCheckpoint(db, run.checkpointId);
  if (!sft) throw new InputError(`the run's checkpoint ${run.checkpointId} is gone`, { field: 'checkpoint' });

  const driver = new EsDriver({ db, runId, cfg, sft, bestCheckpointId: run.bestCheckpointId });
  const r = await runStagedLoop(driver, {
    connection: opts.connection,
    workerConnection: opts.workerConnection,
    prefix: opts.prefix,
    ...(opts.pollMs !== undefined && { pollMs: opts.pollMs }),
    ...(opts.maxDispatches !== undefined && { maxDispatches: opts.maxDispatches }),
    ...(opts.signal && { signal: opts.signal }),
    ...(opts.log && { log: opts.log }),
    ...(opts.crashAt && { crashAt: { point: opts.crashAt.point, iteration: opts.crashAt.generation } }),
    names: { iteration: 'generation', jobs: 'evaluations' },
    onDispatch: (d) => opts.onDispatch?.({ runId, generation: d.index, dispatch: d.dispatch, jobs: d.jobs, bytesPerJob: d.bytesPerJob, reason: d.reason }),
    onProgress: (p) => opts.onProgress?.({ generation: p.index, done: p.done, total: p.total }),
    onIteration: (e) =>
      opts.onGeneration?.({
        ...e.update.record, generation: e.index, committedAt: new Date(), runId, generations: cfg.generations,
        bestCheckpointId: driver.bestCheckpointId, coordinatorMs: e.coordinatorMs, timings: e.timings, cycleMs: e.cycleMs,
      }),
  });
  return { status: r.status, generation: driver.position, bestCheckpointId: driver.bestCheckpointId, ...(r.reason !== undefined && { reason: r.reason }) };
}
