// The Conductor's evaluation-batch driver (`fugu ultra eval`), mirroring `runEval`: resolve the
// dataset and pool, check the conductor specs, pick the items (the router's split by unique
// prompt, then a seeded sample), create (or resume) a `conductor_runs` row, submit one workflow
// per (item, spec, repeat) in chunks, and follow the run to the end. An abort (Ctrl-C) pauses it;
// `resume` goes on (workflow keys make re-submission harmless).
import { randomBytes } from 'node:crypto';
import { InputError, type DatasetItem, type ProviderKind } from '@fugu/core';
import { checkConductorSpec, parseConductorSpecs, resolveMaxSteps, rewardConfig, validateReplayConfig, type ConductorSpec, type ReplayConfig, type RewardConfig } from '@fugu/conductor';
import { splitByPrompt } from '@fugu/datasets';
import {
  conductorCheckpointWorkers, conductorRunProgress, createConductorRun, getCheckpoint, getConductorRun, getDatasetItems, getPoolWorkers,
  saveDataset, savePool, setConductorRunStatus, type ConductorRunProgress, type ConductorRunRow, type Db, type StoredItem, type StoredWorker,
} from '@fugu/db';
import { checkPoolAgainstDataset, poolContentHash, resolveDataset, resolveWorkerPool, sampleIndices, type Context, type LocalWorkers } from '@fugu/evaluation';
import { conductQueue, providerCallQueue } from '@fugu/queue';
import { SPLIT_FRACTIONS } from '@fugu/training';
import { submitWorkflows, type NewWorkflow, type WorkflowOptions } from '../engine/index.ts';

export const ULTRA_SPLITS = ['train', 'val', 'test', 'all'] as const;
export type UltraSplit = (typeof ULTRA_SPLITS)[number];

export type UltraEvalOptions = {
  dataset?: string;
  pool?: string;
  /** a comma list of conductor specs */
  conductor?: string;
  split: UltraSplit;
  /** seed of the split by unique prompt (the router's default: 0) */
  splitSeed: number;
  sample: number | null;
  seed: number;
  repeats: number;
  maxSteps: number;
  maxUsd: string | null;
  maxTokensPerStep: number | null;
  reward?: Partial<RewardConfig>;
  replay?: ReplayConfig;
  runId?: string;
  resume?: string;
  localConductors: number | 'auto';
  localWorkers: number | 'auto';
  keyCheck: boolean;
  /** follow the run until it ends (default); false returns after submitting */
  wait: boolean;
  /** seconds without progress, with nothing queued, before unfinished workflows are submitted again */
  stallSeconds?: number;
  chunkSize?: number;
  log?: (line: string) => void;
  signal?: AbortSignal;
  progress?: (run: { id: string; total: number; specs: string[] }) => UltraProgress;
  startLocalWorkers?: (opts: { count: number; providers: string[]; onEvent: (msg: string) => void }) => Promise<LocalWorkers>;
  startLocalConductors?: (opts: { count: number; onEvent: (msg: string) => void }) => Promise<LocalWorkers>;
};

export type UltraProgress = { update(p: ConductorRunProgress, note?: string): void; stop(): void };
export type UltraEvalOutcome = { run: ConductorRunRow; interrupted: boolean; elapsedS: number };

/** What a run stores in `conductor_runs.options` (and hands each workflow: `workflow`). */
export type UltraRunOptions = {
  dataset: string; pool: string; split: UltraSplit; splitSeed: number; sample: number | null; seed: number; repeats: number;
  items: number; workflow: WorkflowOptions;
};

const newRunId = (): string => `ultra_${new Date().toISOString().replace(/[-:T]/g, '').slice(0, 14)}_${randomBytes(3).toString('hex')}`;

/** Runs `fn`; an InputError it throws is thrown again naming `flag` as its field. */
export function asFlag<T>(flag: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (e instanceof InputError) throw new InputError(e.message.replace(/^field [^:]+: /, ''), { field: flag }, { cause: e });
    throw e;
  }
}

/** The conductor specs of `--conductor`, parsed and checked against the pool (InputError naming --conductor). */
export function checkSpecs(text: string | undefined, workers: readonly string[], maxSteps: number, endpoints: readonly string[] = []): ConductorSpec[] {
  if (text === undefined) throw new InputError('give one or more conductor specs', { field: '--conductor' });
  const specs = asFlag('--conductor', () => parseConductorSpecs(text));
  for (const s of specs) asFlag('--conductor', () => checkConductorSpec(s, { workers, maxSteps, endpoints }));
  return specs;
}

/** Checkpoints the specs name must exist (and a policy's must choose from this pool). */
export async function checkSpecCheckpoints(db: Db, specs: readonly ConductorSpec[], workers: readonly string[]): Promise<void> {
  for (const s of specs) {
    if (s.kind === 'policy') {
      const w = await conductorCheckpointWorkers(db, s.checkpoint);
      if (!w) throw new InputError(`conductor spec "${s.spec}": no Conductor policy checkpoint "${s.checkpoint}"`, { field: '--conductor' });
      if (w.length !== workers.length || w.some((n, i) => n !== workers[i])) {
        throw new InputError(`conductor spec "${s.spec}": checkpoint ${s.checkpoint} chooses from [${w.join(', ')}] but the pool has [${workers.join(', ')}]`, { field: '--conductor' });
      }
    } else if (s.kind === 'fixed' && s.topology === 'router') {
      if (!(await getCheckpoint(db, s.checkpoint))) throw new InputError(`conductor spec "${s.spec}": no router checkpoint "${s.checkpoint}"`, { field: '--conductor' });
    }
  }
}

/** The numeric options, checked; each error names its flag. */
export function checkUltraNumbers(o: Pick<UltraEvalOptions, 'repeats' | 'sample' | 'maxSteps' | 'maxTokensPerStep' | 'split'>): void {
  if (!Number.isInteger(o.repeats) || o.repeats < 1) throw new InputError(`must be a whole number >= 1, got ${o.repeats}`, { field: '--repeats' });
  if (o.sample !== null && o.sample < 1) throw new InputError(`must be at least 1, got ${o.sample}`, { field: '--sample' });
  asFlag('--max-steps', () => resolveMaxSteps(o.maxSteps));
  if (o.maxTokensPerStep !== null && o.maxTokensPerStep < 1) throw new InputError(`must be at least 1, got ${o.maxTokensPerStep}`, { field: '--max-tokens-per-step' });
  if (!(ULTRA_SPLITS as readonly string[]).includes(o.split)) throw new InputError(`must be ${ULTRA_SPLITS.join(', ')}, got "${o.split}"`, { field: '--split' });
}

/** Item indices (dataset order) of a split by unique prompt: the router's split (SPLIT_FRACTIONS, same seed). */
export function splitItems(items: ReadonlyArray<Pick<DatasetItem, 'id' | 'prompt'>>, split: UltraSplit, splitSeed: number): number[] {
  if (split === 'all') return items.map((_, i) => i);
  const by = splitByPrompt(items, { seed: splitSeed, fractions: { ...SPLIT_FRACTIONS } });
  return items.flatMap((it, i) => (by.get(it.id) === split ? [i] : []));
}

/** Each worker's mean recorded score over the given items and how many it averages (0 items: no record). */
export function workerMeans(workers: readonly string[], items: ReadonlyArray<Pick<DatasetItem, 'recorded'>>): Array<{ worker: string; mean: number; items: number }> {
  return workers.map((worker) => {
    let sum = 0;
    let n = 0;
    for (const it of items) {
      const r = it.recorded?.[worker];
      if (r && Number.isFinite(r.score)) {
        sum += r.score;
        n++;
      }
    }
    return { worker, mean: n > 0 ? sum / n : Number.NEGATIVE_INFINITY, items: n };
  });
}

/** Workers by mean recorded score over the given items, best first (ties and workers without records: pool order). */
export function rankWorkers(workers: readonly string[], items: ReadonlyArray<Pick<DatasetItem, 'recorded'>>): string[] {
  return workerMeans(workers, items).map((m, i) => ({ ...m, i })).sort((a, b) => b.mean - a.mean || a.i - b.i).map((x) => x.worker);
}

/** Workers by mean recorded score on the train part of the router's split (what the fixed topologies and a policy's initialisation rank by). */
export function trainSplitRanking(workers: readonly string[], items: ReadonlyArray<Pick<DatasetItem, 'id' | 'prompt' | 'recorded'>>, splitSeed: number): string[] {
  return rankWorkers(workers, splitItems(items, 'train', splitSeed).map((i) => items[i]!));
}

/** The run's items: the split, then a seeded sample of it (stable for a seed). */
export function runItems(items: readonly StoredItem[], o: Pick<UltraRunOptions, 'split' | 'splitSeed' | 'sample' | 'seed'>): StoredItem[] {
  const idx = splitItems(items, o.split, o.splitSeed);
  const chosen = o.sample !== null && o.sample < idx.length ? sampleIndices(idx.length, o.sample, o.seed).map((j) => idx[j]!) : idx;
  return chosen.map((i) => items[i]!);
}

/** The workflows of a run, in submission order: item, spec, repeat. Seed = run seed + repeat. */
export function planWorkflows(run: Pick<ConductorRunRow, 'id' | 'poolId' | 'specs'>, o: Pick<UltraRunOptions, 'seed' | 'repeats' | 'workflow'>, items: readonly StoredItem[]): NewWorkflow[] {
  const out: NewWorkflow[] = [];
  for (const it of items) {
    run.specs.forEach((spec, s) => {
      for (let r = 0; r < o.repeats; r++) {
        out.push({ key: `${run.id}.${it.dbId}.${s}.${r}`, runId: run.id, itemId: it.dbId, poolId: run.poolId, question: it.prompt, conductor: spec, seed: o.seed + r, repeat: r, options: o.workflow });
      }
    });
  }
  return out;
}

export async function runUltraEval(ctx: Context, opts: UltraEvalOptions): Promise<UltraEvalOutcome> {
  const log = opts.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const { config, db } = ctx;
  let run: ConductorRunRow;
  let workers: StoredWorker[];

  if (opts.resume) {
    const found = await getConductorRun(db, opts.resume);
    if (!found) throw new InputError(`no conductor run "${opts.resume}"`, { field: '--resume' });
    run = found;
    workers = await getPoolWorkers(db, run.poolId);
    if (run.status === 'completed') {
      log(`run ${run.id} is already completed`);
      return { run, interrupted: false, elapsedS: 0 };
    }
    await setConductorRunStatus(db, run.id, 'running', { from: ['pending', 'running', 'paused', 'failed'] });
    const p = await conductorRunProgress(db, run.id);
    log(`resuming conductor run ${run.id}: ${p.counts.done + p.counts.failed}/${run.total} workflows finished`);
  } else {
    if (!opts.dataset) throw new InputError('give --dataset (or --resume <run>)', { field: '--dataset' });
    if (!opts.pool) throw new InputError('give --pool (or --resume <run>)', { field: '--pool' });
    checkUltraNumbers(opts);
    const pool = await resolveWorkerPool(opts.pool, config.llmrouterDir);
    const names = pool.workers.map((w) => w.name);
    const specs = checkSpecs(opts.conductor, names, opts.maxSteps, config.conductor.endpoints.map((e) => e.name));
    const reward = opts.reward ? asFlag('--reward', () => rewardConfig(opts.reward)) : undefined;
    const replay = opts.replay ? asFlag('--replay', () => validateReplayConfig(opts.replay)) : undefined;
    const dataset = await resolveDataset(opts.dataset, config.llmrouterDir);
    checkPoolAgainstDataset(pool, dataset, opts.keyCheck ? process.env : null);
    await checkSpecCheckpoints(db, specs, names);
    const ds = await saveDataset(db, { name: dataset.name, source: dataset.source, contentHash: dataset.contentHash, items: dataset.items });
    const saved = await savePool(db, pool, poolContentHash(pool));
    workers = saved.workers;
    const stored = await getDatasetItems(db, ds.id);
    const ranking = trainSplitRanking(names, stored, opts.splitSeed);
    const base = { split: opts.split, splitSeed: opts.splitSeed, sample: opts.sample, seed: opts.seed };
    const items = runItems(stored, base);
    if (items.length === 0) throw new InputError(`the ${opts.split} split of dataset "${dataset.name}" has no items`, { field: '--split' });
    const workflow: WorkflowOptions = {
      maxSteps: opts.maxSteps, ranking,
      ...(opts.maxTokensPerStep !== null && { maxTokensPerStep: opts.maxTokensPerStep }),
      ...(opts.maxUsd !== null && { maxUsd: opts.maxUsd }),
      ...(reward && { reward }),
      ...(replay && { replay }),
    };
    const options: UltraRunOptions = { dataset: opts.dataset, pool: opts.pool, ...base, repeats: opts.repeats, items: items.length, workflow };
    run = await createConductorRun(db, {
      id: opts.runId ?? newRunId(), datasetId: ds.id, poolId: saved.poolId, specs: specs.map((s) => s.spec), options, total: items.length * specs.length * opts.repeats,
    });
    await setConductorRunStatus(db, run.id, 'running', { from: ['pending'] });
    log(`conductor run ${run.id}: ${dataset.name} ${opts.split} split (${items.length} items) x ${specs.length} conductor(s) x ${opts.repeats} repeat(s) = ${run.total} workflows`);
  }

  const o = run.options as UltraRunOptions;
  const rows = planWorkflows(run, o, runItems(await getDatasetItems(db, run.datasetId!), o));
  const providers = [...new Set(workers.map((w) => w.provider))];
  const started = Date.now();
  // a failure from here on (no local processes, the queue away) leaves the run paused and resumable
  const pauseOnError = async (e: unknown): Promise<never> => {
    await setConductorRunStatus(db, run.id, 'paused', { reason: `stopped by an error: ${(e as Error).message}; resume with \`fugu ultra eval --resume ${run.id}\``, from: ['running'] }).catch(() => {});
    throw e;
  };
  const locals = await startLocals(ctx, { ...opts, providers, log }).catch(pauseOnError);
  try {
    const submitDeps = { db, queue: (n: string) => ctx.queue(n), endpoints: config.conductor.endpoints.map((e) => e.name) };
    const chunk = opts.chunkSize ?? 500;
    let submitted = 0;
    const submitAll = async (): Promise<void> => {
      for (let i = 0; i < rows.length && !opts.signal?.aborted; i += chunk) {
        await submitWorkflows(submitDeps, rows.slice(i, i + chunk));
        submitted = Math.min(rows.length, i + chunk);
      }
    };
    if (!opts.wait) {
      await submitAll();
      return { run: (await getConductorRun(db, run.id))!, interrupted: false, elapsedS: (Date.now() - started) / 1000 };
    }

    let submitDone = false;
    let submitError: unknown;
    const submitting = submitAll().then(() => { submitDone = true; }, (e: unknown) => { submitError = e; submitDone = true; });
    const progress = opts.progress?.({ id: run.id, total: run.total, specs: run.specs }) ?? { update() {}, stop() {} };
    const stallS = opts.stallSeconds ?? 15;
    let lastFinished = -1;
    let lastChange = Date.now();
    let interrupted = false;
    try {
      for (;;) {
        if (submitError) throw submitError;
        if (opts.signal?.aborted) {
          interrupted = true;
          await setConductorRunStatus(db, run.id, 'paused', { reason: `interrupted; resume with \`fugu ultra eval --resume ${run.id}\``, from: ['running'] });
          break;
        }
        const cur = (await getConductorRun(db, run.id))!;
        const p = await conductorRunProgress(db, run.id);
        const finished = p.counts.done + p.counts.failed;
        progress.update(p, submitDone ? '' : `(submitted ${submitted})`);
        if (cur.status !== 'running') break;
        if (submitDone && finished >= cur.total) {
          await setConductorRunStatus(db, run.id, 'completed', { from: ['running'] });
          continue;
        }
        if (finished !== lastFinished || !submitDone) {
          lastFinished = finished;
          lastChange = Date.now();
        } else if (Date.now() - lastChange > stallS * 1000) {
          // no progress and nothing queued (a lost job, a flushed Redis): submit the unfinished
          // workflows again; their keys keep this harmless
          const counts = await ctx.queue(conductQueue).getJobCounts('waiting', 'active', 'delayed', 'prioritized').catch(() => undefined);
          if (counts && Object.values(counts).every((n) => n === 0)) {
            const again = await submitWorkflows(submitDeps, rows);
            log(`no progress for ${stallS}s and nothing queued: submitted again, ${again.enqueued} conduct job(s) enqueued`);
          }
          lastChange = Date.now();
        }
        await new Promise((r) => setTimeout(r, 250));
      }
    } finally {
      progress.stop();
      await submitting;
    }
    const final = (await getConductorRun(db, run.id))!;
    if (final.status === 'paused' && final.statusReason) log(`run ${final.id} paused: ${final.statusReason}`);
    return { run: final, interrupted, elapsedS: (Date.now() - started) / 1000 };
  } catch (e) {
    return await pauseOnError(e);
  } finally {
    for (const l of locals.reverse()) await l.stop();
  }
}

/**
 * Starts the local provider workers and conductor processes asked for ('auto': 2 of a kind when
 * none is connected to its queue), workers first; returns them, to stop in reverse order.
 */
export async function startLocals(
  ctx: Context,
  o: Pick<UltraEvalOptions, 'localConductors' | 'localWorkers' | 'startLocalConductors' | 'startLocalWorkers'> & { providers: ProviderKind[]; log: (l: string) => void },
): Promise<LocalWorkers[]> {
  const locals: LocalWorkers[] = [];
  try {
    // provider workers first: conductors wait on their answers, and the stop is in reverse order,
    // so conductors drain their workflows while the workers still answer
    let nw = o.localWorkers;
    if (nw === 'auto') {
      const connected = await Promise.all(o.providers.map((p) => ctx.queue(providerCallQueue(p)).getWorkersCount()));
      nw = connected.every((n) => n > 0) ? 0 : 2;
    }
    if (nw > 0) {
      if (!o.startLocalWorkers) throw new InputError('no way to start local provider workers here: start some, or give 0', { field: '--local-workers' });
      const l = await o.startLocalWorkers({ count: nw, providers: o.providers, onEvent: o.log });
      locals.push(l);
      o.log(`started ${nw} local provider worker(s); logs in ${l.logDir}`);
    }
    let nc = o.localConductors;
    if (nc === 'auto') nc = (await ctx.queue(conductQueue).getWorkersCount()) > 0 ? 0 : 2;
    if (nc > 0) {
      if (!o.startLocalConductors) throw new InputError('no way to start local conductor processes here: start some, or give 0', { field: '--local-conductors' });
      const l = await o.startLocalConductors({ count: nc, onEvent: o.log });
      locals.push(l);
      o.log(`started ${nc} local conductor process(es); logs in ${l.logDir}`);
    }
    return locals;
  } catch (e) {
    for (const l of locals.reverse()) await l.stop();
    throw e;
  }
}
