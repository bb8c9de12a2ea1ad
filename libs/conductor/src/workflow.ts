// The workflow model: what a Conductor writes. A workflow is 1..maxSteps steps; each names a
// worker by its ordinal id in the pool (0..K-1, so worker names bias nothing), gives it a
// subtask in natural language, and says which earlier steps' subtasks and answers it sees.
// The answer of the last step is the workflow's answer.

import { InputError } from '@fugu/core';

/** Which earlier steps a step sees: every earlier one, none, or the listed ones (0-based step indices, ascending, unique, all earlier). */
export type Access = 'all' | 'none' | readonly number[];

export type Step = {
  /** the worker's ordinal id in the pool, 0..K-1 */
  worker: number;
  subtask: string;
  access: Access;
};

export type Workflow = { steps: readonly Step[] };

/** The default and the allowed range of the maximum number of steps. */
export const DEFAULT_MAX_STEPS = 5;
export const MAX_STEPS_LIMIT = 10;

/** The maximum number of steps, checked: an integer in 1..MAX_STEPS_LIMIT (default 5); anything else is an InputError naming `maxSteps`. */
export function resolveMaxSteps(maxSteps: number | undefined = DEFAULT_MAX_STEPS): number {
  if (typeof maxSteps !== 'number' || !Number.isInteger(maxSteps) || maxSteps < 1 || maxSteps > MAX_STEPS_LIMIT) {
    throw new InputError(`maxSteps must be an integer from 1 to ${MAX_STEPS_LIMIT}, got ${String(maxSteps)}`, { field: 'maxSteps' });
  }
  return maxSteps;
}

// ---- the pool as the Conductor sees it ------------------------------------------------------

export type PoolEntry = { id: number; name: string; description: string };

/** The numbered workers a Conductor chooses from: `workers[i].id === i`; `name` maps an id back to the pool's worker. */
export type ConductorPool = { workers: readonly PoolEntry[] };

/**
 * The Conductor's view of a pool, in the order given: ordinal ids 0..K-1 with a short
 * description each. Names must be unique and non-empty, descriptions non-empty (InputError
 * naming the field `workers[i].name` / `workers[i].description`).
 */
export function conductorPool(workers: ReadonlyArray<{ name: string; description: string }>): ConductorPool {
  if (workers.length === 0) throw new InputError('a Conductor pool needs at least one worker', { field: 'workers' });
  const seen = new Set<string>();
  const entries = workers.map((w, i) => {
    const name = typeof w.name === 'string' ? w.name.trim() : '';
    const description = typeof w.description === 'string' ? w.description.trim().replace(/\s+/g, ' ') : '';
    if (!name) throw new InputError(`worker ${i} has no name`, { field: `workers[${i}].name` });
    if (seen.has(name)) throw new InputError(`worker name ${JSON.stringify(name)} appears twice`, { field: `workers[${i}].name` });
    if (!description) throw new InputError(`worker ${name} has no description`, { field: `workers[${i}].description` });
    seen.add(name);
    return { id: i, name, description };
  });
  return { workers: entries };
}

/** The pool worker's name for an ordinal id (InputError when out of range). */
export function workerName(pool: ConductorPool, id: number): string {
  const w = Number.isInteger(id) ? pool.workers[id] : undefined;
  if (!w) throw new InputError(`no worker ${id} in a pool of ${pool.workers.length}`, { field: 'worker' });
  return w.name;
}

/** The ordinal id of a pool worker by name (InputError naming the known names when absent). */
export function workerId(pool: ConductorPool, name: string): number {
  const w = pool.workers.find((x) => x.name === name);
  if (!w) throw new InputError(`unknown worker ${JSON.stringify(name)}; the pool has ${pool.workers.map((x) => x.name).join(', ')}`, { field: 'worker' });
  return w.id;
}

// ---- validation ------------------------------------------------------------------------------

/** The three lists of the text form, as messages name them. */
export type ListName = 'model id' | 'subtasks' | 'access list';

/** Why a workflow is not valid: the list and (1-based) step where it goes wrong. */
export type WorkflowError = {
  list: ListName;
  /** 1-based step number (the first step is 1); absent when the fault is the list as a whole */
  step?: number;
  message: string;
};

/** The steps step `i` sees (0-based indices, ascending). */
export function visibleSteps(workflow: Workflow, i: number): number[] {
  const step = workflow.steps[i];
  if (!step) return [];
  if (step.access === 'all') return Array.from({ length: i }, (_, j) => j);
  if (step.access === 'none') return [];
  return [...step.access];
}

/** An access list in canonical form: ascending, unique; an empty list is `none`. */
export function canonicalAccess(access: Access): Access {
  if (access === 'all' || access === 'none') return access;
  const out = [...new Set(access)].sort((a, b) => a - b);
  return out.length === 0 ? 'none' : out;
}

/** How messages name the step of 0-based index i: 'step 3 (1-based; index 2 in the lists)'. */
export function stepLabel(i: number): string {
  return `step ${i + 1} (1-based; index ${i} in the lists)`;
}

/**
 * Checks a workflow against a pool size and a maximum number of steps: 1..maxSteps steps,
 * worker ids integers in 0..poolSize-1, non-empty subtasks, access only to earlier steps
 * (integers, each at most once). Returns the first fault, or undefined when valid.
 */
export function checkWorkflow(workflow: Workflow, opts: { poolSize: number; maxSteps?: number }): WorkflowError | undefined {
  const maxSteps = resolveMaxSteps(opts.maxSteps);
  const k = opts.poolSize;
  const n = workflow.steps.length;
  if (n === 0) return { list: 'model id', message: `model id: the workflow has no steps (a workflow has 1 to ${maxSteps})` };
  if (n > maxSteps) return { list: 'model id', message: `model id: ${n} steps, more than the maximum of ${maxSteps}` };
  for (let i = 0; i < n; i++) {
    const s = workflow.steps[i]!;
    const at = stepLabel(i);
    if (!Number.isInteger(s.worker) || s.worker < 0 || s.worker >= k) {
      return { list: 'model id', step: i + 1, message: `model id, ${at}: worker ${String(s.worker)} is not in the pool (ids 0 to ${k - 1})` };
    }
    if (typeof s.subtask !== 'string' || s.subtask.trim() === '') {
      return { list: 'subtasks', step: i + 1, message: `subtasks, ${at}: the subtask is empty` };
    }
    if (s.access === 'all' || s.access === 'none') continue;
    const seen = new Set<number>();
    for (const j of s.access) {
      if (!Number.isInteger(j) || j < 0) {
        return { list: 'access list', step: i + 1, message: `access list, ${at}: ${String(j)} is not a step index (0-based integers)` };
      }
      if (j >= i) {
        const may = i === 0 ? 'the first step may see no other step' : `it may see indices 0 to ${i - 1}`;
        return { list: 'access list', step: i + 1, message: `access list, ${at}: index ${j} is not an earlier step (${may})` };
      }
      if (seen.has(j)) return { list: 'access list', step: i + 1, message: `access list, ${at}: index ${j} appears twice` };
      seen.add(j);
    }
  }
  return undefined;
}

/** Two workflows are the same: same steps, same workers, same subtask text, same access (canonical forms compared). */
export function sameWorkflow(a: Workflow, b: Workflow): boolean {
  if (a.steps.length !== b.steps.length) return false;
  return a.steps.every((s, i) => {
    const t = b.steps[i]!;
    if (s.worker !== t.worker || s.subtask !== t.subtask) return false;
    const x = canonicalAccess(s.access);
    const y = canonicalAccess(t.access);
    if (typeof x === 'string' || typeof y === 'string') return x === y;
    return x.length === y.length && x.every((v, j) => v === y[j]);
  });
}
