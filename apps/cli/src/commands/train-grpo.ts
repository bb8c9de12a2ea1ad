// `fugu train grpo`: create a GRPO run of the embedded Conductor (or resume one) and coordinate
// it here, one line per iteration. The rollouts run on the cluster (conduct jobs; local provider
// workers and conductor processes are started when none is connected) or, with `--rollouts
// local`, in this process (replay pools). The logic is in @fugu/ultra-training (src/grpo).
import type { Command } from 'commander';
import type { FuguConfig } from '@fugu/config';
import { POLICY_HEADS, type PolicyHead } from '@fugu/conductor';
import { InputError, type ProviderKind } from '@fugu/core';
import { splitLabel, type SplitScheme } from '@fugu/datasets';
import { getGrpoRun, getPoolWorkers, setGrpoRunStatus } from '@fugu/db';
import { openContext } from '@fugu/evaluation';
import * as localServices from '@fugu/local-services';
import { backboneFeatures, GRPO_DEFAULTS, runGrpo, startGrpoRun, startLocals, storedGrpoConfig, type GrpoConfig, type GrpoStartOptions } from '@fugu/ultra-training';
import { action, choiceOption, countOption, EXIT, interruptSignal, intOption, listOption, numOption, type Cli } from '../cli.ts';
import { readReplayFile } from './ultra.ts';
import { iterationClock } from '../progress.ts';
import { splitByOption } from '../split-by.ts';

type GrpoFlags = {
  dataset?: string; pool?: string; from?: string; start?: string; warmStartQuestions?: number; resume?: string; runId?: string; q?: number; g?: number; iterations?: number; seed?: number; splitSeed?: number; splitBy?: SplitScheme;
  lr?: number; maxGradNorm?: number; epochs?: number; miniBatches?: number; clip?: number; clipHigh?: number; advantage?: GrpoConfig['advantageScale'];
  lossAgg?: GrpoConfig['lossAgg']; kl?: number; stepTiebreak?: number; maxSteps?: number; heads?: string[]; mu?: number; costWeight?: number; replay?: string; valEvery?: number; valSize?: number; poolK?: number; poolHoldout?: string;
  attempts?: number; deadlineMs?: number; rollouts: 'cluster' | 'local'; localConductors: number | 'auto'; localWorkers: number | 'auto'; wait: boolean;
};

const D = GRPO_DEFAULTS;

export function registerTrainGrpo(train: Command, cli: Cli): void {
  // no parser defaults for the run's settings: on --resume a given flag must match the run's configuration
  train
    .command('grpo')
    .description('train the embedded Conductor (policy:) with GRPO: Q questions x G sampled workflows per iteration, group-relative advantages, a clipped update; or --resume a run')
    .option('--dataset <spec>', 'the dataset with recorded scores (llmrouter, llmrouter:<dir> or a file)')
    .option('--pool <spec>', 'the worker pool (llmrouter or a pool file)')
    .option('--from <checkpoint>', 'a stored policy checkpoint to start from')
    .option('--start <point>', 'a new starting policy: init (the documented initialisation; default) or router:<checkpoint> (a warm start: its first-step worker choice fitted to the router\'s)')
    .addOption(intOption('--warm-start-questions <n>', 'a warm start fits the router on a seeded sample of this many train questions (default 2000)'))
    .option('--resume <run>', 'go on with an interrupted run (same code and configuration)')
    .option('--run-id <id>', "the new run's id")
    .addOption(intOption('--q <n>', `questions per iteration (default ${D.q})`))
    .addOption(intOption('--g <n>', `sampled workflows per question, the group (default ${D.g})`))
    .addOption(intOption('--iterations <n>', `iterations (default ${D.iterations})`))
    .addOption(intOption('--seed <n>', `seed of the questions, the samples and the environment (default ${D.seed})`))
    .addOption(intOption('--split-seed <n>', `seed of the router's split by prompt (default ${D.splitSeed})`))
    .addOption(splitByOption("default: the scheme of --from's policy or --start's router, another refused; else prompt"))
    .addOption(numOption('--lr <x>', `Adam's learning rate (default ${D.lr})`))
    .addOption(numOption('--max-grad-norm <x>', `gradient-norm clip (default ${D.maxGradNorm})`))
    .addOption(intOption('--epochs <n>', `optimisation epochs over one iteration's rollouts (default ${D.epochs})`))
    .addOption(intOption('--mini-batches <n>', `mini-batches per epoch (default ${D.miniBatches})`))
    .addOption(numOption('--clip <x>', `clip range below 1 (and above, unless --clip-high) (default ${D.clipLow})`))
    .addOption(numOption('--clip-high <x>', 'clip range above 1 (default: --clip)'))
    .addOption(choiceOption('--advantage <scale>', 'group (GRPO), none (Dr. GRPO) or batch std scaling (default group)', ['group', 'none', 'batch']))
    .addOption(choiceOption('--loss-agg <mode>', 'average per sequence then over sequences (GRPO) or over all decisions (default seq-mean-token-mean)', ['seq-mean-token-mean', 'token-mean']))
    .addOption(numOption('--kl <coef>', 'KL coefficient against the starting policy, k3 estimator (default 0)'))
    .addOption(numOption('--step-tiebreak <x>', `rollouts of a group whose rewards tie exactly: advantage -x per step above their mean, so an extra step that changed nothing is never free; never reorders unequal rewards; 0: off (default ${D.stepTiebreak})`))
    .addOption(intOption('--max-steps <n>', `steps per workflow (default ${D.maxSteps})`))
    .addOption(listOption('--heads <a,b>', `the policy heads trained (${POLICY_HEADS.join(', ')}; default all, without kind on a replay pool)`))
    .addOption(numOption('--mu <x>', 'the cost preference per dollar: reward minus mu x dollars per workflow (default 0)'))
    .addOption(numOption('--cost-weight <x>', "the cost preference in the pool's own unit: reward minus x times the workflow's dollars over the best single worker's (by train mean) dollars per train item, so it carries across pools and prices; e.g. 0.01: always paying the best worker is worth 0.01 reward, 2 points of accuracy at 1 / 0.5 / 0 (sets mu; not with --mu)"))
    .option('--replay <file>', 'replay step model parameters (a ReplayConfig JSON file)')
    .addOption(intOption('--val-every <n>', `evaluate the argmax policy on the validation items every n iterations, 0: never (default ${D.valEvery})`))
    .addOption(intOption('--val-size <n>', `validation items (default ${D.valSize})`))
    .addOption(intOption('--pool-k <k>', 'randomised pools: each training question sees a seeded random k of the pool\'s workers (the policy\'s worker choice masked to them), so one policy serves any per-key pool; 0: the whole pool (default 0)'))
    .option('--pool-holdout <pools>', 'with --pool-k: pools never drawn for training, held out for evaluation (workers comma separated, pools by ;), e.g. "a,b,c;d,e,f"')
    .addOption(intOption('--attempts <n>', `attempts per rollout job (default ${D.attempts})`))
    .addOption(intOption('--deadline-ms <n>', `re-dispatch missing rollouts after this long (default ${D.deadlineMs})`))
    .addOption(choiceOption('--rollouts <where>', 'cluster: conduct jobs; local: in this process, replay pools only', ['cluster', 'local'], 'cluster'))
    .addOption(countOption('--local-conductors <n|auto>', 'cluster rollouts: conductor processes to start here (auto: 2 when none is connected)'))
    .addOption(countOption('--local-workers <n|auto>', 'cluster rollouts: provider workers to start here (auto: 2 when none is connected)'))
    .option('--no-wait', 'create the run and return')
    .action(action(async (f: GrpoFlags) => cmdTrainGrpo(cli.config(), f, interruptSignal())));
}

async function startOptions(f: GrpoFlags): Promise<GrpoStartOptions> {
  if (f.heads) for (const h of f.heads) if (!(POLICY_HEADS as readonly string[]).includes(h)) throw new InputError(`${JSON.stringify(h)} is not a head (${POLICY_HEADS.join(', ')})`, { field: '--heads' });
  const replay = f.replay !== undefined ? await readReplayFile(f.replay) : undefined;
  const o: GrpoStartOptions = {
    dataset: f.dataset, pool: f.pool, from: f.from, start: f.start, warmStartQuestions: f.warmStartQuestions, resume: f.resume, runId: f.runId, q: f.q, g: f.g, iterations: f.iterations, seed: f.seed, splitSeed: f.splitSeed, splitBy: f.splitBy,
    lr: f.lr, maxGradNorm: f.maxGradNorm, epochs: f.epochs, miniBatches: f.miniBatches, clipLow: f.clip, clipHigh: f.clipHigh ?? (f.resume ? undefined : f.clip),
    advantageScale: f.advantage, lossAgg: f.lossAgg, klCoef: f.kl, stepTiebreak: f.stepTiebreak, maxSteps: f.maxSteps, heads: f.heads as PolicyHead[] | undefined,
    reward: f.mu !== undefined ? { costPerUsd: f.mu } : undefined, costWeight: f.costWeight, replay, valEvery: f.valEvery, valSize: f.valSize, poolK: f.poolK, poolHoldout: f.poolHoldout?.split(';').map((p) => p.split(',').map((w) => w.trim()).filter(Boolean)), attempts: f.attempts, deadlineMs: f.deadlineMs,
  };
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as GrpoStartOptions;
}

/** The run's cost preference as the user gave it: mu per dollar, or the cost weight with the mu it became. */
function costLabel(c: GrpoConfig): string {
  const mu = c.reward.costPerUsd ?? 0;
  if (c.costWeight === undefined || !c.costReference) return `mu ${mu}`;
  const r = c.costReference;
  return `cost weight ${c.costWeight} (1 = ${r.worker}'s $${r.usdPerItem.toPrecision(3)} per train item) = mu ${mu === 0 ? '0' : mu.toPrecision(4)} per $`;
}

async function cmdTrainGrpo(config: FuguConfig, f: GrpoFlags, signal: AbortSignal): Promise<number> {
  if (f.resume !== undefined && f.runId !== undefined) throw new InputError('cannot be given with --resume', { field: '--run-id' });
  const ctx = await openContext({ redis: f.rollouts === 'cluster', config });
  const features = await backboneFeatures(ctx.db, config.home);
  const err = process.stderr;
  const locals: Array<{ stop(): Promise<void> }> = [];
  try {
    const runId = await startGrpoRun(ctx, await startOptions(f), features);
    const run = (await getGrpoRun(ctx.db, runId))!;
    const cfg = storedGrpoConfig(run.config);
    err.write(`${f.resume ? 'resuming' : 'created'} GRPO run ${runId} at iteration ${run.iteration}/${cfg.iterations}: Q ${cfg.q} x G ${cfg.g}, lr ${cfg.lr}, ${cfg.epochs} epoch(s), clip ${cfg.clipLow}/${cfg.clipHigh}, advantages ${cfg.advantageScale}, step tie-break ${cfg.stepTiebreak ?? 0}, ${costLabel(cfg)}, heads ${cfg.heads.join(', ')}, rollouts ${f.rollouts}; split ${splitLabel({ by: cfg.splitBy, seed: cfg.splitSeed })}\n`);
    if ((cfg.reward.costPerUsd ?? 0) > 0 && cfg.advantageScale === 'group') {
      err.write("note: a cost term with --advantage group: dividing by each group's std scales its rollouts' cost-only differences to size 1, so cost weighs as much as correctness wherever their outcomes tie, whatever the weight (docs/benchmarks.md, \"The cost preference in the pool's unit\"); --advantage none keeps the weight's size\n");
    }
    if (run.status === 'completed') {
      process.stdout.write(`run ${runId} is already completed; report: fugu report ${runId}\n`);
      return EXIT.ok;
    }
    if (!f.wait) {
      process.stdout.write(`created GRPO run ${runId}; coordinate it with: FUGU_GRPO_RUN=${runId} node apps/trainer/src/grpo-main.ts (or fugu train grpo --resume ${runId})\n`);
      return EXIT.ok;
    }
    if (f.rollouts === 'cluster') {
      const providers = [...new Set((await getPoolWorkers(ctx.db, run.poolId)).map((w) => w.provider))] as ProviderKind[];
      locals.push(...(await startLocals(ctx, {
        localConductors: f.localConductors, localWorkers: f.localWorkers, providers, log: (l) => err.write(`${l}\n`),
        startLocalWorkers: (o) => localServices.startLocalWorkers(config, o), startLocalConductors: (o) => localServices.startLocalConductors(config, o),
      })));
    }
    const tty = err.isTTY === true;
    const clock = iterationClock(cfg.iterations - run.iteration);
    const r = await runGrpo(ctx, {
      runId, rollouts: f.rollouts, features, signal,
      onProgress: (p) => {
        if (tty) err.write(`\r\x1b[Kiteration ${p.index + 1}/${cfg.iterations}: ${p.done}/${p.total} rollouts`);
      },
      onIteration: ({ index, update: u }) => {
        const rec = u.record;
        const crit = rec.criterion ? `; criterion ${rec.criterion.value.toFixed(4)} (${rec.criterion.exact ? 'exact' : 'sampled'}, ${rec.criterion.items} val items, acc ${rec.criterion.accuracy.toFixed(4)}, $ ${rec.criterion.usd.toExponential(2)})` : '';
        const val = rec.val ? `  val ${rec.val.meanReward.toFixed(4)} (acc ${rec.val.accuracy.toFixed(3)}, ${rec.val.meanSteps.toFixed(2)} steps${crit})` : '';
        process.stdout.write(
          `${tty ? '\r\x1b[K' : ''}iteration ${index + 1}/${cfg.iterations}: reward ${rec.meanReward.toFixed(4)} ± ${rec.rewardSd.toFixed(3)}  acc ${rec.accuracy.toFixed(3)}  ` +
            `steps ${rec.meanSteps.toFixed(2)}  zero-adv groups ${rec.zeroAdvantageGroups}/${rec.groups}${rec.tiebreakGroups ? ` (tie-break ${rec.tiebreakGroups})` : ''}  parse failures ${rec.parseFailures}  clip ${rec.clipFraction.toFixed(3)}  ` +
            `KL ${rec.approxKl.toExponential(2)}${val}  ${clock(index - run.iteration)}\n`,
        );
      },
    });
    if (r.status === 'interrupted') {
      await setGrpoRunStatus(ctx.db, runId, 'paused', `interrupted; resume with fugu train grpo --resume ${runId}`);
      err.write(`\ninterrupted; resume with: fugu train grpo --resume ${runId}\n`);
      return EXIT.interrupted;
    }
    if (r.status === 'failed') {
      err.write(`run ${runId} failed: ${r.reason}\n`);
      return EXIT.incomplete;
    }
    const done = (await getGrpoRun(ctx.db, runId))!;
    process.stdout.write(`run ${runId} completed: final policy ${done.policyCheckpointId}; best on validation ${done.bestCheckpointId ?? '(none)'}${done.bestValReward !== null ? ` (checkpoint criterion ${done.bestValReward.toFixed(4)})` : ''}; report: fugu report ${runId}\n`);
    return EXIT.ok;
  } finally {
    for (const l of locals.reverse()) await l.stop();
    await features.release();
    await ctx.close();
  }
}
