// The study driver (`fugu router study`): the router's headline figure. For each split seed, SFT of the router
// (head + SVF) and of the head-only ablation, both evaluated on that seed's test split beside
// the baselines; then mean and standard deviation over the seeds.
import type { Db } from '@fugu/db';
import type { RouterEvaluation } from './evaluation-data.ts';
import { evaluateRouter } from './evaluate.ts';
import { trainRouter, type TrainOptions } from './train.ts';

export type StudyOptions = Omit<TrainOptions, 'splitSeed' | 'headOnly' | 'run' | 'labels'> & { run: string; seeds: number; k: number };

export type StudyResult = {
  seeds: number;
  /** per method: mean reward per seed */
  perSeed: Record<string, number[]>;
  summary: Array<{ name: string; mean: number; sd: number }>;
  gapClosed: { mean: number; sd: number };
  /** the last seed's full evaluation (for the report), with the seed summary attached */
  last: RouterEvaluation;
};

const meanSd = (xs: number[]): { mean: number; sd: number } => {
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  const sd = xs.length > 1 ? Math.sqrt(xs.reduce((a, b) => a + (b - mean) ** 2, 0) / (xs.length - 1)) : 0;
  return { mean, sd };
};

export async function routerStudy(db: Db, opts: StudyOptions): Promise<StudyResult> {
  const log = opts.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const perSeed: Record<string, number[]> = {};
  const gaps: number[] = [];
  let last: RouterEvaluation | undefined;
  for (let seed = 0; seed < opts.seeds; seed++) {
    const quiet = () => {};
    const full = await trainRouter(db, { ...opts, splitSeed: seed, headOnly: false, log: quiet });
    const head = await trainRouter(db, { ...opts, splitSeed: seed, headOnly: true, log: quiet });
    const r = await evaluateRouter(db, { checkpoint: full.checkpointId, split: 'test', k: opts.k, home: opts.home, log: quiet });
    const h = await evaluateRouter(db, { checkpoint: head.checkpointId, split: 'test', k: opts.k, home: opts.home, log: quiet });
    const methods = [r.methods[0]!, { ...h.methods[0]!, name: 'router (head only)' }, ...r.methods.slice(1)];
    for (const m of methods) (perSeed[m.name] ??= []).push(m.meanReward);
    gaps.push(r.gapClosed);
    log(`split seed ${seed}: ${methods.map((m) => `${m.name} ${m.meanReward.toFixed(4)}`).join(', ')}`);
    last = { ...r, methods };
  }
  const summary = Object.entries(perSeed).map(([name, xs]) => ({ name, ...meanSd(xs) }));
  return { seeds: opts.seeds, perSeed, summary, gapClosed: meanSd(gaps), last: { ...last!, seeds: { count: opts.seeds, methods: summary } } };
}

export function formatStudy(s: StudyResult): string {
  const lines = [`mean reward on the test split over ${s.seeds} split seeds (by unique prompt):`, `${'method'.padEnd(22)}${'mean'.padStart(8)}${'sd'.padStart(8)}`];
  for (const m of s.summary) lines.push(`${m.name.padEnd(22)}${m.mean.toFixed(4).padStart(8)}${m.sd.toFixed(4).padStart(8)}`);
  lines.push(`gap closed toward the oracle (router): ${(100 * s.gapClosed.mean).toFixed(1)}% +- ${(100 * s.gapClosed.sd).toFixed(1)}%`);
  return `${lines.join('\n')}\n`;
}
