import { describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { groupByPrompt, sourceSplitDedup, splitByPrompt, splitCounts } from './splits.ts';

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
