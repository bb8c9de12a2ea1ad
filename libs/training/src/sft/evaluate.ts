// The router evaluation (`fugu router eval`): the router on a held-out split (by unique prompt, seeded, or the
// dataset's own: the checkpoint's scheme, another refused) beside
// the best single worker, the best worker per task (it knows the task label; the router does
// not), a kNN router on the same backbone features, random, and the per-question oracle. Mean
// reward and cost, the gap closed toward the oracle, APGR and CPT(50%/80%) for a strong/weak
// pair (RouteLLM), AIQ of the router's cost-quality sweep (RouterBench), and the routing
// distribution per task.
import { InputError } from '@fugu/core';
import { resolveSplitScheme, splitLabel, splitScheme, type SplitScheme } from '@fugu/datasets';
import { getCheckpoint, type Db } from '@fugu/db';
import {
  aiq, bestPerTask, bestSingle, costQualitySweep, gapClosed, knnRouter, loadRouterModel, meanCost, meanReward, oracle, pairScores, randomExpected,
  routingDistribution, strongWeakMetrics, validateEvalTable, type Decisions, type EvalTable,
} from '@fugu/router-model';
import type { RouterEvaluation } from './evaluation-data.ts';
import { cachedFeatures, checkCompatible, routingDataFromRun, splitIndices } from '../tasks/index.ts';

export type RouterEvalOptions = {
  checkpoint: string; run?: string; split: 'test' | 'val'; splitSeed?: number;
  /** default: the checkpoint's scheme; another is refused (it would score the router on questions it was trained on) */
  splitBy?: SplitScheme;
  k: number; home: string; log?: (l: string) => void;
};

const stack = (rows: Float32Array[], idx: readonly number[], dim: number): Float32Array => {
  const out = new Float32Array(idx.length * dim);
  idx.forEach((r, i) => out.set(rows[r]!, i * dim));
  return out;
};

export async function evaluateRouter(db: Db, opts: RouterEvalOptions): Promise<RouterEvaluation> {
  const log = opts.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const ckpt = await getCheckpoint(db, opts.checkpoint);
  if (!ckpt) throw new InputError(`no router checkpoint "${opts.checkpoint}"`, { field: 'checkpoint' });
  const run = opts.run ?? (ckpt.training.run as string | undefined);
  if (!run) throw new InputError(`checkpoint ${ckpt.id} names no training run: give --run`, { field: '--run' });
  // the checkpoint's own split: another seed's held-out part would hold questions it was trained on
  const trainedSeed = ckpt.training.splitSeed as number | undefined;
  if (opts.splitSeed !== undefined && trainedSeed !== undefined && opts.splitSeed !== trainedSeed) {
    throw new InputError(`checkpoint ${ckpt.id} was trained on the train part of split seed ${trainedSeed}: the ${opts.split} split of seed ${opts.splitSeed} would hold questions it was trained on (leave --split-seed out, or give ${trainedSeed})`, { field: '--split-seed' });
  }
  const splitSeed = opts.splitSeed ?? trainedSeed ?? 0;
  const made = splitScheme(ckpt.training.splitBy ?? 'prompt', 'checkpoint');
  const splitBy = resolveSplitScheme(opts.splitBy, [{ what: `router checkpoint ${ckpt.id}`, by: made }]);
  const data = await routingDataFromRun(db, run);
  const K = data.workers.length;
  const model = await loadRouterModel(opts.home, K);
  try {
    checkCompatible(ckpt, data, model.backboneId);
    const { features } = await cachedFeatures(db, model.encoder, data.items.map((i) => i.prompt), {
      onProgress: (done, total) => log(`features: ${done}/${total} encoded`),
    });
    const split = splitIndices(data, { by: splitBy, seed: splitSeed });
    const label = new Array<string>(data.items.length);
    for (const [name, idx] of Object.entries(split)) for (const i of idx) label[i] = name;
    const table: EvalTable = validateEvalTable({
      items: data.items.map((it, i) => ({ id: it.id, task: it.task, split: label[i]! })),
      workers: data.workers.map((w) => ({ name: w.name, prices: { inputPerMTok: w.inputPerMTok, outputPerMTok: w.outputPerMTok } })),
      rewards: data.rewards.map((r) => [...r]),
      costs: data.costs.map((c) => [...c]),
    });
    const opt = { trainSplit: 'train', testSplit: opts.split };
    const rows = split[opts.split];
    const D = features[0]!.length;

    const out = await model.head.logits(stack(features, rows, D), ckpt.theta);
    const probs = softmaxRows(out.data, K);
    const router: Decisions = { rows, choice: Int32Array.from(rows, (_, t) => argmax(probs, t * K, K)) };
    const single = bestSingle(table, opt);
    const perTask = bestPerTask(table, opt);
    const knn = knnRouter(table, { data: stack(features, split.train, D), n: split.train.length, dim: D }, { data: stack(features, rows, D), n: rows.length, dim: D }, { ...opt, k: opts.k });
    const best = oracle(table, opt);
    const random = randomExpected(table, opt);
    const result = (name: string, d: Decisions, note?: string) => ({ name, meanReward: meanReward(table, d), meanCost: meanCost(table, d), ...(note && { note }) });
    const methods = [
      result('router', router),
      result('best single', single, data.workers[single.worker]!.name),
      result('best per task', perTask),
      result(`kNN (k=${opts.k})`, knn),
      { name: 'random', meanReward: random.meanReward, meanCost: random.meanCost },
      result('oracle', best),
    ];

    // strong/weak pair: the best single worker, and the cheapest worker other than it
    const avgPrice = data.workers.map((w) => (Number(w.inputPerMTok) + Number(w.outputPerMTok)) / 2);
    const weak = avgPrice.map((p, j) => ({ p, j })).filter(({ j }) => j !== single.worker).sort((a, b) => a.p - b.p || a.j - b.j)[0]!.j;
    const sw = strongWeakMetrics(table, rows, pairScores(probs, K, single.worker, weak), single.worker, weak);
    const sweep = costQualitySweep(table, rows, probs);
    const routing = routingDistribution(table, router);
    const taskCounts: Record<string, number> = {};
    for (const i of rows) taskCounts[table.items[i]!.task] = (taskCounts[table.items[i]!.task] ?? 0) + 1;

    return {
      checkpoint: { id: ckpt.id, stage: ckpt.stage, backboneId: ckpt.backboneId, parentId: ckpt.parentId, tau: ckpt.tau, createdAt: ckpt.createdAt?.toISOString() ?? '' },
      data: { run, split: opts.split, splitBy, splitSeed, items: rows.length, trainItems: split.train.length },
      workers: data.workers,
      methods,
      gapClosed: gapClosed(methods[0]!.meanReward, methods[1]!.meanReward, methods[5]!.meanReward),
      strongWeak: { strong: data.workers[single.worker]!.name, weak: data.workers[weak]!.name, apgr: sw.apgr, cpt50: sw.cpt50, cpt80: sw.cpt80, curve: { calls: [...sw.curve.calls], pgr: [...sw.curve.pgr] } },
      aiq: aiq(sweep.hull),
      sweep: { points: sweep.points.map((p) => ({ lambda: p.lambda, cost: p.cost, reward: p.reward })), hull: sweep.hull.map((p) => ({ cost: p.cost, reward: p.reward })) },
      routing,
      taskCounts,
      ...(Array.isArray(ckpt.metrics.history) && { training: ckpt.metrics.history as RouterEvaluation['training'] }),
    };
  } finally {
    await model.release();
  }
}

function softmaxRows(logits: Float32Array, K: number): Float64Array {
  const out = new Float64Array(logits.length);
  for (let i = 0; i < logits.length; i += K) {
    let max = -Infinity;
    for (let j = 0; j < K; j++) max = Math.max(max, logits[i + j]!);
    let sum = 0;
    for (let j = 0; j < K; j++) sum += (out[i + j] = Math.exp(logits[i + j]! - max));
    for (let j = 0; j < K; j++) out[i + j]! /= sum;
  }
  return out;
}

function argmax(p: ArrayLike<number>, from: number, K: number): number {
  let best = 0;
  for (let j = 1; j < K; j++) if (p[from + j]! > p[from + best]!) best = j;
  return best;
}

/** The comparison as a plain-text table. */
export function formatRouterEval(r: RouterEvaluation): string {
  const lines = [`router ${r.checkpoint.id} on run ${r.data.run}, ${r.data.split} split (${splitLabel({ by: r.data.splitBy ?? 'prompt', seed: r.data.splitSeed })}, ${r.data.items} items):`];
  lines.push(`${'method'.padEnd(18)}${'mean reward'.padStart(12)}${'USD/call'.padStart(12)}`);
  for (const m of r.methods) lines.push(`${m.name.padEnd(18)}${m.meanReward.toFixed(4).padStart(12)}${m.meanCost.toExponential(3).padStart(12)}${m.note ? `  ${m.note}` : ''}`);
  lines.push(`gap closed toward the oracle: ${(100 * r.gapClosed).toFixed(1)}%`);
  lines.push(`strong/weak ${r.strongWeak.strong} / ${r.strongWeak.weak}: APGR ${r.strongWeak.apgr.toFixed(3)}, CPT(50%) ${(100 * r.strongWeak.cpt50).toFixed(1)}%, CPT(80%) ${(100 * r.strongWeak.cpt80).toFixed(1)}%`);
  lines.push(`AIQ of the cost-quality sweep: ${r.aiq.toFixed(4)}`);
  return `${lines.join('\n')}\n`;
}
