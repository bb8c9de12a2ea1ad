// `fugu train es`: create an ES run from a router checkpoint (or resume one) and coordinate it in
// this process, with local evaluator processes when no evaluator is connected, printing one line
// per generation.
import { cpus } from 'node:os';
import { InputError } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import { getCheckpoint, setEsRunStatus } from '@fugu/db';
import { defaultLambda } from '@fugu/es';
import { createRedis, esEvalQueue } from '@fugu/queue';
import { checkEsResume, createEsRunFromCheckpoint, ES_DEFAULTS, esMeanCheckpointId, runCoordinator, type CoordinatorResult, type EsRunConfig } from '@fugu/training';
import { int, num, parse, type Flags } from '../args.ts';
import { openContext, type Context } from '@fugu/evaluation';
import { cmdTrainCompare } from './compare.ts';
import { startLocalEvaluators, type LocalEvaluators } from '@fugu/local-services';

export const TRAIN_ES_OPTIONS = {
  from: { type: 'string' },
  resume: { type: 'string' },
  lambda: { type: 'string' },
  sigma0: { type: 'string' },
  replicas: { type: 'string' },
  generations: { type: 'string' },
  task: { type: 'string' },
  batch: { type: 'string' },
  episodes: { type: 'string' },
  questions: { type: 'string' },
  'turn-budget': { type: 'string' },
  seed: { type: 'string' },
  'step-size': { type: 'string' },
  'eval-run': { type: 'string' },
  'split-seed': { type: 'string' },
  'deadline-ms': { type: 'string' },
  attempts: { type: 'string' },
  'run-id': { type: 'string' },
  'local-evaluators': { type: 'string' },
  'no-wait': { type: 'boolean' },
} as const;

const opt = <T>(v: unknown, f: (v: unknown) => T): T | undefined => (v === undefined ? undefined : f(v));

/** The config fields the flags give (undefined where a flag is absent). */
export function configFromFlags(flags: Flags): Partial<EsRunConfig> {
  const kind = flags.task as string | undefined;
  if (kind !== undefined && kind !== 'single-step' && kind !== 'episodes') throw new InputError(`must be single-step or episodes, got "${kind}"`, { field: '--task' });
  const stepSize = flags['step-size'] as string | undefined;
  if (stepSize !== undefined && stepSize !== 'tpa' && stepSize !== 'csa') throw new InputError(`must be tpa or csa, got "${stepSize}"`, { field: '--step-size' });
  let task: EsRunConfig['task'] | undefined;
  if (kind === 'episodes' || (kind === undefined && (flags.episodes ?? flags.questions ?? flags['turn-budget']) !== undefined)) {
    if (flags.batch !== undefined) throw new InputError('is for --task single-step', { field: '--batch' });
    const d = ES_DEFAULTS.episodes;
    task = {
      kind: 'episodes',
      episodes: int(flags.episodes, '--episodes', d.episodes),
      questions: int(flags.questions, '--questions', d.questions),
      turnBudget: int(flags['turn-budget'], '--turn-budget', d.turnBudget),
    };
  } else if (kind === 'single-step' || flags.batch !== undefined) {
    task = { kind: 'single-step', batchSize: int(flags.batch, '--batch', ES_DEFAULTS.singleStepBatch) };
  }
  const c: Partial<EsRunConfig> = {
    ...(task && { task }),
    ...opt(flags.lambda, (v) => ({ lambda: int(v, '--lambda', 0) })),
    ...opt(flags.sigma0, (v) => ({ sigma0: num(v, '--sigma0', 0) })),
    ...opt(flags.replicas, (v) => ({ replicas: int(v, '--replicas', 0) })),
    ...opt(flags.generations, (v) => ({ generations: int(v, '--generations', 0) })),
    ...opt(flags.seed, (v) => ({ seed: int(v, '--seed', 0) })),
    ...(stepSize && { stepSize: stepSize as 'tpa' | 'csa' }),
    ...(typeof flags['eval-run'] === 'string' && { evalRun: flags['eval-run'] }),
    ...opt(flags['split-seed'], (v) => ({ splitSeed: int(v, '--split-seed', 0) })),
    ...opt(flags['deadline-ms'], (v) => ({ deadlineMs: int(v, '--deadline-ms', 0) })),
    ...opt(flags.attempts, (v) => ({ attempts: int(v, '--attempts', 0) })),
  };
  return c;
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

export async function cmdTrain(config: FuguConfig, args: string[], signal: AbortSignal): Promise<number> {
  const [what, ...rest] = args;
  if (what === 'compare') return cmdTrainCompare(config, rest);
  if (what !== 'es') throw new InputError(`unknown training command "${what ?? ''}" (fugu train es ... | fugu train compare ...)`, { field: 'stage' });
  const { flags, positionals } = parse(rest, TRAIN_ES_OPTIONS);
  if (positionals.length) throw new InputError(`unexpected argument "${positionals[0]}"`, { field: 'arguments' });
  const lw = flags['local-evaluators'];
  const localEvaluators = lw === undefined || lw === 'auto' ? 'auto' : int(lw, '--local-evaluators', 0);
  if (typeof localEvaluators === 'number' && localEvaluators < 0) throw new InputError('must be >= 0 or auto', { field: '--local-evaluators' });
  const given = configFromFlags(flags);
  const ctx = await openContext({ redis: true, config });
  try {
    let runId: string;
    if (typeof flags.resume === 'string') {
      if (flags['run-id'] !== undefined) throw new InputError('cannot be given with --resume', { field: '--run-id' });
      const run = await checkEsResume(ctx.db, flags.resume, { ...given, ...(typeof flags.from === 'string' && { checkpointId: flags.from }) });
      runId = run.id;
      if (run.status === 'completed') {
        process.stdout.write(`run ${runId} is already completed (${run.generation} generations); report: fugu report ${runId}\n`);
        return 0;
      }
      process.stderr.write(`resuming ES run ${runId} at generation ${run.generation}\n`);
    } else {
      if (typeof flags.from !== 'string') throw new InputError('give the checkpoint to start from: fugu train es --from <checkpoint> (or --resume <run>)', { field: '--from' });
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
      const run = await createEsRunFromCheckpoint({ db: ctx.db, home: config.home, checkpointId: ckpt.id, config: cfg, ...(typeof flags['run-id'] === 'string' && { runId: flags['run-id'] }) });
      runId = run.id;
      const c = run.config;
      process.stderr.write(
        `ES run ${runId}: n ${String(c.n)}, lambda ${cfg.lambda}, sigma0 ${cfg.sigma0}, ${cfg.replicas} replica(s), ${cfg.generations} generations, task ${cfg.task.kind}, seed ${cfg.seed}\n`,
      );
      if (flags['no-wait']) {
        process.stdout.write(`created ES run ${runId}; coordinate it with: FUGU_ES_RUN=${runId} node apps/trainer/src/coordinator-main.ts (or fugu train es --resume ${runId})\n`);
        return 0;
      }
    }
    const r = await followEsRun(ctx, runId, { localEvaluators, signal });
    return r.status === 'completed' ? 0 : r.status === 'interrupted' ? 130 : 3;
  } finally {
    await ctx.close();
  }
}

