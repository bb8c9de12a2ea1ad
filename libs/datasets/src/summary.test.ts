import { describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { recordedRewardRows, routingSummary, type RewardRow } from './summary.ts';

const rows: RewardRow[] = [
  { itemId: '1', task: 'math', split: 'train', rewards: { a: 1, b: 0, c: 0 } },
  { itemId: '2', task: 'math', split: 'train', rewards: { a: 1, b: 1, c: 0 } },
  { itemId: '3', task: 'qa', split: 'train', rewards: { a: 0, b: 1, c: 0.5 } },
  { itemId: '4', task: 'qa', split: 'test', rewards: { a: 0, b: 0, c: 0 } },
  { itemId: '5', task: 'qa', rewards: { a: 0.5, b: 0, c: 1 } },
];

describe('routingSummary', () => {
  it('computes per-worker means, best single, best per task and oracle', () => {
    const s = routingSummary(rows, ['a', 'b', 'c']);
    expect(s.n).toBe(5);
    expect(s.perWorker).toEqual([
      { worker: 'a', mean: 2.5 / 5 },
      { worker: 'b', mean: 2 / 5 },
      { worker: 'c', mean: 1.5 / 5 },
    ]);
    expect(s.bestSingle).toEqual({ worker: 'a', mean: 0.5 });
    // math: a (2/2); qa: c has 1.5 of 3, b has 1 -> c
    expect(s.bestPerTask.choice).toEqual({ math: 'a', qa: 'c' });
    expect(s.bestPerTask.mean).toBeCloseTo((2 + 1.5) / 5, 12);
    expect(s.oracle).toBeCloseTo((1 + 1 + 1 + 0 + 1) / 5, 12);
    expect(s.perTask['qa']).toEqual({ a: 0.5 / 3, b: 1 / 3, c: 0.5 });
  });

  it('gives figures per split, leaving out rows without one', () => {
    const s = routingSummary(rows, ['a', 'b', 'c']);
    expect(Object.keys(s.bySplit).sort()).toEqual(['test', 'train']);
    expect(s.bySplit['train']!.n).toBe(3);
    expect(s.bySplit['train']!.bestSingle).toEqual({ worker: 'a', mean: 2 / 3 });
    expect(s.bySplit['train']!.oracle).toBe(1);
    expect(s.bySplit['test']!.oracle).toBe(0);
    expect('bySplit' in s.bySplit['train']!).toBe(false);
  });

  it('breaks ties toward the earlier worker', () => {
    const s = routingSummary([{ itemId: 'x', task: 't', rewards: { a: 1, b: 1 } }], ['b', 'a']);
    expect(s.bestSingle.worker).toBe('b');
    expect(s.bestPerTask.choice['t']).toBe('b');
  });

  it('rejects a missing reward, no rows and no workers', () => {
    expect(() => routingSummary(rows, ['a', 'z'])).toThrow(/item 1 has no reward for worker "z"/);
    expect(() => routingSummary([], ['a'])).toThrow(InputError);
    expect(() => routingSummary(rows, [])).toThrow(InputError);
  });

  it('builds rows from recorded scores, with the source split or a given split map', () => {
    const items = [
      { id: 'q1', task: 't', prompt: 'p', sourceSplit: 'train', recorded: { a: { score: 1 }, b: { score: 0.25 } } },
      { id: 'q2', task: 't', prompt: 'p2' },
    ];
    expect(recordedRewardRows(items)).toEqual([
      { itemId: 'q1', task: 't', split: 'train', rewards: { a: 1, b: 0.25 } },
      { itemId: 'q2', task: 't', rewards: {} },
    ]);
    expect(recordedRewardRows(items, new Map([['q2', 'val']]))[1]!.split).toBe('val');
  });
});
