// The cost preference in a unit that carries across pools (issue 29, GRPO as a user, item 3).
// `--mu` is reward units per dollar: 10 barely matters at one pool's prices and dominates at
// another's. `--cost-weight λ` is reward units per *the pool's own reference cost*: the dollars per
// item of its best single worker (the first of the training ranking, by train-split mean recorded
// score) answering the train split's questions alone, as the replay provider charges them
// (recorded tokens x the worker's prices; recordedCallTokens). The run's mu is λ / that cost, so
//
//   reward = base - λ x (the workflow's dollars / the best single worker's dollars per item)
//
// and λ = 0.01 reads "always paying the best worker's cost is worth 0.01 reward" (2 points of
// accuracy at 1 correct / 0.5 wrong, where a point is 0.005 reward) on any pool: scaling every price by k scales the reference by k
// and leaves every reward, and so the whole run, unchanged.
import { InputError, tokenCost, type DatasetItem } from '@fugu/core';
import { picoToUsd, recordedCallTokens } from '@fugu/conductor';
import type { SplitSpec } from '@fugu/datasets';
import { splitItems, trainingRanking } from '@fugu/ultra';

/** What a run's cost weight was converted with (stored in its config as `costReference`). */
export type CostReference = {
  /** the reference worker: the best single worker by train-split mean recorded score */
  worker: string;
  /** its mean dollars per train item (recorded tokens x its prices) */
  usdPerItem: number;
  /** the train items it was averaged over (those with a recorded outcome of the worker) */
  items: number;
};

/** The reference cost of a pool on a dataset's train split (see the file's header). */
export function costReference(
  items: readonly DatasetItem[],
  workers: ReadonlyArray<{ name: string; prices: { inputPerMTok: string; outputPerMTok: string } }>,
  split: SplitSpec,
  datasetName?: string,
): CostReference {
  const { ranking } = trainingRanking(items, workers.map((w) => w.name), { splitSeed: split.seed, splitBy: split.by, ...(datasetName !== undefined && { datasetName }) });
  const worker = workers.find((w) => w.name === ranking[0])!;
  let sum = 0n;
  let n = 0;
  for (const i of splitItems(items, 'train', split)) {
    const it = items[i]!;
    const r = it.recorded?.[worker.name];
    if (!r) continue;
    const t = recordedCallTokens(r, it.prompt);
    sum += tokenCost(t.tokensIn, t.tokensOut, worker.prices);
    n++;
  }
  const usdPerItem = n === 0 ? 0 : picoToUsd(sum) / n;
  if (!(usdPerItem > 0)) {
    throw new InputError(`the reference worker ${worker.name} (best by train mean) costs nothing on the train split at the pool's prices, so a cost weight has no unit: give --mu (reward per dollar)`, { field: '--cost-weight' });
  }
  return { worker: worker.name, usdPerItem, items: n };
}

/** mu (reward units per dollar) of a cost weight λ under a reference. */
export const muOfCostWeight = (weight: number, ref: CostReference): number => weight / ref.usdPerItem;
