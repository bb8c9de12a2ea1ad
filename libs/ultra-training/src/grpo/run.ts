// `fugu train grpo`: create a run (the dataset, the pool, the starting policy, the checked
// config) or resume one (the code version and any flag given again must be the stored ones), then
// run its iterations on the cluster (conduct jobs through the staged loop) or in this process
// (replay pools only).
import { randomBytes } from 'node:crypto';
import { InputError } from '@fugu/core';
import { createGrpoRun, getDatasetItems, getGrpoRun, saveDataset, savePool, setGrpoRunStatus, type Db } from '@fugu/db';
import { checkPoolAgainstDataset, poolContentHash, resolveDataset, resolveWorkerPool, sampleIndices, type Context } from '@fugu/evaluation';
import { createRedis } from '@fugu/queue';
import { loadRouterModel, useLiteHeadDims, type RouterModel } from '@fugu/router-model';
import { cachedFeatures, runStagedLoop, type CrashPoint, type LoopTimings } from '@fugu/training';
import { ConductorPolicy, policyCheckpoint } from '@fugu/conductor';
import { resolveSplitScheme, type SplitSpec } from '@fugu/datasets';
import { routerChoices, loadPolicy, policySplitScheme, routerSplitScheme, savePolicyCheckpoint, trainingRanking, splitItems } from '@fugu/ultra';
import { warmStartPolicy } from './warm-start.ts';
import { checkResumeConfig, grpoCodeVersion, resolveGrpoConfig, storedGrpoConfig, type GrpoConfig } from './config.ts';
import { GrpoDriver, runGrpoInProcess } from './driver.ts';
import { costReference, muOfCostWeight } from './cost-weight.ts';
import { GrpoSession, type FeatureSource } from './session.ts';
import type { GrpoUpdate } from './update.ts';

export type GrpoStartOptions = Partial<GrpoConfig> & {
  dataset?: string;
  pool?: string;
  /** a stored policy checkpoint to start from; default: a new one at the documented initialisation */
  from?: string;
  /** the starting point of a new policy: the documented initialisation, or a warm start whose first-step worker choice is a router checkpoint's (`router:<checkpoint>`) */
  start?: string;
  /** a warm start fits the router's picks on a seeded sample of this many train questions (default 2000) */
  warmStartQuestions?: number;
  runId?: string;
  resume?: string;
  /** check the pool's API keys against the environment (live pools) */
  keyCheck?: boolean;
};

/** The features the policy reads (the router backbone's), through the Postgres cache; `release` frees the encoder. */
export async function backboneFeatures(db: Db, home: string): Promise<FeatureSource & { featureDim: number; release(): Promise<void> }> {
  const m: RouterModel = await loadRouterModel(home, 1);
  return {
    backboneId: m.backboneId,
    featureDim: useLiteHeadDims(1).dim,
    features: async (qs) => (await cachedFeatures(db, m.encoder, qs)).features,
    release: () => m.release(),
  };
}

const newRunId = (): string => `grpo_${new Date().toISOString().replace(/[-:T]/g, '').slice(0, 14)}_${randomBytes(3).toString('hex')}`;

/** A new run (or the one to resume, checked): returns its id. */
export async function startGrpoRun(ctx: Context, o: GrpoStartOptions, backbone: FeatureSource & { featureDim: number }): Promise<string> {
  const { db, config } = ctx;
  const given: Partial<GrpoConfig> = Object.fromEntries(Object.entries(o).filter(([k, v]) => v !== undefined && !['dataset', 'pool', 'from', 'start', 'warmStartQuestions', 'runId', 'resume', 'keyCheck'].includes(k)));
  if (o.resume) {
    const run = await getGrpoRun(db, o.resume);
    if (!run) throw new InputError(`no GRPO run "${o.resume}"`, { field: '--resume' });
    const code = grpoCodeVersion();
    if (run.codeVersion !== code) throw new InputError(`run ${run.id} was started by code version ${run.codeVersion}, this is ${code}: resume it with the code that started it`, { field: 'code_version' });
    checkResumeConfig(run.id, storedGrpoConfig(run.config), given);
    if (run.status === 'failed' || run.status === 'paused') await setGrpoRunStatus(db, run.id, 'running');
    return run.id;
  }
  if (!o.dataset) throw new InputError('give --dataset (or --resume <run>)', { field: '--dataset' });
  if (!o.pool) throw new InputError('give --pool (or --resume <run>)', { field: '--pool' });
  const pool = await resolveWorkerPool(o.pool, config.llmrouterDir);
  const names = pool.workers.map((w) => w.name);
  const dataset = await resolveDataset(o.dataset, config.llmrouterDir);
  checkPoolAgainstDataset(pool, dataset, o.keyCheck ? process.env : null);
  const splitSeed = o.splitSeed ?? 0;
  // the split of what the run starts from (a stored policy, a router to warm-start from): the default, and another is refused
  const startSpec = o.start ?? 'init';
  const made: Array<{ what: string; by: SplitSpec['by'] }> = [];
  if (o.from) {
    const by = await policySplitScheme(db, o.from);
    if (by) made.push({ what: `policy checkpoint ${o.from}`, by });
  }
  if (startSpec.startsWith('router:')) {
    const by = await routerSplitScheme(db, startSpec.slice('router:'.length));
    if (by) made.push({ what: `router checkpoint ${startSpec.slice('router:'.length)}`, by });
  }
  given.splitBy = resolveSplitScheme(o.splitBy, made);
  const split: SplitSpec = { by: given.splitBy, seed: splitSeed };
  const trainItems = splitItems(dataset.items, 'train', split).length;
  const valItems = splitItems(dataset.items, 'val', split).length;
  const cfg = resolveGrpoConfig(given, { trainItems, valItems, replayPool: pool.workers.every((w) => w.provider === 'replay'), pool: pool.workers.map((w) => w.name) });
  if (cfg.costWeight !== undefined) {
    // the cost weight in dollars: over the pool's reference cost on this train split
    cfg.costReference = costReference(dataset.items, pool.workers, split, dataset.name);
    cfg.reward = { ...cfg.reward, costPerUsd: muOfCostWeight(cfg.costWeight, cfg.costReference) };
  }
  let start: string;
  if (startSpec !== 'init' && !/^router:[^\s,]+$/.test(startSpec)) throw new InputError(`must be init or router:<checkpoint>, got ${JSON.stringify(startSpec)}`, { field: '--start' });
  if (o.from && o.start) throw new InputError('give --from (a stored policy) or --start (a new one), not both', { field: '--start' });
  if (o.from) {
    try {
      const { checkpoint } = await loadPolicy(db, o.from, { workers: names });
      if (checkpoint.backboneId !== backbone.backboneId) throw new InputError(`checkpoint ${o.from} reads features of backbone ${checkpoint.backboneId}, this process has ${backbone.backboneId}`, { field: '--from' });
    } catch (e) {
      if (e instanceof InputError) throw new InputError(e.message.replace(/^field [^:]+: /, ''), { field: '--from' }, { cause: e });
      throw e;
    }
    start = o.from;
  }
  const id = o.runId ?? newRunId();
  // it names checkpoints, workflow keys and job ids: letters, digits, _ and - only
  if (!/^[A-Za-z0-9_-]{1,100}$/.test(id)) throw new InputError(`run id ${JSON.stringify(id)}: 1 to 100 letters, digits, _ and -`, { field: '--run-id' });
  if (await getGrpoRun(db, id)) throw new InputError(`a GRPO run "${id}" exists already (use --resume ${id})`, { field: '--run-id' });
  const ds = await saveDataset(db, { name: dataset.name, source: dataset.source, contentHash: dataset.contentHash, items: dataset.items });
  const saved = await savePool(db, pool, poolContentHash(pool));
  if (!o.from) {
    const stored = await getDatasetItems(db, ds.id);
    const r = trainingRanking(stored, names, { splitSeed, splitBy: split.by, datasetName: dataset.name });
    const training: Record<string, unknown> = { start: startSpec };
    let policy = ConductorPolicy.init({ workers: names, featureDim: backbone.featureDim, seed: cfg.seed, maxSteps: cfg.maxSteps, ranking: r.ranking });
    if (startSpec.startsWith('router:')) {
      const router = startSpec.slice('router:'.length);
      const all = splitItems(stored, 'train', split);
      const n = o.warmStartQuestions ?? 2000;
      if (!Number.isInteger(n) || n < 1) throw new InputError(`must be a whole number >= 1, got ${String(n)}`, { field: '--warm-start-questions' });
      const train = sampleIndices(all.length, n, cfg.seed).map((j) => stored[all[j]!]!.prompt);
      let targets: number[];
      try {
        targets = await routerChoices(db, config.home, router, train, names);
      } catch (e) {
        if (e instanceof InputError) throw new InputError(e.message.replace(/^field [^:]+: /, ''), { field: '--start' }, { cause: e });
        throw e;
      }
      const x = await backbone.features(train);
      const w = warmStartPolicy({ policy, features: x, targets, seed: cfg.seed });
      policy = w.policy;
      Object.assign(training, { router, agreement: w.agreement, epochs: w.epochs, questions: train.length });
    }
    await savePolicyCheckpoint(db, policyCheckpoint(policy, {
      id: `${id}-start`, backboneId: backbone.backboneId, parentId: null,
      training: { stage: startSpec === 'init' ? 'init' : 'warm-start', run: id, ...training, seed: cfg.seed, ranking: r.ranking, rankedBy: { by: 'training-split mean recorded score', dataset: dataset.name, splitBy: split.by, splitSeed, means: r.means } },
    }));
    start = `${id}-start`;
  }
  await createGrpoRun(db, { id, datasetId: ds.id, poolId: saved.poolId, startCheckpointId: start!, config: cfg as unknown as Record<string, unknown>, codeVersion: grpoCodeVersion() });
  return id;
}

export type GrpoRunEvents = {
  /** wallMs: the iteration's cycle; on the cluster path also the loop's own time (coordinatorMs, and its parts) */
  onIteration?: (e: { index: number; update: GrpoUpdate; wallMs: number; coordinatorMs?: number; timings?: LoopTimings }) => void;
  onProgress?: (e: { index: number; done: number; total: number }) => void;
  log?: (msg: string, extra?: Record<string, unknown>) => void;
};

/**
 * Runs a run's remaining iterations: `cluster` fans each one out as conduct jobs in one flow
 * (the conductor processes and provider workers of the queues run them), `local` runs them in
 * this process (replay pools). Returns how it ended.
 */
export async function runGrpo(ctx: Context, o: GrpoRunEvents & {
  runId: string;
  rollouts: 'cluster' | 'local';
  features: FeatureSource;
  signal?: AbortSignal;
  pollMs?: number;
  crashAt?: { point: CrashPoint; iteration: number };
}): Promise<{ status: 'completed' | 'failed' | 'interrupted'; iteration: number; reason?: string }> {
  const session = await GrpoSession.open(ctx.db, o.runId, o.features);
  if (session.run.status === 'completed') return { status: 'completed', iteration: session.run.iteration };
  if (o.rollouts === 'local') {
    const status = await runGrpoInProcess(session, {
      ...(o.signal && { signal: o.signal }),
      onIteration: (index, update, wallMs) => o.onIteration?.({ index, update, wallMs }),
      onProgress: (index, done, total) => o.onProgress?.({ index, done, total }),
    });
    return { status, iteration: session.run.iteration };
  }
  if (!ctx.redis) throw new Error('the cluster path needs Redis');
  const workerConnection = createRedis(ctx.config.redisUrl, 'worker');
  try {
    const r = await runStagedLoop(new GrpoDriver(ctx.db, session), {
      connection: ctx.redis,
      workerConnection,
      prefix: ctx.config.queuePrefix,
      ...(o.pollMs !== undefined && { pollMs: o.pollMs }),
      ...(o.signal && { signal: o.signal }),
      ...(o.log && { log: o.log }),
      ...(o.crashAt && { crashAt: o.crashAt }),
      names: { iteration: 'iteration', jobs: 'rollouts' },
      onProgress: (p) => o.onProgress?.(p),
      onIteration: (e) => o.onIteration?.({ index: e.index, update: e.update, wallMs: Math.round(e.cycleMs), coordinatorMs: e.coordinatorMs, timings: e.timings }),
    });
    return { status: r.status, iteration: session.run.iteration, ...(r.reason !== undefined && { reason: r.reason }) };
  } finally {
    await workerConnection.quit().catch(() => {});
  }
}
