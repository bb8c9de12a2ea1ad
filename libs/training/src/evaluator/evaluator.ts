// The ES evaluator: a BullMQ worker on `es-eval`. A job is (run, generation, candidate k, replica,
// state hash); the evaluator loads the generation's optimiser state from Postgres (once per
// generation), regenerates candidate k (SepCmaEs.fromState(state).candidate(k)), evaluates it
// with the run's FitnessTask and writes the es_evaluations row (on conflict do nothing).
//
// Jobs of the same (run, generation, replica) that are in hand together (worker concurrency) are
// evaluated in ONE task.evaluate call: the task scores every candidate of the list on the same
// minibatch / episodes, and a candidate's result does not depend on the others in the list.
//
// Skipped (completed without a row): a job of a generation already committed or of another
// state (stale), one whose row exists (a re-dispatched duplicate: first result wins), a run that
// is not running. Errors (Postgres away, the task failing) are thrown: BullMQ retries the job.
// A thrown error travels as @fugu/core's WireError (WireFailure: the job's failedReason is the
// encoded WireError), so the coordinator reads its code and fields.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Worker, type Job } from 'bullmq';
import { decodeWireError, WireFailure } from '@fugu/core';
import { SepCmaEs, type SepCmaEsState } from '@fugu/es';
import { getEsRun, getEsState, recordedEsCandidates, recordEsEvaluations, type Db } from '@fugu/db';
import { esEvalJobSchema, esEvalQueue, parseJob, type EsEvalJob, type EsEvalResult, type RedisClient } from '@fugu/queue';
import { stateVersion, type EsRunConfig } from '../coordinator/run-config.ts';
import { createFitnessTask } from '../tasks/index.ts';
import type { FitnessTask, FitnessTaskOptions } from '../tasks/types.ts';
import { bullTelemetry } from '@fugu/telemetry';

export type EvaluatorOptions = {
  db: Db;
  /** a worker connection (maxRetriesPerRequest: null) */
  connection: RedisClient;
  prefix: string;
  /** FUGU_HOME (the fitness task caches the backbone's SVD there) */
  home: string;
  /** jobs in hand at once; jobs of one (generation, replica) among them are evaluated together */
  concurrency?: number;
  /** BullMQ job lock: a killed evaluator's jobs come back after about this long */
  lockDurationMs?: number;
  /** how long the first job of a batch waits for others (ms) */
  batchWaitMs?: number;
  id?: string;
  log?: (msg: string, extra?: Record<string, unknown>) => void;
  /** the fitness task of a run (default createFitnessTask) */
  createTask?: (o: FitnessTaskOptions) => Promise<FitnessTask>;
  taskOptions?: Pick<FitnessTaskOptions, 'executionProvider' | 'threads'>;
  /** test hook (FUGU_ES_EVAL_HANG_AT): jobs of this generation are taken and never finished, so a
   *  kill -9 finds them in hand */
  hangAt?: number;
};

export type EvaluatorStats = { evaluated: number; skipped: number; batches: number; evalMs: number };

export type EvaluatorHandle = {
  id: string;
  stats(): EvaluatorStats;
  close(deadline?: number): Promise<void>;
};

type Generation = { es: SepCmaEs; version: string; cfg: EsRunConfig; task: FitnessTask } | { stale: true };
/** resolved with the fitness, or null when the evaluation was recorded already (a duplicate) */
type Pending = { candidate: number; job: EsEvalJob; resolve: (f: number | null) => void; reject: (e: unknown) => void };

export async function startEvaluator(opts: EvaluatorOptions): Promise<EvaluatorHandle> {
  const { db } = opts;
  const id = opts.id ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  const log = opts.log ?? (() => {});
  const makeTask = opts.createTask ?? createFitnessTask;
  const stats: EvaluatorStats = { evaluated: 0, skipped: 0, batches: 0, evalMs: 0 };

  // one fitness task per run (loaded once), one optimiser per (run, generation)
  const tasks = new Map<string, Promise<{ task: FitnessTask; cfg: EsRunConfig }>>();
  const generations = new Map<string, Promise<Generation>>();
  const taskOf = (runId: string): Promise<{ task: FitnessTask; cfg: EsRunConfig }> => {
    let t = tasks.get(runId);
    if (!t) {
      t = (async () => {
        const run = await getEsRun(db, runId);
        if (!run) throw new Error(`no ES run ${runId}`);
        const cfg = run.config as unknown as EsRunConfig;
        const task = await makeTask({
          db, home: opts.home, checkpointId: run.checkpointId, spec: cfg.task,
          ...(cfg.evalRun !== undefined && { run: cfg.evalRun }),
          ...(cfg.splitSeed !== undefined && { splitSeed: cfg.splitSeed }),
          ...opts.taskOptions,
        });
        return { task, cfg };
      })();
      t.catch(() => tasks.delete(runId));
      tasks.set(runId, t);
    }
    return t;
  };
  const generationOf = (job: EsEvalJob): Promise<Generation> => {
    const key = `${job.runId}/${job.generation}`;
    let g = generations.get(key);
    if (!g) {
      g = (async (): Promise<Generation> => {
        const cur = await getEsState(db, job.runId);
        if (!cur || cur.generation !== job.generation || cur.status !== 'running') return { stale: true };
        const { task, cfg } = await taskOf(job.runId);
        return { es: SepCmaEs.fromState(cur.state as unknown as SepCmaEsState), version: stateVersion(cur.state), cfg, task };
      })();
      g.then((x) => { if ('stale' in x) generations.delete(key); }, () => generations.delete(key));
      generations.set(key, g);
      // keep the last few generations only
      for (const k of generations.keys()) if (generations.size > 8) generations.delete(k);
    }
    return g;
  };

  // micro-batches: jobs of one (run, generation, replica) in hand together
  const pending = new Map<string, Pending[]>();
  let chain: Promise<void> = Promise.resolve();
  // A batch is taken when its turn comes (evaluations run one at a time: they are CPU-bound), so
  // jobs that arrive while another batch is being evaluated join the next one.
  const runBatch = async (key: string, gen: Extract<Generation, { es: SepCmaEs }>): Promise<void> => {
    const all = pending.get(key);
    pending.delete(key);
    if (!all?.length) return;
    const job = all[0]!.job;
    try {
      // a duplicate (re-dispatched, or a stalled job another evaluator finished) is skipped: one
      // query for the whole batch rather than one a job
      const done = await recordedEsCandidates(db, job.runId, job.generation, job.replica, all.map((p) => p.candidate));
      for (const p of all) if (done.has(p.candidate)) p.resolve(null);
      stats.skipped += done.size;
      const batch = all.filter((p) => !done.has(p.candidate));
      if (batch.length === 0) return;
      const t0 = performance.now();
      const thetas = batch.map((p) => Float32Array.from(gen.es.candidate(p.candidate)));
      const results = await gen.task.evaluate(thetas, { seed: gen.cfg.seed, generation: job.generation, replica: job.replica, split: 'train' });
      const ms = performance.now() - t0;
      await recordEsEvaluations(
        db,
        batch.map((p, i) => ({
          runId: job.runId, generation: job.generation, candidate: p.candidate, replica: job.replica, fitness: results[i]!.fitness,
          seed: `${gen.cfg.seed}/${job.generation}/${job.replica}/train`, summary: results[i]!.summary, evaluator: id, evalMs: ms / batch.length,
        })),
      );
      stats.batches++;
      stats.evaluated += batch.length;
      stats.evalMs += ms;
      batch.forEach((p, i) => p.resolve(results[i]!.fitness));
    } catch (e) {
      for (const p of all) p.reject(e);
    }
  };
  const flush = (key: string, gen: Extract<Generation, { es: SepCmaEs }>): void => {
    chain = chain.then(() => runBatch(key, gen));
  };

  const concurrency = opts.concurrency ?? 8;
  const batchWaitMs = opts.batchWaitMs ?? 5;
  const evaluateJob = async (j: Job): Promise<EsEvalResult> => {
    const job = parseJob(esEvalJobSchema, j.data, esEvalQueue, j.id);
    if (opts.hangAt === job.generation) await new Promise(() => {});
    const gen = await generationOf(job);
    if ('stale' in gen || gen.version !== job.stateVersion) {
      stats.skipped++;
      return { outcome: 'skipped', reason: 'stale' };
    }
    if (job.candidate >= gen.cfg.lambda || job.replica >= gen.cfg.replicas) throw new Error(`job ${j.id}: candidate or replica out of range`);
    const key = `${job.runId}/${job.generation}/${job.replica}`;
    const fitness = await new Promise<number | null>((resolve, reject) => {
      let list = pending.get(key);
      if (!list) {
        pending.set(key, (list = []));
        setTimeout(() => flush(key, gen), batchWaitMs);
      }
      list.push({ candidate: job.candidate, job, resolve, reject });
      if (list.length >= concurrency) flush(key, gen);
    });
    return fitness === null ? { outcome: 'skipped', reason: 'duplicate' } : { outcome: 'recorded', fitness };
  };
  const processor = async (j: Job): Promise<EsEvalResult> => {
    try {
      return await evaluateJob(j);
    } catch (e) {
      throw new WireFailure(e);
    }
  };

  const lockDuration = opts.lockDurationMs ?? 30_000;
  const worker = new Worker(esEvalQueue, processor, {
    ...bullTelemetry(),
    connection: opts.connection,
    prefix: opts.prefix,
    concurrency,
    lockDuration,
    stalledInterval: lockDuration,
    maxStalledCount: 3,
  });
  worker.on('error', (e) => log('es-eval worker error', { err: e.message }));
  worker.on('failed', (j, e) => {
    const w = decodeWireError(e.message);
    log('evaluation failed', { job: j?.id, attempt: j?.attemptsMade, code: w.code, err: w.message });
  });
  await worker.waitUntilReady();

  return {
    id,
    stats: () => ({ ...stats }),
    async close(deadline?: number) {
      if (deadline === undefined) await worker.close();
      else await Promise.race([worker.close(), new Promise((r) => setTimeout(r, Math.max(0, deadline - Date.now())).unref())]);
      if (worker.isRunning()) await worker.close(true).catch(() => {});
      await chain.catch(() => {});
      for (const t of tasks.values()) await t.then((x) => x.task.release(), () => {}).catch(() => {});
    },
  };
}
