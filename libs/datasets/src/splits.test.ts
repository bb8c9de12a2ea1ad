import { describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { assignSplit, groupByPrompt, resolveSplitScheme, sourceSplitDedup, splitByPrompt, splitCounts, splitLabel } from './splits.ts';

// 1,000 items over 700 prompts: some prompts repeat with different case and spacing
const items = Array.from({ length: 1000 }, (_, k) => {
  const p = k % 700;
  const prompt = k < 700 ? `Question number ${p}?` : `  QUESTION   number ${p}?\n`;
  return { id: `i${k}`, prompt };
});

describe('splitByPrompt', () => {
  it('groups by normalised prompt', () => {
    const groups = groupByPrompt(items);
    expect(groups).toHaveLength(700);
    expect(groups[0]).toEqual(['i0', 'i700']);
  });

  it('never splits a prompt across splits, and sizes follow the fractions', () => {
    const split = splitByPrompt(items, { seed: 7, fractions: { train: 0.8, val: 0.1, test: 0.1 } });
    expect(split.size).toBe(1000);
    for (let p = 0; p < 300; p++) expect(split.get(`i${p}`)).toBe(split.get(`i${p + 700}`));
    const counts = splitCounts(split);
    // a group of two may straddle a boundary: each split is within one group of its share
    expect(Math.abs(counts['train']! - 800)).toBeLessThanOrEqual(2);
    expect(Math.abs(counts['val']! - 100)).toBeLessThanOrEqual(2);
    expect(Math.abs(counts['test']! - 100)).toBeLessThanOrEqual(2);
  });

  it('is deterministic for a seed and differs between seeds', () => {
    const a = splitByPrompt(items, { seed: 1 });
    const b = splitByPrompt(items, { seed: 1 });
    const c = splitByPrompt(items, { seed: 2 });
    expect([...a]).toEqual([...b]);
    expect([...a]).not.toEqual([...c]);
    // the default fractions are 0.8 / 0.1 / 0.1
    expect(Object.keys(splitCounts(a)).sort()).toEqual(['test', 'train', 'val']);
  });

  it('accepts any split names and string seeds', () => {
    const s = splitByPrompt(items, { seed: 'exp-1', fractions: { fit: 0.5, holdout: 0.5 } });
    const counts = splitCounts(s);
    expect(counts['fit']! + counts['holdout']!).toBe(1000);
    expect(Math.abs(counts['fit']! - 500)).toBeLessThanOrEqual(2);
  });

  it('rejects bad fractions and duplicate ids', () => {
    expect(() => splitByPrompt(items, { seed: 1, fractions: { train: 0.8, test: 0.1 } })).toThrow(/sum to 1/);
    expect(() => splitByPrompt(items, { seed: 1, fractions: { train: 1.1, test: -0.1 } })).toThrow(InputError);
    expect(() => splitByPrompt([{ id: 'a', prompt: 'x' }, { id: 'a', prompt: 'y' }], { seed: 1 })).toThrow(/duplicate item id/);
  });
});

describe('sourceSplitDedup', () => {
  it('moves test items whose prompt is in train into train', () => {
    const s = sourceSplitDedup([
      { id: 'a', prompt: 'What is 2+2?', sourceSplit: 'train' },
      { id: 'b', prompt: 'what is  2+2?', sourceSplit: 'test' },
      { id: 'c', prompt: 'Capital of France?', sourceSplit: 'test' },
      { id: 'd', prompt: 'Capital of France?', sourceSplit: 'val' },
    ]);
    expect(Object.fromEntries(s)).toEqual({ a: 'train', b: 'train', c: 'test', d: 'val' });
  });

  it('needs a source split on every item', () => {
    expect(() => sourceSplitDedup([{ id: 'a', prompt: 'x' }])).toThrow(/no source split/);
  });
});

// issue 29 (GRPO as a user, item 1): `--split-by prompt | dataset`, one split for every command
describe('assignSplit', () => {
  // a source split like the issue's: 3,150 items, the source's test part 945 of them (30%), its train part the rest
  const sourced = Array.from({ length: 3150 }, (_, k) => ({ id: `s${k}`, prompt: `Problem ${k}: how many?`, sourceSplit: k % 10 < 3 ? 'test' : 'train' }));

  it('by prompt: exactly splitByPrompt with 0.8 / 0.1 / 0.1 and the seed (every documented split as it was)', () => {
    for (const seed of [0, 1, 17]) expect([...assignSplit(items, { by: 'prompt', seed })]).toEqual([...splitByPrompt(items, { seed, fractions: { train: 0.8, val: 0.1, test: 0.1 } })]);
    // the source's split plays no part
    expect(splitCounts(assignSplit(sourced, { by: 'prompt', seed: 0 }))['test']).toBe(315);
  });

  it("by dataset: the dataset's test items are the test split (945, not 315); val a seeded 1/9 of its train part by unique prompt", () => {
    const s = assignSplit(sourced, { by: 'dataset', seed: 0 });
    const counts = splitCounts(s);
    expect(counts['test']).toBe(945);
    for (const it of sourced) if (it.sourceSplit === 'test') expect(s.get(it.id)).toBe('test');
    expect(counts['train']! + counts['val']!).toBe(2205);
    expect(Math.abs(counts['val']! - 245)).toBeLessThanOrEqual(1);
    // seeded: the same val part for a seed, another for another seed; the test part never moves
    expect([...assignSplit(sourced, { by: 'dataset', seed: 0 })]).toEqual([...s]);
    const other = assignSplit(sourced, { by: 'dataset', seed: 1 });
    expect([...other]).not.toEqual([...s]);
    expect(sourced.filter((it) => other.get(it.id) === 'test')).toHaveLength(945);
  });

  it("by dataset: the dataset's val (or validation) items are the val split; prompts shared with train move to train, test prompts shared with val to val", () => {
    const s = assignSplit([
      { id: 'a', prompt: 'What is 2+2?', sourceSplit: 'train' },
      { id: 'b', prompt: 'what is  2+2?', sourceSplit: 'TEST' },
      { id: 'c', prompt: 'Capital of France?', sourceSplit: 'test' },
      { id: 'd', prompt: 'Capital of Spain?', sourceSplit: 'validation' },
      { id: 'e', prompt: 'capital of  SPAIN?', sourceSplit: 'test' },
      { id: 'f', prompt: ' What is 2+2? ', sourceSplit: 'val' },
      { id: 'g', prompt: 'Largest planet?', sourceSplit: 'train' },
    ], { by: 'dataset', seed: 0 });
    expect(Object.fromEntries(s)).toEqual({ a: 'train', b: 'train', c: 'test', d: 'val', e: 'val', f: 'train', g: 'train' });
  });

  it('by dataset: an item without a split of its own, or with another name, is an InputError naming the item', () => {
    const e = (() => {
      try {
        assignSplit([{ id: 'a', prompt: 'x', sourceSplit: 'train' }, { id: 'q17', prompt: 'y' }], { by: 'dataset', seed: 0 });
      } catch (x) {
        return x as InputError;
      }
    })();
    expect(e).toBeInstanceOf(InputError);
    expect(e!.field).toBe('--split-by');
    expect(e!.message).toMatch(/item "q17" has no split of its own/);
    expect(() => assignSplit([{ id: 'z', prompt: 'x', sourceSplit: 'dev' }], { by: 'dataset', seed: 0 })).toThrow(/item "z" has split "dev"/);
    expect(() => assignSplit(items, { by: 'other' as 'prompt', seed: 0 })).toThrow(InputError);
  });

  it('names the scheme', () => {
    expect(splitLabel({ by: 'prompt', seed: 3 })).toBe('by unique prompt (seed 3)');
    expect(splitLabel({ by: 'dataset', seed: 0 })).toMatch(/^the dataset's own split/);
  });
});

describe('resolveSplitScheme', () => {
  it('the scheme given, else the one of what is read, else prompt; a mismatch is an InputError naming --split-by', () => {
    expect(resolveSplitScheme(undefined, [])).toBe('prompt');
    expect(resolveSplitScheme('dataset', [])).toBe('dataset');
    expect(resolveSplitScheme(undefined, [{ what: 'router checkpoint r', by: 'dataset' }])).toBe('dataset');
    expect(resolveSplitScheme('dataset', [{ what: 'router checkpoint r', by: 'dataset' }, { what: 'policy checkpoint p', by: 'dataset' }])).toBe('dataset');
    let e: unknown;
    try {
      resolveSplitScheme('dataset', [{ what: 'router checkpoint r', by: 'prompt' }]);
    } catch (x) {
      e = x;
    }
    expect(e).toBeInstanceOf(InputError);
    expect(e).toMatchObject({ field: '--split-by' });
    expect((e as Error).message).toMatch(/router checkpoint r was made with the split by unique prompt \(--split-by prompt\), not --split-by dataset/);
    expect(() => resolveSplitScheme(undefined, [{ what: 'router checkpoint r', by: 'prompt' }, { what: 'policy checkpoint p', by: 'dataset' }])).toThrow(/router checkpoint r was made with --split-by prompt and policy checkpoint p with --split-by dataset/);
    expect(() => resolveSplitScheme('nope' as 'prompt', [])).toThrow(InputError);
  });
});
