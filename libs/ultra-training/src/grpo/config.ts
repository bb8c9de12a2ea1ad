// A GRPO run's configuration: what `fugu train grpo` takes, what the run stores (grpo_runs.config)
// and the checks of every flag (each error names its flag). A resume compares the flags given
// again with the stored ones and refuses a change (InputError naming the flag and both values).
import { InputError } from '@fugu/core';
import { POLICY_HEADS, resolveMaxSteps, rewardConfig, validateReplayConfig, type PolicyHead, type ReplayConfig, type RewardConfig } from '@fugu/conductor';
import { sourceVersion } from '@fugu/training';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { asFlag } from '@fugu/ultra';
import { splitScheme, type SplitScheme } from '@fugu/datasets';
import type { CostReference } from './cost-weight.ts';

/** The most rollouts one iteration may fan out (Q x G, plus the validation items): one flow, one fan-in. */
export const MAX_ROLLOUTS_PER_ITERATION = 4096;

export type GrpoConfig = {
  /** questions per iteration, drawn with the seed from the train split */
  q: number;
  /** sampled workflows per question (the group) */
  g: number;
  iterations: number;
  seed: number;
  /** the seed of the router's split (by unique prompt; with `dataset`, of a val part carved from train) */
  splitSeed: number;
  /**
   * the split: by unique prompt (`prompt`) or the dataset's own (`dataset`, @fugu/datasets
   * assignSplit). A run stored without it (created before it existed) was by prompt (storedGrpoConfig).
   */
  splitBy: SplitScheme;
  /** Adam's learning rate, gradient-norm clip, optimisation epochs over one batch and mini-batches per epoch */
  lr: number;
  maxGradNorm: number;
  epochs: number;
  miniBatches: number;
  /** the clipped surrogate: clip(rho, 1 - clipLow, 1 + clipHigh) */
  clipLow: number;
  clipHigh: number;
  /** group-relative advantages: (r - mean) / (std + eps) per group ('group', GRPO), r - mean ('none', Dr. GRPO), or over the batch's std ('batch') */
  advantageScale: 'group' | 'batch' | 'none';
  /** per decision over the batch ('token-mean') or per sequence then over sequences ('seq-mean-token-mean', GRPO) */
  lossAgg: 'token-mean' | 'seq-mean-token-mean';
  /** KL coefficient (k3 estimator against the starting policy); 0 by default, as the Conductor report trains */
  klCoef: number;
  /**
   * the step tie-break: within a group, rollouts with exactly equal rewards get an extra advantage
   * of -stepTiebreak per step above their tie's mean (update.ts stepTiebreaks), so that a step
   * which changed nothing is not free; it never reorders unequal rewards. 0: off. A run stored
   * without it (created before it existed) reads 0.
   */
  stepTiebreak: number;
  maxSteps: number;
  /** the policy heads that are trained (the others keep their parameters) */
  heads: PolicyHead[];
  /** the reward (correct / incorrect / unparsed, mu per dollar) */
  reward: Partial<RewardConfig>;
  /**
   * the cost preference in the pool's own unit (`--cost-weight`, cost-weight.ts): reward units per
   * the best single worker's dollars per train item. Given, the run's mu (reward.costPerUsd) is
   * this over `costReference.usdPerItem`; absent, mu is as given (`--mu`) or 0.
   */
  costWeight?: number;
  /** what `costWeight` was converted with (set when the run is created) */
  costReference?: CostReference;
  replay?: ReplayConfig;
  /** every valEvery iterations (and after the last) the sampling policy's argmax on valSize validation items */
  valEvery: number;
  valSize: number;
  /**
   * randomised pools: each training question's group sees a seeded random subset of poolK of the
   * K workers (the policy's worker choice masked to it); 0: the whole pool. Validation: the whole pool.
   */
  poolK: number;
  /** randomised pools never drawn for training (each a list of worker names): held out for evaluation */
  poolHoldout: string[][];
  /** BullMQ attempts per rollout job, and ms after a dispatch before missing rollouts go out again */
  attempts: number;
  deadlineMs: number;
};

export const GRPO_DEFAULTS: Omit<GrpoConfig, 'heads'> = {
  q: 8, g: 16, iterations: 20, seed: 0, splitSeed: 0, splitBy: 'prompt', lr: 0.003, maxGradNorm: 1, epochs: 2, miniBatches: 1, clipLow: 0.2, clipHigh: 0.2,
  advantageScale: 'group', lossAgg: 'seq-mean-token-mean', klCoef: 0, stepTiebreak: 0.05, maxSteps: 5, reward: {}, valEvery: 5, valSize: 100, poolK: 0, poolHoldout: [], attempts: 3, deadlineMs: 300_000,
};

const int = (flag: string, v: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number => {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw new InputError(`must be a whole number in [${min}, ${max}], got ${String(v)}`, { field: flag });
  return v;
};
const num = (flag: string, v: unknown, ok: (x: number) => boolean, what: string): number => {
  if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v)) throw new InputError(`must be ${what}, got ${String(v)}`, { field: flag });
  return v;
};

/** The flag of each config field (errors and resume checks name it). */
export const GRPO_FLAGS: Record<keyof GrpoConfig, string> = {
  q: '--q', g: '--g', iterations: '--iterations', seed: '--seed', splitSeed: '--split-seed', splitBy: '--split-by', lr: '--lr', maxGradNorm: '--max-grad-norm', epochs: '--epochs',
  miniBatches: '--mini-batches', clipLow: '--clip', clipHigh: '--clip-high', advantageScale: '--advantage', lossAgg: '--loss-agg', klCoef: '--kl', stepTiebreak: '--step-tiebreak',
  maxSteps: '--max-steps', heads: '--heads', reward: '--reward', costWeight: '--cost-weight', costReference: '--cost-weight', replay: '--replay', valEvery: '--val-every', valSize: '--val-size', poolK: '--pool-k', poolHoldout: '--pool-holdout', attempts: '--attempts',
  deadlineMs: '--deadline-ms',
};

/**
 * A complete config from partial input (defaults filled), checked; `trainItems` (the train
 * split's size) bounds Q. `replayPool`: every worker is a replay worker, so the `kind` head is
 * left out by default (the replay model cannot tell subtask kinds apart).
 */
export function resolveGrpoConfig(input: Partial<GrpoConfig>, ctx: { trainItems: number; valItems: number; replayPool: boolean; pool: readonly string[] }): GrpoConfig {
  const c = { ...GRPO_DEFAULTS, ...Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined)) } as GrpoConfig;
  const f = GRPO_FLAGS;
  int(f.g, c.g, 2, 1024);
  int(f.q, c.q, 1, 4096);
  if (c.q > ctx.trainItems) throw new InputError(`asks ${c.q} questions per iteration but the train split has ${ctx.trainItems} items`, { field: f.q });
  int(f.iterations, c.iterations, 1, 100_000);
  int(f.seed, c.seed, 0);
  int(f.splitSeed, c.splitSeed, 0);
  splitScheme(c.splitBy, f.splitBy);
  num(f.lr, c.lr, (x) => x > 0 && x <= 10, 'a number in (0, 10]');
  num(f.maxGradNorm, c.maxGradNorm, (x) => x > 0, 'a number > 0');
  int(f.epochs, c.epochs, 1, 100);
  int(f.miniBatches, c.miniBatches, 1, 1024);
  num(f.clipLow, c.clipLow, (x) => x > 0 && x < 1, 'a number in (0, 1)');
  num(f.clipHigh, c.clipHigh, (x) => x > 0 && x <= 10, 'a number in (0, 10]');
  if (!['group', 'batch', 'none'].includes(c.advantageScale)) throw new InputError(`must be group, batch or none, got ${JSON.stringify(c.advantageScale)}`, { field: f.advantageScale });
  if (!['token-mean', 'seq-mean-token-mean'].includes(c.lossAgg)) throw new InputError(`must be token-mean or seq-mean-token-mean, got ${JSON.stringify(c.lossAgg)}`, { field: f.lossAgg });
  num(f.klCoef, c.klCoef, (x) => x >= 0, 'a number >= 0');
  num(f.stepTiebreak, c.stepTiebreak, (x) => x >= 0 && x <= 1, 'a number in [0, 1]');
  asFlag(f.maxSteps, () => resolveMaxSteps(c.maxSteps));
  asFlag(f.reward, () => rewardConfig(c.reward));
  if (c.costWeight !== undefined) {
    num(f.costWeight, c.costWeight, (x) => x >= 0, 'a number >= 0');
    if (c.reward.costPerUsd !== undefined) throw new InputError('give --cost-weight (per the pool\'s reference cost) or --mu (per dollar), not both', { field: f.costWeight });
  }
  if (c.replay !== undefined) c.replay = asFlag(f.replay, () => validateReplayConfig(c.replay));
  int(f.valEvery, c.valEvery, 0);
  int(f.valSize, c.valSize, 0);
  if (c.valEvery > 0 && c.valSize > 0 && ctx.valItems === 0) throw new InputError('the validation split has no items (use --val-every 0)', { field: f.valSize });
  int(f.poolK, c.poolK, 0, ctx.pool.length);
  if (c.poolK === 1) throw new InputError('a pool of 1 worker leaves the policy no worker choice to learn: use 2 or more (or 0, the whole pool)', { field: f.poolK });
  if (!Array.isArray(c.poolHoldout)) throw new InputError('must be a list of worker lists', { field: f.poolHoldout });
  if (c.poolHoldout.length > 0 && c.poolK === 0) throw new InputError('holds out randomised pools: give --pool-k too', { field: f.poolHoldout });
  c.poolHoldout = c.poolHoldout.map((set, i) => {
    if (!Array.isArray(set) || set.length !== c.poolK) throw new InputError(`pool ${i + 1} must name --pool-k = ${c.poolK} workers, got ${Array.isArray(set) ? set.length : String(set)}`, { field: f.poolHoldout });
    for (const w of set) if (!ctx.pool.includes(w)) throw new InputError(`pool ${i + 1}: worker ${JSON.stringify(w)} is not in the pool (it has ${ctx.pool.join(', ')})`, { field: f.poolHoldout });
    if (new Set(set).size !== set.length) throw new InputError(`pool ${i + 1} names a worker twice`, { field: f.poolHoldout });
    // stored in pool order, as the plan draws them
    return ctx.pool.filter((w) => set.includes(w));
  });
  const subsets = binomial(ctx.pool.length, c.poolK);
  if (c.poolK > 0 && c.poolK < ctx.pool.length && c.poolHoldout.length >= subsets) throw new InputError(`holds out all ${subsets} pools of ${c.poolK}`, { field: f.poolHoldout });
  int(f.attempts, c.attempts, 1, 100);
  int(f.deadlineMs, c.deadlineMs, 1000);
  const rollouts = c.q * c.g + Math.min(c.valSize, ctx.valItems);
  if (rollouts > MAX_ROLLOUTS_PER_ITERATION) {
    throw new InputError(`Q x G = ${c.q} x ${c.g}${c.valSize > 0 ? ` plus ${Math.min(c.valSize, ctx.valItems)} validation items` : ''} = ${rollouts} rollouts in one iteration, more than the ${MAX_ROLLOUTS_PER_ITERATION} one flow takes: lower --q, --g or --val-size`, { field: '--q' });
  }
  const heads = c.heads ?? (ctx.replayPool ? POLICY_HEADS.filter((h) => h !== 'kind') : [...POLICY_HEADS]);
  if (!Array.isArray(heads) || heads.length === 0) throw new InputError(`must name one or more of ${POLICY_HEADS.join(', ')}`, { field: f.heads });
  for (const h of heads) if (!(POLICY_HEADS as readonly string[]).includes(h)) throw new InputError(`${JSON.stringify(h)} is not a head (${POLICY_HEADS.join(', ')})`, { field: f.heads });
  return { ...c, heads: [...heads] };
}

function binomial(n: number, k: number): number {
  let r = 1;
  for (let i = 1; i <= k; i++) r = (r * (n - k + i)) / i;
  return Math.round(r);
}

/**
 * A stored run's config as this code reads it: fields added after the run was created get the
 * value the run ran with (splitBy: by prompt; stepTiebreak is read as 0 where it is used).
 */
export function storedGrpoConfig(raw: Record<string, unknown>): GrpoConfig {
  return { splitBy: 'prompt', ...raw } as unknown as GrpoConfig;
}

/** A resume's flags against the stored config: a changed one is an InputError naming it and both values. */
export function checkResumeConfig(runId: string, stored: GrpoConfig, given: Partial<GrpoConfig>): void {
  for (const [k, v] of Object.entries(given) as Array<[keyof GrpoConfig, unknown]>) {
    if (v === undefined) continue;
    if (JSON.stringify(v) !== JSON.stringify(stored[k])) {
      throw new InputError(`run ${runId} was created with ${k} = ${JSON.stringify(stored[k])}, got ${JSON.stringify(v)}: a resume continues the run as it was created`, { field: GRPO_FLAGS[k] });
    }
  }
}

const here = path.dirname(fileURLToPath(import.meta.url));
const CODE_DIRS = ['grpo/src', 'conductor/src', 'ultra/src', 'ultra-training/src', 'training/src'].map((d) => path.resolve(here, '../../..', d));

/** The code version of a GRPO run: a hash of the optimiser's, the policy's, the engine's, this lib's and the loop's sources (FUGU_GRPO_CODE_VERSION overrides). */
export function grpoCodeVersion(env: Record<string, string | undefined> = process.env): string {
  return env.FUGU_GRPO_CODE_VERSION || sourceVersion(CODE_DIRS);
}
