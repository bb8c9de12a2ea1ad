// A run's items: the split (by unique prompt, or the dataset's own: @fugu/ultra's split.ts), then a
// seeded sample of it; what `fugu ultra eval`, `fugu ultra run` and the reward service's prompts
// pick items by.
import type { DatasetItem } from '@fugu/core';
import type { SplitScheme } from '@fugu/datasets';
import { sampleIndices } from '@fugu/evaluation';
import { splitItems, type UltraSplit } from '@fugu/ultra';

/** A run's items: the split, then a seeded sample of it (stable for a seed). `splitBy` absent (runs stored before it existed): by prompt. */
export function runItems<T extends Pick<DatasetItem, 'id' | 'prompt' | 'sourceSplit'>>(
  items: readonly T[],
  o: { split: UltraSplit; splitSeed: number; splitBy?: SplitScheme; sample: number | null; seed: number },
): T[] {
  const idx = splitItems(items, o.split, { by: o.splitBy ?? 'prompt', seed: o.splitSeed });
  const chosen = o.sample !== null && o.sample < idx.length ? sampleIndices(idx.length, o.sample, o.seed).map((j) => idx[j]!) : idx;
  return chosen.map((i) => items[i]!);
}
