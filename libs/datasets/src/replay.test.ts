import { describe, expect, it } from 'vitest';
import type { DatasetItem } from '@fugu/core';
import { replayStoreFor } from './replay.ts';

const items: DatasetItem[] = [
  { id: 'train-1', task: 't', prompt: 'What is 2+2?', recorded: { a: { score: 1, answer: '4' }, b: { score: 0 } } },
  { id: 'test-1', task: 't', prompt: 'What is 2+2?', recorded: { a: { score: 0 } } },
  { id: 'train-2', task: 't', prompt: 'Name a colour.', recorded: { b: { score: 0.5 } } },
];

describe('replayStoreFor', () => {
  it('looks up by item id first', () => {
    const store = replayStoreFor(items, 'a');
    expect(store.lookup('What is 2+2?', 'test-1')).toEqual({ itemId: 'test-1', outcome: { score: 0 } });
    // an unknown id falls back to the prompt
    expect(store.lookup('What is 2+2?', 'nope')?.itemId).toBe('train-1');
  });

  it('then by exact prompt (first item), then by normalised prompt', () => {
    const store = replayStoreFor(items, 'a');
    expect(store.lookup('What is 2+2?')).toEqual({ itemId: 'train-1', outcome: { score: 1, answer: '4' } });
    expect(store.lookup('  what IS   2+2?\n')?.itemId).toBe('train-1');
    expect(store.lookup('What is 3+3?')).toBeUndefined();
  });

  it('forgives trailing punctuation and Unicode form: a user\'s "Who won ...?" finds the dataset\'s "who won ..."', () => {
    const store = replayStoreFor(
      [
        { id: 'test-171', task: 't', prompt: 'who won the most gold metals in olympics', recorded: { a: { score: 1 } } },
        { id: 'test-172', task: 't', prompt: 'Caf\u00e9 au lait', recorded: { a: { score: 0 } } },
      ],
      'a',
    );
    expect(store.lookup('Who won the most gold metals in Olympics?')?.itemId).toBe('test-171');
    expect(store.lookup('cafe\u0301 AU lait.')?.itemId).toBe('test-172');
  });

  it('two prompts with the same key: a lookup by key finds the first', () => {
    const store = replayStoreFor(
      [
        { id: 'train-9', task: 't', prompt: 'Define entropy.', recorded: { a: { score: 1 } } },
        { id: 'test-9', task: 't', prompt: 'define entropy', recorded: { a: { score: 0 } } },
      ],
      'a',
    );
    expect(store.lookup('DEFINE ENTROPY?')?.itemId).toBe('train-9');
    expect(store.lookup('define entropy')?.itemId).toBe('test-9'); // the exact text first
  });

  it('only sees items recorded for its worker', () => {
    const store = replayStoreFor({ name: 'd', source: '/x', items, workers: ['a', 'b'], contentHash: '' }, 'b');
    expect(store.lookup('Name a colour.')).toEqual({ itemId: 'train-2', outcome: { score: 0.5 } });
    expect(replayStoreFor(items, 'a').lookup('Name a colour.')).toBeUndefined();
    expect(store.lookup('x', 'test-1')).toBeUndefined(); // test-1 has no outcome for b
  });

  it('rejects a worker with no recorded outcomes, naming the known ones', () => {
    expect(() => replayStoreFor(items, 'zz')).toThrow(/no recorded outcomes for worker "zz" \(recorded workers: a, b\)/);
  });
});
