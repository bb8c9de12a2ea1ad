// The Conductor's evaluation-batch driver (`fugu ultra eval`), mirroring `runEval`: resolve the
// dataset and pool, check the conductor specs, pick the items (the router's split, by unique
// prompt or the dataset's own: the scheme of the specs' checkpoints, another refused; then a
// seeded sample), create (or resume) a `conductor_runs` row, submit one workflow
// per (item, spec, repeat) in chunks, and follow the run to the end. An abort (Ctrl-C) pauses it;
// `resume` goes on (workflow keys make re-submission harmless). The options and their checks are
// in options.ts, the split and ranking in ../split.ts, the local processes in ../locals.ts.
import { randomBytes } from 'node:crypto';
import { InputError } from '@fugu/core';
import { checkConductorSpec, rewardConfig, validateReplayConfig } from '@fugu/conductor';
import {
  conductorRunProgress, createConductorRun, getConductorRun, getDatasetItems, getPoolWorkers,
  saveDataset, savePool, setConductorRunStatus, type ConductorRunRow, type StoredItem, type StoredWorker,
} from '@fugu/db';
import { checkPoolAgainstDataset, poolContentHash, resolveDataset, resolveWorkerPool, type Context } from '@fugu/evaluation';
import { conductQueue } from '@fugu/queue';
import { resolveSplitScheme, splitLabel } from '@fugu/datasets';
import { type WorkflowOptions, submitWorkflows, type NewWorkflow, asFlag, checkSpecCheckpoints, checkSpecs, specsSplitMade, trainSplitRanking } from '@fugu/ultra';
import { runItems } from '../run-items.ts';
import { startLocals } from '../locals.ts';
import { checkUltraNumbers, type UltraEvalOptions, type UltraEvalOutcome, type UltraRunOptions } from './options.ts';

const newRunId = (): string => `ultra_${new Date().toISOString().replace(/[-:T]/g, '').slice(0, 14)}_${randomBytes(3).toString('hex')}`;

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
    const allowed = opts.workers !== undefined ? restrictedPool(opts.workers, names) : undefined;
    const specs = checkSpecs(opts.conductor, names, opts.maxSteps, config.conductor.endpoints.map((e) => e.name));
    // fixed topologies must fit in the restricted pool (an llm: writer may be any pool worker or endpoint)
    if (allowed) for (const s of specs) if (s.kind === 'fixed') asFlag('--conductor', () => checkConductorSpec(s, { workers: allowed, maxSteps: opts.maxSteps }));
    const reward = opts.reward ? asFlag('--reward', () => rewardConfig(opts.reward)) : undefined;
    const replay = opts.replay ? asFlag('--replay', () => validateReplayConfig(opts.replay)) : undefined;
    const dataset = await resolveDataset(opts.dataset, config.llmrouterDir);
    checkPoolAgainstDataset(pool, dataset, opts.keyCheck ? process.env : null);
    await checkSpecCheckpoints(db, specs, names);
    // the split of the checkpoints the specs name: a router or policy scored on another scheme's test split would leak its training questions
    const splitBy = resolveSplitScheme(opts.splitBy, await specsSplitMade(db, specs));
    const ds = await saveDataset(db, { name: dataset.name, source: dataset.source, contentHash: dataset.contentHash, items: dataset.items });
    const saved = await savePool(db, pool, poolContentHash(pool));
    workers = saved.workers;
    const stored = await getDatasetItems(db, ds.id);
    const ranking = trainSplitRanking(names, stored, { by: splitBy, seed: opts.splitSeed });
    const base = { split: opts.split, splitSeed: opts.splitSeed, splitBy, sample: opts.sample, seed: opts.seed };
    const items = runItems(stored, base);
    if (items.length === 0) throw new InputError(`the ${opts.split} split of dataset "${dataset.name}" has no items`, { field: '--split' });
    const workflow: WorkflowOptions = {
      maxSteps: opts.maxSteps, ranking,
      ...(opts.maxTokensPerStep !== null && { maxTokensPerStep: opts.maxTokensPerStep }),
      ...(opts.argmax && { argmax: true }),
      ...(allowed && { workers: allowed }),
      ...(opts.maxUsd !== null && { maxUsd: opts.maxUsd }),
      ...(reward && { reward }),
      ...(replay && { replay }),
    };
    const options: UltraRunOptions = { dataset: opts.dataset, pool: opts.pool, ...base, repeats: opts.repeats, items: items.length, workflow };
    run = await createConductorRun(db, {
      id: opts.runId ?? newRunId(), datasetId: ds.id, poolId: saved.poolId, specs: specs.map((s) => s.spec), options, total: items.length * specs.length * opts.repeats,
    });
    await setConductorRunStatus(db, run.id, 'running', { from: ['pending'] });
    log(`conductor run ${run.id}: ${dataset.name} ${opts.split} split, ${splitLabel({ by: splitBy, seed: opts.splitSeed })} (${items.length} items) x ${specs.length} conductor(s) x ${opts.repeats} repeat(s) = ${run.total} workflows`);
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

/** `--workers`: pool worker names, each once (InputError naming --workers); returned in pool order. */
function restrictedPool(workers: readonly string[], pool: readonly string[]): string[] {
  if (workers.length === 0) throw new InputError('name one or more of the pool\'s workers', { field: '--workers' });
  const seen = new Set<string>();
  for (const w of workers) {
    if (!pool.includes(w)) throw new InputError(`worker ${JSON.stringify(w)} is not in the pool (it has ${pool.join(', ')})`, { field: '--workers' });
    if (seen.has(w)) throw new InputError(`worker ${JSON.stringify(w)} is named twice`, { field: '--workers' });
    seen.add(w);
  }
  return pool.filter((w) => seen.has(w));
}
