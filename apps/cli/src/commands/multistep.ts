// `fugu multistep fit`: the replay step model's parameters measured on recorded multi-agent runs
// (data/multistep), with bootstrap intervals, and the out-of-sample check. The logic is in
// @fugu/multistep and @fugu/conductor (the estimator `fugu ultra calibrate` uses too). No
// service is needed: the tables are files.
import { InputError } from '@fugu/core';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { validateReplayConfig, type ReplayConfig } from '@fugu/conductor';
import { renderMultistepReport } from '@fugu/report';
import { bySourcesConfigsOf, CONFIG_CORNERS, convertAll, DYLAN_MMLU_BY_SOURCES, predictDebateGain, type AdasTable, DEFAULT_TABLES_DIR, fitTable, marginsOf, type MarginRow, multistepReportData, fixedWorkflowCeilings, formatCeilings, formatFits, formatReview, readTables, replayConfigsOf, reviewsOf, type ReflexionTask, type TableFit } from '@fugu/multistep';
import { action, intOption, jsonOption, listOption, printJson, type CommandGroup } from '../cli.ts';

type FitFlags = { dir: string; tables?: string[]; seed: number; samples: number; writeConfigs?: string; report?: string; margins?: string[]; json?: boolean };

export const multistepCommands: CommandGroup = (program) => {
  const multistep = program
    .command('multistep')
    .description('the replay step model measured on recorded multi-agent runs (data/multistep: DyLAN debates, Reflexion)');
  multistep
    .command('convert')
    .description('the tables of data/multistep from checkouts of the public repositories (data/multistep/README.md names their commits) and the MMLU test set')
    .option('--dylan <dir>', 'a checkout of SALT-NLP/DyLAN')
    .option('--mmlu <dir>', "the MMLU test set, <subject>_test.csv (hendrycks/test's data/test): the gold letters of DyLAN's MMLU runs; needed with --dylan")
    .option('--reflexion <dir>', 'a checkout of noahshinn/reflexion')
    .option('--adas <dir>', 'a checkout of ShengranHu/ADAS')
    .option('--out <dir>', 'where the tables go', DEFAULT_TABLES_DIR)
    .action(action(async (f: { dylan?: string; mmlu?: string; reflexion?: string; adas?: string; out: string }) => {
      const t0 = performance.now();
      await convertAll({ ...(f.dylan && { dylan: f.dylan }), ...(f.mmlu && { mmlu: f.mmlu }), ...(f.reflexion && { reflexion: f.reflexion }), ...(f.adas && { adas: f.adas }) }, f.out, (l) => process.stderr.write(`${l}\n`));
      process.stderr.write(`wrote ${f.out} in ${((performance.now() - t0) / 1000).toFixed(1)} s (reports.json: what each table read and left out)\n`);
    }));
  multistep
    .command('fit')
    .description("each table's step-model parameters (keep, misled, adopt, fix, herd) with bootstrap intervals, per MATH level where there are levels, and the out-of-sample check")
    .option('--dir <dir>', 'the tables (<source>.jsonl)', DEFAULT_TABLES_DIR)
    .addOption(listOption('--tables <a,b>', 'only these tables (file names without .jsonl; default: every table with a second round)'))
    .addOption(intOption('--seed <n>', 'seed of the halves and the bootstrap', 0))
    .addOption(intOption('--samples <n>', 'bootstrap resamples', 500))
    .option('--write-configs <dir>', 'also write each table\'s ReplayConfig files (<table>.<point|optimistic|pessimistic>.json) for `fugu ultra eval --replay`')
    .option('--report <file.html>', 'also write the HTML report (predicted against observed, the parameters, the fixed-workflow ceiling across the intervals)')
    .addOption(listOption('--margins <a.json,b.json>', "with --report: the Conductor's margin over the router across the intervals, from `fugu ultra analyse planner|score --json` run with the measured ReplayConfigs"))
    .addOption(jsonOption())
    .action(action((f: FitFlags) => cmdFit(f)));
  multistep
    .command('ceiling')
    .description("the best fixed multi-step workflow against the best single worker on LLMRouter's test split (replay, exact expectation), under the presets and each measured parameter set with its interval bounds")
    .option('--configs <dir>', 'ReplayConfig files (`fugu multistep fit --write-configs`)', path.join(DEFAULT_TABLES_DIR, 'replay'))
    .addOption(jsonOption())
    .action(action(async (f: { configs: string; json?: boolean }) => {
      const files = (await readdir(f.configs)).filter((x) => x.endsWith('.json')).sort();
      const configs: Array<[string, ReplayConfig]> = [['presets (evidence note)', {}]];
      for (const x of files) configs.push([x.slice(0, -'.json'.length), validateReplayConfig(JSON.parse(await readFile(path.join(f.configs, x), 'utf8')))]);
      const cs = await fixedWorkflowCeilings(configs);
      if (f.json) printJson(cs);
      else process.stdout.write(`${formatCeilings(cs)}\n`);
    }));
  multistep
    .command('adas')
    .description("ADAS's gpt-3.5 LLM Debate against its Chain-of-Thought on MMLU, predicted by the step model measured on DyLAN's gpt-3.5 MMLU run of 3 agents")
    .option('--dir <dir>', 'the tables', DEFAULT_TABLES_DIR)
    .option('--table <t>', 'the table the debate is simulated from (3 solo answers a question)', 'dylan-mmlu-optimal7-3')
    .addOption(intOption('--samples <n>', 'bootstrap resamples', 500))
    .addOption(intOption('--seed <n>', 'seed', 0))
    .addOption(jsonOption())
    .action(action(async (f: { dir: string; table: string; samples: number; seed: number; json?: boolean }) => {
      const tables = await readTables(f.dir);
      const qs = tables[f.table];
      if (!qs) throw new InputError(`no table "${f.table}" in ${f.dir}`, { field: '--table' });
      const adas = JSON.parse(await readFile(path.join(f.dir, 'adas-gpt3.5.json'), 'utf8')) as AdasTable;
      const p = predictDebateGain(qs, { samples: f.samples, seed: f.seed, adas, benchmark: 'mmlu' });
      if (f.json) printJson(p);
      else {
        const pts = (x: number) => `${x >= 0 ? '+' : ''}${x.toFixed(1)}`;
        process.stdout.write(
          `debate of 3 (each reads the other two, then the majority) simulated on ${p.questions} questions of ${f.table} (rho ${p.rho.toFixed(2)}): ` +
            `one agent ${(100 * p.solo).toFixed(1)}%, the debate ${(100 * p.debate.mean).toFixed(1)}% (${(100 * p.debate.interval[0]).toFixed(1)}-${(100 * p.debate.interval[1]).toFixed(1)}), ` +
            `gain ${pts(p.gain.mean)} points (${pts(p.gain.interval[0])} to ${pts(p.gain.interval[1])})\n` +
            (p.adas ? `ADAS (gpt-3.5, MMLU): Chain-of-Thought ${(100 * p.adas.cot).toFixed(1)}%, LLM Debate ${(100 * p.adas.debate).toFixed(1)}%: gain ${pts(p.adas.gain)} points\n` : ''),
        );
      }
    }));
  multistep
    .command('review')
    .description("Reflexion's review rounds against its one-pass runs: wrong-to-right and right-to-wrong per benchmark, the runs' own noise apart")
    .option('--dir <dir>', 'the tables (reflexion-tasks.json)', DEFAULT_TABLES_DIR)
    .addOption(jsonOption())
    .action(action(async (f: { dir: string; json?: boolean }) => {
      const runs = JSON.parse(await readFile(path.join(f.dir, 'reflexion-tasks.json'), 'utf8')) as Record<string, { tasks: ReflexionTask[] }>;
      const ms = reviewsOf(runs);
      if (f.json) printJson(ms);
      else process.stdout.write(`${formatReview(ms)}\n`);
    }));
};

async function cmdFit(f: FitFlags): Promise<number> {
  if (f.samples < 20) throw new InputError(`must be at least 20, got ${f.samples}`, { field: '--samples' });
  const tables = await readTables(f.dir);
  const names = f.tables ?? Object.keys(tables);
  const unknown = names.filter((n) => !(n in tables));
  if (unknown.length > 0) throw new InputError(`no table ${unknown.map((n) => `"${n}"`).join(', ')} in ${f.dir} (there: ${Object.keys(tables).join(', ')})`, { field: '--tables' });
  const fits: TableFit[] = [];
  for (const name of names) {
    const qs = tables[name]!;
    // a table whose questions never reach a second round (single-agent runs) has nothing to fit
    if (!qs.some((q) => q.rounds.length > 1 && q.rounds[1]!.length > 0)) {
      if (f.tables) process.stderr.write(`${name}: no question reaches a second round; left out\n`);
      continue;
    }
    const t0 = performance.now();
    fits.push(fitTable(name, qs, { seed: f.seed, samples: f.samples }));
    process.stderr.write(`${name}: ${qs.length} questions fitted in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  }
  if (f.writeConfigs) {
    await mkdir(f.writeConfigs, { recursive: true });
    for (const t of fits) {
      for (const [corner, config] of Object.entries(replayConfigsOf(t))) await writeFile(path.join(f.writeConfigs, `${t.source}.${corner}.json`), `${JSON.stringify(config, null, 2)}\n`);
    }
    // DyLAN's MMLU teams together: a step's parameters by the number of answers it reads
    const family = DYLAN_MMLU_BY_SOURCES.map(([k, t]) => [k, fits.find((x) => x.source === t)] as const);
    const whole = family.every(([, fit]) => fit !== undefined);
    if (whole) {
      for (const [corner, config] of Object.entries(bySourcesConfigsOf('dylan-mmlu-by-sources', family as Array<readonly [number, TableFit]>))) {
        await writeFile(path.join(f.writeConfigs, `dylan-mmlu-by-sources.${corner}.json`), `${JSON.stringify(config, null, 2)}\n`);
      }
    }
    process.stderr.write(`wrote ${(fits.length + (whole ? 1 : 0)) * 3} ReplayConfig files to ${f.writeConfigs}\n`);
  }
  if (f.margins && !f.report) throw new InputError('--margins goes with --report', { field: '--margins' });
  const margins = f.margins ? await readMargins(f.margins) : undefined;
  if (f.report) {
    const configs = fits.map((t) => [t.source, replayConfigsOf(t)] as const);
    const cs = await fixedWorkflowCeilings([['presets', {}], ...configs.flatMap(([name, c]) => CONFIG_CORNERS.map((k) => [`${name}.${k}`, c[k]] as [string, ReplayConfig]))]);
    const gain = (name: string) => 100 * cs.find((c) => c.config === name)!.gain;
    const rows = configs.map(([name]) => ({ table: name, pessimistic: gain(`${name}.pessimistic`), point: gain(`${name}.point`), optimistic: gain(`${name}.optimistic`) }));
    await writeFile(f.report, renderMultistepReport({ ...multistepReportData(fits, { presets: gain('presets'), rows }, { seed: f.seed, samples: f.samples }), ...(margins && { margins }) }));
    process.stderr.write(`wrote the report to ${f.report}\n`);
  }
  if (f.json) printJson(fits);
  else process.stdout.write(`${formatFits(fits)}\n`);
  return 0;
}

/** `--margins`: analyse JSON documents, each read and turned into margin rows (errors name the file). */
async function readMargins(files: readonly string[]): Promise<MarginRow[]> {
  const out: MarginRow[] = [];
  for (const file of files) {
    let doc: unknown;
    try {
      doc = JSON.parse(await readFile(file, 'utf8'));
    } catch (e) {
      throw new InputError(`cannot read ${file} as JSON: ${(e as Error).message}`, { field: '--margins' });
    }
    out.push(...marginsOf(doc, file));
  }
  return out;
}
