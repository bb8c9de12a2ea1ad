// The fixed topologies as workflows (the baselines of issue 12): `fixed:single:<w>`,
// `fixed:router:<ckpt>` (the router's pick, one step), `fixed:moa:<n>` (the n best workers
// solve independently, the best aggregates with access to all), `fixed:chain` (the best solves,
// the second-best verifies and corrects). "Best" is the ranking handed in: worker names by
// training mean, best first. The subtasks are the fixed texts below, versioned like the prompt
// templates: a new wording is a new version, and rows record FIXED_SUBTASKS_VERSION.

import { InputError } from '@fugu/core';
import type { FixedConductorSpec } from './spec.ts';
import { checkWorkflow, resolveMaxSteps, workerId, type ConductorPool, type Step, type Workflow } from './workflow.ts';

/** The version of the subtask wording below; change it (fixed-v2) whenever a text changes. */
export const FIXED_SUBTASKS_VERSION = 'fixed-v1';

/** The subtask texts of the fixed topologies; `{{question}}` is replaced by the question. */
export const FIXED_SUBTASKS: Readonly<Record<'solve' | 'propose' | 'aggregate' | 'verify', string>> = {
  solve: 'Solve this problem and give the final answer. Problem: {{question}}',
  propose: 'Solve this problem on your own, showing your reasoning, and give the final answer. Problem: {{question}}',
  aggregate:
    'Other agents each solved the problem below independently; their answers are shown above. Weigh them, work out which reasoning holds, and give the single best final answer. Problem: {{question}}',
  verify:
    'Another agent solved the problem below; its answer is shown above. Check it step by step, correct any mistake, and give the final answer. Problem: {{question}}',
};

function subtask(kind: keyof typeof FIXED_SUBTASKS, question: string): string {
  // one pass: a question containing "{{question}}" stays as it is
  return FIXED_SUBTASKS[kind].replace('{{question}}', () => question);
}

export type FixedWorkflowInput = {
  /** the pool the workflow's ids refer to */
  pool: ConductorPool;
  /** pool worker names ordered by training mean, best first (need not list every worker) */
  ranking: readonly string[];
  /** the question, embedded in every subtask */
  question: string;
  /** the worker the router picked, by name (needed by fixed:router) */
  routerChoice?: string;
  /** the maximum number of steps (default 5) */
  maxSteps?: number;
};

/**
 * The workflow of a fixed topology for a question. InputErrors: an empty question (field
 * `question`), a ranking with a name not in the pool or twice (field `ranking`), fewer ranked
 * workers than the topology needs, a single worker or router choice not in the pool, a missing
 * router choice, more steps than maxSteps. The result always passes `checkWorkflow`.
 */
export function fixedWorkflow(spec: FixedConductorSpec, input: FixedWorkflowInput): Workflow {
  const maxSteps = resolveMaxSteps(input.maxSteps);
  const { pool } = input;
  const question = typeof input.question === 'string' ? input.question.trim() : '';
  if (!question) throw new InputError(`${spec.spec}: the question is empty`, { field: 'question' });
  const names = pool.workers.map((w) => w.name).join(', ');
  const inPool = (name: string, what: string, field: string): number => {
    if (!pool.workers.some((w) => w.name === name)) throw new InputError(`${spec.spec}: ${what} ${JSON.stringify(name)} is not in the pool (the pool has ${names})`, { field });
    return workerId(pool, name);
  };
  const seen = new Set<string>();
  const ranked = input.ranking.map((name, i) => {
    if (seen.has(name)) throw new InputError(`${spec.spec}: ranking entry ${i + 1}, worker ${JSON.stringify(name)}, appears twice`, { field: 'ranking' });
    seen.add(name);
    return inPool(name, `ranking entry ${i + 1}, worker`, 'ranking');
  });
  const needRanked = (k: number, why: string): void => {
    if (ranked.length < k) throw new InputError(`${spec.spec}: ${why} needs ${k} ranked workers, the ranking has ${ranked.length}`, { field: 'ranking' });
  };
  let steps: Step[];
  switch (spec.topology) {
    case 'single':
      steps = [{ worker: inPool(spec.worker, 'worker', 'conductor'), subtask: subtask('solve', question), access: 'none' }];
      break;
    case 'router': {
      if (input.routerChoice === undefined) throw new InputError(`${spec.spec}: no router choice given (the worker router ${spec.checkpoint} picked for the question)`, { field: 'routerChoice' });
      steps = [{ worker: inPool(input.routerChoice, 'router choice', 'routerChoice'), subtask: subtask('solve', question), access: 'none' }];
      break;
    }
    case 'moa': {
      needRanked(spec.n, `${spec.n} proposers`);
      if (spec.n + 1 > maxSteps) throw new InputError(`${spec.spec}: ${spec.n} proposers and an aggregator are ${spec.n + 1} steps, more than maxSteps = ${maxSteps}`, { field: 'conductor' });
      steps = ranked.slice(0, spec.n).map((worker) => ({ worker, subtask: subtask('propose', question), access: 'none' as const }));
      steps.push({ worker: ranked[0]!, subtask: subtask('aggregate', question), access: 'all' });
      break;
    }
    case 'chain':
      needRanked(2, 'a solver and a verifier');
      if (maxSteps < 2) throw new InputError(`${spec.spec}: a chain is 2 steps, more than maxSteps = ${maxSteps}`, { field: 'conductor' });
      steps = [
        { worker: ranked[0]!, subtask: subtask('solve', question), access: 'none' },
        { worker: ranked[1]!, subtask: subtask('verify', question), access: [0] },
      ];
      break;
  }
  const workflow: Workflow = { steps };
  const fault = checkWorkflow(workflow, { poolSize: pool.workers.length, maxSteps });
  if (fault) throw new Error(`${spec.spec}: built an invalid workflow (${fault.message})`); // a bug, not bad input
  return workflow;
}
