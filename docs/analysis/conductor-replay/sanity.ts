// Sanity figures of the replay step model (libs/conductor/src/replay) on the LLMRouter test split:
// the best single worker, a strong and a weak aggregator over three proposers, a worker
// re-reviewing its own answer, the best-then-second-best chain, and the oracle, over 3 seeds.
// These are figures of the replay MODEL (a simulation from recorded solo outcomes), not live calls.
//   source infra/node-env.sh && node docs/analysis/conductor-replay/sanity.ts [llmrouter dir]
import path from 'node:path';
import { loadLlmRouter } from '../../../libs/datasets/src/index.ts';
import { REPLAY_PRESETS, replayItemOf, replayWorkflow, resolveWorkerParams, type ReplayConfig, type ReplayParams, type ReplayWorkflowStep } from '../../../libs/conductor/src/replay/index.ts';

const SEEDS = [0, 1, 2];
const ds = await loadLlmRouter(process.argv[2] ?? path.resolve(import.meta.dirname, '../../../data/llmrouter'));
const train = ds.items.filter((i) => i.sourceSplit === 'train').map(replayItemOf);
const test = ds.items.filter((i) => i.sourceSplit === 'test').map(replayItemOf);

const trainMean = (w: string): number => train.reduce((a, i) => a + i.recorded[w]!, 0) / train.length;
const ranked = [...ds.workers].sort((a, b) => trainMean(b) - trainMean(a));
const best = ranked[0]!, second = ranked[1]!, top3 = ranked.slice(0, 3), weakest = ranked[ranked.length - 1]!;

type Row = { name: string; workflow: string; steps: ReplayWorkflowStep[] | 'oracle'; config?: ReplayConfig };
const moa = (agg: string): ReplayWorkflowStep[] => [...top3.map((w) => ({ worker: w, sees: [] })), { worker: agg, sees: [0, 1, 2] }];
const rows: Row[] = [
  { name: 'best single worker (on train)', workflow: best, steps: [{ worker: best, sees: [] }] },
  { name: 'strong aggregator over top 3', workflow: `${top3.join(' + ')} -> ${best}`, steps: moa(best) },
  { name: 'weak aggregator over top 3', workflow: `${top3.join(' + ')} -> ${weakest}`, steps: moa(weakest) },
  { name: 'self re-review (2-step chain)', workflow: `${best} -> ${best}`, steps: [{ worker: best, sees: [] }, { worker: best, sees: [0] }] },
  { name: 'chain: best solves, 2nd verifies', workflow: `${best} -> ${second}`, steps: [{ worker: best, sees: [] }, { worker: second, sees: [0] }] },
  { name: 'oracle (any of the 9 correct)', workflow: 'per item', steps: 'oracle' },
];
// how far the strong aggregator's parameters must move for it to lose to the best single worker
for (const misled of [0.05, 0.35, 0.5]) {
  rows.push({ name: `strong aggregator, its misled = ${misled}`, workflow: 'as above', steps: moa(best), config: { workers: { [best]: { params: { misled } } } } });
}
rows.push({ name: 'strong aggregator, small preset', workflow: 'as above', steps: moa(best), config: { workers: { [best]: { sizeClass: 'small' } } } });

function run(row: Row, seed: number): { acc: number; reward: number; p: number; steps: number } {
  let correct = 0, p = 0;
  const params = (w: string): ReplayParams => resolveWorkerParams(row.config ?? {}, w);
  for (const it of test) {
    if (row.steps === 'oracle') {
      const r = ds.workers.map((w) => replayWorkflow({ params, item: it, seed, steps: [{ worker: w, sees: [] }] }).correct);
      if (r.some(Boolean)) correct++;
      p += Math.max(...ds.workers.map((w) => it.recorded[w]!));
      continue;
    }
    const out = replayWorkflow({ params, item: it, seed, steps: row.steps });
    if (out.correct) correct++;
    p += out.steps[out.steps.length - 1]!.p;
  }
  const n = test.length;
  return { acc: correct / n, reward: (correct + 0.5 * (n - correct)) / n, p: p / n, steps: row.steps === 'oracle' ? 1 : row.steps.length };
}

const meanSd = (xs: number[]): string => {
  const m = xs.reduce((a, b) => a + b, 0) / xs.length;
  const sd = Math.sqrt(xs.reduce((a, b) => a + (b - m) ** 2, 0) / (xs.length - 1));
  return `${m.toFixed(3)} ± ${sd.toFixed(3)}`;
};

console.log(`LLMRouter test split: ${test.length} items, ${ds.workers.length} workers; seeds ${SEEDS.join(', ')}; replay-model figures, not live calls`);
console.log(`train means: ${ranked.map((w) => `${w} ${trainMean(w).toFixed(3)} (${resolveWorkerParams({}, w).sizeClass})`).join(', ')}`);
console.log(`presets: large ${JSON.stringify(REPLAY_PRESETS.large)}, small ${JSON.stringify(REPLAY_PRESETS.small)}\n`);
console.log('| topology | workflow | steps | accuracy (mean ± sd, 3 seeds) | mean reward (1 / 0.5) | model P(correct) of the last step |');
console.log('|---|---|---|---|---|---|');
for (const row of rows) {
  const rs = SEEDS.map((s) => run(row, s));
  console.log(`| ${row.name} | ${row.workflow} | ${rs[0]!.steps} | ${meanSd(rs.map((r) => r.acc))} | ${meanSd(rs.map((r) => r.reward))} | ${meanSd(rs.map((r) => r.p))} |`);
}
