// Train/val/test splits that never put the same question on both sides.

import { InputError, rng, shuffled, type DatasetItem } from '@fugu/core';
import { normalizePrompt } from './normalize.ts';

export type SplitOptions = {
  seed: number | string;
  /** split name -> fraction of the items; must sum to 1 (default train 0.8, val 0.1, test 0.1) */
  fractions?: Record<string, number>;
};

export const DEFAULT_FRACTIONS: Readonly<Record<string, number>> = { train: 0.8, val: 0.1, test: 0.1 };

/** Items grouped by normalised prompt, groups in order of first appearance. */
export function groupByPrompt(items: readonly Pick<DatasetItem, 'id' | 'prompt'>[]): string[][] {
  const groups = new Map<string, string[]>();
  for (const item of items) {
    const key = normalizePrompt(item.prompt);
    let g = groups.get(key);
    if (!g) groups.set(key, (g = []));
    g.push(item.id);
  }
  return [...groups.values()];
}

/**
 * Assign every item to a split so that all items with the same normalised prompt share one
 * split (no test prompt appears in train). Groups are shuffled with the seed and laid end to
 * end; a group goes to the split whose share of the item count its first item falls in.
 * Deterministic for a seed. Returns item id -> split name.
 */
export function splitByPrompt(items: readonly Pick<DatasetItem, 'id' | 'prompt'>[], opts: SplitOptions): Map<string, string> {
  const fractions = Object.entries(opts.fractions ?? DEFAULT_FRACTIONS);
  if (fractions.length === 0) throw new InputError('no splits given', { field: 'fractions' });
  for (const [name, f] of fractions) {
    if (!(Number.isFinite(f) && f >= 0)) throw new InputError(`fraction of split "${name}" must be a number >= 0`, { field: `fractions.${name}` });
  }
  const total = fractions.reduce((s, [, f]) => s + f, 0);
  if (Math.abs(total - 1) > 1e-6) throw new InputError(`fractions must sum to 1, got ${total}`, { field: 'fractions' });
  const ids = new Set<string>();
  for (const item of items) {
    if (ids.has(item.id)) throw new InputError(`duplicate item id ${JSON.stringify(item.id)}`, { field: 'id' });
    ids.add(item.id);
  }

  const n = items.length;
  const bounds: Array<[string, number]> = [];
  let acc = 0;
  for (const [name, f] of fractions) {
    acc += f;
    bounds.push([name, acc * n]);
  }
  const groups = shuffled(groupByPrompt(items), rng(opts.seed, 'split-by-prompt'));
  const out = new Map<string, string>();
  let offset = 0;
  for (const g of groups) {
    // the first split whose upper bound lies beyond this group's first item; the last split otherwise
    const split = bounds.find(([, upper]) => offset < upper - 1e-9)?.[0] ?? bounds[bounds.length - 1]![0];
    for (const id of g) out.set(id, split);
    offset += g.length;
  }
  return out;
}

/**
 * Keep the source's own split (e.g. LLMRouter's train/test) but move every non-train item
 * whose normalised prompt also appears in the train split into train, so held-out numbers are
 * held out. Items without a sourceSplit are an error. Returns item id -> split name.
 */
export function sourceSplitDedup(items: readonly Pick<DatasetItem, 'id' | 'prompt' | 'sourceSplit'>[], trainSplit = 'train'): Map<string, string> {
  const trainPrompts = new Set<string>();
  for (const item of items) {
    if (item.sourceSplit === undefined) throw new InputError(`item ${JSON.stringify(item.id)} has no source split`, { field: 'split' });
    if (item.sourceSplit === trainSplit) trainPrompts.add(normalizePrompt(item.prompt));
  }
  const out = new Map<string, string>();
  for (const item of items) {
    const moved = item.sourceSplit !== trainSplit && trainPrompts.has(normalizePrompt(item.prompt));
    out.set(item.id, moved ? trainSplit : item.sourceSplit!);
  }
  return out;
}

/** Items per split name, in order of first appearance. */
export function splitCounts(assignment: ReadonlyMap<string, string>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of assignment.values()) out[s] = (out[s] ?? 0) + 1;
  return out;
}
