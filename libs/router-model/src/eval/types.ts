// The evaluation table: what every baseline and metric of `fugu router eval` reads.
//
// One row per item (question), one column per worker. rewards[i][j] is the mean measured reward
// of worker j on item i (mean over repetitions), costs[i][j] the USD of one call of worker j on
// item i (plain numbers: evaluation sums and averages them, exact money stays in @fugu/core).

import { InputError, tokenCost, PICO_PER_USD, type WorkerSpec } from '@fugu/core';

/** One item of the table: its id, its task label and the split it belongs to. */
export type EvalItem = {
  id: string;
  task: string;
  /** 'train', 'validation', 'test', ... (the split names are the caller's) */
  split: string;
};

/** A worker column: its name and, when known, its token prices (USD per 1M tokens, decimal strings). */
export type EvalWorker = {
  name: string;
  prices?: WorkerSpec['prices'];
};

export type EvalTable = {
  items: readonly EvalItem[];
  workers: readonly EvalWorker[];
  /** rewards[i][j]: mean reward of worker j on item i */
  rewards: readonly (readonly number[])[];
  /** costs[i][j]: USD of one call of worker j on item i */
  costs: readonly (readonly number[])[];
};

/**
 * A routing decision for a set of rows: rows[t] is a row index of the table, choice[t] the worker
 * index chosen for it. Every baseline returns one; every metric reads one.
 */
export type Decisions = {
  rows: readonly number[];
  choice: Int32Array;
};

/** USD of one call from token counts and a worker's prices (exact in picodollars, then a number). */
export function callCostUsd(tokensIn: number, tokensOut: number, prices: WorkerSpec['prices']): number {
  const pico = tokenCost(tokensIn, tokensOut, prices);
  return Number(pico / PICO_PER_USD) + Number(pico % PICO_PER_USD) / Number(PICO_PER_USD);
}

/**
 * Check the shape and values of a table; throws InputError naming the field
 * (e.g. `rewards[3][1]`). Returns the table for chaining.
 */
export function validateEvalTable(table: EvalTable): EvalTable {
  const n = table.items.length;
  const k = table.workers.length;
  if (k < 1) throw new InputError('the table has no workers', { field: 'workers' });
  const names = new Set<string>();
  table.workers.forEach((w, j) => {
    if (!w.name) throw new InputError('worker without a name', { field: `workers[${j}].name` });
    if (names.has(w.name)) throw new InputError(`duplicate worker name ${JSON.stringify(w.name)}`, { field: `workers[${j}].name` });
    names.add(w.name);
  });
  const ids = new Set<string>();
  table.items.forEach((it, i) => {
    if (ids.has(it.id)) throw new InputError(`duplicate item id ${JSON.stringify(it.id)}`, { field: `items[${i}].id` });
    ids.add(it.id);
    if (typeof it.task !== 'string' || it.task === '') throw new InputError('item without a task', { field: `items[${i}].task` });
    if (typeof it.split !== 'string' || it.split === '') throw new InputError('item without a split', { field: `items[${i}].split` });
  });
  for (const [field, m] of [['rewards', table.rewards], ['costs', table.costs]] as const) {
    if (m.length !== n) throw new InputError(`${n} items but ${m.length} rows`, { field });
    m.forEach((row, i) => {
      if (row.length !== k) throw new InputError(`${k} workers but ${row.length} columns`, { field: `${field}[${i}]` });
      row.forEach((v, j) => {
        if (!Number.isFinite(v)) throw new InputError(`not a finite number: ${v}`, { field: `${field}[${i}][${j}]` });
        if (field === 'costs' && v < 0) throw new InputError(`negative cost: ${v}`, { field: `${field}[${i}][${j}]` });
      });
    });
  }
  return table;
}

/** Row indices of the items of one split, in table order. */
export function splitRows(table: EvalTable, split: string): number[] {
  const rows: number[] = [];
  table.items.forEach((it, i) => {
    if (it.split === split) rows.push(i);
  });
  return rows;
}

/** The worker indices a router may choose: all of them, or the given subset (checked). */
export function resolveAllowed(table: EvalTable, allowed?: readonly number[]): number[] {
  const k = table.workers.length;
  if (allowed === undefined) return Array.from({ length: k }, (_, j) => j);
  if (allowed.length === 0) throw new InputError('the allowed worker pool is empty', { field: 'allowed' });
  const seen = new Set<number>();
  for (const j of allowed) {
    if (!Number.isInteger(j) || j < 0 || j >= k) throw new InputError(`no worker ${j} (the table has ${k})`, { field: 'allowed' });
    if (seen.has(j)) throw new InputError(`worker ${j} listed twice`, { field: 'allowed' });
    seen.add(j);
  }
  return [...allowed].sort((a, b) => a - b);
}
