// Baselines of `fugu router eval`, each a decision (one worker per test item) computed from the
// evaluation table alone:
//
//   best single    the worker with the highest mean reward on the TRAIN split, for every test item
//   best per task  per task label, the worker with the highest train mean on that task (knows the
//                  task label, which the router does not); a task unseen in train gets best single
//   kNN            the k nearest train items by cosine similarity of backbone embeddings; the worker
//                  with the highest mean reward over those k items
//   random         uniform over the allowed workers: its expectation is exact (mean over workers)
//   oracle         the best worker of each test item (an upper bound no router reaches)
//
// Ties: between workers with equal mean reward, the cheaper (mean cost over the same rows) wins,
// then the lower index; the kNN router breaks ties to the lower index, as its neighbours' costs
// are not what it optimises. Every baseline may be restricted to an allowed worker pool.

import { InputError, rng } from '@fugu/core';
import { resolveAllowed, splitRows, type Decisions, type EvalTable } from './types.ts';

export type BaselineOptions = {
  /** split whose items choose the worker(s); default 'train' */
  trainSplit?: string;
  /** split whose items are decided; default 'test' */
  testSplit?: string;
  /** worker indices the baseline may choose; default all */
  allowed?: readonly number[];
};

type Resolved = { train: number[]; test: number[]; allowed: number[] };

function resolve(table: EvalTable, opts: BaselineOptions, needTrain = true): Resolved {
  const trainSplit = opts.trainSplit ?? 'train';
  const testSplit = opts.testSplit ?? 'test';
  const train = splitRows(table, trainSplit);
  const test = splitRows(table, testSplit);
  if (needTrain && train.length === 0) throw new InputError(`no items in split ${JSON.stringify(trainSplit)}`, { field: 'trainSplit' });
  if (test.length === 0) throw new InputError(`no items in split ${JSON.stringify(testSplit)}`, { field: 'testSplit' });
  return { train, test, allowed: resolveAllowed(table, opts.allowed) };
}

function constant(rows: readonly number[], worker: number): Decisions {
  return { rows, choice: new Int32Array(rows.length).fill(worker) };
}

/** The allowed worker with the highest mean reward over `rows`; ties to the cheaper, then the lower index. */
export function bestWorkerOn(table: EvalTable, rows: readonly number[], allowed: readonly number[]): number {
  if (rows.length === 0) throw new InputError('cannot choose a worker on no items', { field: 'rows' });
  let best = -1;
  let bestR = -Infinity;
  let bestC = Infinity;
  for (const j of allowed) {
    let r = 0;
    let c = 0;
    for (const i of rows) {
      r += table.rewards[i]![j]!;
      c += table.costs[i]![j]!;
    }
    r /= rows.length;
    c /= rows.length;
    if (r > bestR || (r === bestR && c < bestC)) {
      best = j;
      bestR = r;
      bestC = c;
    }
  }
  return best;
}

/** Best single worker: chosen on the train split, applied to every test item. */
export function bestSingle(table: EvalTable, opts: BaselineOptions = {}): Decisions & { worker: number } {
  const { train, test, allowed } = resolve(table, opts);
  const worker = bestWorkerOn(table, train, allowed);
  return { ...constant(test, worker), worker };
}

/** Best worker per task: chosen per task label on the train split; unseen tasks get the best single worker. */
export function bestPerTask(
  table: EvalTable,
  opts: BaselineOptions = {},
): Decisions & { perTask: Map<string, number>; fallback: number } {
  const { train, test, allowed } = resolve(table, opts);
  const fallback = bestWorkerOn(table, train, allowed);
  const byTask = new Map<string, number[]>();
  for (const i of train) {
    const t = table.items[i]!.task;
    let rows = byTask.get(t);
    if (!rows) byTask.set(t, (rows = []));
    rows.push(i);
  }
  const perTask = new Map<string, number>();
  for (const [t, rows] of byTask) perTask.set(t, bestWorkerOn(table, rows, allowed));
  const choice = new Int32Array(test.length);
  test.forEach((i, n) => {
    choice[n] = perTask.get(table.items[i]!.task) ?? fallback;
  });
  return { rows: test, choice, perTask, fallback };
}

/** Oracle: the best allowed worker of each test item; ties to the cheaper on that item, then the lower index. */
export function oracle(table: EvalTable, opts: BaselineOptions = {}): Decisions {
  const { test, allowed } = resolve(table, opts, false);
  const choice = new Int32Array(test.length);
  test.forEach((i, n) => {
    const r = table.rewards[i]!;
    const c = table.costs[i]!;
    let best = allowed[0]!;
    for (const j of allowed) {
      if (r[j]! > r[best]! || (r[j] === r[best] && c[j]! < c[best]!)) best = j;
    }
    choice[n] = best;
  });
  return { rows: test, choice };
}

/** Random routing, uniform over the allowed workers: the exact expected mean reward and cost on the test split. */
export function randomExpected(table: EvalTable, opts: BaselineOptions = {}): { meanReward: number; meanCost: number } {
  const { test, allowed } = resolve(table, opts, false);
  let r = 0;
  let c = 0;
  for (const i of test) {
    for (const j of allowed) {
      r += table.rewards[i]![j]!;
      c += table.costs[i]![j]!;
    }
  }
  const n = test.length * allowed.length;
  return { meanReward: r / n, meanCost: c / n };
}

/** One seeded sample of uniform random routing (use randomExpected for the report's figure). */
export function randomDecisions(table: EvalTable, seed: number | string, opts: BaselineOptions = {}): Decisions {
  const { test, allowed } = resolve(table, opts, false);
  const r = rng('random-router', seed);
  const choice = new Int32Array(test.length);
  for (let n = 0; n < test.length; n++) choice[n] = allowed[r.int(allowed.length)]!;
  return { rows: test, choice };
}

// ---------------------------------------------------------------------------------------------
// kNN

/** Row-major embeddings: n rows of `dim` floats. */
export type Embeddings = { data: Float32Array; n: number; dim: number };

function checkEmbeddings(e: Embeddings, field: string): void {
  if (!Number.isInteger(e.dim) || e.dim < 1) throw new InputError(`dim must be a positive integer, got ${e.dim}`, { field: `${field}.dim` });
  if (e.data.length !== e.n * e.dim) {
    throw new InputError(`${e.n} rows of ${e.dim} need ${e.n * e.dim} floats, got ${e.data.length}`, { field: `${field}.data` });
  }
}

/** Rows scaled to unit L2 norm (a zero row stays zero: similarity 0 to everything). */
function normalised(e: Embeddings): Float32Array {
  const out = new Float32Array(e.data.length);
  for (let r = 0; r < e.n; r++) {
    const o = r * e.dim;
    let s = 0;
    for (let d = 0; d < e.dim; d++) s += e.data[o + d]! * e.data[o + d]!;
    const inv = s > 0 ? 1 / Math.sqrt(s) : 0;
    for (let d = 0; d < e.dim; d++) out[o + d] = e.data[o + d]! * inv;
  }
  return out;
}

/**
 * The k nearest train rows of each query row by cosine similarity, most similar first; equal
 * similarities keep the lower train index first. Returns Int32Array [nQuery * k'] with
 * k' = min(k, nTrain).
 *
 * Four query rows are scored against each train row at once (one pass over a train row serves
 * four dot products), which is what keeps 5,600 x 500 x 512 near a second in plain JavaScript.
 */
export function nearestNeighbours(train: Embeddings, query: Embeddings, k: number): { index: Int32Array; k: number } {
  checkEmbeddings(train, 'train');
  checkEmbeddings(query, 'query');
  if (train.dim !== query.dim) throw new InputError(`train dim ${train.dim} differs from query dim ${query.dim}`, { field: 'query.dim' });
  if (!Number.isInteger(k) || k < 1) throw new InputError(`k must be a positive integer, got ${k}`, { field: 'k' });
  if (train.n === 0) throw new InputError('no train rows to take neighbours from', { field: 'train' });
  const kk = Math.min(k, train.n);
  const dim = train.dim;
  const T = normalised(train);
  const Q = normalised(query);
  const index = new Int32Array(query.n * kk);
  // per query row: the kept similarities (descending) and how many are kept
  const sims = new Float64Array(query.n * kk);
  const count = new Int32Array(query.n);

  const offer = (q: number, s: number, t: number): void => {
    const base = q * kk;
    let c = count[q]!;
    if (c === kk) {
      if (!(s > sims[base + kk - 1]!)) return; // ties keep the earlier (lower) train index
      c = kk - 1;
    } else {
      count[q] = c + 1;
    }
    // insertion: shift strictly smaller similarities down
    let p = c;
    while (p > 0 && sims[base + p - 1]! < s) {
      sims[base + p] = sims[base + p - 1]!;
      index[base + p] = index[base + p - 1]!;
      p--;
    }
    sims[base + p] = s;
    index[base + p] = t;
  };

  let q0 = 0;
  for (; q0 + 4 <= query.n; q0 += 4) {
    const a = q0 * dim;
    const b = a + dim;
    const c = b + dim;
    const d = c + dim;
    for (let t = 0; t < train.n; t++) {
      const o = t * dim;
      let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (let x = 0; x < dim; x++) {
        const v = T[o + x]!;
        s0 += v * Q[a + x]!;
        s1 += v * Q[b + x]!;
        s2 += v * Q[c + x]!;
        s3 += v * Q[d + x]!;
      }
      offer(q0, s0, t);
      offer(q0 + 1, s1, t);
      offer(q0 + 2, s2, t);
      offer(q0 + 3, s3, t);
    }
  }
  for (; q0 < query.n; q0++) {
    const a = q0 * dim;
    for (let t = 0; t < train.n; t++) {
      const o = t * dim;
      let s = 0;
      for (let x = 0; x < dim; x++) s += T[o + x]! * Q[a + x]!;
      offer(q0, s, t);
    }
  }
  return { index, k: kk };
}

export type KnnOptions = BaselineOptions & {
  /** neighbours per test item; default 10 */
  k?: number;
};

/**
 * kNN router: for each test item, the mean reward of every worker over its k nearest train items
 * (`scores`, [nTest * K] row-major; a cost-quality sweep can use them), and the decision: the allowed
 * worker with the highest neighbour mean, ties to the lower index.
 *
 * `trainEmb` and `testEmb` hold one row per item of the train and test splits, in table order
 * (the order of splitRows).
 */
export function knnRouter(
  table: EvalTable,
  trainEmb: Embeddings,
  testEmb: Embeddings,
  opts: KnnOptions = {},
): Decisions & { scores: Float64Array } {
  const { train, test, allowed } = resolve(table, opts);
  if (trainEmb.n !== train.length) throw new InputError(`${train.length} train items but ${trainEmb.n} train embeddings`, { field: 'trainEmb.n' });
  if (testEmb.n !== test.length) throw new InputError(`${test.length} test items but ${testEmb.n} test embeddings`, { field: 'testEmb.n' });
  const K = table.workers.length;
  const { index, k } = nearestNeighbours(trainEmb, testEmb, opts.k ?? 10);
  const scores = new Float64Array(test.length * K);
  const choice = new Int32Array(test.length);
  for (let q = 0; q < test.length; q++) {
    const out = q * K;
    for (let n = 0; n < k; n++) {
      const r = table.rewards[train[index[q * k + n]!]!]!;
      for (let j = 0; j < K; j++) scores[out + j] = scores[out + j]! + r[j]!;
    }
    for (let j = 0; j < K; j++) scores[out + j] = scores[out + j]! / k;
    let best = allowed[0]!;
    for (const j of allowed) if (scores[out + j]! > scores[out + best]!) best = j;
    choice[q] = best;
  }
  return { rows: test, choice, scores };
}
