// Small tables shared by the evaluation tests.
import type { EvalTable } from './types.ts';

/** A table from [task, split] rows, a reward matrix and a cost matrix (or one cost row for all items). */
export function makeTable(
  items: Array<[task: string, split: string]>,
  rewards: number[][],
  costs: number[][] | number[],
  workers = rewards[0]!.map((_, j) => `w${j}`),
): EvalTable {
  const costRows = typeof costs[0] === 'number' ? items.map(() => [...(costs as number[])]) : (costs as number[][]);
  return {
    items: items.map(([task, split], i) => ({ id: `q${i}`, task, split })),
    workers: workers.map((name) => ({ name })),
    rewards,
    costs: costRows,
  };
}

/**
 * Workers A (cost 1), B (cost 2), C (cost 3). Train means: A 0.4, B 0.4, C 0.6 (best single C);
 * per task: math -> B, code -> A (tied with C at 2/3, cheaper). Test: s1 math, s2 code,
 * s3 poetry (a task unseen in train).
 */
export function tinyTable(): EvalTable {
  return makeTable(
    [
      ['math', 'train'],
      ['math', 'train'],
      ['code', 'train'],
      ['code', 'train'],
      ['code', 'train'],
      ['math', 'test'],
      ['code', 'test'],
      ['poetry', 'test'],
    ],
    [
      [0, 1, 1],
      [0, 1, 0],
      [1, 0, 1],
      [1, 0, 0],
      [0, 0, 1],
      [0.2, 0.9, 0.9],
      [1, 1, 1],
      [0, 0, 0.5],
    ],
    [1, 2, 3],
    ['A', 'B', 'C'],
  );
}
