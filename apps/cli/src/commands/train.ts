// `fugu train es | grpo | compare` (grpo: train-grpo.ts): create an ES run from a router checkpoint (or resume one) and
// coordinate it in this process, with local evaluator processes when no evaluator is connected,
// printing one line per generation; and the held-out end-to-end comparison of checkpoints
// (compareOnEpisodes in @fugu/training).
import { writeFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { InputError } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import { getCheckpoint, setEsRunStatus } from '@fugu/db';
import { defaultLambda } from '@fugu/es';
import { openContext, type Context } from '@fugu/evaluation';
import { startLocalEvaluators, type LocalEvaluators } from '@fugu/local-services';
import { createRedis, esEvalQueue } from '@fugu/queue';
import {
  checkEsResume, compareOnEpisodes, createEsRunFromCheckpoint, ES_DEFAULTS, esMeanCheckpointId, formatComparison, runCoordinator, type CoordinatorResult, type EsRunConfig,
} from '@fugu/training';
import { action, choiceOption, countOption, EXIT, int, interruptSignal, intOption, jsonOption, numOption, printJson, type CommandGroup } from '../cli.ts';
import { registerTrainGrpo } from './train-grpo.ts';

type EsFlags = {
  from?: string; resume?: string; lambda?: number; sigma0?: number; replicas?: number; generations?: number; task?: 'single-step' | 'episodes';
  batch?: number; episodes?: number; questions?: number; turnBudget?: number; seed?: number; stepSize?: 'tpa' | 'csa'; evalRun?: string;
  splitSeed?: number; deadlineMs?: number; attempts?: number; runId?: string; localEvaluators: number | 'auto'; wait: boolean;
};

const E = ES_DEFAULTS;

export const trainCommands: CommandGroup = (program, cli) => {
  const train = program.command('train').description("training stages beyond SFT: ES (sep-CMA-ES over the router's theta), GRPO of the embedded Conductor, and the held-out comparison");

  // no parser defaults here: on --resume a given flag must match the run's configuration
  train
    .command('es')
    .description('create an ES run and coordinate it here, one line per generation (evaluators: apps/trainer/src/evaluator-main.ts, or local ones); or --resume one')
    .option('--from <checkpoint>', 'the router checkpoint to start from')
    .option('--resume <run>', 'go on with an interrupted run (same code and configuration)')
    .addOption(intOption('--lambda <n>', 'population size (default: max(4, the sep-CMA-ES default))'))
    .addOption(numOption('--sigma0 <x>', `initial step size (default ${E.sigma0})`))
    .addOption(intOption('--replicas <n>', `evaluations per candidate (default ${E.replicas})`))
    .addOption(intOption('--generations <n>', `generations (default ${E.generations})`))
    .addOption(choiceOption('--task <kind>', 'fitness task (default single-step)', ['single-step', 'episodes']))
    .addOption(intOption('--batch <n>', `single-step: questions per evaluation (default ${E.singleStepBatch})`))
    .addOption(intOption('--episodes <n>', `episodes: episodes per evaluation (default ${E.episodes.episodes})`))
    .addOption(intOption('--questions <n>', `episodes: questions per episode (default ${E.episodes.questions})`))
    .addOption(intOption('--turn-budget <n>', `episodes: turns per episode (default ${E.episodes.turnBudget})`))
    .addOption(intOption('--seed <n>', `seed (default ${E.seed})`))
    .addOption(choiceOption('--step-size <rule>', 'step-size adaptation (default tpa)', ['tpa', 'csa']))
    .option('--eval-run <run>', "the evaluation run the fitness draws from (default: the checkpoint's training run)")
    .addOption(intOption('--split-seed <n>', "seed of the split (default: the checkpoint's)"))
    .addOption(intOption('--deadline-ms <n>', `re-dispatch missing evaluations after this long (default ${E.deadlineMs})`))
    .addOption(intOption('--attempts <n>', `attempts per evaluation job (default ${E.attempts})`))
    .option('--run-id <id>', "the new run's id")
    .addOption(countOption('--local-evaluators <n|auto>', 'ES evaluator processes to start here (auto: some when none is connected)'))
    .option('--no-wait', 'create the run and return')
    .action(action(async (f: EsFlags) => cmdTrainEs(cli.config(), f, interruptSignal())));

  registerTrainGrpo(train, cli);

  train
    .command('compare')
    .description('held-out end-to-end success of router checkpoints (e.g. SFT, ES) beside best single worker, random and oracle, on the same episodes')
    .option('--checkpoints <a,b>', 'the router checkpoints to compare')
    .addOption(choiceOption('--split <split>', 'the split the episodes draw from', ['test', 'val', 'train'], 'test'))
    .addOption(intOption('--episodes <n>', 'episodes per seed', 500))
    .addOption(intOption('--questions <n>', 'questions per episode', E.episodes.questions))
    .addOption(intOption('--turn-budget <n>', 'turns per episode', E.episodes.turnBudget))
    .option('--seeds <a,b>', 'episode seeds', '0,1,2')
    .option('--argmax', 'also route by the argmax (not only by sampling)')
    .option('--out <file>', 'also write the table to this file')
    .addOption(jsonOption())
    .action(action(async (f: { checkpoints?: string; split: 'test' | 'val' | 'train'; episodes: number; questions: number; turnBudget: number; seeds: string; argmax?: boolean; out?: string; json?: boolean }) => {
      const config = cli.config();
      const checkpoints = (f.checkpoints ?? '').split(',').map((s) => s.trim()).filter(Boolean);
      if (checkpoints.length === 0) throw new InputError('give the router checkpoints to compare: --checkpoints SFT,ES,...', { field: '--checkpoints' });
      const seeds = f.seeds.split(',').map((s, i) => int(s.trim(), `--seeds[${i}]`, 0));
      const ctx = await openContext({ redis: false, config });
      try {
        const cmp = await compareOnEpisodes({
          db: ctx.db, home: config.home, checkpoints, split: f.split, seeds, episodes: f.episodes, questions: f.questions, turnBudget: f.turnBudget,
          modes: f.argmax ? ['sample', 'argmax'] : ['sample'],
        });
        const table = formatComparison(cmp);
        if (f.json) printJson(cmp);
        else process.stdout.write(table);
        if (f.out !== undefined) {
          await writeFile(f.out, table);
          process.stderr.write(`wrote ${f.out}\n`);
        }
      } finally {
        await ctx.close();
      }
    }));
};

/** The config fields the flags give (undefined where a flag is absent). */
export function configFromFlags(f: EsFlags): Partial<EsRunConfig> {
  let task: EsRunConfig['task'] | undefined;
  if (f.task === 'episodes' || (f.task === undefined && (f.episodes ?? f.questions ?? f.turnBudget) !== undefined)) {
    if (f.batch !== undefined) throw new InputError('is for --task single-step', { field: '--batch' });
    const d = E.episodes;
    task = { kind: 'episodes', episodes: f.episodes ?? d.episodes, questions: f.questions ?? d.questions, turnBudget: f.turnBudget ?? d.turnBudget };
  } else if (f.task === 'single-step' || f.batch !== undefined) {
    task = { kind: 'single-step', batchSize: f.batch ?? E.singleStepBatch };
  }
  return {
    ...(task && { task }),
    ...(f.lambda !== undefined && { lambda: f.lambda }),
    ...(f.sigma0 !== undefined && { sigma0: f.sigma0 }),
    ...(f.replicas !== undefined && { replicas: f.replicas }),
    ...(f.generations !== undefined && { generations: f.generations }),
    ...(f.seed !== undefined && { seed: f.seed }),
    ...(f.stepSize && { stepSize: f.stepSize }),
    ...(f.evalRun !== undefined && { evalRun: f.evalRun }),
    ...(f.splitSeed !== undefined && { splitSeed: f.splitSeed }),
    ...(f.deadlineMs !== undefined && { deadlineMs: f.deadlineMs }),
    ...(f.attempts !== undefined && { attempts: f.attempts }),
  };
}

export type TrainEsOutcome = CoordinatorResult & { runId: string };

/** Follows (coordinates) a run until it completes, fails or is interrupted. */
export async function followEsRun(
  ctx: Context,
  runId: string,
  opts: { localEvaluators: number | 'auto'; signal?: AbortSignal; out?: NodeJS.WritableStream; err?: NodeJS.WritableStream },
): Promise<TrainEsOutcome> {
  const out = opts.out ?? process.stdout;
  const err = opts.err ?? process.stderr;
  let count = opts.localEvaluators;
  if (count === 'auto') {
    const connected = await ctx.queue(esEvalQueue).getWorkersCount();
    count = connected > 0 ? 0 : Math.min(2, Math.max(1, cpus().length >> 1));
    if (connected > 0) err.write(`${connected} ES evaluator(s) connected; starting none here\n`);
  }
  let evaluators: LocalEvaluators | undefined;
  if (count > 0) {
    const threads = Math.max(1, Math.floor(cpus().length / count));
    evaluators = await startLocalEvaluators(ctx.config, { count, env: { FUGU_ES_THREADS: String(threads) }, onEvent: (m) => err.write(`${m}\n`) });
    err.write(`started ${count} local ES evaluator(s) (logs in ${evaluators.logDir})\n`);
  }
  const workerConnection = createRedis(ctx.config.redisUrl, 'worker');
  const tty = (err as NodeJS.WriteStream).isTTY === true;
  try {
    const r = await runCoordinator({
      db: ctx.db, connection: ctx.redis!, workerConnection, prefix: ctx.config.queuePrefix, runId,
      ...(opts.signal && { signal: opts.signal }),
      onDispatch: (e) => {
        if (e.reason !== 'start') err.write(`${tty ? '\r\x1b[K' : ''}generation ${e.generation}: dispatched ${e.jobs} missing evaluations again (${e.reason})\n`);
        else if (e.generation === 0 || !tty) err.write(`${tty ? '\r\x1b[K' : ''}generation ${e.generation}: ${e.jobs} evaluation jobs of ${e.bytesPerJob} bytes each\n`);
      },
      onProgress: (p) => {
        if (tty) err.write(`\r\x1b[Kgeneration ${p.generation}: ${p.done}/${p.total} evaluations`);
      },
      onGeneration: (g) => {
        out.write(
          `${tty ? '\r\x1b[K' : ''}generation ${g.generation + 1}/${g.generations}: mean ${g.meanFitness.toFixed(4)}  median ${g.medianFitness.toFixed(4)}  best ${g.bestFitness.toFixed(4)}  ` +
            `best so far ${g.bestSoFar.toFixed(4)}  sigma ${g.sigma.toPrecision(4)} -> ${g.sigmaAfter.toPrecision(4)}  ${g.evaluations} evaluations in ${((g.wallMs ?? 0) / 1000).toFixed(1)} s\n`,
        );
      },
    });
    if (r.status === 'interrupted') {
      await setEsRunStatus(ctx.db, runId, 'paused', `interrupted; resume with fugu train es --resume ${runId}`);
      err.write(`\ninterrupted at generation ${r.generation}; resume with: fugu train es --resume ${runId}\n`);
    } else if (r.status === 'failed') {
      err.write(`run ${runId} failed: ${r.reason}\n`);
    } else {
      out.write(`run ${runId} completed: ${r.generation} generations; search mean: checkpoint ${esMeanCheckpointId(runId)}; best candidate: ${r.bestCheckpointId ?? '(none)'}; report: fugu report ${runId}\n`);
    }
    return { ...r, runId };
  } finally {
    workerConnection.disconnect();
    await evaluators?.stop();
  }
}

async function cmdTrainEs(config: FuguConfig, flags: EsFlags, signal: AbortSignal): Promise<number> {
  const localEvaluators = flags.localEvaluators;
  const given = configFromFlags(flags);
  const ctx = await openContext({ redis: true, config });
  try {
    let runId: string;
    if (flags.resume !== undefined) {
      if (flags.runId !== undefined) throw new InputError('cannot be given with --resume', { field: '--run-id' });
      const run = await checkEsResume(ctx.db, flags.resume, { ...given, ...(flags.from !== undefined && { checkpointId: flags.from }) });
      runId = run.id;
      if (run.status === 'completed') {
        process.stdout.write(`run ${runId} is already completed (${run.generation} generations); report: fugu report ${runId}\n`);
        return EXIT.ok;
      }
      process.stderr.write(`resuming ES run ${runId} at generation ${run.generation}\n`);
    } else {
      if (flags.from === undefined) throw new InputError('give the checkpoint to start from: fugu train es --from <checkpoint> (or --resume <run>)', { field: '--from' });
      const ckpt = await getCheckpoint(ctx.db, flags.from);
      if (!ckpt) throw new InputError(`no router checkpoint "${flags.from}" (fugu router list shows them)`, { field: '--from' });
      const cfg: EsRunConfig = {
        task: given.task ?? { kind: 'single-step', batchSize: ES_DEFAULTS.singleStepBatch },
        lambda: given.lambda ?? Math.max(defaultLambda(ckpt.theta.length), 4),
        sigma0: given.sigma0 ?? ES_DEFAULTS.sigma0,
        replicas: given.replicas ?? ES_DEFAULTS.replicas,
        generations: given.generations ?? ES_DEFAULTS.generations,
        seed: given.seed ?? ES_DEFAULTS.seed,
        deadlineMs: given.deadlineMs ?? ES_DEFAULTS.deadlineMs,
        attempts: given.attempts ?? ES_DEFAULTS.attempts,
        ...(given.stepSize && { stepSize: given.stepSize }),
        ...(given.evalRun !== undefined && { evalRun: given.evalRun }),
        ...(given.splitSeed !== undefined && { splitSeed: given.splitSeed }),
      };
      const run = await createEsRunFromCheckpoint({ db: ctx.db, home: config.home, checkpointId: ckpt.id, config: cfg, ...(flags.runId !== undefined && { runId: flags.runId }) });
      runId = run.id;
      const c = run.config;
      process.stderr.write(
        `ES run ${runId}: n ${String(c.n)}, lambda ${cfg.lambda}, sigma0 ${cfg.sigma0}, ${cfg.replicas} replica(s), ${cfg.generations} generations, task ${cfg.task.kind}, seed ${cfg.seed}\n`,
      );
      if (!flags.wait) {
        process.stdout.write(`created ES run ${runId}; coordinate it with: FUGU_ES_RUN=${runId} node apps/trainer/src/coordinator-main.ts (or fugu train es --resume ${runId})\n`);
        return EXIT.ok;
      }
    }
    const r = await followEsRun(ctx, runId, { localEvaluators, signal });
    return r.status === 'completed' ? EXIT.ok : r.status === 'interrupted' ? EXIT.interrupted : EXIT.incomplete;
  } finally {
    await ctx.close();
  }
}

