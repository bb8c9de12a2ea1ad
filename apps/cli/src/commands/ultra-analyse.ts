// `fugu ultra analyse score | planner | landscape`: exact expectations on a replay pool (any
// dataset with recorded scores and its pool, a simulation from recorded outcomes). The logic is in
// @fugu/ultra-training (src/analysis).
import path from 'node:path';
import type { Command } from 'commander';
import { InputError } from '@fugu/core';
import { REPLAY_PRESETS } from '@fugu/conductor';
import type { FuguConfig } from '@fugu/config';
import type { SplitScheme } from '@fugu/datasets';
import type { Db } from '@fugu/db';
import { openContext } from '@fugu/evaluation';
import { ULTRA_SPLITS, type UltraSplit } from '@fugu/ultra';
import {
  analyseLandscape, analysePlanner, analyseScores, analysisInputs, analysisSplitScheme, criterionSettings, formatLandscape, formatPlanner, formatScores, namedReplayConfig, presetPerturbations, type NamedReplayConfig,
} from '@fugu/ultra-training';
import { action, choiceOption, intOption, jsonOption, list, listOption, numOption, printJson, type Cli } from '../cli.ts';
import { createProgress } from '../progress.ts';
import { readReplayFile, replayFilePath } from './ultra.ts';
import { splitByOption } from '../split-by.ts';

type Common = { dataset?: string; pool?: string; splitSeed: number; splitBy?: SplitScheme; replay?: string[]; perturbations?: boolean; json?: boolean };

const replayHelp = 'step models, each a ReplayConfig JSON file named by its file name or measured:<table>.<point|pessimistic|optimistic> (space or comma separated; e.g. data/multistep/replay/dylan-math-cot.*.json); default: the presets';

export function registerUltraAnalyse(ultra: Command, cli: Cli): void {
  const analyse = ultra.command('analyse').description('exact expectations on a replay pool (a simulation from recorded outcomes): policies, the router and workflows scored over every draw of the step model');
  const common = (c: Command) =>
    c
      .option('--dataset <D>', 'llmrouter | llmrouter:<dir> | <file.jsonl>', 'llmrouter')
      .option('--pool <P>', 'llmrouter | <pool.yaml> (replay workers)', 'llmrouter')
      .addOption(intOption('--split-seed <n>', "seed of the router's split by unique prompt", 0))
      .addOption(splitByOption('default: the scheme of the policy and router checkpoints analysed, another refused; else prompt'))
      .option('--replay <files...>', replayHelp)
      .option('--perturbations', "also score under figure 2's fixed perturbations of the presets (misled +0.1, fix -0.05, keep -0.05, herd halved)")
      .addOption(jsonOption());

  common(
    analyse
      .command('score')
      .description("stored policies (argmax or sampled), router checkpoints and single workers on a split, under each step model given; with argmax workflows each one's checkpoint criterion (the expected reward, mu x $ included: what a GRPO run's best on validation is chosen by) and the best policy by it")
      .argument('<specs>', 'comma separated: a policy checkpoint id, router:<checkpoint>, single:<worker>, best (the best single worker by train mean)')
      .addOption(choiceOption('--split <s>', 'the items', ULTRA_SPLITS, 'val'))
      .addOption(intOption('--samples <n>', 'score n seeded sampled workflows per item instead of the argmax', 0))
      .addOption(listOption('--workers <a,b>', "only these of the pool's workers (a policy's choice masked to them, the router's pick among them)"))
      .addOption(numOption('--mu <x>', "the criterion's cost preference, reward units per dollar (default: the policies' GRPO run's --mu, else 0)")),
  ).action(action(async (specs: string, f: Common & { split: UltraSplit; samples: number; workers?: string[]; mu?: number }) => cmdScore(cli.config(), list(specs), f)));

  common(
    analyse
      .command('planner')
      .description('the model-based ceiling: per-worker regressions on the backbone features, per question the best single worker or "A, then B reading A" under the step model it plans with, scored under every step model given')
      .requiredOption('--router <checkpoint>', 'the router checkpoint it is compared with')
      .addOption(numOption('--l2 <x>', "the regressions' L2 penalty (choose it on val)", 0.1))
      .addOption(intOption('--iterations <n>', "the regressions' full-batch Adam iterations", 300))
      .option('--plan <files...>', 'step models to plan under (default: every --replay one, each planned under and scored under all)')
      .addOption(listOption('--splits <a,b>', 'the splits scored (default val,test)')),
  ).action(action(async (f: Common & { router: string; l2: number; iterations: number; plan?: string[]; splits?: string[] }) => cmdPlanner(cli.config(), f)));

  common(
    analyse
      .command('landscape')
      .description('what a Conductor could gain over the router: every fixed "A, then B reading A" ending at a top-5 worker, and the per-question best of the router\'s pick and such pairs (an upper bound)')
      .requiredOption('--router <checkpoint>', 'the router checkpoint')
      .addOption(choiceOption('--split <s>', 'the items', ULTRA_SPLITS, 'test')),
  ).action(action(async (f: Common & { router: string; split: UltraSplit }) => cmdLandscape(cli.config(), f)));
}

/** ReplayConfig files or measured:<table>.<corner> specs (variadic, each also comma separated), each named by its file name without .json. */
export async function readNamedConfigs(specs: readonly string[], flag: string): Promise<NamedReplayConfig[]> {
  const out: NamedReplayConfig[] = [];
  for (const spec of specs.flatMap((f) => list(f))) {
    const raw = await readReplayFile(spec, flag);
    const name = path.basename(await replayFilePath(spec, flag)).replace(/\.json$/, '');
    if (out.some((c) => c.name === name)) throw new InputError(`two step models named ${name}`, { field: flag });
    out.push(namedReplayConfig(name, raw));
  }
  return out;
}

async function configsOf(f: Common): Promise<NamedReplayConfig[]> {
  const given = f.replay ? await readNamedConfigs(f.replay, '--replay') : [];
  const perturbed = f.perturbations ? presetPerturbations(REPLAY_PRESETS) : [];
  if (given.length === 0 && perturbed.length === 0) return [{ name: 'presets', config: {} }];
  return [...given, ...perturbed];
}

/** The analysis' inputs under the split of the checkpoints it reads (policies, routers): --split-by defaults to it, another is refused. */
async function inputsOf(config: FuguConfig, db: Db, f: Common, read: { policies?: readonly string[]; routers?: readonly string[] }) {
  const splitBy = await analysisSplitScheme(db, f.splitBy, read);
  return analysisInputs(config, { dataset: f.dataset ?? 'llmrouter', pool: f.pool ?? 'llmrouter', splitSeed: f.splitSeed, splitBy });
}

async function cmdScore(config: FuguConfig, specs: string[], f: Common & { split: UltraSplit; samples: number; workers?: string[]; mu?: number }): Promise<void> {
  const configs = await configsOf(f);
  const ctx = await openContext({ redis: false, config });
  try {
    const routers = specs.filter((s) => s.startsWith('router:')).map((s) => s.slice('router:'.length));
    const policies = specs.filter((s) => !s.startsWith('router:') && !s.startsWith('single:') && s !== 'best');
    const inputs = await inputsOf(config, ctx.db, f, { policies, routers });
    // the criterion under the settings of the policies' GRPO run (its mu, its step model): what the run chose its best by
    const criterion = await criterionSettings(ctx.db, policies, { ...(f.mu !== undefined && { mu: f.mu }), configs });
    const r = await analyseScores({ db: ctx.db, home: config.home }, inputs, { specs, split: f.split, samples: f.samples, configs, criterion, ...(f.workers && { allowed: f.workers }) });
    if (f.json) return printJson(r);
    process.stdout.write(`${formatScores(r)}\n`);
  } finally {
    await ctx.close();
  }
}

async function cmdPlanner(config: FuguConfig, f: Common & { router: string; l2: number; iterations: number; plan?: string[]; splits?: string[] }): Promise<void> {
  const score = await configsOf(f);
  const plan = f.plan ? await readNamedConfigs(f.plan, '--plan') : score;
  const splits = (f.splits ?? ['val', 'test']).map((s) => {
    if (!(ULTRA_SPLITS as readonly string[]).includes(s)) throw new InputError(`must be ${ULTRA_SPLITS.join(', ')}, got "${s}"`, { field: '--splits' });
    return s as UltraSplit;
  });
  const ctx = await openContext({ redis: false, config });
  const bar = f.json ? null : createProgress({ total: f.iterations, label: 'regressions', unit: 'iterations' });
  try {
    const inputs = await inputsOf(config, ctx.db, f, { routers: [f.router] });
    const r = await analysePlanner({ db: ctx.db, home: config.home }, inputs, {
      router: f.router, l2: f.l2, iterations: f.iterations, plan, score, splits, ...(bar && { onFit: (t: number) => bar.update(t, 0) }),
    });
    bar?.stop();
    if (f.json) return printJson(r);
    process.stdout.write(`${formatPlanner(r)}\n`);
  } finally {
    await ctx.close();
  }
}

async function cmdLandscape(config: FuguConfig, f: Common & { router: string; split: UltraSplit }): Promise<void> {
  const [first] = await configsOf(f);
  const ctx = await openContext({ redis: false, config });
  try {
    const inputs = await inputsOf(config, ctx.db, f, { routers: [f.router] });
    const r = await analyseLandscape({ db: ctx.db, home: config.home }, inputs, { router: f.router, split: f.split, config: first! });
    if (f.json) return printJson(r);
    process.stdout.write(`${formatLandscape(r)}\n`);
  } finally {
    await ctx.close();
  }
}
