// createFitnessTask: the single-step and episode tasks behind the FitnessTask interface.
import { InputError } from '@fugu/core';
import { drawEpisodes, runEpisodes, summariseEpisodes, type EpisodeEnv } from './episodes.ts';
import { evaluateSingleStep } from './single-step.ts';
import { loadTaskData, validateContext, validateSpec, type TaskData } from './task-data.ts';
import { StateFeatures, thetaPolicies, type LayoutStats } from './theta-policy.ts';
import type { CandidateResult, EvalContext, FitnessTask, FitnessTaskOptions, FitnessTaskSpec } from './types.ts';

/** The environment of a task's data for an episodes spec. */
export function episodeEnv(task: Pick<TaskData, 'data'>, spec: { questions: number; turnBudget: number }): EpisodeEnv {
  return {
    workers: task.data.workers.map((w) => w.name),
    prompts: task.data.items.map((i) => i.prompt),
    rewards: task.data.rewards,
    questions: spec.questions,
    turnBudget: spec.turnBudget,
  };
}

/** The state-feature cache of a task, with every prompt's projected features pinned. */
export function stateFeaturesOf(task: TaskData): StateFeatures {
  const features = new StateFeatures(task.model.encoder, task.head);
  const R = task.promptY.rank;
  task.data.items.forEach((it, i) => features.pin(it.prompt, task.promptY.y.subarray(i * R, (i + 1) * R)));
  return features;
}

/** A fitness task's own counters (for benchmarks and logs). */
export type FitnessTaskStats = { evaluations: number; candidates: number; features?: StateFeatures['stats']; layout?: LayoutStats };

export async function createFitnessTask(opts: FitnessTaskOptions): Promise<FitnessTask & { readonly stats: FitnessTaskStats }> {
  const spec: FitnessTaskSpec = validateSpec(opts.spec);
  const task = await loadTaskData(opts);
  const workers = task.data.workers.map((w) => w.name);
  const stats: FitnessTaskStats = { evaluations: 0, candidates: 0 };
  const check = (thetas: readonly Float32Array[]) => {
    if (!Array.isArray(thetas)) throw new InputError('thetas must be an array of Float32Array', { field: 'thetas' });
    const n = task.head.thetaSize;
    thetas.forEach((t, i) => {
      if (!(t instanceof Float32Array) || t.length !== n) throw new InputError(`candidate ${i}: theta must be a Float32Array of ${n} values (the checkpoint's layout)`, { field: 'thetas' });
    });
  };
  let evaluate: (thetas: readonly Float32Array[], ctx: EvalContext) => Promise<CandidateResult[]>;
  if (spec.kind === 'single-step') {
    evaluate = (thetas, ctx) => evaluateSingleStep(task, spec.batchSize, thetas, ctx);
  } else {
    const env = episodeEnv(task, spec);
    const features = stateFeaturesOf(task);
    const layout: LayoutStats = { shared: 0, paired: 0, pairs: 0, headMs: 0 };
    stats.features = features.stats;
    stats.layout = layout;
    evaluate = async (thetas, ctx) => {
      const episodes = drawEpisodes(task.split[ctx.split], spec.episodes, env, ctx);
      const trajs = await runEpisodes(env, episodes, thetaPolicies(task.head, features, thetas, { layoutStats: layout }));
      return trajs.map((t) => summariseEpisodes(env, t));
    };
  }
  let released = false;
  return {
    spec,
    workers,
    theta0: task.checkpoint.theta,
    stats,
    async evaluate(thetas, ctx) {
      if (released) throw new Error('fitness task used after release()');
      validateContext(ctx);
      check(thetas);
      if (thetas.length === 0) return [];
      const out = await evaluate(thetas, ctx);
      stats.evaluations++;
      stats.candidates += thetas.length;
      return out;
    },
    async release() {
      if (released) return;
      released = true;
      await task.release();
    },
  };
}
