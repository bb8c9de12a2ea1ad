// Reference figures of a routing matrix (items x workers of mean rewards): each worker's mean,
// the best single worker, the best worker per task, and the per-item oracle, overall and per split.

import { InputError, type DatasetItem } from '@fugu/core';

export type RewardRow = { itemId: string; task: string; split?: string; rewards: Record<string, number> };

export type RoutingFigures = {
  n: number;
  /** in the order of `workers` */
  perWorker: Array<{ worker: string; mean: number }>;
  /** highest mean; ties go to the earlier worker */
  bestSingle: { worker: string; mean: number };
  /** choose per task the worker with the highest mean on that task (in-sample) */
  bestPerTask: { mean: number; choice: Record<string, string> };
  /** mean over items of the best reward any worker got */
  oracle: number;
  /** task -> worker -> mean */
  perTask: Record<string, Record<string, number>>;
};

export type RoutingSummary = RoutingFigures & { bySplit: Record<string, RoutingFigures> };

function figures(rows: readonly RewardRow[], workers: readonly string[]): RoutingFigures {
  const n = rows.length;
  const sums = workers.map(() => 0);
  const taskSums = new Map<string, { n: number; sums: number[] }>();
  let oracleSum = 0;
  for (const row of rows) {
    let t = taskSums.get(row.task);
    if (!t) taskSums.set(row.task, (t = { n: 0, sums: workers.map(() => 0) }));
    t.n++;
    let best = -Infinity;
    workers.forEach((w, j) => {
      const r = row.rewards[w]!;
      sums[j]! += r;
      t.sums[j]! += r;
      if (r > best) best = r;
    });
    oracleSum += best;
  }
  const perWorker = workers.map((worker, j) => ({ worker, mean: sums[j]! / n }));
  const bestSingle = perWorker.reduce((a, b) => (b.mean > a.mean ? b : a));
  const perTask: Record<string, Record<string, number>> = {};
  const choice: Record<string, string> = {};
  let perTaskSum = 0;
  for (const [task, t] of taskSums) {
    const means: Record<string, number> = {};
    let bestJ = 0;
    workers.forEach((w, j) => {
      means[w] = t.sums[j]! / t.n;
      if (t.sums[j]! > t.sums[bestJ]!) bestJ = j;
    });
    perTask[task] = means;
    choice[task] = workers[bestJ]!;
    perTaskSum += t.sums[bestJ]!;
  }
  return { n, perWorker, bestSingle, bestPerTask: { mean: perTaskSum / n, choice }, oracle: oracleSum / n, perTask };
}

/**
 * Reference figures over all rows, and per split for rows that have one. Every row needs a
 * finite reward for every worker; there must be at least one row and one worker.
 */
export function routingSummary(rows: readonly RewardRow[], workers: readonly string[]): RoutingSummary {
  if (workers.length === 0) throw new InputError('no workers to summarise', { field: 'workers' });
  if (rows.length === 0) throw new InputError('no rows to summarise', { field: 'rows' });
  for (const row of rows) {
    for (const w of workers) {
      const r = row.rewards[w];
      if (typeof r !== 'number' || !Number.isFinite(r)) {
        throw new InputError(`item ${row.itemId} has no reward for worker "${w}"`, { field: `rewards.${w}` });
      }
    }
  }
  const bySplitRows = new Map<string, RewardRow[]>();
  for (const row of rows) {
    if (row.split === undefined) continue;
    let list = bySplitRows.get(row.split);
    if (!list) bySplitRows.set(row.split, (list = []));
    list.push(row);
  }
  const bySplit: Record<string, RoutingFigures> = {};
  for (const [split, list] of bySplitRows) bySplit[split] = figures(list, workers);
  return { ...figures(rows, workers), bySplit };
}

/**
 * Rows of recorded scores: one per item, rewards = the recorded score of each worker, split =
 * `splits.get(item.id)` when a split map is given, else the item's source split.
 */
export function recordedRewardRows(items: readonly DatasetItem[], splits?: ReadonlyMap<string, string>): RewardRow[] {
  return items.map((item) => {
    const rewards: Record<string, number> = {};
    for (const [w, o] of Object.entries(item.recorded ?? {})) rewards[w] = o.score;
    const row: RewardRow = { itemId: item.id, task: item.task, rewards };
    const split = splits ? splits.get(item.id) : item.sourceSplit;
    if (split !== undefined) row.split = split;
    return row;
  });
}
