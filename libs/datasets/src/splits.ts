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

// ---- the train / val / test split every command uses (`--split-by prompt | dataset`) ---------

/** How items are split into train / val / test: by unique prompt (seeded, 0.8 / 0.1 / 0.1), or the dataset's own split. */
export const SPLIT_SCHEMES = ['prompt', 'dataset'] as const;
export type SplitScheme = (typeof SPLIT_SCHEMES)[number];
export type SplitPart = 'train' | 'val' | 'test';
/** A split: the scheme and its seed (`prompt`: the shuffle of the prompts; `dataset`: the val part carved from train when the dataset has none). */
export type SplitSpec = { by: SplitScheme; seed: number };

/** The fractions of the split by unique prompt (train / val / test, in this order). */
export const PROMPT_SPLIT_FRACTIONS = Object.freeze({ train: 0.8, val: 0.1, test: 0.1 } as const);

/** A dataset's own split names as `--split-by dataset` reads them (case-insensitive). */
const SOURCE_PARTS: Readonly<Record<string, SplitPart>> = { train: 'train', val: 'val', validation: 'val', test: 'test' };

/** A split scheme from a flag or a stored record (InputError naming the field). */
export function splitScheme(v: unknown, field = '--split-by'): SplitScheme {
  if (typeof v !== 'string' || !(SPLIT_SCHEMES as readonly string[]).includes(v)) throw new InputError(`must be ${SPLIT_SCHEMES.join(' or ')}, got ${JSON.stringify(v)}`, { field });
  return v as SplitScheme;
}

/** The split in words, for headers and reports: `by unique prompt (seed 0)` or `the dataset's own split`. */
export function splitLabel(spec: SplitSpec): string {
  return spec.by === 'prompt' ? `by unique prompt (seed ${spec.seed})` : `the dataset's own split (seed ${spec.seed} for a val part carved from train)`;
}

/**
 * Every item's part (train / val / test) under a split scheme; item id -> part.
 *
 * - `prompt`: `splitByPrompt` with PROMPT_SPLIT_FRACTIONS and the seed (no prompt in two parts).
 * - `dataset`: the dataset's own `split` field (sourceSplit: train, val / validation, test; any
 *   case). Every item needs one: an item without it, or with another name, is an InputError
 *   naming the item (field `--split-by`). Items of val or test whose normalised prompt also
 *   appears in train move to train (`sourceSplitDedup`), then test items whose prompt appears in
 *   val move to val, so no prompt is in two parts. The val part is the dataset's val items; a
 *   dataset without any gets a seeded 1/9 of its train part by unique prompt (`splitByPrompt`,
 *   train 8/9, val 1/9) as val. The test part is the dataset's test items.
 */
export function assignSplit(items: readonly Pick<DatasetItem, 'id' | 'prompt' | 'sourceSplit'>[], spec: SplitSpec): Map<string, SplitPart> {
  const by = splitScheme(spec.by);
  if (by === 'prompt') return splitByPrompt(items, { seed: spec.seed, fractions: { ...PROMPT_SPLIT_FRACTIONS } }) as Map<string, SplitPart>;
  const named = items.map((it) => {
    if (it.sourceSplit === undefined) {
      throw new InputError(`item ${JSON.stringify(it.id)} has no split of its own: --split-by dataset needs every item's \`split\` (train, val or test); use --split-by prompt`, { field: '--split-by' });
    }
    const part = SOURCE_PARTS[it.sourceSplit.toLowerCase()];
    if (!part) throw new InputError(`item ${JSON.stringify(it.id)} has split ${JSON.stringify(it.sourceSplit)}: --split-by dataset reads train, val (or validation) and test`, { field: '--split-by' });
    return { id: it.id, prompt: it.prompt, sourceSplit: part };
  });
  const ids = new Set<string>();
  for (const it of named) {
    if (ids.has(it.id)) throw new InputError(`duplicate item id ${JSON.stringify(it.id)}`, { field: 'id' });
    ids.add(it.id);
  }
  const out = sourceSplitDedup(named) as Map<string, SplitPart>;
  const valPrompts = new Set(named.filter((it) => out.get(it.id) === 'val').map((it) => normalizePrompt(it.prompt)));
  for (const it of named) if (out.get(it.id) === 'test' && valPrompts.has(normalizePrompt(it.prompt))) out.set(it.id, 'val');
  if (valPrompts.size === 0) {
    const train = named.filter((it) => out.get(it.id) === 'train');
    const carved = splitByPrompt(train, { seed: spec.seed, fractions: { train: 8 / 9, val: 1 / 9 } });
    for (const [id, part] of carved) out.set(id, part as SplitPart);
  }
  return out;
}

/**
 * The scheme a command uses: the one given (`--split-by`), else the one the checkpoints and runs
 * it reads were made with (`made`: what, and its scheme; old records without one were by prompt),
 * else `prompt`. A scheme given that differs from one of them, or two of them that differ, is an
 * InputError: a model trained on one scheme's train part and scored on another's test (or val)
 * part would be scored on questions it was trained on.
 */
export function resolveSplitScheme(given: SplitScheme | undefined, made: ReadonlyArray<{ what: string; by: SplitScheme }>, field = '--split-by'): SplitScheme {
  if (given !== undefined) splitScheme(given, field);
  const first = made[0];
  for (const m of made) {
    if (given !== undefined && m.by !== given) {
      throw new InputError(`${m.what} was made with the split ${m.by === 'prompt' ? 'by unique prompt' : "of the dataset's own"} (--split-by ${m.by}), not --split-by ${given}: scored on another scheme's held-out items it would be scored on questions it was trained on`, { field });
    }
    if (first && m.by !== first.by) {
      throw new InputError(`${first.what} was made with --split-by ${first.by} and ${m.what} with --split-by ${m.by}: no held-out split is held out from both`, { field });
    }
  }
  return given ?? first?.by ?? 'prompt';
}
