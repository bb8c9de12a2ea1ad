// Held-out end-to-end comparison (the README table): router checkpoints' policies beside the
// baselines (best single worker chosen on train, random, oracle), every method on the same
// episodes and random streams of each seed, on one split (default test).
import { InputError } from '@fugu/core';
import type { Db } from '@fugu/db';
import type { ExecutionProviderSetting } from '@fugu/router-model';
import { baselinePolicies, bestSingleWorker, drawEpisodes, functionPolicies, runEpisodes, summariseEpisodes, type PolicyGroup } from './episodes.ts';
import { episodeEnv, stateFeaturesOf } from './create.ts';
import type { SplitName } from './routing-data.ts';
import { checkCompatible } from './routing-data.ts';
import { getCheckpointOrThrow, loadTaskData, validateSpec } from './task-data.ts';
import { thetaPolicies, type ThetaPolicyMode } from './theta-policy.ts';
import type { CandidateResult } from './types.ts';

export type CompareOptions = {
  db: Db;
  home: string;
  /** router checkpoints to compare (e.g. the SFT checkpoint and ES results); all must score the run's workers */
  checkpoints: readonly string[];
  /** default: the first checkpoint's training run */
  run?: string;
  /** default: the first checkpoint's split seed */
  splitSeed?: number;
  episodes: number;
  questions: number;
  turnBudget: number;
  /** default 'test' */
  split?: SplitName;
  /** one evaluation per seed (default [0, 1, 2]); the table gives mean and sd over them */
  seeds?: ReadonlyArray<number | string>;
  /** how a checkpoint picks: 'sample' from pi (the ES objective, default) and/or 'argmax' */
  modes?: readonly ThetaPolicyMode[];
  executionProvider?: ExecutionProviderSetting;
  threads?: number;
};

export type CompareRow = {
  method: string;
  kind: 'checkpoint' | 'best single' | 'random' | 'oracle';
  checkpoint?: string;
  mode?: ThetaPolicyMode;
  worker?: string;
  /** success rate (mean terminal reward) per seed */
  perSeed: number[];
  mean: number;
  /** sample standard deviation over seeds (0 for one seed) */
  sd: number;
  /** summary of the first seed's trajectories */
  summary: Record<string, unknown>;
};

export type Comparison = {
  run: string;
  split: SplitName;
  splitSeed: number;
  spec: { episodes: number; questions: number; turnBudget: number };
  seeds: Array<number | string>;
  workers: string[];
  rows: CompareRow[];
};

export async function compareOnEpisodes(opts: CompareOptions): Promise<Comparison> {
  if (!Array.isArray(opts.checkpoints) || opts.checkpoints.length === 0) throw new InputError('give at least one router checkpoint to compare', { field: 'checkpoints' });
  const spec = validateSpec({ kind: 'episodes', episodes: opts.episodes, questions: opts.questions, turnBudget: opts.turnBudget }) as { kind: 'episodes'; episodes: number; questions: number; turnBudget: number };
  const split = opts.split ?? 'test';
  const seeds = [...(opts.seeds ?? [0, 1, 2])];
  if (seeds.length === 0) throw new InputError('give at least one seed', { field: 'seeds' });
  const modes = [...(opts.modes ?? ['sample'])];
  const task = await loadTaskData({ ...opts, checkpointId: opts.checkpoints[0]! });
  try {
    const ckpts = [task.checkpoint];
    for (const id of opts.checkpoints.slice(1)) {
      const c = await getCheckpointOrThrow(opts.db, id, 'checkpoints');
      checkCompatible(c, task.data, task.model.backboneId);
      ckpts.push(c);
    }
    const env = episodeEnv(task, spec);
    const K = env.workers.length;
    const features = stateFeaturesOf(task);
    const single = bestSingleWorker(task.data.rewards, task.split.train, K);

    type Method = Omit<CompareRow, 'perSeed' | 'mean' | 'sd' | 'summary'>;
    const methods: Method[] = [];
    for (const c of ckpts) for (const mode of modes) methods.push({ method: `${c.id} (${c.stage}${modes.length > 1 ? `, ${mode}` : ''})`, kind: 'checkpoint', checkpoint: c.id, mode });
    methods.push({ method: `best single worker (${env.workers[single]}, chosen on train)`, kind: 'best single', worker: env.workers[single]! });
    methods.push({ method: 'random', kind: 'random' });
    methods.push({ method: 'oracle (best recorded mean per question)', kind: 'oracle' });

    const perSeed: number[][] = methods.map(() => []);
    const summaries: Array<Record<string, unknown>> = [];
    for (const [si, seed] of seeds.entries()) {
      const ctx = { seed, generation: 0, replica: 0, split };
      const episodes = drawEpisodes(task.split[split], spec.episodes, env, ctx);
      const groups: PolicyGroup[] = [];
      for (const mode of modes) groups.push(thetaPolicies(task.head, features, ckpts.map((c) => c.theta), { mode }));
      groups.push(functionPolicies([baselinePolicies.fixed(single), baselinePolicies.random(), baselinePolicies.oracle()]));
      const results: CandidateResult[] = [];
      for (const g of groups) for (const t of await runEpisodes(env, episodes, g)) results.push(summariseEpisodes(env, t));
      // groups are [mode][checkpoint] then baselines; methods are [checkpoint][mode] then baselines
      const order = methods.map((m) => (m.kind === 'checkpoint' ? modes.indexOf(m.mode!) * ckpts.length + ckpts.findIndex((c) => c.id === m.checkpoint) : modes.length * ckpts.length + ['best single', 'random', 'oracle'].indexOf(m.kind)));
      order.forEach((r, mi) => {
        perSeed[mi]!.push(results[r]!.fitness);
        if (si === 0) summaries[mi] = results[r]!.summary;
      });
    }
    return {
      run: task.run, split, splitSeed: task.splitSeed, spec: { episodes: spec.episodes, questions: spec.questions, turnBudget: spec.turnBudget }, seeds, workers: [...env.workers],
      rows: methods.map((m, i) => ({ ...m, perSeed: perSeed[i]!, mean: mean(perSeed[i]!), sd: sd(perSeed[i]!), summary: summaries[i]! })),
    };
  } finally {
    await task.release();
  }
}

const mean = (xs: readonly number[]): number => xs.reduce((s, x) => s + x, 0) / xs.length;
const sd = (xs: readonly number[]): number => {
  if (xs.length < 2) return 0;
  const m = mean(xs);
  return Math.sqrt(xs.reduce((s, x) => s + (x - m) ** 2, 0) / (xs.length - 1));
};

/** The comparison as a Markdown table (success rate, mean ± sd over seeds). */
export function formatComparison(c: Comparison): string {
  const lines = [
    `End-to-end success on run ${c.run}, ${c.split} split (split seed ${c.splitSeed}): ${c.spec.episodes} episodes of ${c.spec.questions} questions, turn budget ${c.spec.turnBudget}, seeds ${c.seeds.join(', ')}`,
    '',
    '| method | success (mean ± sd) | per seed |',
    '|---|---|---|',
    ...c.rows.map((r) => `| ${r.method} | ${r.mean.toFixed(3)} ± ${r.sd.toFixed(3)} | ${r.perSeed.map((x) => x.toFixed(3)).join(' ')} |`),
  ];
  return `${lines.join('\n')}\n`;
}
