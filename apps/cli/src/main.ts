#!/usr/bin/env node
// `fugu`: the command line of the platform. Run as `node apps/cli/src/main.ts <command>` or
// `npm run fugu -- <command>`.
import type { ParseArgsConfig } from 'node:util';
import { writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { FuguError, InputError } from '@fugu/core';
import { loadConfig, redactUrl, type FuguConfig } from '@fugu/config';
import { callErrors, connectDb, getEsRun, listEsGenerations, listEsRuns, listRuns, migrate } from '@fugu/db';
import { esEvalQueue, providerCallQueue } from '@fugu/queue';
import { openContext } from './context.ts';
import { runEval, type EvalOptions } from './eval/run.ts';
import { collectRunSummary, formatSummary, runPrompts, writeSoftLabels } from './eval/summary.ts';
import { down, isReachable, localServiceUrls, servicesStatus, up } from './local-services.ts';
import { renderEvalReport } from './report/eval-report.ts';
import { defaultOut, int, money, parse, type Flags } from './args.ts';
import { cmdRouter, publishCheckpoint } from './router/commands.ts';
import { trainRouter, TRAIN_DEFAULTS } from './router/train.ts';
import { cmdGateway } from './serving/gateway.ts';
import { cmdKeys } from './serving/keys.ts';
import { cmdRequests, requestsOptions } from './serving/requests.ts';
import { cmdTrain } from './train/es.ts';
import { renderEsReport } from './report/es-report.ts';

const HELP = `fugu — learned LLM orchestration on a distributed batch platform

usage: fugu <command> [options]

services
  up                      start the project's own Redis and Postgres when they are not reachable
  down                    stop what \`fugu up\` started
  services                show where Redis and Postgres are and whether they answer
  migrate                 run database migrations

evaluation batches
  eval --dataset D --pool P [--workers a,b] [--repetitions 4] [--sample N] [--seed 0]
       [--spend-cap USD] [--run-id ID] [--local-workers N|auto] [--no-key-check] [--no-wait]
                          enqueue dataset x workers x repetitions and follow the run
                          D: llmrouter | llmrouter:<dir> | <file.jsonl>   P: llmrouter | <pool.yaml>
  eval --resume RUN [--spend-cap USD]
                          go on with a paused or interrupted run
  status [RUN]            a run's progress and errors (no RUN: recent runs)
  labels RUN [--tau 0.1] [--out FILE]
                          soft labels p_i(j) = softmax(rbar_ij / tau) as JSONL
  report RUN [--out FILE] [--tau 0.1]
                          HTML report: per-worker/per-task table, reference figures, plots
router model
  router list              the stored router checkpoints
  router info [CHECKPOINT]  the backbone, the adapted matrices and the flat theta layout and size
  router train --run RUN | --labels FILE --pool P [--tau 0.1] [--seed 0] [--split-seed 0] [--epochs 40] [--batch 256]
       [--lr 0.003] [--patience 5] [--weight-decay 0] [--select-by reward|loss] [--head-only]
                          SFT of the router on a run's rewards (features cached per backbone)
  router eval CHECKPOINT [--split test|val] [--run RUN] [--split-seed N] [--k 10] [--out FILE]
  router sweep CHECKPOINT [--split test|val] [--out FILE]
                          the cost-quality curve over lambda (printed and plotted)
  router route CHECKPOINT "text" ... [--allowed a,b] [--lambda 0] [--sample --seed N]
                          the worker chosen for each text (cost-aware with --lambda)
  router publish CHECKPOINT [--deployment fugu]
                          serve this checkpoint (router workers and gateways swap to it at once)
  router study --run RUN [--seeds 5] [training options]
                          router, head-only ablation and baselines, mean +- sd over split seeds
  router export CHECKPOINT [--out FILE] | router import FILE
                          a checkpoint to and from one JSON file
                          the router beside best single, best per task, kNN, random, oracle

ES training (sep-CMA-ES over the router's theta)
  train es --from CHECKPOINT [--lambda L] [--sigma0 0.5] [--replicas 1] [--generations 30] [--seed 0]
       [--task single-step|episodes] [--batch 256] [--episodes 32 --questions 3 --turn-budget 5]
       [--step-size tpa|csa] [--eval-run RUN] [--split-seed N] [--deadline-ms 300000] [--attempts 3]
       [--run-id ID] [--local-evaluators N|auto] [--no-wait]
                          create an ES run and coordinate it here, one line per generation
                          (evaluators: apps/trainer/src/evaluator-main.ts, or local ones)
  train es --resume RUN [--local-evaluators N|auto]
                          go on with an interrupted run (same code and configuration)
  train compare --checkpoints A,B [--split test] [--episodes 500] [--questions 3] [--turn-budget 5]
       [--seeds 0,1,2] [--argmax] [--out FILE]
                          held-out end-to-end success of router checkpoints (e.g. SFT, ES) beside
                          best single worker, random and oracle, on the same episodes
  status RUN / report RUN also take an ES run: progress; the fitness curve (mean, best, sigma)

serving
  gateway [--port 8080] [--host H] [--mode in-process|pool] [--pool P] [--auth keys|none]
                          the OpenAI-compatible gateway (model "fugu" or a worker's name)
  keys create --name NAME [--workers a,b] [--spend-limit-usd X]
                          an API key for the gateway, printed once (only its hash is stored)
  keys list | keys revoke <name|id>
  requests [--key K] [--since 2h|ISO] [--limit 50] [--json] | requests show <id> [--json]
                          the gateway's request rows: worker, tokens, exact cost, latency split

  demo [--repetitions 4] [--sample N] [--no-serve]
                          the embedded default: the full LLMRouter batch through replay workers,
                          the summary table, soft labels and the HTML report; then trains the
                          router, publishes it and starts the gateway (not with --no-serve)

Configuration comes from the environment (and FUGU_CONFIG); see README.md.`;

const EVAL_OPTIONS: ParseArgsConfig['options'] = {
  dataset: { type: 'string' },
  pool: { type: 'string' },
  workers: { type: 'string' },
  repetitions: { type: 'string' },
  sample: { type: 'string' },
  seed: { type: 'string' },
  'spend-cap': { type: 'string' },
  'run-id': { type: 'string' },
  resume: { type: 'string' },
  'local-workers': { type: 'string' },
  'no-key-check': { type: 'boolean' },
  'no-wait': { type: 'boolean' },
  'stall-seconds': { type: 'string' },
};

function evalOptions(flags: Flags, signal: AbortSignal): EvalOptions {
  const lw = flags['local-workers'];
  return {
    ...(typeof flags.dataset === 'string' && { dataset: flags.dataset }),
    ...(typeof flags.pool === 'string' && { pool: flags.pool }),
    ...(typeof flags.workers === 'string' && { workers: flags.workers.split(',').map((s) => s.trim()).filter(Boolean) }),
    ...(typeof flags.resume === 'string' && { resume: flags.resume }),
    ...(typeof flags['run-id'] === 'string' && { runId: flags['run-id'] }),
    repetitions: int(flags.repetitions, '--repetitions', 1),
    sample: flags.sample === undefined ? null : int(flags.sample, '--sample', 0),
    seed: int(flags.seed, '--seed', 0),
    spendCap: money(flags['spend-cap'], '--spend-cap'),
    localWorkers: lw === undefined || lw === 'auto' ? 'auto' : int(lw, '--local-workers', 0),
    keyCheck: !flags['no-key-check'],
    wait: !flags['no-wait'],
    stallSeconds: int(flags['stall-seconds'], '--stall-seconds', 15),
    signal,
  };
}

/** Ctrl-C once: pause the run and leave it resumable; twice: exit now. */
function interruptSignal(): AbortSignal {
  const ac = new AbortController();
  process.on('SIGINT', () => {
    if (ac.signal.aborted) process.exit(130);
    process.stderr.write('\ninterrupted: pausing the run (Ctrl-C again to exit at once)\n');
    ac.abort();
  });
  return ac.signal;
}

async function cmdUp(config: FuguConfig): Promise<void> {
  const own = localServiceUrls();
  const only: Array<'redis' | 'postgres'> = [];
  for (const [name, url, ownUrl, variable] of [
    ['redis', config.redisUrl, own.redisUrl, 'FUGU_REDIS_URL'],
    ['postgres', config.databaseUrl, own.databaseUrl, 'FUGU_DATABASE_URL'],
  ] as const) {
    if (await isReachable(url)) {
      process.stderr.write(`${name}: reachable at ${redactUrl(url)}\n`);
    } else if (url === ownUrl) {
      only.push(name);
    } else {
      throw new FuguError('service-unavailable', `${name} is not reachable at ${redactUrl(url)}: start it, or unset ${variable} to use the project's own`);
    }
  }
  if (only.length > 0) {
    const r = await up({ home: config.home, only });
    for (const s of r.started) process.stderr.write(`${s}: started (data in ${config.home})\n`);
  }
}

async function cmdStatus(config: FuguConfig, runId: string | undefined): Promise<void> {
  const ctx = await openContext({ redis: true, config });
  try {
    const es = runId ? await getEsRun(ctx.db, runId) : undefined;
    if (es) {
      await esStatus(ctx, es);
      return;
    }
    if (!runId) {
      for (const r of await listEsRuns(ctx.db, 10)) {
        process.stdout.write(`${r.id}  ES ${r.status.padEnd(9)}  generation ${r.generation}/${String(r.config.generations)}  from ${r.checkpointId}  ${r.createdAt.toISOString()}\n`);
      }
      const runs = await listRuns(ctx.db, 20);
      if (runs.length === 0) process.stdout.write('no evaluation runs yet\n');
      for (const r of runs) {
        process.stdout.write(`${r.id}  ${r.status.padEnd(9)}  ${r.doneCalls + r.failedCalls}/${r.totalCalls} calls  failed ${r.failedCalls}  spent $${r.spent}  ${r.createdAt.toISOString()}\n`);
      }
      return;
    }
    const s = await collectRunSummary(ctx.db, runId);
    const r = s.run;
    process.stdout.write(`run ${r.id}: ${r.status}${r.statusReason ? ` (${r.statusReason})` : ''}\n`);
    process.stdout.write(`calls: ${r.doneCalls} ok + ${r.failedCalls} failed = ${r.doneCalls + r.failedCalls} of ${r.totalCalls} (${((100 * (r.doneCalls + r.failedCalls)) / r.totalCalls).toFixed(1)}%)\n`);
    process.stdout.write(`spent: $${r.spent}${r.spendCap ? ` of a $${r.spendCap} cap` : ''}\n`);
    for (const provider of [...new Set(s.workers.map((w) => w.provider))]) {
      const q = ctx.queue(providerCallQueue(provider));
      const counts = await q.getJobCounts('waiting', 'prioritized', 'active', 'delayed', 'failed');
      process.stdout.write(`queue ${providerCallQueue(provider)}: ${Object.entries(counts).map(([k, v]) => `${k} ${v}`).join(', ')}; workers connected ${await q.getWorkersCount()}\n`);
    }
    const errors = await callErrors(ctx.db, runId);
    for (const e of errors) process.stdout.write(`errors ${e.kind}: ${e.count} (e.g. ${e.example.slice(0, 160)})\n`);
    process.stdout.write(`\n${formatSummary(s)}`);
  } finally {
    await ctx.close();
  }
}

async function esStatus(ctx: Awaited<ReturnType<typeof openContext>>, r: NonNullable<Awaited<ReturnType<typeof getEsRun>>>): Promise<void> {
  const c = r.config;
  const gens = await listEsGenerations(ctx.db, r.id);
  const last = gens.at(-1);
  process.stdout.write(`ES run ${r.id}: ${r.status}${r.statusReason ? ` (${r.statusReason})` : ''}\n`);
  process.stdout.write(`generation ${r.generation} of ${String(c.generations)}; lambda ${String(c.lambda)} x ${String(c.replicas)} replica(s); sigma0 ${String(c.sigma0)}; task ${JSON.stringify(c.task)}; seed ${String(c.seed)}\n`);
  process.stdout.write(`from checkpoint ${r.checkpointId}; best checkpoint ${r.bestCheckpointId ?? '(none yet)'}; code ${r.codeVersion}\n`);
  if (last) process.stdout.write(`last generation: mean ${last.meanFitness.toFixed(4)}, best ${last.bestFitness.toFixed(4)}, best so far ${last.bestSoFar.toFixed(4)}, sigma ${last.sigmaAfter.toPrecision(4)}\n`);
  const q = ctx.queue(esEvalQueue);
  const counts = await q.getJobCounts('waiting', 'prioritized', 'active', 'delayed', 'failed');
  process.stdout.write(`queue ${esEvalQueue}: ${Object.entries(counts).map(([k, v]) => `${k} ${v}`).join(', ')}; evaluators connected ${await q.getWorkersCount()}\n`);
  for (const g of gens.slice(-10)) {
    process.stdout.write(`  ${String(g.generation).padStart(4)}  mean ${g.meanFitness.toFixed(4)}  median ${g.medianFitness.toFixed(4)}  best ${g.bestFitness.toFixed(4)}  sigma ${g.sigma.toPrecision(4)}  ${g.evaluations} evals  ${((g.wallMs ?? 0) / 1000).toFixed(1)} s\n`);
  }
}

async function cmdLabels(config: FuguConfig, runId: string, flags: Flags): Promise<void> {
  const ctx = await openContext({ redis: false, config });
  try {
    const tau = flags.tau === undefined ? 0.1 : Number(flags.tau);
    const out = typeof flags.out === 'string' ? flags.out : defaultOut(config, 'labels', `${runId}-tau${tau}.jsonl`);
    const summary = await collectRunSummary(ctx.db, runId);
    const stats = await writeSoftLabels(summary, tau, out, await runPrompts(ctx.db, summary));
    process.stdout.write(`wrote soft labels for ${stats.items} items (tau ${tau}, mean entropy ${stats.meanEntropy.toFixed(3)} nats) to ${stats.path}\n`);
  } finally {
    await ctx.close();
  }
}

async function cmdReport(config: FuguConfig, runId: string, flags: Flags): Promise<string> {
  const ctx = await openContext({ redis: false, config });
  try {
    const es = await getEsRun(ctx.db, runId);
    if (es) {
      const out = typeof flags.out === 'string' ? flags.out : defaultOut(config, 'reports', `${runId}.html`);
      await mkdir(path.dirname(path.resolve(out)), { recursive: true });
      await writeFile(out, renderEsReport({ run: es, generations: await listEsGenerations(ctx.db, runId) }, { generatedAt: new Date().toISOString() }));
      process.stdout.write(`wrote the report of ES run ${runId} to ${out}\n`);
      return out;
    }
    const s = await collectRunSummary(ctx.db, runId);
    const tau = flags.tau === undefined ? 0.1 : Number(flags.tau);
    if (s.rows.length > 0) {
      const labels = await writeSoftLabels(s, tau, defaultOut(config, 'labels', `${runId}-tau${tau}.jsonl`));
      s.report.labels = { tau, meanEntropy: labels.meanEntropy, argmaxCounts: labels.argmaxCounts };
    }
    const out = typeof flags.out === 'string' ? flags.out : defaultOut(config, 'reports', `${runId}.html`);
    await mkdir(path.dirname(path.resolve(out)), { recursive: true });
    await writeFile(out, renderEvalReport(s.report, { generatedAt: new Date().toISOString() }));
    process.stdout.write(`wrote the report of ${runId} to ${out}\n`);
    return out;
  } finally {
    await ctx.close();
  }
}

async function cmdEval(config: FuguConfig, opts: EvalOptions): Promise<number> {
  const ctx = await openContext({ redis: true, config });
  try {
    const outcome = await runEval(ctx, opts);
    if (outcome.interrupted) return 130; // runEval said how to resume
    if (!opts.wait) {
      process.stdout.write(`enqueued run ${outcome.run.id}; follow it with: fugu status ${outcome.run.id}\n`);
      return 0;
    }
    process.stdout.write(`\n${formatSummary(await collectRunSummary(ctx.db, outcome.run.id))}`);
    return outcome.run.status === 'completed' ? 0 : 3;
  } finally {
    await ctx.close();
  }
}

async function cmdDemo(config: FuguConfig, flags: Flags, signal: AbortSignal): Promise<number> {
  process.stderr.write(`demo: the LLMRouter data (${config.llmrouterDir}) through replay workers\n`);
  const opts = evalOptions({ ...flags, dataset: 'llmrouter', pool: 'llmrouter', repetitions: (flags.repetitions as string | undefined) ?? '4' }, signal);
  const ctx = await openContext({ redis: true, config });
  let runId: string;
  try {
    const outcome = await runEval(ctx, opts);
    runId = outcome.run.id;
    if (outcome.run.status !== 'completed') {
      process.stderr.write(`run ${runId} is ${outcome.run.status}; resume with: fugu eval --resume ${runId}\n`);
      return outcome.interrupted ? 130 : 3;
    }
    const s = await collectRunSummary(ctx.db, runId);
    process.stdout.write(`\n${formatSummary(s)}`);
    process.stdout.write(`${outcome.elapsedS.toFixed(1)} s end to end (${(outcome.run.totalCalls / outcome.elapsedS).toFixed(0)} calls/s)\n\n`);
  } finally {
    await ctx.close();
  }
  await cmdLabels(config, runId, { tau: '0.1' });
  await cmdReport(config, runId, {});
  if (flags['no-serve']) return 0;

  // the router: SFT on the run's rewards, published as the deployment the gateway serves
  process.stderr.write(`\ndemo: training the router on run ${runId} (SFT, about 30 s)\n`);
  const routerCtx = await openContext({ redis: false, config });
  try {
    const { checkpointId } = await trainRouter(routerCtx.db, { ...TRAIN_DEFAULTS, run: runId, home: config.home });
    process.stderr.write(`demo: ${await publishCheckpoint(config, routerCtx.db, config.router.deployment, checkpointId)}\n`);
  } finally {
    await routerCtx.close();
  }
  // the gateway on this machine only, without keys; the replay workers answer the dataset's questions
  process.stderr.write('demo: starting the gateway (Ctrl-C stops it; `fugu gateway` starts it again)\n');
  process.removeAllListeners('SIGINT'); // the run is over: Ctrl-C now stops the gateway, not the run
  return cmdGateway(config, ['--auth', 'none', '--host', '127.0.0.1', '--pool', 'llmrouter', '--mode', 'in-process']);
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(`${HELP}\n`);
    return command ? 0 : 2;
  }
  const config = loadConfig();
  switch (command) {
    case 'up':
      await cmdUp(config);
      return 0;
    case 'down': {
      const r = await down({ home: config.home });
      process.stderr.write(r.stopped.length ? `stopped ${r.stopped.join(', ')}\n` : 'nothing was running\n');
      return 0;
    }
    case 'services': {
      process.stdout.write(`redis     ${redactUrl(config.redisUrl)}  ${(await isReachable(config.redisUrl)) ? 'reachable' : 'NOT reachable'}\n`);
      process.stdout.write(`postgres  ${redactUrl(config.databaseUrl)}  ${(await isReachable(config.databaseUrl)) ? 'reachable' : 'NOT reachable'}\n`);
      for (const s of await servicesStatus({ home: config.home })) process.stdout.write(`own ${s.name}: ${s.pid ? `running (pid ${s.pid})` : 'not running'} in ${s.dir}\n`);
      return 0;
    }
    case 'migrate': {
      const db = await connectDb(config.databaseUrl);
      try {
        const results = await migrate(db);
        process.stdout.write(results.length ? results.map((r) => `${r.migrationName}: ${r.status}`).join('\n') + '\n' : 'database is up to date\n');
      } finally {
        await db.destroy();
      }
      return 0;
    }
    case 'eval': {
      const { flags, positionals } = parse(rest, EVAL_OPTIONS);
      if (positionals.length) throw new InputError(`unexpected argument "${positionals[0]}"`, { field: 'arguments' });
      return cmdEval(config, evalOptions(flags, interruptSignal()));
    }
    case 'status': {
      const { positionals } = parse(rest, {});
      await cmdStatus(config, positionals[0]);
      return 0;
    }
    case 'labels': {
      const { flags, positionals } = parse(rest, { tau: { type: 'string' }, out: { type: 'string' } });
      if (!positionals[0]) throw new InputError('give the run id: fugu labels <run>', { field: 'run' });
      await cmdLabels(config, positionals[0], flags);
      return 0;
    }
    case 'report': {
      const { flags, positionals } = parse(rest, { tau: { type: 'string' }, out: { type: 'string' } });
      if (!positionals[0]) throw new InputError('give the run id: fugu report <run>', { field: 'run' });
      await cmdReport(config, positionals[0], flags);
      return 0;
    }
    case 'router':
      return cmdRouter(config, rest);
    case 'train':
      return cmdTrain(config, rest, interruptSignal());
    case 'keys':
      return cmdKeys(config, rest);
    case 'gateway':
      return cmdGateway(config, rest);
    case 'requests': {
      const { flags, positionals } = parse(rest, { key: { type: 'string' }, since: { type: 'string' }, limit: { type: 'string' }, json: { type: 'boolean' } });
      const opts = requestsOptions(flags, positionals);
      const ctx = await openContext({ redis: false, config });
      return cmdRequests(ctx, opts).finally(() => ctx.close());
    }
    case 'demo': {
      const { flags } = parse(rest, { repetitions: { type: 'string' }, sample: { type: 'string' }, seed: { type: 'string' }, 'local-workers': { type: 'string' }, 'no-serve': { type: 'boolean' } });
      return cmdDemo(config, flags, interruptSignal());
    }
    default:
      throw new InputError(`unknown command "${command}" (fugu help lists them)`, { field: 'command' });
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`fugu: ${(e as Error).message}\n`);
    if (process.env.FUGU_DEBUG && e instanceof Error) process.stderr.write(`${e.stack}\n`);
    process.exit(e instanceof FuguError ? (e instanceof InputError ? 2 : 1) : 1);
  },
);
