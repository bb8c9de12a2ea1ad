// The evaluation-batch driver (`fugu eval`): create (or resume) an evaluation run, stream its
// calls onto the provider queues, and follow it to the end, reporting progress to the caller.
// An abort (Ctrl-C in the CLI) pauses the run; `resume` goes on.
import { randomBytes } from 'node:crypto';
import { parseUsd, InputError } from '@fugu/core';
import {
  createRun, getDataset, getPoolWorkers, getRun, saveDataset, savePool, setEnqueued, setRunStatus, type RunRow, type StoredWorker,
} from '@fugu/db';
import { enqueueStream, parseJob, providerCallJobSchema, providerCallQueues } from '@fugu/queue';
import type { JobsOptions } from 'bullmq';
import type { Context } from './context.ts';
import { checkPoolAgainstDataset, poolContentHash, resolveDataset, resolveWorkerPool, selectWorkers } from './inputs.ts';
import { planCalls } from './plan.ts';

/** how long a provider worker may act on a stale run status (its cache TTL) */
const RUN_STATUS_TTL_MS = 1_000;

export type EvalOptions = {
  dataset?: string;
  pool?: string;
  workers?: string[];
  repetitions: number;
  sample: number | null;
  seed: number;
  spendCap: string | null;
  runId?: string;
  resume?: string;
  /** provider worker processes to start here; 'auto' starts some when no worker is connected */
  localWorkers: number | 'auto';
  keyCheck: boolean;
  /** follow the run until it ends (default); false returns after enqueueing */
  wait: boolean;
  /** seconds without progress, with nothing queued, before missing calls are enqueued again */
  stallSeconds?: number;
  log?: (line: string) => void;
  signal?: AbortSignal;
  /** shows the progress of a followed run (the CLI's bar); default: nothing */
  progress?: (run: { id: string; totalCalls: number }) => EvalProgress;
  /** starts `count` provider-worker processes for these provider queues (the CLI forks the
   * provider-worker app); needed when `localWorkers` is a number > 0 or resolves to one */
  startLocalWorkers?: (opts: { count: number; providers: string[]; onEvent: (msg: string) => void }) => Promise<LocalWorkers>;
};

export type EvalProgress = { update(done: number, failed: number, note?: string): void; stop(): void };
export type LocalWorkers = { count: number; logDir: string; stop(): Promise<void> };

export type EvalOutcome = { run: RunRow; interrupted: boolean; elapsedS: number };

const newRunId = (): string => `run_${new Date().toISOString().replace(/[-:T]/g, '').slice(0, 14)}_${randomBytes(3).toString('hex')}`;

export async function runEval(ctx: Context, opts: EvalOptions): Promise<EvalOutcome> {
  const log = opts.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const { config, db } = ctx;
  let run: RunRow;
  let workers: StoredWorker[];

  if (opts.resume) {
    const found = await getRun(db, opts.resume);
    if (!found) throw new InputError(`no evaluation run "${opts.resume}"`, { field: '--resume' });
    run = found;
    const all = await getPoolWorkers(db, run.poolId);
    const chosen = (run.options.workers as string[] | undefined) ?? all.map((w) => w.name);
    workers = all.filter((w) => chosen.includes(w.name));
    if (run.status === 'completed') {
      log(`run ${run.id} is already completed`);
      return { run, interrupted: false, elapsedS: 0 };
    }
    if (opts.spendCap !== null) await setRunStatus(db, run.id, run.status, { reason: run.statusReason, spendCap: opts.spendCap });
    const capped = opts.spendCap ?? run.spendCap;
    if (capped !== null && parseUsd(run.spent) >= parseUsd(capped)) {
      throw new InputError(`run ${run.id} has spent $${run.spent} of its $${capped} cap: give a higher --spend-cap to resume`, { field: '--spend-cap' });
    }
    await setRunStatus(db, run.id, 'running', { from: ['pending', 'running', 'paused', 'failed'] });
    log(`resuming run ${run.id}: ${run.doneCalls + run.failedCalls}/${run.totalCalls} calls recorded`);
  } else {
    if (!opts.dataset || !opts.pool) throw new InputError('give --dataset and --pool (or --resume <run>)', { field: '--dataset' });
    const dataset = await resolveDataset(opts.dataset, config.llmrouterDir);
    const pool = selectWorkers(await resolveWorkerPool(opts.pool, config.llmrouterDir), opts.workers);
    checkPoolAgainstDataset(pool, dataset, opts.keyCheck ? process.env : null);
    if (opts.repetitions < 1) throw new InputError('must be at least 1', { field: '--repetitions' });
    if (opts.sample !== null && opts.sample < 1) throw new InputError('must be at least 1', { field: '--sample' });
    const ds = await saveDataset(db, { name: dataset.name, source: dataset.source, contentHash: dataset.contentHash, items: dataset.items });
    const saved = await savePool(db, pool, poolContentHash(pool));
    workers = saved.workers;
    const itemCount = opts.sample === null ? dataset.items.length : Math.min(opts.sample, dataset.items.length);
    run = await createRun(db, {
      id: opts.runId ?? newRunId(),
      datasetId: ds.id,
      poolId: saved.poolId,
      repetitions: opts.repetitions,
      sampleSize: opts.sample,
      seed: opts.seed,
      itemCount,
      totalCalls: itemCount * workers.length * opts.repetitions,
      spendCap: opts.spendCap,
      options: { dataset: opts.dataset, pool: opts.pool, workers: workers.map((w) => w.name), datasetItems: dataset.items.length },
    });
    await setRunStatus(db, run.id, 'running', { from: ['pending'] });
    log(`run ${run.id}: ${dataset.name} (${itemCount} items) x ${workers.length} workers x ${opts.repetitions} repetitions = ${run.totalCalls} calls`);
  }

  const dataset = await getDataset(db, run.datasetId);
  const providers = [...new Set(workers.map((w) => w.provider))];
  // every shard of the run's providers' queues: what the workers consume and the stall check counts
  const queueNames = providers.flatMap((p) => providerCallQueues(p, config.providerQueueShards));

  let local: LocalWorkers | undefined;
  let count = opts.localWorkers;
  if (count === 'auto') {
    const connected = await Promise.all(queueNames.map((q) => ctx.queue(q).getWorkersCount()));
    count = connected.every((n) => n > 0) ? 0 : 2;
  }
  const started = Date.now();
  try {
    if (count > 0) {
      if (!opts.startLocalWorkers) throw new InputError('no way to start local provider workers here: start some, or give 0', { field: '--local-workers' });
      local = await opts.startLocalWorkers({ count, providers, onEvent: log });
      log(`started ${count} local provider worker(s); logs in ${local.logDir}`);
    }

    const jobOptions: JobsOptions = {
      attempts: config.worker.attempts,
      backoff: { type: 'exponential', delay: config.worker.backoffMs, jitter: 0.5 },
      removeOnComplete: true,
      removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
    };
    // enqueueing stops at the next chunk when the run is interrupted or stops running
    const stopEnqueue = new AbortController();
    opts.signal?.addEventListener('abort', () => stopEnqueue.abort(), { once: true });
    let enqueued = 0; // for the progress bar
    const enqueue = async (skipExisting: boolean): Promise<number> => {
      const jobs = planCalls({
        db, runId: run.id, datasetId: run.datasetId, itemCount: dataset!.item_count, sampleSize: run.sampleSize, seed: run.seed,
        workers, repetitions: run.repetitions, jobOptions, shards: config.providerQueueShards, skipExisting,
      });
      const validated = (async function* () {
        for await (const j of jobs) {
          parseJob(providerCallJobSchema, j.data, j.queue, j.opts?.jobId);
          yield j;
        }
      })();
      return enqueueStream((n) => ctx.queue(n), validated, { chunkSize: 1000, signal: stopEnqueue.signal, onChunk: (n) => { enqueued += n; } });
    };
    const enqueueAll = async (): Promise<void> => {
      // failed jobs keep their ids in Redis (so re-adding them would be ignored): drop this run's
      if (opts.resume) await removeFailedJobs(ctx, queueNames, run.id);
      const added = await enqueue(Boolean(opts.resume));
      await setEnqueued(db, run.id, added + (opts.resume ? run.doneCalls + run.failedCalls : 0));
      if (opts.resume && !stopEnqueue.signal.aborted) {
        // a worker that still saw the run as paused may have skipped a job whose id made our add
        // a no-op; once every worker sees `running` (status cache TTL), put such calls back
        await new Promise((r) => setTimeout(r, RUN_STATUS_TTL_MS * 2));
        await enqueue(true);
      }
    };
    if (!opts.wait) {
      await enqueueAll();
      return { run: (await getRun(db, run.id))!, interrupted: false, elapsedS: (Date.now() - started) / 1000 };
    }

    // workers start on the first chunk while the rest streams in; the bar shows both
    let enqueueDone = false;
    let enqueueError: unknown;
    const enqueuing = enqueueAll().then(
      () => { enqueueDone = true; },
      (e: unknown) => { enqueueError = e; enqueueDone = true; },
    );
    const progress = opts.progress?.({ id: run.id, totalCalls: run.totalCalls }) ?? { update() {}, stop() {} };
    let lastDone = -1;
    let lastChange = Date.now();
    let interrupted = false;
    try {
      for (;;) {
        if (enqueueError) throw enqueueError;
        if (opts.signal?.aborted) {
          interrupted = true;
          await setRunStatus(db, run.id, 'paused', { reason: `interrupted; resume with \`fugu eval --resume ${run.id}\``, from: ['running'] });
          break;
        }
        const cur = (await getRun(db, run.id))!;
        const done = cur.doneCalls + cur.failedCalls;
        progress.update(done, cur.failedCalls, enqueueDone ? '' : `(enqueued ${enqueued})`);
        if (cur.status !== 'running') break;
        if (done >= cur.totalCalls) {
          await setRunStatus(db, run.id, 'completed', { from: ['running'] });
          continue;
        }
        if (done !== lastDone || !enqueueDone) {
          lastDone = done;
          lastChange = Date.now();
        } else if (Date.now() - lastChange > (opts.stallSeconds ?? 15) * 1000) {
          // no progress: if nothing of the run is queued any more (a lost write, a flushed
          // Redis), put the missing calls back; the unique key keeps re-runs harmless
          const queued = await queuedJobs(ctx, queueNames).catch(() => undefined); // Redis away: ask again later
          if (queued === 0) {
            await removeFailedJobs(ctx, queueNames, run.id);
            const again = await enqueue(true);
            log(`no progress for ${opts.stallSeconds ?? 15}s and nothing queued: re-enqueued ${again} missing calls`);
          }
          lastChange = Date.now();
        }
        await new Promise((r) => setTimeout(r, 250));
      }
    } finally {
      progress.stop();
      stopEnqueue.abort();
      await enqueuing;
    }
    const final = (await getRun(db, run.id))!;
    if (final.status === 'paused' && final.statusReason) log(`run ${final.id} paused: ${final.statusReason}`);
    return { run: final, interrupted, elapsedS: (Date.now() - started) / 1000 };
  } finally {
    await local?.stop();
  }
}

async function queuedJobs(ctx: Context, queueNames: string[]): Promise<number> {
  const counts = await Promise.all(queueNames.map((q) => ctx.queue(q).getJobCounts('waiting', 'active', 'delayed', 'prioritized')));
  return counts.reduce((s, c) => s + Object.values(c).reduce((a, b) => a + b, 0), 0);
}

async function removeFailedJobs(ctx: Context, queueNames: string[], runId: string): Promise<void> {
  for (const name of queueNames) {
    const q = ctx.queue(name);
    let offset = 0;
    for (;;) {
      const jobs = await q.getFailed(offset, offset + 499);
      let removed = 0;
      for (const j of jobs) {
        if (j.id?.startsWith(`${runId}.`)) {
          await j.remove();
          removed++;
        }
      }
      offset += jobs.length - removed;
      if (jobs.length < 500) break;
    }
  }
}
