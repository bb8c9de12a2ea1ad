#!/usr/bin/env node
// `fugu`: the command line of the platform. Run as `node apps/cli/src/main.ts <command>` or
// `npm run fugu -- <command>`.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { FuguError, InputError, parseUsd, formatUsd } from '@fugu/core';
import { loadConfig, redactUrl, type FuguConfig } from '@fugu/config';
import { callErrors, connectDb, getCheckpoint, listRuns, migrate } from '@fugu/db';
import { describeThetaLayout, loadUseLite, thetaSize, useLiteHeadDims } from '@fugu/router-model';
import { providerCallQueue } from '@fugu/queue';
import { openContext } from './context.ts';
import { runEval, type EvalOptions } from './eval/run.ts';
import { collectRunSummary, formatSummary, runPrompts, writeSoftLabels } from './eval/summary.ts';
import { down, isReachable, localServiceUrls, servicesStatus, up } from './local-services.ts';
import { renderEvalReport } from './report/eval-report.ts';
import { renderRouterReport } from './report/router-report.ts';
import { trainRouter } from './router/train.ts';
import { resolveWorkerPool } from './eval/inputs.ts';
import { evaluateRouter, formatRouterEval } from './router/evaluate.ts';
import { exportCheckpoint, importCheckpoint } from './router/transfer.ts';
import { formatStudy, routerStudy } from './router/study.ts';
import { routeTexts } from './router/route.ts';

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
  router info [CHECKPOINT]  the backbone, the adapted matrices and the flat theta layout and size
  router train --run RUN | --labels FILE --pool P [--tau 0.1] [--seed 0] [--split-seed 0] [--epochs 40] [--batch 256]
       [--lr 0.003] [--patience 5] [--weight-decay 0] [--select-by reward|loss] [--head-only]
                          SFT of the router on a run's rewards (features cached per backbone)
  router eval CHECKPOINT [--split test|val] [--run RUN] [--split-seed N] [--k 10] [--out FILE]
  router sweep CHECKPOINT [--split test|val] [--out FILE]
                          the cost-quality curve over lambda (printed and plotted)
  router route CHECKPOINT "text" ... [--allowed a,b] [--lambda 0] [--sample --seed N]
                          the worker chosen for each text (cost-aware with --lambda)
  router study --run RUN [--seeds 5] [training options]
                          router, head-only ablation and baselines, mean +- sd over split seeds
  router export CHECKPOINT [--out FILE] | router import FILE
                          a checkpoint to and from one JSON file
                          the router beside best single, best per task, kNN, random, oracle

  demo [--repetitions 4] [--sample N]
                          the embedded default: the full LLMRouter batch through replay workers,
                          the summary table, soft labels and the HTML report

Configuration comes from the environment (and FUGU_CONFIG); see README.md.`;

type Flags = Record<string, string | boolean | undefined>;

function parse(args: string[], options: ParseArgsConfig['options']): { flags: Flags; positionals: string[] } {
  try {
    const r = parseArgs({ args, options, allowPositionals: true, strict: true });
    return { flags: r.values as Flags, positionals: r.positionals };
  } catch (e) {
    throw new InputError((e as Error).message.replace(/^TypeError( \[[A-Z_]+\])?: /, ''), { field: 'arguments' });
  }
}

function int(v: unknown, name: string, dflt: number): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n)) throw new InputError(`must be a whole number, got "${String(v)}"`, { field: name });
  return n;
}

function num(v: unknown, name: string, dflt: number): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new InputError(`must be a number, got "${String(v)}"`, { field: name });
  return n;
}

function money(v: unknown, name: string): string | null {
  if (v === undefined) return null;
  try {
    return formatUsd(parseUsd(String(v)));
  } catch {
    throw new InputError(`must be an amount of USD like 12.50, got "${String(v)}"`, { field: name });
  }
}

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
    if (!runId) {
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

const defaultOut = (config: FuguConfig, kind: string, name: string) => path.join(config.home, kind, name);

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
  return 0;
}

async function cmdRouter(config: FuguConfig, args: string[]): Promise<number> {
  const [sub, ...rest] = args;
  switch (sub) {
    case 'info': {
      const { positionals } = parse(rest, {});
      const ctx = positionals[0] ? await openContext({ redis: false, config }) : undefined;
      try {
        const ckpt = positionals[0] ? await getCheckpoint(ctx!.db, positionals[0]) : undefined;
        if (positionals[0] && !ckpt) throw new InputError(`no router checkpoint "${positionals[0]}"`, { field: 'checkpoint' });
        const backbone = await loadUseLite();
        const K = ckpt ? ckpt.workers.length : 9;
        process.stdout.write(`backbone: use-lite ${backbone.backboneId} (feature 512, SVF-adapted: tanh_layer_0 512x512)\n`);
        if (ckpt) process.stdout.write(`checkpoint ${ckpt.id} (${ckpt.stage}, parent ${ckpt.parentId ?? '-'}), workers: ${ckpt.workers.map((w) => w.name).join(', ')}\n`);
        else process.stdout.write(`(no checkpoint given: shown for K = ${K} workers)\n`);
        process.stdout.write(`${describeThetaLayout(useLiteHeadDims(K))}\n`);
        process.stdout.write(`theta size: ${thetaSize(useLiteHeadDims(K))}\n`);
      } finally {
        await ctx?.close();
      }
      return 0;
    }
    case 'train': {
      const { flags, positionals } = parse(rest, {
        run: { type: 'string' }, tau: { type: 'string' }, seed: { type: 'string' }, 'split-seed': { type: 'string' }, epochs: { type: 'string' },
        batch: { type: 'string' }, lr: { type: 'string' }, patience: { type: 'string' }, 'head-only': { type: 'boolean' }, 'select-by': { type: 'string' }, 'weight-decay': { type: 'string' },
        labels: { type: 'string' }, pool: { type: 'string' },
      });
      if (positionals.length) throw new InputError(`unexpected argument "${positionals[0]}"`, { field: 'arguments' });
      if (typeof flags.run !== 'string' && typeof flags.labels !== 'string') throw new InputError('give the evaluation run to train on (--run <run>) or a label file and its pool (--labels FILE --pool P)', { field: '--run' });
      if (typeof flags.labels === 'string' && typeof flags.pool !== 'string') throw new InputError('a label file needs the worker pool it routes to: --pool llmrouter|<file>', { field: '--pool' });
      const ctx = await openContext({ redis: false, config });
      try {
        const out = await trainRouter(ctx.db, {
          ...(typeof flags.run === 'string' && { run: flags.run }),
          ...(typeof flags.labels === 'string' && { labels: { file: flags.labels, pool: await resolveWorkerPool(flags.pool as string, config.llmrouterDir) } }),
          tau: num(flags.tau, '--tau', 0.1), seed: int(flags.seed, '--seed', 0), splitSeed: int(flags['split-seed'], '--split-seed', 0),
          epochs: int(flags.epochs, '--epochs', 40), batchSize: int(flags.batch, '--batch', 256), lr: num(flags.lr, '--lr', 0.003),
          patience: int(flags.patience, '--patience', 5), headOnly: Boolean(flags['head-only']), home: config.home,
          selectBy: flags['select-by'] === 'loss' ? 'loss' : 'reward', weightDecay: num(flags['weight-decay'], '--weight-decay', 0),
        });
        process.stdout.write(`${out.checkpointId}\n`);
      } finally {
        await ctx.close();
      }
      return 0;
    }
    case 'sweep':
    case 'eval': {
      const { flags, positionals } = parse(rest, { run: { type: 'string' }, split: { type: 'string' }, 'split-seed': { type: 'string' }, k: { type: 'string' }, out: { type: 'string' } });
      if (!positionals[0]) throw new InputError('give the checkpoint: fugu router eval <checkpoint>', { field: 'checkpoint' });
      const split = (flags.split as string | undefined) ?? 'test';
      if (split !== 'test' && split !== 'val') throw new InputError(`must be test or val, got "${split}"`, { field: '--split' });
      const ctx = await openContext({ redis: false, config });
      try {
        const r = await evaluateRouter(ctx.db, {
          checkpoint: positionals[0], split, k: int(flags.k, '--k', 10), home: config.home,
          ...(typeof flags.run === 'string' && { run: flags.run }),
          ...(flags['split-seed'] !== undefined && { splitSeed: int(flags['split-seed'], '--split-seed', 0) }),
        });
        if (sub === 'sweep') {
          // the cost-quality curve over lambda: decision = argmax_j (pi_j - lambda * normalised price_j)
          process.stdout.write(`cost-quality sweep of ${r.checkpoint.id} on the ${split} split (${r.sweep.points.length} values of lambda; * on the hull):\n${'lambda'.padStart(10)}${'USD/call'.padStart(12)}${'mean reward'.padStart(13)}\n`);
          const hull = new Set(r.sweep.hull.map((h) => `${h.cost}:${h.reward}`));
          let last = '';
          for (const p of r.sweep.points) {
            const row = `${p.cost.toExponential(3).padStart(12)}${p.reward.toFixed(4).padStart(13)}`;
            if (row !== last) process.stdout.write(`${p.lambda.toPrecision(3).padStart(10)}${row}${hull.has(`${p.cost}:${p.reward}`) ? ' *' : ''}\n`);
            last = row;
          }
          process.stdout.write(`AIQ ${r.aiq.toFixed(4)}\n`);
        } else {
          process.stdout.write(formatRouterEval(r));
        }
        const out = typeof flags.out === 'string' ? flags.out : defaultOut(config, 'reports', `${r.checkpoint.id}-${split}.html`);
        await mkdir(path.dirname(path.resolve(out)), { recursive: true });
        await writeFile(out, renderRouterReport(r, { generatedAt: new Date().toISOString() }));
        process.stdout.write(`wrote the report to ${out}\n`);
      } finally {
        await ctx.close();
      }
      return 0;
    }
    case 'study': {
      const { flags } = parse(rest, {
        run: { type: 'string' }, seeds: { type: 'string' }, tau: { type: 'string' }, seed: { type: 'string' }, epochs: { type: 'string' },
        batch: { type: 'string' }, lr: { type: 'string' }, patience: { type: 'string' }, 'weight-decay': { type: 'string' }, k: { type: 'string' }, out: { type: 'string' },
      });
      if (typeof flags.run !== 'string') throw new InputError('give the evaluation run: --run <run>', { field: '--run' });
      const ctx = await openContext({ redis: false, config });
      try {
        const s = await routerStudy(ctx.db, {
          run: flags.run, seeds: int(flags.seeds, '--seeds', 5), tau: num(flags.tau, '--tau', 0.1), seed: int(flags.seed, '--seed', 0),
          epochs: int(flags.epochs, '--epochs', 40), batchSize: int(flags.batch, '--batch', 256), lr: num(flags.lr, '--lr', 0.003),
          patience: int(flags.patience, '--patience', 5), weightDecay: num(flags['weight-decay'], '--weight-decay', 0), selectBy: 'reward',
          k: int(flags.k, '--k', 10), home: config.home,
        });
        process.stdout.write(formatStudy(s));
        const out = typeof flags.out === 'string' ? flags.out : defaultOut(config, 'reports', `router-study-${flags.run}.html`);
        await mkdir(path.dirname(path.resolve(out)), { recursive: true });
        await writeFile(out, renderRouterReport(s.last, { generatedAt: new Date().toISOString() }));
        process.stdout.write(`wrote the report to ${out}\n`);
      } finally {
        await ctx.close();
      }
      return 0;
    }
    case 'route': {
      const { flags, positionals } = parse(rest, { allowed: { type: 'string' }, lambda: { type: 'string' }, sample: { type: 'boolean' }, seed: { type: 'string' } });
      const [checkpoint, ...texts] = positionals;
      if (!checkpoint || texts.length === 0) throw new InputError('give a checkpoint and one or more texts: fugu router route <checkpoint> "text" ...', { field: 'arguments' });
      const ctx = await openContext({ redis: false, config });
      try {
        const { workers, decisions } = await routeTexts(ctx.db, {
          checkpoint, texts, lambda: num(flags.lambda, '--lambda', 0), sample: Boolean(flags.sample), seed: int(flags.seed, '--seed', 0), home: config.home,
          ...(typeof flags.allowed === 'string' && { allowed: flags.allowed.split(',').map((x) => x.trim()).filter(Boolean) }),
        });
        for (const d of decisions) {
          const top = [...d.probs].map((p, j) => ({ p, j })).sort((a, b) => b.p - a.p).slice(0, 3);
          process.stdout.write(`${d.worker}\t(pi: ${top.map(({ p, j }) => `${workers[j]} ${p.toFixed(3)}`).join(', ')})\t${d.text.slice(0, 60)}\n`);
        }
      } finally {
        await ctx.close();
      }
      return 0;
    }
    case 'export':
    case 'import': {
      const { flags, positionals } = parse(rest, { out: { type: 'string' } });
      if (!positionals[0]) throw new InputError(sub === 'export' ? 'give the checkpoint: fugu router export <checkpoint> [--out FILE]' : 'give the file: fugu router import <file>', { field: 'arguments' });
      const ctx = await openContext({ redis: false, config });
      try {
        if (sub === 'export') {
          const out = typeof flags.out === 'string' ? flags.out : `${positionals[0]}.json`;
          await exportCheckpoint(ctx.db, positionals[0], out);
          process.stdout.write(`wrote ${positionals[0]} to ${out}\n`);
        } else {
          process.stdout.write(`${await importCheckpoint(ctx.db, positionals[0])}\n`);
        }
      } finally {
        await ctx.close();
      }
      return 0;
    }
    default:
      throw new InputError(`unknown router command "${sub ?? ''}" (info, train, eval, sweep, route, study, export, import)`, { field: 'command' });
  }
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
    case 'demo': {
      const { flags } = parse(rest, { repetitions: { type: 'string' }, sample: { type: 'string' }, seed: { type: 'string' }, 'local-workers': { type: 'string' } });
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
