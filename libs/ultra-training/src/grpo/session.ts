// A GRPO run as the coordinator sees it: its committed state in Postgres (grpo_runs), its items
// (the router's split: by unique prompt, or the dataset's own with --split-by dataset), the pool, the base workflow options, the question
// features (the router backbone's, through the Postgres feature cache as the conductor processes
// read them) and the one update and commit both rollout paths share.
import { InputError } from '@fugu/core';
import { policyCheckpoint, policyConductor, type ConductorPolicy } from '@fugu/conductor';
import {
  commitGrpoIteration, getDatasetItems, getGrpoRun, getPoolWorkers, listGrpoIterations, setGrpoRunStatus,
  type Db, type GrpoRunRecord, type StoredItem, type StoredWorker,
} from '@fugu/db';
import { type WorkflowOptions, loadPolicy, policyRecord, splitItems, trainSplitRanking } from '@fugu/ultra';
import { storedGrpoConfig, type GrpoConfig } from './config.ts';
import { planIteration, type GrpoItems, type PlannedRollout } from './plan.ts';
import { grpoFanIn, type GrpoIterationStats, type GrpoUpdate, type RolloutResult } from './update.ts';
import { criterionBetter, replayCriterion, rolloutCriterion, type CheckpointCriterion } from './criterion.ts';
import type { GrpoReportData } from '@fugu/report';

/** Features of questions (the backbone the policy reads): the Postgres cache, computed where missing. */
export type FeatureSource = { backboneId: string; features(questions: readonly string[]): Promise<Float32Array[]> };

export type GrpoIterationPlan = {
  index: number;
  keys: string[];
  rollouts: PlannedRollout[];
  byKey: Map<string, PlannedRollout>;
  policy: ConductorPolicy;
  policyCheckpointId: string;
};

/** The checkpoint id of the policy that samples iteration i (the start samples 0), and of the validation best. */
export const grpoPolicyId = (runId: string, iteration: number): string => `${runId}-i${iteration}`;
export const grpoBestId = (runId: string, iteration: number): string => `${runId}-best-i${iteration}`;

export class GrpoSession {
  readonly runId: string;
  readonly cfg: GrpoConfig;
  readonly workers: StoredWorker[];
  readonly items: GrpoItems;
  readonly base: WorkflowOptions;
  run: GrpoRunRecord;
  private readonly db: Db;
  private readonly feats: FeatureSource;
  private readonly cache = new Map<string, Float32Array>();
  private reference: ConductorPolicy | undefined;

  private constructor(o: { db: Db; run: GrpoRunRecord; workers: StoredWorker[]; items: GrpoItems; base: WorkflowOptions; features: FeatureSource }) {
    this.db = o.db;
    this.run = o.run;
    this.runId = o.run.id;
    this.cfg = storedGrpoConfig(o.run.config);
    this.workers = o.workers;
    this.items = o.items;
    this.base = o.base;
    this.feats = o.features;
  }

  static async open(db: Db, runId: string, features: FeatureSource): Promise<GrpoSession> {
    const run = await getGrpoRun(db, runId);
    if (!run) throw new InputError(`no GRPO run "${runId}"`, { field: '--resume' });
    const cfg = storedGrpoConfig(run.config);
    const workers = await getPoolWorkers(db, run.poolId);
    const stored = await getDatasetItems(db, run.datasetId);
    const split = { by: cfg.splitBy, seed: cfg.splitSeed };
    const train = splitItems(stored, 'train', split).map((i) => stored[i]!);
    const val = splitItems(stored, 'val', split).map((i) => stored[i]!);
    const names = workers.map((w) => w.name);
    const base: WorkflowOptions = {
      maxSteps: cfg.maxSteps, ranking: trainSplitRanking(names, stored, split),
      ...(Object.keys(cfg.reward).length > 0 && { reward: cfg.reward }),
      ...(cfg.replay && { replay: cfg.replay }),
    };
    return new GrpoSession({ db, run, workers, items: { train, val }, base, features });
  }

  /** The iteration the committed state asks (read from Postgres), with its rollouts; null when the run is complete. */
  async load(): Promise<GrpoIterationPlan | null> {
    const run = await getGrpoRun(this.db, this.runId);
    if (!run) throw new Error(`GRPO run ${this.runId} is gone`);
    this.run = run;
    if (run.iteration >= this.cfg.iterations) return null;
    const { policy } = await loadPolicy(this.db, run.policyCheckpointId, { workers: this.workers.map((w) => w.name) });
    const rollouts = planIteration(this.cfg, this.items, run.iteration, this.base, this.workers.map((w) => w.name));
    return { index: run.iteration, keys: rollouts.map((r) => r.key), rollouts, byKey: new Map(rollouts.map((r) => [r.key, r])), policy, policyCheckpointId: run.policyCheckpointId };
  }

  /** Every worker of the pool is a replay worker: the checkpoint criterion is exact. */
  get replayPool(): boolean {
    return this.workers.length > 0 && this.workers.every((w) => w.provider === 'replay');
  }

  /** The features of every question of these rollouts (kept for the session). */
  async prepareFeatures(rollouts: readonly PlannedRollout[]): Promise<void> {
    await this.prepareQuestions(rollouts.map((r) => r.item.prompt));
  }

  /** The features of these questions (kept for the session). */
  async prepareQuestions(questions: readonly string[]): Promise<void> {
    const missing = [...new Set(questions.filter((q) => !this.cache.has(q)))];
    if (missing.length === 0) return;
    const f = await this.feats.features(missing);
    missing.forEach((q, i) => this.cache.set(q, f[i]!));
  }

  features(question: string): Float32Array {
    const f = this.cache.get(question);
    if (!f) throw new Error(`no features prepared for a question of run ${this.runId}`);
    return f;
  }

  /**
   * The checkpoint criterion of a policy (criterion.ts) on a replay pool: exact, over the whole val
   * split, its argmax workflows run once in this process under the run's workflow options.
   */
  async exactCriterion(policy: ConductorPolicy, spec: string): Promise<CheckpointCriterion> {
    const val = this.items.val;
    await this.prepareQuestions(val.map((v) => v.prompt));
    const conductor = policyConductor(policy, spec, { argmax: true });
    return replayCriterion({
      items: val, workers: this.workers, options: { ...this.base, argmax: true },
      write: (input, item) => conductor.write({ ...input, features: this.features(item.prompt) }),
    });
  }

  /** The update of an iteration from all its results (writes nothing). */
  async fanIn(it: GrpoIterationPlan, results: ReadonlyMap<string, RolloutResult>, info: { dispatches: number; wallMs: number }): Promise<GrpoUpdate> {
    await this.prepareFeatures(it.rollouts);
    if (this.cfg.klCoef > 0 && !this.reference) this.reference = (await loadPolicy(this.db, this.run.startCheckpointId, { workers: this.workers.map((w) => w.name) })).policy;
    // a validation iteration: the sampling policy's checkpoint criterion, exact on a replay pool, else from its validation rollouts
    const val = it.rollouts.filter((r) => r.split === 'val');
    let criterion: CheckpointCriterion | undefined;
    if (val.length > 0) {
      criterion = this.replayPool
        ? await this.exactCriterion(it.policy, `policy:${it.policyCheckpointId}`)
        : rolloutCriterion(val.map((r) => results.get(r.key)!).filter((r) => r !== undefined), this.cfg.reward);
    }
    const u = grpoFanIn({
      cfg: this.cfg, iteration: it.index, policy: it.policy, ...(this.reference && { reference: this.reference }), rollouts: it.rollouts, results,
      features: (q) => this.features(q), adam: this.run.adam, ...(criterion && { criterion }),
    });
    return { ...u, record: { ...u.record, dispatches: info.dispatches, wallMs: info.wallMs } };
  }

  /** The iteration in one transaction: the next policy, Adam's moments, the record, every rollout row, a validation best. */
  async commit(it: GrpoIterationPlan, u: GrpoUpdate): Promise<void> {
    const { runId } = this;
    const training = { stage: 'grpo', run: runId, iteration: it.index + 1, sampledBy: it.policyCheckpointId };
    const nextPolicy = it.policy.withTheta(u.theta);
    const next = policyCheckpoint(nextPolicy, {
      id: grpoPolicyId(runId, it.index + 1), backboneId: this.feats.backboneId, parentId: it.policyCheckpointId, training,
      metrics: { meanReward: u.record.meanReward, iteration: it.index },
    });
    const completed = it.index + 1 >= this.cfg.iterations;
    // the final policy samples no iteration, so no validation judges it: on a replay pool (with
    // validation on) its criterion is computed here (exact, deterministic: both rollout paths commit the same), so the
    // last update can be the run's best too
    const final = completed && this.replayPool && this.cfg.valEvery > 0 ? await this.exactCriterion(nextPolicy, `policy:${next.id}`) : undefined;
    const record = final ? { ...u.record, finalCriterion: final } : u.record;
    // the best on validation: by the checkpoint criterion (criterion.ts), strictly better than the best so far
    const bestOf = (iteration: number, policy: ConductorPolicy, policyId: string, criterion: CheckpointCriterion | null, valReward: number, sampled: number | null) => ({
      valReward,
      checkpoint: policyRecord(policyCheckpoint(policy, {
        id: grpoBestId(runId, iteration), backboneId: this.feats.backboneId, parentId: this.run.startCheckpointId,
        training: { stage: 'grpo-best', run: runId, iteration, policy: policyId },
        metrics: { criterion, valReward, valAccuracy: criterion?.accuracy ?? null, sampledValReward: sampled, iteration },
      })),
    });
    let best = u.valReward !== null && criterionBetter(u.valReward, this.run.bestValReward)
      ? bestOf(it.index, it.policy, it.policyCheckpointId, u.record.criterion ?? null, u.valReward, u.record.val?.meanReward ?? null)
      : undefined;
    if (final && criterionBetter(final.value, best?.valReward ?? this.run.bestValReward)) best = bestOf(it.index + 1, nextPolicy, next.id, final, final.value, null);
    await commitGrpoIteration(this.db, {
      runId, iteration: it.index, next: policyRecord(next), adam: u.adam, record,
      valReward: u.valReward, rollouts: u.rollouts, completed, ...(best && { best }),
    });
  }

  async finish(status: 'completed' | 'failed', reason?: string): Promise<void> {
    if (status === 'failed') await setGrpoRunStatus(this.db, this.runId, 'failed', reason ?? null);
    else if (this.run.status !== 'completed') await setGrpoRunStatus(this.db, this.runId, 'completed');
  }
}

/** The items of a stored item list by db id (the in-process replay models answer from them). */
export function itemsById(items: GrpoItems): Map<number, StoredItem> {
  return new Map([...items.train, ...items.val].map((i) => [i.dbId, i]));
}

/** What `fugu report` and `fugu status` show of a run: its row and every committed iteration's record. */
export async function grpoReportData(db: Db, runId: string): Promise<GrpoReportData | undefined> {
  const run = await getGrpoRun(db, runId);
  if (!run) return undefined;
  const workers = await getPoolWorkers(db, run.poolId);
  const iterations = (await listGrpoIterations(db, runId)).map((i) => ({ ...(i.record as unknown as GrpoIterationStats), iteration: i.iteration }));
  return { run: { ...run, replay: workers.length > 0 && workers.every((w) => w.provider === 'replay') }, iterations };
}
