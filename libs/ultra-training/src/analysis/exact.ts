// Exact expectations in the replay model (a simulation from recorded outcomes): the workflows a
// stored policy writes (argmax, or seeded samples), the router's picks, the best single worker and
// every "A alone, then B reading A", each scored by expectedWorkflowCorrect over every draw of the
// step model under a ReplayConfig. What `fugu ultra analyse` prints.
import type { DatasetItem } from '@fugu/core';
import { conductorPool, expectedWorkflowCorrect, replayItemOf, visibleSteps, type ReplayWorkflowStep, type StepParams } from '@fugu/conductor';
import type { Db } from '@fugu/db';
import { loadPolicy, routerChoices } from '@fugu/ultra';
import type { AnalysisInputs } from './inputs.ts';

export type Workflows = ReplayWorkflowStep[][];

/** What a conductor writes for each item: one workflow (argmax) or `samples` seeded ones per item, item-major. */
export type Written = { id: string; draws: number; workflows: Workflows };

/** The workflows a stored policy writes for the items (argmax when samples is 0), over the allowed workers. */
export async function policyWorkflows(
  db: Db, id: string, inputs: Pick<AnalysisInputs, 'workers' | 'names'>, items: readonly DatasetItem[], x: readonly Float32Array[], o: { samples?: number; allowed?: readonly string[] } = {},
): Promise<Written> {
  const { policy } = await loadPolicy(db, id, { workers: inputs.names });
  const allowed = o.allowed ?? inputs.names;
  const pool = conductorPool(inputs.workers.filter((w) => allowed.includes(w.name)).map((w) => ({ name: w.name, description: w.description ?? w.name })));
  const samples = o.samples ?? 0;
  const draws = samples > 0 ? samples : 1;
  const workflows: Workflows = [];
  items.forEach((it, i) => {
    for (let s = 0; s < draws; s++) {
      const out = policy.write({ features: x[i]!, question: it.prompt, pool, ...(samples > 0 ? { seed: `eval/${s}/${it.id}` } : { argmax: true }) });
      workflows.push(out.workflow.steps.map((st, j) => ({ worker: pool.workers[st.worker]!.name, sees: visibleSteps(out.workflow, j) })));
    }
  });
  return { id, draws, workflows };
}

/** The router checkpoint's pick for each item as a one-step workflow (among the allowed workers). */
export async function routerWorkflows(db: Db, home: string, checkpoint: string, names: readonly string[], items: readonly DatasetItem[], allowed?: readonly string[]): Promise<Written> {
  const picks = await routerChoices(db, home, checkpoint, items.map((i) => i.prompt), names, allowed);
  return { id: `router:${checkpoint}`, draws: 1, workflows: picks.map((p) => [{ worker: names[p]!, sees: [] }]) };
}

/** One worker alone on every item. */
export function singleWorkflows(worker: string, items: readonly DatasetItem[]): Written {
  return { id: `single:${worker}`, draws: 1, workflows: items.map(() => [{ worker, sees: [] }]) };
}

export type ExactScore = { accuracy: number; steps: number; perItem: number[] };

/** Expected accuracy of written workflows on the items (per item: the mean over its draws) and their mean steps. */
export function exactScore(params: StepParams, items: readonly DatasetItem[], w: Written): ExactScore {
  const perItem = items.map((it, i) => {
    const item = replayItemOf(it);
    let sum = 0;
    for (let d = 0; d < w.draws; d++) sum += expectedWorkflowCorrect({ params, item, steps: w.workflows[i * w.draws + d]! });
    return sum / w.draws;
  });
  const steps = w.workflows.reduce((a, wf) => a + wf.length, 0) / w.workflows.length;
  return { accuracy: perItem.reduce((a, b) => a + b, 0) / Math.max(1, items.length), steps, perItem };
}

/** A workflow in short: `worker<-[sources]` per step. */
export function workflowLabel(wf: readonly ReplayWorkflowStep[]): string {
  return wf.map((st) => `${st.worker}${st.sees.length ? `<-[${st.sees.join(',')}]` : ''}`).join(' ; ');
}

/** The most frequent workflows of a written set, most first. */
export function topWorkflows(w: Written, n: number): Array<{ workflow: string; count: number }> {
  const counts = new Map<string, number>();
  for (const wf of w.workflows) counts.set(workflowLabel(wf), (counts.get(workflowLabel(wf)) ?? 0) + 1);
  return [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, n).map(([workflow, count]) => ({ workflow, count }));
}

/** Every single worker and every "A alone, then B reading A" (A != B): the planner's candidates. */
export function singlesAndPairs(names: readonly string[]): Workflows {
  return [...names.map((w) => [{ worker: w, sees: [] }]), ...names.flatMap((a) => names.filter((b) => b !== a).map((b) => [{ worker: a, sees: [] }, { worker: b, sees: [0] }]))];
}
