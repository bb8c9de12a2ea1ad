// The exhaustive search over fixed workflows in the replay model: what a Conductor could gain
// with no per-question adaptation at all. A fixed workflow's expected accuracy on an item depends
// only on its last step's worker and sources (README "The model"), so the search enumerates every
// workflow of the given space, reduces it to that signature, and scores each signature once,
// exactly (`expectedStepCorrect`) over the items.

import { InputError } from '@fugu/core';
import { expectedStepCorrect, normalizeSources, type ReplayItem, type ReplayWorkflowStep, type StepParams } from './model.ts';

export type FixedWorkflowScore = {
  /** a shortest workflow with this score */
  steps: ReplayWorkflowStep[];
  /** its last step's worker and sources */
  worker: string;
  sources: string[];
  /** the mean over items of the exact expected accuracy */
  accuracy: number;
};

export type FixedWorkflowSearch = {
  /** the best workflow found (ties: fewest steps, then the first enumerated) */
  best: FixedWorkflowScore;
  /** the best one-step workflow */
  bestSingle: FixedWorkflowScore;
  /** best.accuracy - bestSingle.accuracy */
  gain: number;
  /** how many workflows were enumerated, and how many distinct signatures they reduce to */
  workflows: number;
  signatures: number;
  /** every signature's score, best first */
  ranked: FixedWorkflowScore[];
};

/**
 * Every workflow of up to `maxSteps` steps over `workers`, where step i >= 1 takes one of
 * `access` (each a function of the step index giving the earlier steps it sees; step 0 sees
 * nothing), scored on `items` in exact expectation.
 */
export function searchFixedWorkflows(input: {
  items: readonly ReplayItem[];
  workers: readonly string[];
  params: StepParams;
  maxSteps: number;
  access: ReadonlyArray<(i: number) => readonly number[]>;
}): FixedWorkflowSearch {
  const { items, workers, maxSteps, access } = input;
  if (items.length === 0) throw new InputError('the search needs at least one item', { field: 'items' });
  if (workers.length === 0 || workers.length > 20) throw new InputError(`the search takes 1 to 20 workers, got ${workers.length}`, { field: 'workers' });
  if (!Number.isInteger(maxSteps) || maxSteps < 1) throw new InputError(`maxSteps must be a positive integer, got ${maxSteps}`, { field: 'maxSteps' });
  // signature (last worker, source mask) -> a shortest workflow reaching it
  const found = new Map<string, { w: number; mask: number; steps: ReplayWorkflowStep[] }>();
  let count = 0;
  const steps: ReplayWorkflowStep[] = [];
  const reach: number[] = [];
  const walk = (): void => {
    const i = steps.length;
    if (i > 0) {
      count++;
      const w = workers.indexOf(steps[i - 1]!.worker);
      const mask = reach[i - 1]! & ~(1 << w);
      const sig = `${w}:${mask}`;
      const prior = found.get(sig);
      if (!prior || prior.steps.length > i) found.set(sig, { w, mask, steps: steps.map((s) => ({ worker: s.worker, sees: [...s.sees] })) });
    }
    if (i === maxSteps) return;
    const choices = i === 0 ? [() => [] as number[]] : access;
    workers.forEach((worker, w) => {
      for (const a of choices) {
        const sees = [...new Set(a(i))];
        let r = 1 << w;
        for (const j of sees) {
          if (!Number.isInteger(j) || j < 0 || j >= i) throw new InputError(`an access choice gave step ${i} the step ${j}`, { field: 'access' });
          r |= reach[j]!;
        }
        steps.push({ worker, sees });
        reach.push(r);
        walk();
        steps.pop();
        reach.pop();
      }
    });
  };
  walk();
  const ranked: FixedWorkflowScore[] = [...found.values()].map(({ w, mask, steps: st }) => {
    const worker = workers[w]!;
    const sources = workers.filter((_, k) => (mask >> k) & 1);
    const p = input.params(worker, normalizeSources(worker, sources).length);
    let sum = 0;
    for (const it of items) sum += expectedStepCorrect(p, it, worker, sources);
    return { steps: st, worker, sources, accuracy: sum / items.length };
  });
  ranked.sort((a, b) => b.accuracy - a.accuracy || a.steps.length - b.steps.length);
  const bestSingle = ranked.filter((r) => r.steps.length === 1)[0]!;
  return { best: ranked[0]!, bestSingle, gain: ranked[0]!.accuracy - bestSingle.accuracy, workflows: count, signatures: ranked.length, ranked };
}
