// `fugu eval | status | labels | report | demo`: evaluation batches (@fugu/evaluation) and the
// embedded demo.
import { spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { FuguConfig } from '@fugu/config';
import { InputError } from '@fugu/core';
import { batchWorkerStats, callErrors, conductorRunProgress, getBatchRow, getConductorRun, getEsRun, listBatchRows, listConductorRuns, listEsGenerations, listEsRuns, listGrpoRuns, listRuns, type BatchRow, type Db, type EsRunRecord } from '@fugu/db';
import { collectRunSummary, formatSummary, openContext, runEval, runPrompts, writeSoftLabels, type Context, type EvalOptions } from '@fugu/evaluation';
import { startLocalWorkers } from '@fugu/local-services';
import { esEvalQueue, providerCallQueue, providerCallQueues } from '@fugu/queue';
import { renderBatchReport, renderEsReport, renderEvalReport, renderGrpoReport, renderSessionReport, softLabelArgmax, usdText, type BatchReportData, type GrpoReportData } from '@fugu/report';
import { trainRouter, TRAIN_DEFAULTS } from '@fugu/training';
import {
  action, columns, countOption, defaultOut, EXIT, interruptSignal, intOption, jsonOption, listOption, numOption, printJson, usdOption, type CommandGroup,
} from '../cli.ts';
import { createProgress } from '../progress.ts';
import { sessionReportData } from './requests.ts';
import { publishCheckpoint } from './router.ts';
import { backgroundGateway, startGateway } from './serving.ts';
import { cmdUltraEval, conductorRunLine, printConductorRun, writeUltraReport } from './ultra.ts';
import { cmdUltraPublish, ULTRA_PUBLISH_DEFAULTS } from './ultra-publish.ts';
import { pickUltraConductor, type UltraPick } from './demo-ultra.ts';
import { grpoReportData, summarizeUltraRuns } from '@fugu/ultra-training';

type EvalFlags = {
  dataset?: string; pool?: string; workers?: string[]; repetitions: number; sample?: number; seed: number; spendCap?: string; runId?: string;
  resume?: string; localWorkers: number | 'auto'; keyCheck: boolean; wait: boolean; stallSeconds: number; json?: boolean;
};

export const evalCommands: CommandGroup = (program, cli) => {
  program
    .command('eval')
    .description('enqueue dataset x workers x repetitions and follow the run (or go on with one: --resume RUN)')
    .option('--dataset <D>', 'llmrouter | llmrouter:<dir> | <file.jsonl>')
    .option('--pool <P>', 'llmrouter | <pool.yaml>')
    .addOption(listOption('--workers <a,b>', "only these of the pool's workers"))
    .addOption(intOption('--repetitions <n>', 'calls per (item, worker)', 1))
    .addOption(intOption('--sample <n>', 'a seeded sample of n items (default: all)'))
    .addOption(intOption('--seed <n>', 'seed of the sample', 0))
    .addOption(usdOption('--spend-cap <usd>', 'pause the run once it has spent this much'))
    .option('--run-id <id>', 'the new run\'s id (default: run_<time>_<random>)')
    .option('--resume <run>', 'go on with a paused or interrupted run')
    .addOption(countOption('--local-workers <n|auto>', 'provider-worker processes to start here (auto: 2 when none is connected)'))
    .option('--no-key-check', "don't check for the hosted workers' API keys here")
    .option('--no-wait', 'return once the calls are enqueued')
    .addOption(intOption('--stall-seconds <n>', 'seconds without progress, with nothing queued, before missing calls are enqueued again', 15))
    .addOption(jsonOption())
    .action(action(async (f: EvalFlags) => cmdEval(cli.config(), f, interruptSignal())));

  program
    .command('status')
    .description("a run's progress and errors (an evaluation, ES, conductor or GRPO run, or a Batch API batch; no RUN: the recent ones)")
    .argument('[run]', 'the run id')
    .addOption(jsonOption())
    .action(action(async (run: string | undefined, f: { json?: boolean }) => cmdStatus(cli.config(), run, Boolean(f.json))));

  program
    .command('labels')
    .description('soft labels p_i(j) = softmax(rbar_ij / tau) of a run, as JSONL')
    .argument('<run>', 'the evaluation run')
    .addOption(numOption('--tau <t>', 'temperature', 0.1))
    .option('--out <file>', 'default: FUGU_HOME/labels/<run>-tau<t>.jsonl')
    .action(action(async (run: string, f: { tau: number; out?: string }) => cmdLabels(cli.config(), run, f)));

  program
    .command('report')
    .description(
      'HTML report of a run: per-worker/per-task table, reference figures, plots (ES run: the fitness curve; a batch: its lines per worker; ' +
        "session:<S>: a client session's turns, the worker chosen at each and what it cost)",
    )
    .argument('<run>', 'the evaluation, ES, GRPO or conductor run, a batch, or session:<S> (a session id its requests carry: fugu requests --session S)')
    .option('--out <file>', 'default: FUGU_HOME/reports/<run>.html')
    .addOption(numOption('--tau <t>', 'temperature of the soft labels shown', 0.1))
    .action(action(async (run: string, f: { tau: number; out?: string }) => void (await cmdReport(cli.config(), run, f))));

  program
    .command('demo')
    .description(
      'the embedded default: the full LLMRouter batch through replay workers, the summary, soft labels and the HTML report; ' +
        'then trains the router, publishes it, runs the Conductor on 100 test questions against it and starts the gateway (not with --no-serve)',
    )
    .addOption(intOption('--repetitions <n>', 'calls per (item, worker)', 4))
    .addOption(intOption('--sample <n>', 'a seeded sample of n items (default: all)'))
    .addOption(intOption('--seed <n>', 'seed of the sample', 0))
    .addOption(countOption('--local-workers <n|auto>', 'provider-worker processes to start here'))
    .option('--no-serve', 'stop after the report')
    .option('--gateway-log <file>', "where the gateway's JSON log goes (a line per request), '-' for this terminal (default: FUGU_HOME/logs/gateway.log)")
    .action(action(async (f: { repetitions: number; sample?: number; seed: number; localWorkers: number | 'auto'; serve: boolean; gatewayLog?: string }) =>
      cmdDemo(cli.config(), f, interruptSignal())));
};

function evalOptions(config: FuguConfig, f: EvalFlags, signal: AbortSignal): EvalOptions {
  return {
    ...(f.dataset !== undefined && { dataset: f.dataset }),
    ...(f.pool !== undefined && { pool: f.pool }),
    ...(f.workers && { workers: f.workers }),
    ...(f.resume !== undefined && { resume: f.resume }),
    ...(f.runId !== undefined && { runId: f.runId }),
    repetitions: f.repetitions,
    sample: f.sample ?? null,
    seed: f.seed,
    spendCap: f.spendCap ?? null,
    localWorkers: f.localWorkers,
    keyCheck: f.keyCheck,
    wait: f.wait,
    stallSeconds: f.stallSeconds,
    signal,
    progress: (run) => createProgress({ total: run.totalCalls, label: run.id }),
    startLocalWorkers: (o) => startLocalWorkers(config, o),
  };
}

async function cmdEval(config: FuguConfig, f: EvalFlags, signal: AbortSignal): Promise<number> {
  const ctx = await openContext({ redis: true, config });
  try {
    const outcome = await runEval(ctx, evalOptions(config, f, signal));
    if (outcome.interrupted) return EXIT.interrupted; // runEval said how to resume
    if (!f.wait) {
      if (f.json) printJson({ run: outcome.run });
      else process.stdout.write(`enqueued run ${outcome.run.id}; follow it with: fugu status ${outcome.run.id}\n`);
      return EXIT.ok;
    }
    const s = await collectRunSummary(ctx.db, outcome.run.id);
    if (f.json) printJson({ run: s.run, summary: s.report });
    else process.stdout.write(`\n${formatSummary(s)}`);
    return outcome.run.status === 'completed' ? EXIT.ok : EXIT.incomplete;
  } finally {
    await ctx.close();
  }
}

/** The jobs and workers of a queue, or summed over a sharded provider queue's shards (`label` names them together). */
async function queueState(ctx: Context, name: string | string[], label = Array.isArray(name) ? name.join(' ') : name): Promise<{ queue: string; counts: Record<string, number>; workers: number }> {
  const counts: Record<string, number> = {};
  let workers = 0;
  for (const n of Array.isArray(name) ? name : [name]) {
    const q = ctx.queue(n);
    for (const [k, v] of Object.entries(await q.getJobCounts('waiting', 'prioritized', 'active', 'delayed', 'failed'))) counts[k] = (counts[k] ?? 0) + v;
    workers += await q.getWorkersCount();
  }
  return { queue: label, counts, workers };
}

const countsText = (c: Record<string, number>): string => Object.entries(c).map(([k, v]) => `${k} ${v}`).join(', ');

async function cmdStatus(config: FuguConfig, runId: string | undefined, json: boolean): Promise<void> {
  const ctx = await openContext({ redis: true, config });
  try {
    const batch = runId ? await getBatchRow(ctx.db, runId) : undefined;
    if (batch) return await batchStatus(ctx.db, batch, json);
    const es = runId ? await getEsRun(ctx.db, runId) : undefined;
    if (es) return await esStatus(ctx, es, json);
    const conductorRun = runId ? await getConductorRun(ctx.db, runId) : undefined;
    if (conductorRun) return await printConductorRun(ctx.db, conductorRun, json);
    const grpo = runId ? await grpoReportData(ctx.db, runId) : undefined;
    if (grpo) return grpoStatus(grpo, json);
    if (!runId) {
      const grpoRuns = await listGrpoRuns(ctx.db, 10);
      for (const r of grpoRuns) {
        if (json) break;
        process.stdout.write(`${r.id}  GRPO ${r.status.padEnd(9)}  iteration ${r.iteration}/${String(r.config.iterations)}  policy ${r.policyCheckpointId}  best ${r.bestCheckpointId ?? '-'}  ${r.createdAt.toISOString()}\n`);
      }
      const esRuns = await listEsRuns(ctx.db, 10);
      const runs = await listRuns(ctx.db, 20);
      const conductorRuns = await Promise.all((await listConductorRuns(ctx.db, 10)).map(async (r) => ({ run: r, progress: await conductorRunProgress(ctx.db, r.id) })));
      const batches = await listBatchRows(ctx.db, undefined, { limit: 10 });
      if (json) return printJson({ grpoRuns: grpoRuns.map(({ adam: _a, ...r }) => r), esRuns, runs, conductorRuns, batches: batches.map(batchJson) });
      for (const b of batches) process.stdout.write(`${batchLine(b)}\n`);
      for (const c of conductorRuns) process.stdout.write(`${conductorRunLine(c.run, c.progress)}\n`);
      for (const r of esRuns) {
        process.stdout.write(`${r.id}  ES ${r.status.padEnd(9)}  generation ${r.generation}/${String(r.config.generations)}  from ${r.checkpointId}  ${r.createdAt.toISOString()}\n`);
      }
      if (runs.length === 0) process.stdout.write('no evaluation runs yet\n');
      for (const r of runs) {
        process.stdout.write(`${r.id}  ${r.status.padEnd(9)}  ${r.doneCalls + r.failedCalls}/${r.totalCalls} calls  failed ${r.failedCalls}  spent $${r.spent}  ${r.createdAt.toISOString()}\n`);
      }
      return;
    }
    const s = await collectRunSummary(ctx.db, runId);
    const r = s.run;
    const queues = await Promise.all([...new Set(s.workers.map((w) => w.provider))].map((p) => {
      const shards = providerCallQueues(p, ctx.config.providerQueueShards);
      return queueState(ctx, shards, shards.length > 1 ? `${providerCallQueue(p)} (${shards.length} shards)` : shards[0]);
    }));
    const errors = await callErrors(ctx.db, runId);
    if (json) return printJson({ run: r, queues, errors, summary: s.report });
    process.stdout.write(`run ${r.id}: ${r.status}${r.statusReason ? ` (${r.statusReason})` : ''}\n`);
    process.stdout.write(`calls: ${r.doneCalls} ok + ${r.failedCalls} failed = ${r.doneCalls + r.failedCalls} of ${r.totalCalls} (${((100 * (r.doneCalls + r.failedCalls)) / r.totalCalls).toFixed(1)}%)\n`);
    process.stdout.write(`spent: $${r.spent}${r.spendCap ? ` of a $${r.spendCap} cap` : ''}\n`);
    for (const q of queues) process.stdout.write(`queue ${q.queue}: ${countsText(q.counts)}; workers connected ${q.workers}\n`);
    for (const e of errors) process.stdout.write(`errors ${e.kind}: ${e.count} (e.g. ${e.example.slice(0, 160)})\n`);
    process.stdout.write(`\n${formatSummary(s)}`);
  } finally {
    await ctx.close();
  }
}

const batchJson = (b: BatchRow) => ({ ...b, charged: usdText(b.charged) });
const batchLine = (b: BatchRow): string =>
  `${b.id}  batch ${b.status.padEnd(10)}  ${b.completed + b.failed}/${b.total} lines  failed ${b.failed}  spent ${usdText(b.charged)}  ${b.createdAt.toISOString()}`;

/** A Batch API batch: its counts and cost, per worker. */
async function batchStatus(db: Db, b: BatchRow, json: boolean): Promise<void> {
  const workers = await batchWorkerStats(db, b.id);
  if (json) return printJson({ batch: batchJson(b), workers: workers.map((w) => ({ ...w, cost: usdText(w.cost) })) });
  process.stdout.write(`batch ${b.id}: ${b.status} (${b.endpoint})\n`);
  process.stdout.write(`lines: ${b.completed} answered + ${b.failed} failed = ${b.completed + b.failed} of ${b.total} (${((100 * (b.completed + b.failed)) / Math.max(1, b.total)).toFixed(1)}%)\n`);
  process.stdout.write(`spent: ${usdText(b.charged)}; output ${b.outputFileId ?? '-'}; errors ${b.errorFileId ?? '-'}\n`);
  if (workers.length === 0) return;
  const rows = [['worker', 'lines', 'answered', 'failed', 'cost'], ...workers.map((w) => [w.worker ?? '(not run)', String(w.lines), String(w.completed), String(w.failed), usdText(w.cost)])];
  process.stdout.write(columns(rows, [1, 2, 3, 4], '  '));
}

/** The report data of a batch (its rows and per-worker stats). */
export async function batchReportData(db: Db, b: BatchRow): Promise<BatchReportData> {
  const workers = await batchWorkerStats(db, b.id);
  const ended = b.completedAt ?? b.cancelledAt ?? b.expiredAt ?? b.failedAt;
  return {
    id: b.id, status: b.status, endpoint: b.endpoint, createdAt: b.createdAt.toISOString(), endedAt: ended?.toISOString() ?? null, total: b.total, completed: b.completed, failed: b.failed,
    inputFileId: b.inputFileId, outputFileId: b.outputFileId, errorFileId: b.errorFileId, workers, replay: workers.some((w) => w.provider === 'replay'),
  };
}

function grpoStatus(d: GrpoReportData, json: boolean): void {
  const { run: r, iterations } = d;
  const { adam: _adam, ...row } = r as GrpoReportData['run'] & { adam?: unknown };
  if (json) return printJson({ grpoRun: row, iterations });
  const c = r.config;
  process.stdout.write(`GRPO run ${r.id}: ${r.status}${r.statusReason ? ` (${r.statusReason})` : ''}${r.replay ? ' (replay pool: figures are a simulation from recorded outcomes)' : ''}\n`);
  process.stdout.write(`iteration ${iterations.length} of ${String(c.iterations)}; Q ${String(c.q)} x G ${String(c.g)}; lr ${String(c.lr)}; seed ${String(c.seed)}; heads ${String(c.heads)}\n`);
  process.stdout.write(`start ${r.startCheckpointId}; current policy ${r.policyCheckpointId}; best on validation ${r.bestCheckpointId ?? '(none yet)'}${r.bestValReward !== null ? ` (${r.bestValReward.toFixed(4)})` : ''}; code ${r.codeVersion}\n`);
  process.stdout.write('  iter  train reward  val reward  steps  parse fail  zero-adv  clip   KL        workers (top 3)\n');
  for (const i of iterations.slice(-15)) {
    const top = Object.entries(i.workers).sort((a, b) => b[1] - a[1]).slice(0, 3).map(([w, n]) => `${w} ${n}`).join(', ');
    process.stdout.write(
      `  ${String(i.iteration + 1).padStart(4)}  ${i.meanReward.toFixed(4).padStart(12)}  ${(i.val ? i.val.meanReward.toFixed(4) : '-').padStart(10)}  ${i.meanSteps.toFixed(2).padStart(5)}  ` +
        `${String(i.parseFailures).padStart(10)}  ${`${i.zeroAdvantageGroups}/${i.groups}`.padStart(8)}  ${i.clipFraction.toFixed(3)}  ${i.approxKl.toExponential(2).padStart(8)}  ${top}\n`,
    );
  }
}

async function esStatus(ctx: Context, r: EsRunRecord, json: boolean): Promise<void> {
  const c = r.config;
  const gens = await listEsGenerations(ctx.db, r.id);
  const queue = await queueState(ctx, esEvalQueue);
  if (json) return printJson({ esRun: r, generations: gens, queue });
  const last = gens.at(-1);
  process.stdout.write(`ES run ${r.id}: ${r.status}${r.statusReason ? ` (${r.statusReason})` : ''}\n`);
  process.stdout.write(`generation ${r.generation} of ${String(c.generations)}; lambda ${String(c.lambda)} x ${String(c.replicas)} replica(s); sigma0 ${String(c.sigma0)}; task ${JSON.stringify(c.task)}; seed ${String(c.seed)}\n`);
  process.stdout.write(`from checkpoint ${r.checkpointId}; best checkpoint ${r.bestCheckpointId ?? '(none yet)'}; code ${r.codeVersion}\n`);
  if (last) process.stdout.write(`last generation: mean ${last.meanFitness.toFixed(4)}, best ${last.bestFitness.toFixed(4)}, best so far ${last.bestSoFar.toFixed(4)}, sigma ${last.sigmaAfter.toPrecision(4)}\n`);
  process.stdout.write(`queue ${esEvalQueue}: ${countsText(queue.counts)}; evaluators connected ${queue.workers}\n`);
  for (const g of gens.slice(-10)) {
    process.stdout.write(`  ${String(g.generation).padStart(4)}  mean ${g.meanFitness.toFixed(4)}  median ${g.medianFitness.toFixed(4)}  best ${g.bestFitness.toFixed(4)}  sigma ${g.sigma.toPrecision(4)}  ${g.evaluations} evals  ${((g.wallMs ?? 0) / 1000).toFixed(1)} s\n`);
  }
}

async function cmdLabels(config: FuguConfig, runId: string, f: { tau: number; out?: string }): Promise<void> {
  const ctx = await openContext({ redis: false, config });
  try {
    const out = f.out ?? defaultOut(config, 'labels', `${runId}-tau${f.tau}.jsonl`);
    const summary = await collectRunSummary(ctx.db, runId);
    const stats = await writeSoftLabels(summary, f.tau, out, await runPrompts(ctx.db, summary));
    process.stdout.write(`wrote soft labels for ${stats.items} items (tau ${f.tau}, mean entropy ${stats.meanEntropy.toFixed(3)} nats) to ${stats.path}\n`);
  } finally {
    await ctx.close();
  }
}

async function cmdReport(config: FuguConfig, runId: string, f: { tau: number; out?: string }): Promise<string> {
  const ctx = await openContext({ redis: false, config });
  try {
    if (runId.startsWith('session:')) {
      const session = runId.slice('session:'.length);
      const data = await sessionReportData(ctx.db, session);
      if (data.turns.length === 0) throw new InputError(`no requests recorded for session "${session}" (fugu requests --session S lists a session's turns)`, { field: 'run' });
      const out = f.out ?? defaultOut(config, 'reports', `session-${session.replace(/[^A-Za-z0-9._-]/g, '_')}.html`);
      await mkdir(path.dirname(path.resolve(out)), { recursive: true });
      await writeFile(out, renderSessionReport(data, { generatedAt: new Date().toISOString() }));
      process.stdout.write(`wrote the report of session ${session} (${data.turns.length} turns) to ${out}\n`);
      return out;
    }
    const out = f.out ?? defaultOut(config, 'reports', `${runId}.html`);
    const batch = await getBatchRow(ctx.db, runId);
    if (batch) {
      const data = await batchReportData(ctx.db, batch);
      await mkdir(path.dirname(path.resolve(out)), { recursive: true });
      await writeFile(out, renderBatchReport(data, { generatedAt: new Date().toISOString() }));
      process.stdout.write(`wrote the report of batch ${runId} to ${out}\n`);
      return out;
    }
    const es = await getEsRun(ctx.db, runId);
    const grpo = es ? undefined : await grpoReportData(ctx.db, runId);
    if (grpo) {
      await mkdir(path.dirname(path.resolve(out)), { recursive: true });
      await writeFile(out, renderGrpoReport(grpo, { generatedAt: new Date().toISOString() }));
      process.stdout.write(`wrote the report of GRPO run ${runId} to ${out}\n`);
      return out;
    }
    if (!es && (await getConductorRun(ctx.db, runId))) {
      const written = await writeUltraReport(await summarizeUltraRuns(ctx.db, [runId]), out);
      process.stdout.write(`wrote the report of conductor run ${runId} to ${written}\n`);
      return written;
    }
    let html: string;
    if (es) {
      html = renderEsReport({ run: es, generations: await listEsGenerations(ctx.db, runId) }, { generatedAt: new Date().toISOString() });
    } else {
      const s = await collectRunSummary(ctx.db, runId);
      if (s.rows.length > 0) {
        const labels = await writeSoftLabels(s, f.tau, defaultOut(config, 'labels', `${runId}-tau${f.tau}.jsonl`));
        // the argmax of each item's label, a tie split evenly between the tied workers (never to the first in pool order)
        s.report.labels = { tau: f.tau, meanEntropy: labels.meanEntropy, ...softLabelArgmax(labels.workers, labels.labels) };
      }
      html = renderEvalReport(s.report, { generatedAt: new Date().toISOString() });
    }
    await mkdir(path.dirname(path.resolve(out)), { recursive: true });
    await writeFile(out, html);
    process.stdout.write(`wrote the report of ${es ? 'ES run ' : ''}${runId} to ${out}\n`);
    return out;
  } finally {
    await ctx.close();
  }
}

/** Test questions the demo's Conductor batch runs (3 conductors each: about 10 s here). */
const DEMO_CONDUCTOR_SAMPLE = 100;

async function cmdDemo(
  config: FuguConfig,
  f: { repetitions: number; sample?: number; seed: number; localWorkers: number | 'auto'; serve: boolean; gatewayLog?: string },
  signal: AbortSignal,
): Promise<number> {
  process.stderr.write(`demo: the LLMRouter data (${config.llmrouterDir}) through replay workers\n`);
  const opts = evalOptions(config, { ...f, dataset: 'llmrouter', pool: 'llmrouter', keyCheck: true, wait: true, stallSeconds: 15 }, signal);
  const ctx = await openContext({ redis: true, config });
  let runId: string;
  try {
    const outcome = await runEval(ctx, opts);
    runId = outcome.run.id;
    if (outcome.run.status !== 'completed') {
      process.stderr.write(`run ${runId} is ${outcome.run.status}; resume with: fugu eval --resume ${runId}\n`);
      return outcome.interrupted ? EXIT.interrupted : EXIT.incomplete;
    }
    const s = await collectRunSummary(ctx.db, runId);
    process.stdout.write(`\n${formatSummary(s)}`);
    process.stdout.write(`${outcome.elapsedS.toFixed(1)} s end to end (${(outcome.run.totalCalls / outcome.elapsedS).toFixed(0)} calls/s)\n\n`);
  } finally {
    await ctx.close();
  }
  await cmdLabels(config, runId, { tau: 0.1 });
  await cmdReport(config, runId, { tau: 0.1 });
  if (!f.serve) return EXIT.ok;

  // the router: SFT on the run's rewards, published as the deployment the gateway serves
  process.stderr.write(`\ndemo: training the router on run ${runId} (SFT, about 30 s)\n`);
  const routerCtx = await openContext({ redis: false, config });
  let checkpointId: string;
  try {
    ({ checkpointId } = await trainRouter(routerCtx.db, { ...TRAIN_DEFAULTS, run: runId, home: config.home }));
    process.stderr.write(`demo: ${await publishCheckpoint(config, routerCtx.db, config.router.deployment, checkpointId)}\n`);
  } finally {
    await routerCtx.close();
  }
  // the Conductor (fugu-ultra): workflows over the same replay workers, against the router; first
  // on validation questions, to choose what fugu-ultra serves, then on test questions, reported
  const conductors = `fixed:router:${checkpointId},fixed:moa:3,fixed:chain`;
  const ultraFlags = (split: 'val' | 'test') => ({
    dataset: 'llmrouter', pool: 'llmrouter', conductor: conductors, split, splitSeed: 0, sample: DEMO_CONDUCTOR_SAMPLE, seed: f.seed, repeats: 1, maxSteps: 5,
    localConductors: 'auto' as const, localWorkers: f.localWorkers, keyCheck: true, wait: true, stallSeconds: 15,
  });
  process.stderr.write(
    `\ndemo: choosing fugu-ultra on (up to) ${DEMO_CONDUCTOR_SAMPLE} validation questions of the router's split (by unique prompt): ${conductors}, and the best single worker by train mean\n`,
  );
  let pick: UltraPick | undefined;
  const chosen = await cmdUltraEval(config, ultraFlags('val'), signal, { quiet: true, onSummary: (d) => (pick = pickUltraConductor(d.results, d.results.find((r) => r.kind === 'conductor')?.workflows ?? DEMO_CONDUCTOR_SAMPLE)) });
  if (chosen !== EXIT.ok || !pick) return chosen === EXIT.ok ? EXIT.failure : chosen;
  process.stderr.write(`\ndemo: the Conductor on ${DEMO_CONDUCTOR_SAMPLE} test questions of the router's split (${conductors}; replay: a simulation from the recorded outcomes)\n`);
  const ultra = await cmdUltraEval(config, ultraFlags('test'), signal);
  if (ultra !== EXIT.ok) return ultra;
  // fugu-ultra beside fugu: what won on the validation questions, served by the gateway
  process.stderr.write(`demo: fugu-ultra: ${pick.spec}, ${pick.why}\n`);
  process.stderr.write(`demo: ${await cmdUltraPublish(config, { ...ULTRA_PUBLISH_DEFAULTS, conductor: pick.spec, pool: 'llmrouter' })}\n`);
  // the gateway on this machine only, without keys; the replay workers answer the dataset's questions,
  // and a provider worker beside it answers the lines of batches (`fugu batch submit FILE --wait`)
  process.stderr.write('demo: starting the gateway and a provider worker for batches (Ctrl-C stops them; `fugu gateway` starts the gateway again)\n');
  process.removeAllListeners('SIGINT'); // the run is over: Ctrl-C now stops the gateway, not the run
  const batchWorker = await startLocalWorkers(config, { count: 1, providers: ['replay', 'scripted'] });
  let scripted: { url: string; stop(): Promise<void> } | undefined;
  try {
    // its JSON log to a file, so this terminal keeps the demo's own lines (--gateway-log - : here)
    const logFile = f.gatewayLog === '-' ? undefined : (f.gatewayLog ?? defaultOut(config, 'logs', 'gateway.log'));
    // (a scripted gateway that cannot start is said, and the replay one starts all the same)
    scripted = await scriptedGatewayWithExample(config).catch((e: unknown) => {
      process.stderr.write(`demo: the scripted pool's gateway did not start: ${(e as Error).message}\n`);
      return undefined;
    });
    return await startGateway(config, { auth: 'none', host: '127.0.0.1', pool: 'llmrouter', mode: 'in-process', ...(logFile !== undefined && { logFile }) });
  } finally {
    await scripted?.stop();
    await batchWorker.stop();
  }
}

/** The shipped example of fugu-ultra's tool loop with the openai client (examples/ultra-tool-loop.ts). */
const TOOL_LOOP_EXAMPLE = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../../../examples/ultra-tool-loop.ts');

/**
 * The demo's second gateway, beside the replay one: the scripted pool (simulated workers that
 * answer any prompt and call tools, no keys) on the next port, where fugu-ultra's tool loop can be
 * tried; the shipped example is printed and run once, as printed, to its final answer.
 */
async function scriptedGatewayWithExample(config: FuguConfig): Promise<{ url: string; stop(): Promise<void> }> {
  const t0 = performance.now();
  const g = await backgroundGateway(config, { auth: 'none', host: '127.0.0.1', pool: 'scripted', port: config.gateway.port + 1, mode: 'in-process', logFile: defaultOut(config, 'logs', 'gateway-scripted.log') });
  const command = `node ${path.relative(process.cwd(), TOOL_LOOP_EXAMPLE)} ${g.url}`;
  process.stderr.write(
    `\ndemo: the scripted pool at ${g.url} (simulated workers that answer any prompt and call tools, no keys; their answers say so in the fugu object)\n` +
      `demo: fugu-ultra's multi-agent tool loop with the openai client, run as you can run it:\n  ${command}\n`,
  );
  const run = await new Promise<number | null>((resolve) => {
    const child = spawn(process.execPath, [TOOL_LOOP_EXAMPLE, g.url], { stdio: ['ignore', 'pipe', 'inherit'] });
    child.stdout.on('data', (d: Buffer) => process.stderr.write(d.toString().replace(/^(?=.)/gm, '  | ')));
    child.once('exit', resolve);
  });
  process.stderr.write(run === 0 ? `demo: the tool loop reached its final answer (${((performance.now() - t0) / 1000).toFixed(1)} s from starting the scripted gateway)\n` : `demo: the tool loop example exited ${run} (its output is above)\n`);
  return g;
}
