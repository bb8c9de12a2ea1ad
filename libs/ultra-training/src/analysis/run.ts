// `fugu ultra analyse`: exact expectations on a replay pool (a simulation from recorded outcomes).
// score: stored policies, router checkpoints and single workers on a split under one or more step
// models (one: the exact evaluation a checkpoint is chosen by; several: figure 2's robustness
// table). planner: the model-based ceiling, planned under each step model given and scored under
// each. landscape: what fixed two-step workflows and a per-question choice could gain over the
// router.
import { InputError } from '@fugu/core';
import {
  DEFAULT_MAX_STEPS, expectedWorkflowCorrect, fixedConductor, parseConductorSpec, policyConductor, replayItemOf, rewardConfig,
  type ConductorInput, type ConductorOutput, type FixedConductorSpec, type ReplayItem, type RewardConfig,
} from '@fugu/conductor';
import type { SplitScheme } from '@fugu/datasets';
import { getConductorCheckpoint, getGrpoRun, type Db, type StoredItem, type StoredWorker } from '@fugu/db';
import { loadPolicy, type UltraSplit, type WorkflowOptions } from '@fugu/ultra';
import { backboneFeatures } from '../grpo/run.ts';
import { criterionBetter, replayCriterion } from '../grpo/criterion.ts';
import { storedGrpoConfig, type GrpoConfig } from '../grpo/config.ts';
import { exactScore, policyWorkflows, routerWorkflows, singlesAndPairs, singleWorkflows, topWorkflows, type Written } from './exact.ts';
import type { AnalysisInputs, NamedReplayConfig } from './inputs.ts';
import { fitRegressions, planWorkflow, predictAll } from './planner.ts';

type Ctx = { db: Db; home: string };

/** A row's checkpoint criterion (grpo/criterion.ts): the mean expected reward of its argmax workflows, with its parts. */
export type ScoreCriterion = { value: number; accuracy: number; usd: number };
export type ScoreRow = { spec: string; steps: number; accuracy: Record<string, number>; top: Array<{ workflow: string; count: number }>; criterion?: ScoreCriterion };
/** What the criterion was computed with: the reward (mu), the most steps and the step model of the policies' GRPO run(s), or the defaults and the first step model. */
export type CriterionSettings = { reward: Partial<RewardConfig>; maxSteps: number; replay: NamedReplayConfig; runs: string[] };
export type ScoreResult = {
  dataset: string; split: UltraSplit; splitBy: SplitScheme; splitSeed: number; items: number; samples: number; workers: string[]; configs: string[]; rows: ScoreRow[];
  /** the criterion's settings (argmax workflows only; with --samples none) */
  criterion: (Omit<CriterionSettings, 'reward'> & { mu: number; correct: number; incorrect: number }) | null;
  /** the policy with the best checkpoint criterion (ties: the one named first) */
  best: { spec: string; value: number; accuracy: number; usd: number } | null;
};

/**
 * Each spec (a policy checkpoint id, `router:<checkpoint>`, `single:<worker>` or `best` = the best
 * single worker by train mean among the allowed) on a split, in exact expectation under each config;
 * with argmax workflows (no samples) also each one's checkpoint criterion (grpo/criterion.ts, the
 * one a GRPO run's best on validation is chosen by, under `criterion`'s settings), and `best` the
 * policy with the highest criterion.
 */
export async function analyseScores(
  ctx: Ctx, inputs: AnalysisInputs,
  o: { specs: readonly string[]; split: UltraSplit; samples?: number; allowed?: readonly string[]; configs: readonly NamedReplayConfig[]; criterion?: CriterionSettings },
): Promise<ScoreResult> {
  if (o.specs.length === 0) throw new InputError('name one or more checkpoints, router:<checkpoint>, single:<worker> or best', { field: 'specs' });
  if (o.configs.length === 0) throw new InputError('give at least one step model', { field: '--replay' });
  const allowed = o.allowed ?? inputs.names;
  const items = inputs.split(o.split);
  if (items.length === 0) throw new InputError(`the ${o.split} split of dataset "${inputs.dataset}" has no items`, { field: '--split' });
  const needsFeatures = o.specs.some((s) => !s.startsWith('router:') && !s.startsWith('single:') && s !== 'best');
  const feats = needsFeatures ? await backboneFeatures(ctx.db, ctx.home) : null;
  const samples = o.samples ?? 0;
  const settings: CriterionSettings | null = samples > 0 ? null : (o.criterion ?? { reward: {}, maxSteps: DEFAULT_MAX_STEPS, replay: o.configs[0]!, runs: [] });
  try {
    const x = feats ? await feats.features(items.map((i) => i.prompt)) : [];
    const written: Written[] = [];
    // what writes each spec's workflows in the engine (the criterion's run): the same choices as `written`
    const writers: Array<(input: ConductorInput, i: number) => Promise<ConductorOutput>> = [];
    const single = (w: string) => {
      const c = fixedConductor(parseConductorSpec(`fixed:single:${w}`) as FixedConductorSpec);
      return (input: ConductorInput) => c.write(input);
    };
    for (const spec of o.specs) {
      if (spec.startsWith('router:')) {
        const r = await routerWorkflows(ctx.db, ctx.home, spec.slice('router:'.length), inputs.names, items, o.allowed);
        written.push(r);
        const c = fixedConductor(parseConductorSpec(`fixed:${spec}`) as FixedConductorSpec);
        writers.push((input, i) => c.write({ ...input, routerChoice: r.workflows[i]![0]!.worker }));
      } else if (spec === 'best') {
        const w = inputs.ranking.find((n) => allowed.includes(n))!;
        written.push({ ...singleWorkflows(w, items), id: `best single (${w})` });
        writers.push(single(w));
      } else if (spec.startsWith('single:')) {
        const w = spec.slice('single:'.length);
        if (!inputs.names.includes(w)) throw new InputError(`worker ${JSON.stringify(w)} is not in the pool (it has ${inputs.names.join(', ')})`, { field: 'specs' });
        written.push(singleWorkflows(w, items));
        writers.push(single(w));
      } else {
        written.push(await policyWorkflows(ctx.db, spec, inputs, items, x, { samples, allowed }));
        const c = policyConductor((await loadPolicy(ctx.db, spec, { workers: inputs.names })).policy, `policy:${spec}`, { argmax: true });
        writers.push((input, i) => c.write({ ...input, features: x[i]! }));
      }
    }
    const params = o.configs.map((c) => inputs.params(c.config));
    const rows: ScoreRow[] = written.map((w) => {
      const scores = params.map((p) => exactScore(p, items, w));
      return { spec: w.id, steps: scores[0]!.steps, accuracy: Object.fromEntries(o.configs.map((c, k) => [c.name, scores[k]!.accuracy])), top: topWorkflows(w, 4) };
    });
    if (settings) {
      // the checkpoint criterion, exact (grpo/criterion.ts): the engine in this process on stand-ins for the stored items and workers
      const stored: StoredItem[] = items.map((it, i) => ({ ...it, dbId: i + 1, idx: i }));
      const workers: StoredWorker[] = inputs.workers.map((w, j) => ({ ...w, id: j + 1, poolId: 0 }));
      const options: WorkflowOptions = {
        maxSteps: settings.maxSteps, ranking: inputs.ranking, argmax: true, ...(o.allowed && { workers: [...o.allowed] }),
        ...(Object.keys(settings.reward).length > 0 && { reward: settings.reward }), ...(Object.keys(settings.replay.config).length > 0 && { replay: settings.replay.config }),
      };
      for (let k = 0; k < rows.length; k++) {
        const c = await replayCriterion({ items: stored, workers, options, write: (input, _item, i) => writers[k]!(input, i) });
        rows[k]!.criterion = { value: c.value, accuracy: c.accuracy, usd: c.usd };
      }
    }
    const policies = rows.filter((r, i) => !o.specs[i]!.startsWith('router:') && !o.specs[i]!.startsWith('single:') && o.specs[i] !== 'best');
    const bestRow = settings ? policies.reduce<ScoreRow | null>((a, r) => (criterionBetter(r.criterion!.value, a?.criterion!.value ?? null) ? r : a), null) : null;
    const reward = rewardConfig(settings?.reward);
    return {
      dataset: inputs.dataset, split: o.split, splitBy: inputs.splitBy, splitSeed: inputs.splitSeed, items: items.length, samples, workers: [...allowed], configs: o.configs.map((c) => c.name), rows,
      criterion: settings && { maxSteps: settings.maxSteps, replay: settings.replay, runs: settings.runs, mu: reward.costPerUsd, correct: reward.correct, incorrect: reward.incorrect },
      best: bestRow ? { spec: bestRow.spec, ...bestRow.criterion! } : null,
    };
  } finally {
    await feats?.release();
  }
}

/**
 * The checkpoint criterion's settings for the policies analysed: those of their GRPO run (its
 * reward with mu, its most steps, its step model), so that `fugu ultra analyse score` ranks a
 * run's checkpoints by exactly what the run chose its best by; `mu` (--mu) overrides the reward's
 * cost preference. Policies of no run (an initialisation, an import) take the runs' settings, or
 * with none mu 0, 5 steps and the first step model given. Runs whose settings differ are an
 * InputError (--mu settles a different mu; a different step model or most steps cannot be).
 */
export async function criterionSettings(db: Db, policies: readonly string[], o: { mu?: number; configs: readonly NamedReplayConfig[] }): Promise<CriterionSettings> {
  if (o.mu !== undefined && !(Number.isFinite(o.mu) && o.mu >= 0)) throw new InputError(`must be a number >= 0, got ${o.mu}`, { field: '--mu' });
  const runs = new Map<string, GrpoConfig>();
  for (const id of policies) {
    const c = await getConductorCheckpoint(db, id);
    const run = typeof c?.training.run === 'string' ? c.training.run : undefined;
    if (run === undefined || runs.has(run)) continue;
    const r = await getGrpoRun(db, run);
    if (r) runs.set(run, storedGrpoConfig(r.config));
  }
  const [first, ...rest] = [...runs.entries()];
  if (!first) return { reward: o.mu !== undefined ? { costPerUsd: o.mu } : {}, maxSteps: DEFAULT_MAX_STEPS, replay: o.configs[0]!, runs: [] };
  const [id0, c0] = first;
  const mu = (c: GrpoConfig) => rewardConfig(c.reward).costPerUsd;
  for (const [id, c] of rest) {
    const other = (what: string, a: unknown, b: unknown) => new InputError(`the policies come from GRPO runs with different ${what} (${id0}: ${JSON.stringify(a)}, ${id}: ${JSON.stringify(b)}): score one run's checkpoints at a time`, { field: 'specs' });
    if (JSON.stringify(c.replay ?? {}) !== JSON.stringify(c0.replay ?? {})) throw other('step models', c0.replay ?? 'presets', c.replay ?? 'presets');
    if (c.maxSteps !== c0.maxSteps) throw other('most steps', c0.maxSteps, c.maxSteps);
    const { costPerUsd: _a, ...r0 } = rewardConfig(c0.reward);
    const { costPerUsd: _b, ...r1 } = rewardConfig(c.reward);
    if (JSON.stringify(r0) !== JSON.stringify(r1)) throw other('rewards', c0.reward, c.reward);
    if (o.mu === undefined && mu(c) !== mu(c0)) {
      throw new InputError(`the policies come from GRPO runs with different mu (${id0}: ${mu(c0)}, ${id}: ${mu(c)}): give --mu to rank them under one cost preference`, { field: '--mu' });
    }
  }
  return {
    reward: { ...c0.reward, ...(o.mu !== undefined && { costPerUsd: o.mu }) },
    maxSteps: c0.maxSteps,
    replay: c0.replay ? { name: `the step model of run ${id0}`, config: c0.replay } : { name: 'presets', config: {} },
    runs: [...runs.keys()],
  };
}

export type PlannerSplit = {
  split: UltraSplit; items: number; router: number; bestSingle: number; regressionPick: number;
  /**
   * planned under `plan`, scored under `score`: expected accuracy, mean steps, items given two steps.
   * `free`: any single worker or pair; `router-anchored`: the router's pick alone, or a helper A then
   * the router's pick reading A (a Conductor on top of the router: only the second step is its choice).
   */
  cells: Array<{ planner: 'free' | 'router-anchored'; plan: string; score: string; accuracy: number; steps: number; twoStep: number }>;
};
export type PlannerResult = { dataset: string; splitBy: SplitScheme; splitSeed: number; router: string; l2: number; iterations: number; bestSingle: string; splits: PlannerSplit[] };

/** The model-based planner (free, and anchored on the router's pick) planned under each of `plan`, scored under each of `score`. */
export async function analysePlanner(
  ctx: Ctx, inputs: AnalysisInputs,
  o: { router: string; l2: number; iterations: number; plan: readonly NamedReplayConfig[]; score: readonly NamedReplayConfig[]; splits: readonly UltraSplit[]; onFit?: (t: number) => void },
): Promise<PlannerResult> {
  if (o.plan.length === 0 || o.score.length === 0) throw new InputError('give at least one step model to plan under and to score under', { field: '--plan' });
  const feats = await backboneFeatures(ctx.db, ctx.home);
  try {
    const train = inputs.split('train');
    const xTrain = await feats.features(train.map((i) => i.prompt));
    const targets = inputs.names.map((n) => train.map((it) => it.recorded?.[n]?.score ?? 0));
    const models = fitRegressions(xTrain, targets, { l2: o.l2, iterations: o.iterations, ...(o.onFit && { onIteration: o.onFit }) });
    const candidates = singlesAndPairs(inputs.names);
    const planParams = o.plan.map((c) => inputs.params(c.config));
    const scoreParams = o.score.map((c) => inputs.params(c.config));
    const best = inputs.ranking[0]!;
    const splits: PlannerSplit[] = [];
    for (const s of o.splits) {
      const items = inputs.split(s);
      const x = await feats.features(items.map((i) => i.prompt));
      const router = await routerWorkflows(ctx.db, ctx.home, o.router, inputs.names, items);
      const real = items.map((it) => replayItemOf(it));
      const predicted = x.map((xi) => predictAll(models, xi));
      const virtual: ReplayItem[] = items.map((it, i) => ({ id: it.id, recorded: Object.fromEntries(inputs.names.map((n, j) => [n, predicted[i]![j]!])) }));
      const mean = (f: (i: number) => number) => items.reduce((a, _, i) => a + f(i), 0) / items.length;
      const cells: PlannerSplit['cells'] = [];
      const anchoredCandidates = router.workflows.map((wf) => wf[0]!.worker).map((pick) => [[{ worker: pick, sees: [] }], ...inputs.names.filter((a) => a !== pick).map((a) => [{ worker: a, sees: [] }, { worker: pick, sees: [0] }])]);
      for (const planner of ['free', 'router-anchored'] as const) {
        o.plan.forEach((pc, pk) => {
          const workflows = virtual.map((v, i) => planWorkflow(planParams[pk]!, v, planner === 'free' ? candidates : anchoredCandidates[i]!));
          o.score.forEach((sc, sk) => {
            const { accuracy, steps } = exactScore(scoreParams[sk]!, items, { id: `${planner}:${pc.name}`, draws: 1, workflows });
            cells.push({ planner, plan: pc.name, score: sc.name, accuracy, steps, twoStep: workflows.filter((w) => w.length === 2).length });
          });
        });
      }
      splits.push({
        split: s, items: items.length,
        router: mean((i) => real[i]!.recorded[router.workflows[i]![0]!.worker]!),
        bestSingle: mean((i) => real[i]!.recorded[best]!),
        regressionPick: mean((i) => { const p = predicted[i]!; return real[i]!.recorded[inputs.names[p.indexOf(Math.max(...p))]!]!; }),
        cells,
      });
    }
    return { dataset: inputs.dataset, splitBy: inputs.splitBy, splitSeed: inputs.splitSeed, router: o.router, l2: o.l2, iterations: o.iterations, bestSingle: best, splits };
  } finally {
    await feats.release();
  }
}

export type LandscapeResult = {
  dataset: string; split: UltraSplit; splitBy: SplitScheme; splitSeed: number; items: number; config: string; router: number; bestSingle: { worker: string; accuracy: number };
  pairs: Array<{ first: string; then: string; accuracy: number }>; oracle: number; routerReading: Array<{ helper: string; accuracy: number }>;
};

/** Fixed two-step workflows ending at a top-5 worker, the per-question best of the router's pick and such pairs (an upper bound), and the router's pick reading one helper. */
export async function analyseLandscape(ctx: Ctx, inputs: AnalysisInputs, o: { router: string; split: UltraSplit; config: NamedReplayConfig }): Promise<LandscapeResult> {
  const items = inputs.split(o.split);
  const params = inputs.params(o.config.config);
  const router = await routerWorkflows(ctx.db, ctx.home, o.router, inputs.names, items);
  const real = items.map((it) => replayItemOf(it));
  const pair = (i: number, a: string, b: string) => expectedWorkflowCorrect({ params, item: real[i]!, steps: [{ worker: a, sees: [] }, { worker: b, sees: [0] }] });
  const mean = (f: (i: number) => number) => items.reduce((s, _, i) => s + f(i), 0) / items.length;
  const pick = (i: number) => router.workflows[i]![0]!.worker;
  const best = inputs.ranking[0]!;
  const pairs: LandscapeResult['pairs'] = [];
  for (const b of inputs.ranking.slice(0, 5)) for (const a of inputs.names) if (a !== b) pairs.push({ first: a, then: b, accuracy: mean((i) => pair(i, a, b)) });
  pairs.sort((x, y) => y.accuracy - x.accuracy);
  const oracle = mean((i) => {
    const r = pick(i);
    let top = real[i]!.recorded[r]!;
    for (const b of new Set([r, best])) for (const a of inputs.names) if (a !== b) top = Math.max(top, pair(i, a, b));
    return top;
  });
  const routerReading = inputs.names.map((a) => ({ helper: a, accuracy: mean((i) => (pick(i) === a ? real[i]!.recorded[a]! : pair(i, a, pick(i)))) })).sort((x, y) => y.accuracy - x.accuracy);
  return {
    dataset: inputs.dataset, split: o.split, splitBy: inputs.splitBy, splitSeed: inputs.splitSeed, items: items.length, config: o.config.name, router: mean((i) => real[i]!.recorded[pick(i)]!),
    bestSingle: { worker: best, accuracy: mean((i) => real[i]!.recorded[best]!) }, pairs: pairs.slice(0, 8), oracle, routerReading: routerReading.slice(0, 4),
  };
}
