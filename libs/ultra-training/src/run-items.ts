// A run's items: the split by unique prompt (@fugu/ultra's split.ts), then a seeded sample of it;
// what `fugu ultra eval`, `fugu ultra run` and the reward service's prompts pick items by.
import type { DatasetItem } from '@fugu/core';
import { sampleIndices } from '@fugu/evaluation';
import { splitItems, type UltraSplit } from '@fugu/ultra';

/** A run's items: the split, then a seeded sample of it (stable for a seed). */
export function runItems<T extends Pick<DatasetItem, 'id' | 'prompt'>>(
  items: readonly T[],
  o: { split: UltraSplit; splitSeed: number; sample: number | null; seed: number },
): T[] {
  const idx = splitItems(items, o.split, o.splitSeed);
  const chosen = o.sample !== null && o.sample < idx.length ? sampleIndices(idx.length, o.sample, o.seed).map((j) => idx[j]!) : idx;
  return chosen.map((i) => items[i]!);
}
