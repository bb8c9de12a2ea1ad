// The schedule: a workflow's access lists as a DAG (an edge j -> i when step i sees step j).
// Every step whose inputs are all answered is ready, and ready steps run at once; the last
// step's answer is the workflow's answer. Topology labels are defined in the README.

import { visibleSteps, type Workflow } from './workflow.ts';

/**
 * - `single`: one step.
 * - `chain`: two or more steps, each step after the first sees the step just before it (so
 *   the steps run strictly one after another: critical path = number of steps).
 * - `parallel`: three or more steps; every step but the last sees nothing, and the last sees
 *   all of them (independent proposers, one aggregator: critical path 2).
 * - `tree`: any other workflow of two or more steps in which every step's answer reaches the
 *   last step (directly or through other steps).
 * - `other`: some step's answer never reaches the last step (work the answer does not use).
 */
export type Topology = 'single' | 'chain' | 'parallel' | 'tree' | 'other';
export const TOPOLOGIES: readonly Topology[] = ['single', 'chain', 'parallel', 'tree', 'other'];

export type Schedule = {
  /** number of steps */
  size: number;
  /** the steps each step sees (0-based, ascending) */
  inputs: readonly (readonly number[])[];
  /** the steps that see each step */
  dependents: readonly (readonly number[])[];
  /** level of a step: 0 with no inputs, else 1 + the highest level among its inputs */
  level: readonly number[];
  /** the steps of each level, ascending; levels[0] run first */
  levels: readonly (readonly number[])[];
  /** the longest chain of steps (in steps): with every step taking L, the workflow takes criticalPath x L */
  criticalPath: number;
  topology: Topology;
  /** the index of the step whose answer is the workflow's answer (the last) */
  finalStep: number;
  /** steps whose answers never reach the final step, ascending */
  unused: readonly number[];
};

/** The DAG of a (valid) workflow. */
export function scheduleOf(workflow: Workflow): Schedule {
  const n = workflow.steps.length;
  const inputs = workflow.steps.map((_, i) => visibleSteps(workflow, i));
  const dependents: number[][] = inputs.map(() => []);
  inputs.forEach((ins, i) => ins.forEach((j) => dependents[j]?.push(i)));
  const level: number[] = [];
  for (let i = 0; i < n; i++) level.push(inputs[i]!.reduce((m, j) => Math.max(m, (level[j] ?? 0) + 1), 0));
  const depth = n === 0 ? 0 : Math.max(...level) + 1;
  const levels: number[][] = Array.from({ length: depth }, () => []);
  level.forEach((l, i) => levels[l]!.push(i));
  const finalStep = n - 1;
  // steps that reach the final step: walk its inputs backwards
  const reaches = new Array<boolean>(n).fill(false);
  if (n > 0) reaches[finalStep] = true;
  for (let i = finalStep; i >= 0; i--) if (reaches[i]) for (const j of inputs[i]!) reaches[j] = true;
  const unused = reaches.flatMap((r, i) => (r ? [] : [i]));
  return { size: n, inputs, dependents, level, levels, criticalPath: depth, topology: topologyOf(inputs, unused.length), finalStep, unused };
}

function topologyOf(inputs: readonly (readonly number[])[], unusedCount: number): Topology {
  const n = inputs.length;
  if (n <= 1) return 'single';
  if (inputs.every((ins, i) => i === 0 || ins.includes(i - 1))) return 'chain';
  const last = inputs[n - 1]!;
  if (n >= 3 && inputs.slice(0, -1).every((ins) => ins.length === 0) && last.length === n - 1) return 'parallel';
  return unusedCount === 0 ? 'tree' : 'other';
}

/** The steps that can run now: not answered, every input answered (ascending). */
export function readySteps(schedule: Schedule, answered: Iterable<number>): number[] {
  const done = answered instanceof Set ? (answered as Set<number>) : new Set(answered);
  const out: number[] = [];
  for (let i = 0; i < schedule.size; i++) if (!done.has(i) && schedule.inputs[i]!.every((j) => done.has(j))) out.push(i);
  return out;
}
