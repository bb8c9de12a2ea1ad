// The train / val / test split (by unique prompt, or the dataset's own: `--split-by`, assignSplit
// in @fugu/datasets, the router's split too) and the rankings made from recorded scores: what
// `fugu ultra eval`, `fugu ultra run`, a policy's initialisation (policy-store.ts) and any other
// driver pick items and rank workers by (a run's seeded sample of a split, `runItems`, is
// @fugu/ultra-training's, run-items.ts). A leaf: it imports nothing from libs/ultra.
import type { DatasetItem } from '@fugu/core';
import { assignSplit, type SplitSpec } from '@fugu/datasets';

export const ULTRA_SPLITS = ['train', 'val', 'test', 'all'] as const;
export type UltraSplit = (typeof ULTRA_SPLITS)[number];

type SplitItem = Pick<DatasetItem, 'id' | 'prompt' | 'sourceSplit'>;

/** A split given as a seed (by unique prompt, the default scheme) or a SplitSpec. */
export const splitSpecOf = (split: number | SplitSpec): SplitSpec => (typeof split === 'number' ? { by: 'prompt', seed: split } : split);

/**
 * Item indices (dataset order) of a split: the router's split (assignSplit: by unique prompt with
 * the seed when `split` is a number, else the SplitSpec's scheme).
 */
export function splitItems(items: ReadonlyArray<SplitItem>, split: UltraSplit, spec: number | SplitSpec): number[] {
  if (split === 'all') return items.map((_, i) => i);
  const by = assignSplit(items, splitSpecOf(spec));
  return items.flatMap((it, i) => (by.get(it.id) === split ? [i] : []));
}

/** Each worker's mean recorded score over the given items and how many it averages (0 items: no record). */
export function workerMeans(workers: readonly string[], items: ReadonlyArray<Pick<DatasetItem, 'recorded'>>): Array<{ worker: string; mean: number; items: number }> {
  return workers.map((worker) => {
    let sum = 0;
    let n = 0;
    for (const it of items) {
      const r = it.recorded?.[worker];
      if (r && Number.isFinite(r.score)) {
        sum += r.score;
        n++;
      }
    }
    return { worker, mean: n > 0 ? sum / n : Number.NEGATIVE_INFINITY, items: n };
  });
}

/** Workers by mean recorded score over the given items, best first (ties and workers without records: pool order). */
export function rankWorkers(workers: readonly string[], items: ReadonlyArray<Pick<DatasetItem, 'recorded'>>): string[] {
  return workerMeans(workers, items).map((m, i) => ({ ...m, i })).sort((a, b) => b.mean - a.mean || a.i - b.i).map((x) => x.worker);
}

/** Workers by mean recorded score on the train part of the router's split (what the fixed topologies and a policy's initialisation rank by). */
export function trainSplitRanking(workers: readonly string[], items: ReadonlyArray<SplitItem & Pick<DatasetItem, 'recorded'>>, spec: number | SplitSpec): string[] {
  return rankWorkers(workers, splitItems(items, 'train', spec).map((i) => items[i]!));
}
