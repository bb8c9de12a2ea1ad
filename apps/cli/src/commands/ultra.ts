// `fugu ultra eval | run | report | list | show` (+ `ultra policy ...` from ./ultra-policy.ts):
// the Conductor (@fugu/ultra-training's drivers on @fugu/ultra). Batches of workflows through the
// conduct queue, one free question, the Conductor report of one run or several (seeds), and the
// runs.
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import type { ReplayConfig } from '@fugu/conductor';
import path from 'node:path';
import type { SplitScheme } from '@fugu/datasets';
import type { FuguConfig } from '@fugu/config';
import { conductorRunParseFailures, conductorRunProgress, getConductorRun, listConductorRuns, type ConductorRunRow, type Db, type WorkflowDetail } from '@fugu/db';
import { openContext } from '@fugu/evaluation';
import { renderConductorReport, type ConductorReportData } from '@fugu/report';
import * as localServices from '@fugu/local-services';
import { DEFAULT_TABLES_DIR } from '@fugu/multistep';
import { ULTRA_SPLITS } from '@fugu/ultra';
import { checkQuestion, formatUltraSummary, runUltraEval, runUltraQuestion, summarizeUltraRuns, UnanswerableQuestionError, type UltraEvalOptions } from '@fugu/ultra-training';
import { InputError } from '@fugu/core';
import {
  action, choiceOption, countOption, defaultOut, EXIT, interruptSignal, intOption, jsonOption, listOption, printJson, usdOption, type CommandGroup,
} from '../cli.ts';
import { createProgress } from '../progress.ts';
import { splitByOption } from '../split-by.ts';
import { registerUltraAnalyse } from './ultra-analyse.ts';
import { registerUltraCalibrate } from './ultra-calibrate.ts';
import { registerUltraPolicy } from './ultra-policy.ts';
import { registerUltraPrompt } from './ultra-prompt.ts';
import { registerUltraPublish } from './ultra-publish.ts';

export type UltraEvalFlags = {
  dataset?: string; pool?: string; conductor?: string; split: (typeof ULTRA_SPLITS)[number]; splitSeed: number; splitBy?: SplitScheme; sample?: number; seed: number; repeats: number;
  maxSteps: number; maxUsd?: string; maxTokensPerStep?: number; argmax?: boolean; workers?: string[]; replay?: string; runId?: string; resume?: string; localConductors: number | 'auto'; localWorkers: number | 'auto';
  keyCheck: boolean; wait: boolean; stallSeconds: number; out?: string; json?: boolean;
};

type RunFlags = {
  conductor?: string; pool?: string; item?: string; maxSteps?: number; maxUsd?: string; maxTokensPerStep?: number; seed: number; timeoutS: number; json?: boolean;
};

export const ultraCommands: CommandGroup = (program, cli) => {
  const ultra = program.command('ultra').description('the Conductor (fugu-ultra): workflows of up to five steps over the worker pool');

  ultra
    .command('eval')
    .description('a batch of workflows: every conductor spec on the same items (the router\'s split), followed with a progress bar; Ctrl-C pauses (--resume RUN)')
    .option('--dataset <D>', 'llmrouter | llmrouter:<dir> | <file.jsonl>')
    .option('--pool <P>', 'llmrouter | <pool.yaml>')
    .option('--conductor <specs>', 'conductor specs, comma separated: llm:<worker>, policy:<ckpt>, fixed:single:<worker>, fixed:router:<ckpt>, fixed:moa:<n>, fixed:chain')
    .addOption(choiceOption('--split <s>', 'the items: a part of the router\'s split (by unique prompt, train 0.8 / val 0.1 / test 0.1, or the dataset\'s own: --split-by)', ULTRA_SPLITS, 'test'))
    .addOption(intOption('--split-seed <n>', 'seed of the split (the router\'s default: 0)', 0))
    .addOption(splitByOption("default: the scheme of the policy and router checkpoints the specs name, another refused; else prompt"))
    .addOption(intOption('--sample <n>', 'a seeded sample of n items of the split (default: all)'))
    .addOption(intOption('--seed <n>', 'seed of the sample and of the workflows (workflow seed = seed + repeat)', 0))
    .addOption(intOption('--repeats <n>', 'workflows per (item, conductor)', 1))
    .addOption(intOption('--max-steps <n>', 'most steps of a workflow', 5))
    .addOption(usdOption('--max-usd <usd>', 'budget of one workflow in USD'))
    .addOption(intOption('--max-tokens-per-step <n>', 'most output tokens of a step'))
    .option('--argmax', 'policy: writers take their most probable decisions instead of sampling (a trained policy)')
    .addOption(listOption('--workers <a,b>', "only these of the pool's workers, as a per-key pool (every conductor sees only them: a policy's choice is masked, the router picks among them)"))
    .option('--replay <file>', 'replay step model parameters: a ReplayConfig JSON file (e.g. from `fugu ultra calibrate`) or measured:<table>.<point|pessimistic|optimistic> (data/multistep/replay)')
    .option('--run-id <id>', 'the new run\'s id (default: ultra_<time>_<random>)')
    .option('--resume <run>', 'go on with a paused or interrupted conductor run')
    .addOption(countOption('--local-conductors <n|auto>', 'conductor processes to start here (auto: 2 when none is connected)'))
    .addOption(countOption('--local-workers <n|auto>', 'provider-worker processes to start here (auto: 2 when none is connected)'))
    .option('--no-key-check', "don't check for the hosted workers' API keys here")
    .option('--no-wait', 'return once the workflows are submitted')
    .addOption(intOption('--stall-seconds <n>', 'seconds without progress, with nothing queued, before unfinished workflows are submitted again', 15))
    .option('--out <file>', 'the report (default: FUGU_HOME/reports/<run>.html)')
    .addOption(jsonOption())
    .action(action(async (f: UltraEvalFlags) => cmdUltraEval(cli.config(), f, interruptSignal())));

  ultra
    .command('run')
    .description('one workflow for a question (or a dataset item), run in this process as the gateway runs fugu-ultra: prints the workflow, each step with its worker and answer, the final answer, tokens and cost')
    .argument('[question]', 'the question (optional with --item); on the replay pool llmrouter, a question of its dataset')
    .option('--conductor <spec>', 'who writes the workflow (default: the Conductor published as fugu-ultra for the pool, FUGU_ULTRA_DEPLOYMENT; else the gateway\'s default, fixed:moa:2)')
    .option('--pool <P>', 'llmrouter | scripted | <pool.yaml> (default: the gateway\'s pool, FUGU_GATEWAY_POOL)')
    .option('--item <dataset:id>', 'a dataset item: its prompt is the question and its verifier scores the answer')
    .addOption(intOption('--max-steps <n>', 'most steps of the workflow (default: the published Conductor\'s, else 5)'))
    .addOption(usdOption('--max-usd <usd>', 'budget of the workflow in USD'))
    .addOption(intOption('--max-tokens-per-step <n>', 'most output tokens of a step'))
    .addOption(intOption('--seed <n>', 'seed of the workflow', 0))
    .addOption(intOption('--timeout-s <n>', 'seconds the workflow\'s calls may take; then they are stopped and the workflow ends with the step that was cut', 300))
    .addOption(jsonOption())
    .action(action(async (question: string | undefined, f: RunFlags) => cmdUltraRun(cli.config(), question, f)));

  ultra
    .command('report')
    .description('the Conductor report (HTML) of a conductor run, or of several (seeds: mean and sd)')
    .argument('<runs>', 'a conductor run id, or several separated by commas')
    .option('--out <file>', 'default: FUGU_HOME/reports/<run>.html')
    .addOption(jsonOption())
    .action(action(async (runs: string, f: { out?: string; json?: boolean }) => cmdUltraReport(cli.config(), runs, f)));

  ultra
    .command('list')
    .description('the recent conductor runs with their progress')
    .addOption(intOption('--limit <n>', 'how many', 20))
    .addOption(jsonOption())
    .action(action(async (f: { limit: number; json?: boolean }) => cmdUltraList(cli.config(), f)));

  ultra
    .command('show')
    .description('a conductor run: its options, progress per conductor and the summary table')
    .argument('<run>', 'the conductor run id')
    .addOption(jsonOption())
    .action(action(async (run: string, f: { json?: boolean }) => cmdUltraShow(cli.config(), run, Boolean(f.json))));

  registerUltraPolicy(ultra, cli);
  registerUltraCalibrate(ultra, cli);
  registerUltraAnalyse(ultra, cli);
  registerUltraPrompt(ultra, cli);
  registerUltraPublish(ultra, cli);
};

/**
 * Where a `--replay` spec's ReplayConfig is: a file, or `measured:<table>.<corner>`, the parameters
 * measured on recorded multi-agent runs (data/multistep/replay, `fugu multistep fit
 * --write-configs`; corner point, pessimistic or optimistic).
 */
export async function replayFilePath(spec: string, flag = '--replay'): Promise<string> {
  if (!spec.startsWith('measured:')) return spec;
  const dir = path.join(DEFAULT_TABLES_DIR, 'replay');
  const name = spec.slice('measured:'.length);
  const known = (await readdir(dir).catch(() => [] as string[])).filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -'.json'.length)).sort();
  if (!known.includes(name)) throw new InputError(`no measured step model "${name}" (there are: ${known.join(', ') || `none in ${dir}`})`, { field: flag });
  return path.join(dir, `${name}.json`);
}

/** A ReplayConfig JSON file or measured:<table>.<corner> (`--replay`); its content is validated by the driver. */
export async function readReplayFile(spec: string, flag = '--replay'): Promise<ReplayConfig> {
  const file = await replayFilePath(spec, flag);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    throw new InputError(`cannot read ${file}: ${(e as Error).message}`, { field: flag });
  }
  try {
    return JSON.parse(text) as ReplayConfig;
  } catch (e) {
    throw new InputError(`${file} is not JSON: ${(e as Error).message}`, { field: flag });
  }
}

function evalOptions(config: FuguConfig, f: UltraEvalFlags, signal: AbortSignal, replay: ReplayConfig | undefined): UltraEvalOptions {
  return {
    ...(replay !== undefined && { replay }),
    ...(f.dataset !== undefined && { dataset: f.dataset }),
    ...(f.pool !== undefined && { pool: f.pool }),
    ...(f.conductor !== undefined && { conductor: f.conductor }),
    ...(f.resume !== undefined && { resume: f.resume }),
    ...(f.runId !== undefined && { runId: f.runId }),
    split: f.split, splitSeed: f.splitSeed, ...(f.splitBy !== undefined && { splitBy: f.splitBy }), sample: f.sample ?? null, seed: f.seed, repeats: f.repeats, maxSteps: f.maxSteps,
    maxUsd: f.maxUsd ?? null, maxTokensPerStep: f.maxTokensPerStep ?? null, ...(f.argmax && { argmax: true }), ...(f.workers && { workers: f.workers }),
    localConductors: f.localConductors, localWorkers: f.localWorkers, keyCheck: f.keyCheck, wait: f.wait, stallSeconds: f.stallSeconds, signal,
    progress: (run) => {
      const bar = createProgress({ total: run.total, label: run.id, unit: 'workflows' });
      return {
        update: (p, note) => {
          const perSpec = run.specs.map((s) => {
            const c = p.bySpec[s];
            return `${s} ${c ? c.done + c.failed : 0}${c?.failed ? ` (${c.failed} failed)` : ''}`;
          });
          bar.update(p.counts.done + p.counts.failed, p.counts.failed, [perSpec.join(', '), note].filter(Boolean).join(' '));
        },
        stop: () => bar.stop(),
      };
    },
    startLocalWorkers: (o) => localServices.startLocalWorkers(config, o),
    startLocalConductors: (o) => localServices.startLocalConductors(config, o),
  };
}

/** `fugu ultra eval`; `o.onSummary` gets the run's figures, `o.quiet` prints no table (the demo's validation run). */
export async function cmdUltraEval(config: FuguConfig, f: UltraEvalFlags, signal: AbortSignal, o: { onSummary?: (d: ConductorReportData) => void; quiet?: boolean } = {}): Promise<number> {
  const ctx = await openContext({ redis: true, config });
  try {
    const replay = f.replay !== undefined ? await readReplayFile(f.replay) : undefined;
    const outcome = await runUltraEval(ctx, evalOptions(config, f, signal, replay));
    if (outcome.interrupted) return EXIT.interrupted; // runUltraEval said how to resume
    if (!f.wait) {
      if (f.json) printJson({ run: outcome.run });
      else process.stdout.write(`submitted conductor run ${outcome.run.id}; follow it with: fugu status ${outcome.run.id}\n`);
      return EXIT.ok;
    }
    const data = await summarizeUltraRuns(ctx.db, [outcome.run.id]);
    const out = await writeUltraReport(data, f.out ?? defaultOut(config, 'reports', `${outcome.run.id}.html`));
    o.onSummary?.(data);
    if (f.json) printJson({ run: outcome.run, summary: data, report: out });
    else if (!o.quiet) process.stdout.write(`\n${formatUltraSummary(data)}report: ${out}\n`);
    return outcome.run.status === 'completed' ? EXIT.ok : EXIT.incomplete;
  } finally {
    await ctx.close();
  }
}

/** Writes the Conductor report (HTML) and its data beside it as JSON (`<out>.json`). Returns the HTML's path. */
export async function writeUltraReport(data: ConductorReportData, out: string): Promise<string> {
  await mkdir(path.dirname(path.resolve(out)), { recursive: true });
  await writeFile(out.replace(/\.html?$/i, '') + '.json', `${JSON.stringify(data, null, 2)}\n`);
  await writeFile(out, renderConductorReport(data, { generatedAt: new Date().toISOString() }));
  return out;
}

async function cmdUltraRun(config: FuguConfig, question: string | undefined, f: RunFlags): Promise<number> {
  checkQuestion(question, f.item); // before anything connects
  const ctx = await openContext({ redis: true, config });
  try {
    const interrupt = interruptSignal('stopping the workflow\'s calls');
    let w;
    try {
      w = await runUltraQuestion(ctx, {
        ...(question !== undefined && { question }), ...(f.item !== undefined && { item: f.item }), ...(f.conductor !== undefined && { conductor: f.conductor }),
        pool: f.pool ?? config.gateway.pool, deployment: process.env.FUGU_ULTRA_DEPLOYMENT?.trim() || 'fugu-ultra',
        ...(f.maxSteps !== undefined && { maxSteps: f.maxSteps }), maxUsd: f.maxUsd ?? null, maxTokensPerStep: f.maxTokensPerStep ?? null, seed: f.seed,
        signal: AbortSignal.any([interrupt, AbortSignal.timeout(f.timeoutS * 1000)]),
      });
    } catch (e) {
      // the pool cannot answer the question (a replay pool, a question not of its dataset): said in one line, exit 1
      if (!(e instanceof UnanswerableQuestionError)) throw e;
      process.stderr.write(`fugu: ${e.message}\n`);
      return EXIT.failure;
    }
    if (f.json) printJson({ workflow: w });
    else process.stdout.write(formatWorkflow(w));
    if (w.error && typeof w.error.message === 'string') process.stderr.write(`fugu: workflow ${w.id} ended ${w.finishReason ?? w.status}: ${w.error.message.split('\n')[0]}\n`);
    // answered: 0; a workflow that ended without its answer (conductor error, parse error, a budget, failed): 1
    return w.status === 'done' && w.finishReason === 'answered' ? EXIT.ok : EXIT.failure;
  } finally {
    await ctx.close();
  }
}

/** A workflow as text: who wrote it, each step with its worker, access and answer, the final answer, tokens and cost. */
export function formatWorkflow(w: WorkflowDetail): string {
  const lines = [`workflow ${w.id} (${w.key}) by ${w.conductor}: ${w.status}${w.finishReason ? `, ${w.finishReason}` : ''}${w.topology ? `, ${w.topology}` : ''}`];
  lines.push(`question: ${w.question}`);
  if (w.error && typeof w.error.message === 'string') lines.push(`error: ${w.error.message}`);
  if (w.parseError) lines.push(`parse error: ${w.parseError.list}${w.parseError.step !== undefined ? ` step ${w.parseError.step}` : ''}: ${w.parseError.message}`);
  for (const s of w.steps) {
    lines.push(`step ${s.idx} [${s.worker}] sees ${s.sees.length ? s.sees.join(', ') : 'nothing'}: ${s.subtask}`);
    const failed = s.error && typeof s.error.message === 'string' ? s.error.message : undefined;
    lines.push(`  ${s.status}: ${(s.answer ?? failed ?? '(no answer)').replace(/\n/g, '\n  ')}`);
  }
  lines.push(`final answer: ${w.finalAnswer ?? '(none)'}`);
  if (w.outcome !== null) lines.push(`outcome: ${w.outcome}, reward ${w.reward ?? '-'}`);
  lines.push(`tokens: conductor ${w.conductorTokens}, workers ${w.workerTokens}; cost: conductor $${w.conductorCost}, workers $${w.workerCost}${w.latencyMs !== null ? `; ${w.latencyMs} ms` : ''}`);
  return `${lines.join('\n')}\n`;
}

const runIds = (text: string): string[] => {
  const ids = text.split(',').map((s) => s.trim()).filter(Boolean);
  if (ids.length === 0) throw new InputError('give a conductor run id (or several, comma separated)', { field: 'runs' });
  return ids;
};

async function cmdUltraReport(config: FuguConfig, runs: string, f: { out?: string; json?: boolean }): Promise<void> {
  const ids = runIds(runs);
  const ctx = await openContext({ redis: false, config });
  try {
    for (const id of ids) if (!(await getConductorRun(ctx.db, id))) throw new InputError(`no conductor run "${id}"`, { field: 'runs' });
    const data = await summarizeUltraRuns(ctx.db, ids);
    const out = await writeUltraReport(data, f.out ?? defaultOut(config, 'reports', `${ids.join('+')}.html`));
    if (f.json) printJson({ report: out, summary: data });
    else process.stdout.write(`wrote the report of conductor run${ids.length > 1 ? 's' : ''} ${ids.join(', ')} to ${out}\n`);
  } finally {
    await ctx.close();
  }
}

/** One line of a conductor run: status, workflows finished of the total, per spec. */
export function conductorRunLine(r: ConductorRunRow, p: Awaited<ReturnType<typeof conductorRunProgress>>): string {
  const fin = p.counts.done + p.counts.failed;
  return `${r.id}  ultra ${r.status.padEnd(9)}  ${fin}/${r.total} workflows  failed ${p.counts.failed}  ${r.specs.join(',')}  ${r.createdAt.toISOString()}`;
}

async function cmdUltraList(config: FuguConfig, f: { limit: number; json?: boolean }): Promise<void> {
  const ctx = await openContext({ redis: false, config });
  try {
    const runs = await listConductorRuns(ctx.db, f.limit);
    const rows = await Promise.all(runs.map(async (r) => ({ run: r, progress: await conductorRunProgress(ctx.db, r.id) })));
    if (f.json) return printJson(rows);
    if (rows.length === 0) process.stdout.write('no conductor runs yet\n');
    for (const { run, progress } of rows) process.stdout.write(`${conductorRunLine(run, progress)}\n`);
  } finally {
    await ctx.close();
  }
}

/** `fugu ultra show` / `fugu status <conductor run>`: options, progress per spec, the summary. */
export async function printConductorRun(db: Db, run: ConductorRunRow, json: boolean): Promise<void> {
  const progress = await conductorRunProgress(db, run.id);
  const summary = await summarizeUltraRuns(db, [run.id]);
  const parseFailures = await conductorRunParseFailures(db, run.id);
  if (json) return printJson({ conductorRun: run, progress, parseFailures, summary });
  process.stdout.write(`conductor run ${run.id}: ${run.status}${run.statusReason ? ` (${run.statusReason})` : ''}\n`);
  process.stdout.write(`options: ${JSON.stringify(run.options)}\n`);
  for (const s of run.specs) {
    const c = progress.bySpec[s] ?? { pending: 0, running: 0, done: 0, failed: 0 };
    process.stdout.write(`  ${s}: done ${c.done}, failed ${c.failed}, running ${c.running}, pending ${c.pending}\n`);
  }
  process.stdout.write(`workflows: ${progress.counts.done + progress.counts.failed} of ${run.total} finished\n`);
  if (parseFailures.length > 0) {
    process.stdout.write(`parse failures: ${parseFailures.length}\n`);
    for (const f of parseFailures.slice(0, 10)) process.stdout.write(`  ${f.conductor} ${f.item ?? f.key}: ${f.list}${f.step !== undefined ? ` step ${f.step}` : ''}: ${f.message}\n`);
    if (parseFailures.length > 10) process.stdout.write(`  ... (${parseFailures.length - 10} more; --json has all)\n`);
  }
  process.stdout.write(`\n${formatUltraSummary(summary)}`);
}

async function cmdUltraShow(config: FuguConfig, runId: string, json: boolean): Promise<void> {
  const ctx = await openContext({ redis: false, config });
  try {
    const run = await getConductorRun(ctx.db, runId);
    if (!run) throw new InputError(`no conductor run "${runId}"`, { field: 'run' });
    await printConductorRun(ctx.db, run, json);
  } finally {
    await ctx.close();
  }
}

