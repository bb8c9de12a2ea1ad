// A model-based Conductor, as a ceiling for what the question's features let a Conductor learn in
// the replay model (a simulation from recorded outcomes): per worker, a logistic regression of
// its recorded score on the router backbone's features (fitted on the train split); per question,
// the workflow with the highest expected correctness when the item's outcomes are those predicted
// probabilities (expectedWorkflowCorrect on a "virtual item"), among every single worker and every
// two-step workflow "A alone, then B reading A"; scored in exact expectation on the real item.
// Beside it: the router, the best single worker, and the per-worker regression's single pick.
//   FUGU_DATABASE_URL=... node docs/analysis/conductor-grpo/model-based.ts <router checkpoint> [l2] [iterations]
import { expectedWorkflowCorrect, REPLAY_PRESETS, replayItemOf, type ReplayConfig, type ReplayItem, type ReplayParams } from '../../../libs/conductor/src/index.ts';
import { routerChoices, splitItems, trainSplitRanking, workerReplayParams } from '../../../libs/ultra/src/index.ts';
import { backboneFeatures } from '../../../libs/ultra-training/src/index.ts';
import { openLlmrouter } from './llmrouter-db.ts';

const [router, l2Arg = '0.001', itersArg = '400'] = process.argv.slice(2);
const l2 = Number(l2Arg);
const iters = Number(itersArg);
const { config, db, workers, names, stored } = await openLlmrouter('train');
const split = (s: 'train' | 'val' | 'test') => splitItems(stored, s, 0).map((i) => stored[i]!);
const feats = await backboneFeatures(db, config.home);
const params = (w: string) => workerReplayParams(undefined, workers.find((k) => k.name === w)!);
const ranking = trainSplitRanking(names, stored, 0);

type Item = (typeof stored)[number];
const train = split('train');
const xTrain = await feats.features(train.map((i) => i.prompt));
const dim = xTrain[0]!.length;

/** Logistic regression by full-batch Adam on the soft targets (recorded scores in [0, 1]). */
function fit(y: number[]): { w: Float64Array; b: number } {
  const w = new Float64Array(dim);
  let b = 0;
  const m = new Float64Array(dim + 1);
  const v = new Float64Array(dim + 1);
  const lr = 0.05;
  for (let t = 1; t <= iters; t++) {
    const g = new Float64Array(dim + 1);
    for (let i = 0; i < xTrain.length; i++) {
      const x = xTrain[i]!;
      let z = b;
      for (let k = 0; k < dim; k++) z += w[k]! * x[k]!;
      const err = 1 / (1 + Math.exp(-z)) - y[i]!;
      for (let k = 0; k < dim; k++) g[k]! += err * x[k]!;
      g[dim]! += err;
    }
    for (let k = 0; k <= dim; k++) {
      const grad = g[k]! / xTrain.length + (k < dim ? l2 * w[k]! : 0);
      m[k] = 0.9 * m[k]! + 0.1 * grad;
      v[k] = 0.999 * v[k]! + 0.001 * grad * grad;
      const step = (lr * (m[k]! / (1 - 0.9 ** t))) / (Math.sqrt(v[k]! / (1 - 0.999 ** t)) + 1e-8);
      if (k < dim) w[k]! -= step;
      else b -= step;
    }
  }
  return { w, b };
}

const models = names.map((n) => fit(train.map((it) => it.recorded![n]!.score)));
const predict = (x: Float32Array): number[] =>
  models.map(({ w, b }) => {
    let z = b;
    for (let k = 0; k < dim; k++) z += w[k]! * x[k]!;
    return 1 / (1 + Math.exp(-z));
  });

type Wf = Array<{ worker: string; sees: number[] }>;
const candidates: Wf[] = [...names.map((w) => [{ worker: w, sees: [] }]), ...names.flatMap((a) => names.filter((b) => b !== a).map((b) => [{ worker: a, sees: [] }, { worker: b, sees: [0] }]))];
const score = (item: ReplayItem, wf: Wf) => expectedWorkflowCorrect({ params, item, steps: wf });
// the chosen workflows scored under perturbed step models too (the planner keeps the default's)
const both = (f: (p: ReplayParams) => Partial<ReplayParams>): ReplayConfig => ({ presets: { large: f(REPLAY_PRESETS.large), small: f(REPLAY_PRESETS.small) } });
const perturbations: Array<[string, ReplayConfig]> = [
  ['misled +0.1', both((p) => ({ misled: Math.min(1, p.misled + 0.1) }))],
  ['fix -0.05', both((p) => ({ fix: Math.max(0, p.fix - 0.05) }))],
  ['keep -0.05', both((p) => ({ keep: p.keep - 0.05 }))],
  ['herd halved', both((p) => ({ herd: p.herd / 2 }))],
];
const perturbedParams = perturbations.map(([, cfg]) => (w: string) => workerReplayParams(cfg, workers.find((k) => k.name === w)!));

for (const s of ['val', 'test'] as const) {
  const items: Item[] = split(s);
  const x = await feats.features(items.map((i) => i.prompt));
  const picks = await routerChoices(db, config.home, router!, items.map((i) => i.prompt), names);
  let routerAcc = 0, best = 0, single = 0, planned = 0, steps = 0;
  const perturbed = perturbations.map(() => 0);
  const shapes = new Map<string, number>();
  items.forEach((it, i) => {
    const real = replayItemOf(it);
    const p = predict(x[i]!);
    const virtual: ReplayItem = { id: it.id, recorded: Object.fromEntries(names.map((n, j) => [n, p[j]!])) };
    routerAcc += it.recorded![names[picks[i]!]!]!.score;
    best += it.recorded![ranking[0]!]!.score;
    single += it.recorded![names[p.indexOf(Math.max(...p))]!]!.score;
    let chosen = candidates[0]!;
    let top = -1;
    for (const c of candidates) {
      const v = score(virtual, c);
      if (v > top) [top, chosen] = [v, c];
    }
    planned += score(real, chosen);
    perturbedParams.forEach((pp, k) => (perturbed[k]! += expectedWorkflowCorrect({ params: pp, item: real, steps: chosen })));
    steps += chosen.length;
    const key = chosen.length === 1 ? 'single' : 'A then B reading A';
    shapes.set(key, (shapes.get(key) ?? 0) + 1);
  });
  const n = items.length;
  console.log(
    `${s} (${n} items, exact expected accuracy, a simulation): router ${(routerAcc / n).toFixed(4)}, best single ${(best / n).toFixed(4)}, ` +
      `regression's single pick ${(single / n).toFixed(4)}, model-based (singles and pairs) ${(planned / n).toFixed(4)} ` +
      `(${(steps / n).toFixed(2)} steps; ${[...shapes.entries()].map(([k, v]) => `${v} ${k}`).join(', ')}); under ${perturbations.map(([name], k) => `${name} ${(perturbed[k]! / n).toFixed(4)}`).join(', ')}`,
  );
}
await feats.release();
await db.destroy();
