// What a Conductor could gain over the router in the replay model, in exact expectation (a
// simulation from recorded outcomes): on a split of the router's, the router, the best single
// worker, every two-step workflow "A alone, then B reading A" (fixed for all questions), and the
// per-question best of {the router's pick, each such pair} (an oracle upper bound of what
// choosing between them per question can reach).
//   FUGU_DATABASE_URL=... node docs/analysis/conductor-grpo/landscape.ts <router checkpoint> [split]
import { expectedWorkflowCorrect, replayItemOf } from '../../../libs/conductor/src/index.ts';
import { routerChoices, trainSplitRanking, workerReplayParams } from '../../../libs/ultra/src/index.ts';
import { openLlmrouter } from './llmrouter-db.ts';

const [router, split = 'test'] = process.argv.slice(2);
const { config, db, workers, names, stored, items } = await openLlmrouter(split);
const params = (w: string) => workerReplayParams(undefined, workers.find((k) => k.name === w)!);
const ranking = trainSplitRanking(names, stored, 0);
const picks = await routerChoices(db, config.home, router!, items.map((i) => i.prompt), names);
const short = (n: string) => n.replace(/-instruct|-it|-v\d.*$/g, '');
const single = (it: (typeof items)[number], w: string) => it.recorded![w]!.score;
const pair = (it: (typeof items)[number], a: string, b: string) =>
  expectedWorkflowCorrect({ params, item: replayItemOf(it), steps: [{ worker: a, sees: [] }, { worker: b, sees: [0] }] });
const mean = (f: (it: (typeof items)[number], i: number) => number) => items.reduce((s, it, i) => s + f(it, i), 0) / items.length;
console.log(`${split}: ${items.length} items (a simulation: the replay model at its presets)`);
console.log(`best single (${short(ranking[0]!)}) ${mean((it) => single(it, ranking[0]!)).toFixed(4)}; router ${mean((it, i) => single(it, names[picks[i]!]!)).toFixed(4)}`);
const top = ranking.slice(0, 5);
const rows: Array<[string, number]> = [];
for (const b of top) for (const a of names) if (a !== b) rows.push([`${short(a)} -> ${short(b)}`, mean((it) => pair(it, a, b))]);
rows.sort((x, y) => y[1] - x[1]);
console.log('best fixed pairs "A, then B reading A":');
for (const [k, v] of rows.slice(0, 8)) console.log(`  ${k.padEnd(50)} ${v.toFixed(4)}`);
// per question: the router's pick or the best pair ending at the router's pick / at 51b
const oracle = mean((it, i) => {
  const r = names[picks[i]!]!;
  let best = single(it, r);
  for (const b of [r, ranking[0]!]) for (const a of names) if (a !== b) best = Math.max(best, pair(it, a, b));
  return best;
});
console.log(`per-question best of {router pick, A then (router pick | ${short(ranking[0]!)}) reading A}: ${oracle.toFixed(4)} (an upper bound)`);
// the router's pick reading one fixed helper, for every helper
const helpers = names.map((a) => [short(a), mean((it, i) => (names[picks[i]!] === a ? single(it, a) : pair(it, a, names[picks[i]!]!)))] as const).sort((x, y) => y[1] - x[1]);
console.log(`router's pick reading A's answer first (A = router's pick: alone): ${helpers.slice(0, 4).map(([k, v]) => `${k} ${v.toFixed(4)}`).join(', ')}`);
await db.destroy();
