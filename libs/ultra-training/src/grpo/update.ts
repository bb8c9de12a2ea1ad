// The fan-in of a GRPO iteration: from every rollout's reward and sampled decisions to the next
// policy, deterministic in (the committed state, the results), writing nothing. Group-relative
// advantages per question (@fugu/grpo groupAdvantages), the clipped surrogate over several epochs
// with the sampling policy's per-decision log-probabilities kept fixed (grpoUpdate), Adam, and the
// iteration's record. The policy's gradient is restricted to the configured heads. Rollouts of a
// group whose rewards tie exactly prefer fewer steps (stepTiebreaks), so a step that changed
// nothing is never free; an iteration with no advantage anywhere is not stepped at all.
import { formatUsd, InputError, parseUsd } from '@fugu/core';
import { SUBTASK_KINDS, type ConductorPolicy, type PolicyHead, type PolicyDecisions, type PolicyStep, type PolicyWorkerMask as WorkerMask } from '@fugu/conductor';
import { groupAdvantages, grpoUpdate, mean, type AdamState, type GrpoPolicy, type GrpoSample } from '@fugu/grpo';
import type { GrpoRolloutRow, WorkflowFinish } from '@fugu/db';
import type { GrpoConfig } from './config.ts';
import type { PlannedRollout } from './plan.ts';
import type { CheckpointCriterion } from './criterion.ts';

/** What a rollout came to, whichever path ran it (a workflows row, or the in-process engine). */
export type RolloutResult = {
  workflowId: number | null;
  finishReason: string | null;
  parseOk: boolean | null;
  /** null: no reward (the writer failed, a step failed for good): the rollout is left out of its group */
  reward: number | null;
  outcome: string | null;
  /** USD, decimal string */
  cost: string;
  nSteps: number | null;
  topology: string | null;
  /** the step workers' names, in order */
  workers: string[];
  /** the writer's decisions and its summed log-probability */
  decisions: PolicyDecisions | null;
  logprob: number | null;
};

export type GrpoUpdate = {
  theta: Float32Array;
  adam: { step: number; m: Float64Array; v: Float64Array };
  record: GrpoIterationStats;
  /** the checkpoint criterion's value for the sampling policy (criterion.ts; record.criterion), null when the iteration does not validate */
  valReward: number | null;
  rollouts: GrpoRolloutRow[];
};

export type GrpoIterationStats = {
  rollouts: number;
  /** mean and sd of the train rollouts' rewards (those with a reward) */
  meanReward: number;
  rewardSd: number;
  accuracy: number;
  groups: number;
  /** groups whose rewards are all equal (their group advantages are 0) */
  zeroAdvantageGroups: number;
  /** groups where the step tie-break gave some rollout a non-zero term (records made before it: absent) */
  tiebreakGroups?: number;
  /** rollouts without a reward, and groups left with fewer than 2 rewards (left out) */
  unrewarded: number;
  droppedGroups: number;
  parseFailures: number;
  meanSteps: number;
  /** dollars per rollout */
  meanCost: number;
  /** of the last epoch */
  clipFraction: number;
  /** KL(sampling || updated) over the batch's decisions, after the update: mean(old - new) and the k3 estimate */
  approxKl: number;
  k3Kl: number;
  epochs: Array<{ loss: number; clipFraction: number; approxKl: number; gradNorm: number }>;
  /** how often each worker ran a step, each topology and each subtask kind occurred (train rollouts) */
  workers: Record<string, number>;
  topologies: Record<string, number>;
  kinds: Record<string, number>;
  val?: { items: number; meanReward: number; accuracy: number; meanSteps: number; meanCost: number; workers: Record<string, number>; topologies: Record<string, number> };
  /**
   * the checkpoint criterion of the sampling policy (criterion.ts): on a replay pool exact over the
   * whole val split, on a live pool from the validation rollouts; what the run's best is chosen by.
   * Records made before it existed: absent (their best was the rollouts' mean reward).
   */
  criterion?: CheckpointCriterion;
  /** the last iteration on a replay pool: the final policy's criterion (it samples no iteration; session.ts commit) */
  finalCriterion?: CheckpointCriterion;
  /** dispatches of the iteration's rollouts (0: in process) and its wall time to the fan-in */
  dispatches?: number;
  wallMs?: number;
};

/** `only`: the indices (into the rollout's `n` decisions) a sample is restricted to: a tie-break sample's stop decisions. */
type Sample = { x: Float32Array; decisions: PolicyDecisions; mask: WorkerMask; only?: { idx: number[]; n: number } };

/** The worker mask of a rollout's pool (options.workers: names) as the policy's indices; undefined: the whole pool. */
function rolloutMask(policy: ConductorPolicy, r: PlannedRollout): WorkerMask {
  const names = r.options.workers;
  if (!names) return {};
  return { allowedWorkers: names.map((n) => policy.workers.indexOf(n)) };
}

const count = (xs: Iterable<string>): Record<string, number> => {
  const out: Record<string, number> = {};
  for (const x of xs) out[x] = (out[x] ?? 0) + 1;
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
};

/** The decisions a writer stored (workflows.decisions), checked against the policy's choices. */
export function decisionsOf(raw: unknown, where: string): PolicyDecisions {
  const steps = (raw as { steps?: unknown } | null)?.steps;
  if (!Array.isArray(steps) || steps.length === 0) throw new InputError(`${where}: the rollout has no recorded decisions (was it written by the embedded policy?)`, { field: 'decisions' });
  return { steps: steps.map((s) => ({ worker: (s as PolicyStep).worker, kind: (s as PolicyStep).kind, access: (s as PolicyStep).access })) };
}

/** A rollout's result from a workflow's final write (the in-process path) or its row (the cluster's: the same fields). */
export function rolloutResult(f: Omit<WorkflowFinish, 'status'>, workflowId: number | null): RolloutResult {
  return {
    workflowId,
    finishReason: f.finishReason ?? null,
    parseOk: f.parseOk ?? null,
    reward: f.reward ?? null,
    outcome: f.outcome ?? null,
    cost: formatUsd(parseUsd(f.conductorCost ?? '0') + parseUsd(f.workerCost ?? '0')),
    nSteps: f.nSteps ?? null,
    topology: f.topology ?? null,
    workers: (f.steps ?? []).map((s) => s.name),
    decisions: f.decisions !== undefined && f.decisions !== null ? decisionsOf(f.decisions, workflowId !== null ? `workflow ${workflowId}` : 'in-process rollout') : null,
    logprob: f.logprob ?? null,
  };
}

/**
 * The step tie-break of one group (config `stepTiebreak`, x): every rollout whose reward equals
 * another's gets -x (its steps - the mean steps of the rollouts with its reward), added to its
 * advantage. Rewards that tie say the extra steps changed nothing (in the replay model a self-repeat
 * or any step that brings no new information gives exactly the same outcome), so the shorter
 * workflows are preferred; a group whose rewards are all equal is no longer a free direction for
 * the step count. The terms sum to 0 over each tie, so a group's advantages still sum to 0, and
 * they are scaled down where needed to stay below half the smallest gap between the group's
 * distinct advantages, so unequal rewards are never reordered (lexicographic: reward first, then
 * fewer steps). In advantage units, after the group normalisation: a std of 0 cannot inflate it.
 */
export function stepTiebreaks(rewards: readonly number[], advantages: readonly number[], steps: readonly number[], x: number): number[] {
  const out = new Array<number>(rewards.length).fill(0);
  if (x === 0) return out;
  const ties = new Map<number, number[]>();
  rewards.forEach((r, i) => ties.set(r, [...(ties.get(r) ?? []), i]));
  for (const idx of ties.values()) {
    if (idx.length < 2) continue;
    const m = idx.reduce((a, i) => a + steps[i]!, 0) / idx.length;
    for (const i of idx) out[i] = steps[i] === m ? 0 : -x * (steps[i]! - m);
  }
  const largest = out.reduce((a, t) => Math.max(a, Math.abs(t)), 0);
  if (largest === 0) return out;
  const levels = [...new Set(advantages)].sort((a, b) => a - b);
  let gap = Infinity;
  for (let i = 1; i < levels.length; i++) gap = Math.min(gap, levels[i]! - levels[i - 1]!);
  if (largest >= 0.49 * gap) {
    const scale = (0.49 * gap) / largest;
    return out.map((t) => t * scale);
  }
  return out;
}

/**
 * The update of one iteration. `features` gives each rollout's question features; `adam` is the
 * committed optimiser state (null before the first step); `reference` is the starting policy
 * (read only when klCoef > 0).
 */
export function grpoFanIn(input: {
  cfg: GrpoConfig;
  iteration: number;
  policy: ConductorPolicy;
  reference?: ConductorPolicy;
  rollouts: readonly PlannedRollout[];
  results: ReadonlyMap<string, RolloutResult>;
  features: (question: string) => Float32Array;
  adam: { step: number; m: Float64Array | null; v: Float64Array | null };
  /** the sampling policy's checkpoint criterion (criterion.ts), computed by the caller on a validation iteration */
  criterion?: CheckpointCriterion;
}): GrpoUpdate {
  const { cfg, policy, rollouts, results } = input;
  const result = (r: PlannedRollout): RolloutResult => {
    const x = results.get(r.key);
    if (!x) throw new Error(`iteration ${input.iteration}: no result for rollout ${r.key}`);
    return x;
  };
  const train = rollouts.filter((r) => r.split === 'train');
  const val = rollouts.filter((r) => r.split === 'val');

  // the sampling policy's per-decision log-probabilities: recomputed here, and checked against what the writer recorded
  const oldLogps = new Map<string, number[]>();
  const stopDecisions = new Map<string, number[]>();
  const decisions = new Map<string, PolicyDecisions>();
  const masks = new Map<string, WorkerMask>();
  for (const r of train) {
    const res = result(r);
    if (res.reward === null || res.decisions === null) continue;
    const d = res.decisions;
    const mask = rolloutMask(policy, r);
    const parts = policy.decisionLogprobs(input.features(r.item.prompt), d, { maxSteps: cfg.maxSteps, ...mask });
    const lp = parts.map((x) => x.logprob);
    const sum = lp.reduce((a, b) => a + b, 0);
    if (res.logprob !== null && Math.abs(sum - res.logprob) > 1e-6 * Math.max(1, Math.abs(sum))) {
      throw new Error(`rollout ${r.key}: the writer recorded log-probability ${res.logprob}, the sampling policy gives ${sum} (another policy or other features?)`);
    }
    decisions.set(r.key, d);
    masks.set(r.key, mask);
    oldLogps.set(r.key, lp);
    stopDecisions.set(r.key, parts.flatMap((x, i) => (x.head === 'stop' ? [i] : [])));
  }

  // groups: the rewarded rollouts of each question
  const byQuestion = new Map<number, PlannedRollout[]>();
  for (const r of train) if (decisions.has(r.key)) byQuestion.set(r.question, [...(byQuestion.get(r.question) ?? []), r]);
  const groups = [...byQuestion.entries()].sort(([a], [b]) => a - b).map(([, rs]) => rs).filter((rs) => rs.length >= 2);
  const droppedGroups = cfg.q - groups.length;
  const adv = groups.length > 0 ? groupAdvantages(groups.map((rs) => rs.map((r) => result(r).reward!)), { scale: cfg.advantageScale }) : undefined;
  const advantage = new Map<string, number>();
  // the step tie-break's terms, credited to the stop decisions only (below); a run stored before
  // the tie-break existed has none in its config: 0, as it ran
  const tiebreak = cfg.heads.includes('stop') ? (cfg.stepTiebreak ?? 0) : 0;
  const tieTerm = new Map<string, number>();
  let tiebreakGroups = 0;
  groups.forEach((rs, gi) => {
    const a = adv!.advantages[gi]!;
    const t = stepTiebreaks(rs.map((r) => result(r).reward!), a, rs.map((r) => decisions.get(r.key)!.steps.length), tiebreak);
    if (t.some((v) => v !== 0)) tiebreakGroups++;
    rs.forEach((r, i) => {
      advantage.set(r.key, a[i]!);
      if (t[i] !== 0) tieTerm.set(r.key, t[i]!);
    });
  });

  // one sample per rollout (its group advantage, every decision), and per rollout with a tie-break
  // term one more: its stop decisions alone with that term as their advantage. The tie says that
  // the extra steps changed nothing, and the stop decisions are what made them: the worker and
  // access choices of a longer rollout get no part of it (their heads share the question's
  // features across steps, so a penalty there would move the worker choice itself)
  const samples: Array<GrpoSample<Sample>> = [];
  const tieSamples: Array<GrpoSample<Sample>> = [];
  for (const rs of groups) {
    for (const r of rs) {
      const oldLogp = oldLogps.get(r.key)!;
      if (oldLogp.length === 0) continue; // a forced workflow (one worker, one step): nothing to learn
      const x = input.features(r.item.prompt);
      const d = decisions.get(r.key)!;
      const mask = masks.get(r.key)!;
      const refLogp = cfg.klCoef > 0 && input.reference ? input.reference.decisionLogprobs(x, d, { maxSteps: cfg.maxSteps, ...mask }).map((z) => z.logprob) : undefined;
      samples.push({ sample: { x, decisions: d, mask }, advantage: advantage.get(r.key)!, oldLogp, ...(refLogp && { refLogp }) });
      const t = tieTerm.get(r.key);
      const only = stopDecisions.get(r.key)!;
      if (t !== undefined && only.length > 0) {
        tieSamples.push({ sample: { x, decisions: d, mask, only: { idx: only, n: oldLogp.length } }, advantage: t, oldLogp: only.map((i) => oldLogp[i]!), ...(refLogp && { refLogp: only.map((i) => refLogp[i]!) }) });
      }
    }
  }
  const stopHead: PolicyHead[] = ['stop'];
  const gp: GrpoPolicy<Sample, Float32Array> = {
    logps: (theta, s) => {
      const lp = policy.withTheta(theta).decisionLogprobs(s.x, s.decisions, { maxSteps: cfg.maxSteps, ...s.mask }).map((d) => d.logprob);
      return s.only ? s.only.idx.map((i) => lp[i]!) : lp;
    },
    weightedGradLogp: (theta, s, w) => {
      if (!s.only) return policy.withTheta(theta).gradLogprobWeighted(s.x, s.decisions, w, { maxSteps: cfg.maxSteps, heads: cfg.heads, ...s.mask });
      const all = new Float64Array(s.only.n);
      s.only.idx.forEach((i, k) => (all[i] = w[k]!));
      return policy.withTheta(theta).gradLogprobWeighted(s.x, s.decisions, all, { maxSteps: cfg.maxSteps, heads: stopHead, ...s.mask });
    },
  };

  const n = policy.theta.length;
  const adamState: AdamState = {
    version: 1, algorithm: 'adam', step: input.adam.step,
    m: input.adam.m ? Array.from(input.adam.m) : new Array<number>(n).fill(0),
    v: input.adam.v ? Array.from(input.adam.v) : new Array<number>(n).fill(0),
  };
  let theta = policy.theta;
  let state = adamState;
  let epochs: GrpoIterationStats['epochs'] = [];
  const batch = [...samples, ...tieSamples];
  if (batch.some((s) => s.advantage !== 0)) {
    const u = grpoUpdate({
      params: policy.theta, samples: batch, policy: gp, epochs: cfg.epochs, miniBatches: Math.min(cfg.miniBatches, batch.length),
      adam: { lr: cfg.lr }, adamState, maxGradNorm: cfg.maxGradNorm, shuffleSeed: `${cfg.seed}/${input.iteration}`,
      epsLow: cfg.clipLow, epsHigh: cfg.clipHigh, lossAgg: cfg.lossAgg, beta: cfg.klCoef,
    });
    theta = u.params;
    state = u.adamState;
    epochs = u.epochs.map((e) => ({ loss: e.loss, clipFraction: e.clipFraction, approxKl: e.approxKl, gradNorm: e.gradNorm }));
  }
  // KL from the sampling policy to the updated one, over the batch's decisions
  const updated = policy.withTheta(theta);
  let klSum = 0, k3Sum = 0, nDec = 0;
  for (const s of samples) {
    const now = updated.decisionLogprobs(s.sample.x, s.sample.decisions, { maxSteps: cfg.maxSteps, ...s.sample.mask });
    now.forEach((d, i) => {
      const diff = d.logprob - s.oldLogp[i]!;
      klSum += -diff;
      k3Sum += Math.exp(diff) - 1 - diff;
      nDec++;
    });
  }

  const rewarded = train.map(result).filter((r) => r.reward !== null);
  const rows: GrpoRolloutRow[] = rollouts.map((r) => {
    const res = result(r);
    const lp = oldLogps.get(r.key);
    return {
      iteration: input.iteration, split: r.split, question: r.question, sample: r.sample, itemId: r.item.dbId, workflowId: res.workflowId,
      finishReason: res.finishReason, parseOk: res.parseOk, reward: res.reward, cost: res.cost, nSteps: res.nSteps, topology: res.topology,
      decisions: res.decisions, logprobs: lp ?? null,
      // the group advantage plus the step tie-break's term (which only the stop decisions receive)
      advantage: advantage.has(r.key) ? advantage.get(r.key)! + (tieTerm.get(r.key) ?? 0) : null,
    };
  });
  const summary = (rs: RolloutResult[]) => ({
    meanReward: rs.length ? mean(rs.map((r) => r.reward ?? 0)) : 0,
    accuracy: rs.length ? rs.filter((r) => r.outcome === 'correct').length / rs.length : 0,
    meanSteps: rs.length ? mean(rs.map((r) => r.nSteps ?? 0)) : 0,
    meanCost: rs.length ? mean(rs.map((r) => Number(r.cost))) : 0,
    workers: count(rs.flatMap((r) => r.workers)),
    topologies: count(rs.map((r) => r.topology ?? 'none')),
  });
  const trainSummary = summary(rewarded);
  const valResults = val.map(result);
  const valSummary = val.length > 0 ? { items: val.length, ...summary(valResults) } : undefined;
  const criterion = val.length > 0 ? input.criterion : undefined;
  const record: GrpoIterationStats = {
    rollouts: train.length,
    meanReward: trainSummary.meanReward,
    rewardSd: rewarded.length > 1 ? Math.sqrt(rewarded.reduce((a, r) => a + (r.reward! - trainSummary.meanReward) ** 2, 0) / (rewarded.length - 1)) : 0,
    accuracy: trainSummary.accuracy,
    groups: groups.length,
    zeroAdvantageGroups: adv?.stats.zeroAdvantageGroups ?? 0,
    tiebreakGroups,
    unrewarded: train.length - rewarded.length,
    droppedGroups,
    parseFailures: train.map(result).filter((r) => r.parseOk === false).length,
    meanSteps: trainSummary.meanSteps,
    meanCost: trainSummary.meanCost,
    clipFraction: epochs.at(-1)?.clipFraction ?? 0,
    approxKl: nDec ? klSum / nDec : 0,
    k3Kl: nDec ? k3Sum / nDec : 0,
    epochs,
    workers: trainSummary.workers,
    topologies: trainSummary.topologies,
    kinds: count([...decisions.values()].flatMap((d) => d.steps.map((s) => s.kind)).filter((k) => (SUBTASK_KINDS as readonly string[]).includes(k))),
    ...(valSummary && { val: valSummary }),
    ...(criterion && { criterion }),
  };
  return {
    theta: Float32Array.from(theta),
    adam: { step: state.step, m: Float64Array.from(state.m), v: Float64Array.from(state.v) },
    record,
    valReward: criterion ? criterion.value : null,
    rollouts: rows,
  };
}
