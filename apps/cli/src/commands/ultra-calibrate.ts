// `fugu ultra calibrate`: the replay step model's parameters from live two-step workflows. The
// logic is in @fugu/ultra-training (calibrate.ts) and @fugu/conductor (src/replay/calibrate.ts).
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { InputError } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import type { CornerName, ReplayEstimate } from '@fugu/conductor';
import { openContext } from '@fugu/evaluation';
import { startLocalConductors, startLocalWorkers } from '@fugu/local-services';
import { runCalibration, type CalibrationResult } from '@fugu/ultra-training';
import { action, countOption, defaultOut, EXIT, interruptSignal, intOption, jsonOption, listOption, numOption, printJson, type Cli } from '../cli.ts';
import { createProgress } from '../progress.ts';

type CalibrateFlags = {
  pool?: string; dataset?: string; workers?: string[]; sample?: number; seed: number; pairs?: number; id?: string; priorStrength: number;
  maxTokensPerStep?: number; out?: string; localWorkers: number | 'auto'; localConductors: number | 'auto'; keyCheck: boolean; json?: boolean;
};

export function registerUltraCalibrate(ultra: Command, cli: Cli): void {
  ultra
    .command('calibrate')
    .description("estimate the replay step model's parameters (keep, misled, adopt, fix, herd) per worker from live two-step workflows; writes a ReplayConfig file")
    .option('--pool <P>', 'a pool file of live workers (replay workers are refused)')
    .option('--dataset <D>', 'llmrouter | llmrouter:<dir> | <file.jsonl> (items whose verifier grades live answers)')
    .addOption(listOption('--workers <a,b>', "only these of the pool's workers"))
    .addOption(intOption('--sample <n>', 'a seeded sample of n items (default: all gradable items)'))
    .addOption(intOption('--seed <n>', 'seed of the item and pair samples', 0))
    .addOption(intOption('--pairs <n>', 'at most n ordered (proposer, step worker) pairs, a seeded sample (default: all)'))
    .option('--id <id>', 'calibration id in the workflow keys (default: from the dataset and pool); the same id resumes without paying again')
    .addOption(numOption('--prior-strength <k>', "pseudo-observations shrinking each worker's cells toward the pool's", 20))
    .addOption(intOption('--max-tokens-per-step <n>', 'maxTokens of every step'))
    .option('--out <file>', 'the ReplayConfig JSON (default: FUGU_HOME/calibration/<id>.json)')
    .addOption(countOption('--local-workers <n|auto>', 'provider-worker processes to start here (auto: 2 when none is connected)'))
    .addOption(countOption('--local-conductors <n|auto>', 'conductor processes to start here (auto: 2 when none is connected)'))
    .option('--no-key-check', "don't check for the hosted workers' API keys here")
    .addOption(jsonOption())
    .action(action(async (f: CalibrateFlags) => cmdCalibrate(cli.config(), f, interruptSignal('stopping; run the same command again to resume'))));
}

async function cmdCalibrate(config: FuguConfig, f: CalibrateFlags, signal: AbortSignal): Promise<number> {
  if (f.pool === undefined) throw new InputError('give the live pool to calibrate: --pool <file>', { field: '--pool' });
  if (f.dataset === undefined) throw new InputError('give a dataset with a verifier: --dataset <D>', { field: '--dataset' });
  const ctx = await openContext({ redis: true, config });
  let r: CalibrationResult;
  try {
    r = await runCalibration(ctx, {
      dataset: f.dataset, pool: f.pool, seed: f.seed, sample: f.sample ?? null, pairs: f.pairs ?? null, priorStrength: f.priorStrength,
      keyCheck: f.keyCheck, localWorkers: f.localWorkers, localConductors: f.localConductors, signal,
      ...(f.workers && { workers: f.workers }),
      ...(f.id !== undefined && { id: f.id }),
      ...(f.maxTokensPerStep !== undefined && { maxTokensPerStep: f.maxTokensPerStep }),
      startLocalWorkers: (o) => startLocalWorkers(config, o),
      startLocalConductors: (o) => startLocalConductors(config, o),
      progress: ({ name, total }) => createProgress({ total, label: name === 'solo' ? 'solo answers' : 'two-step workflows' }),
    });
  } catch (e) {
    if (signal.aborted) {
      process.stderr.write('interrupted: run the same command again to resume (answered steps are not paid again)\n');
      return EXIT.interrupted;
    }
    throw e;
  } finally {
    await ctx.close();
  }
  const out = f.out ?? defaultOut(config, 'calibration', `${r.id}.json`);
  await mkdir(path.dirname(path.resolve(out)), { recursive: true });
  await writeFile(out, `${JSON.stringify(r.config, null, 2)}\n`);
  if (f.json) printJson({ ...r, out });
  else process.stdout.write(`${formatCalibration(r)}\nwrote the ReplayConfig to ${out} (fugu ultra eval --replay ${out})\n`);
  return EXIT.ok;
}

const fmt = (x: number): string => x.toFixed(3);
/** a corner's value, n and 95% interval (the bootstrap's over items where it ran, else the corner's Wilson interval) */
const cellText = (e: ReplayEstimate, name: CornerName): string => {
  const c = e.cells[name];
  const [lo, hi] = e.bootstrap?.intervals[name] ?? c.interval;
  return c.n === 0 ? `${fmt(c.estimate)} (${c.source}, n 0)` : `${fmt(c.estimate)} (n ${c.n}, ${fmt(lo)}-${fmt(hi)})`;
};
const herdText = (e: ReplayEstimate): string =>
  e.herd.source === 'fallback' ? `${fmt(e.herd.estimate)} (fallback, not identified)` : `${fmt(e.herd.estimate)} (n ${e.herd.n}, ${fmt(e.herd.interval[0])}-${fmt(e.herd.interval[1])}${e.herd.identified ? '' : ', not identified'})`;

/** The per-worker table: solo accuracy, the four corners with n and 95% interval, herd. */
export function formatCalibration(r: CalibrationResult): string {
  const header = ['worker', 'solo', 'keep', 'misled', 'adopt', 'fix', 'herd'];
  const row = (name: string, e: ReplayEstimate, solo: string): string[] => [name, solo, cellText(e, 'keep'), cellText(e, 'misled'), cellText(e, 'adopt'), cellText(e, 'fix'), herdText(e)];
  const rows = Object.entries(r.estimates.workers).map(([w, e]) => {
    const s = r.solo[w];
    return row(w, e, s ? `${s.correct}/${s.n}` : '-');
  });
  rows.push(row('(pool)', r.estimates.pool, ''));
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((x) => x[i]!.length)));
  const line = (cells: string[]): string => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  const lines = [
    `calibration ${r.id}: ${r.dataset}, pool ${r.pool}; ${r.items} items, ${r.pairs.length} ordered pairs, ${r.observations.length} observations` +
      ` (${r.workflows.failed} workflows not answered, ${r.dropped} dropped; ${r.cachedProposerSteps} of ${r.workflows.chains} proposer steps from the response cache)`,
    line(header),
    ...rows.map(line),
    `cells: value (n, 95% interval: a bootstrap over the items, ${r.estimates.pool.bootstrap?.samples ?? 0} resamples); per-worker values are shrunk toward the pool's; herd needs steps that see 2+ answers that disagree (not run here)`,
  ];
  const drift = Object.entries(r.solo).filter(([, s]) => s.recorded);
  if (drift.length > 0) lines.push(`recorded vs live solo outcomes: ${drift.map(([w, s]) => `${w} ${s.recorded!.agree}/${s.recorded!.n} agree`).join(', ')}`);
  return lines.join('\n');
}
