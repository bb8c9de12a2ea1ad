// What every executor starts from once the Conductor has written (issue 27, one executor): the
// workflow row's fields from the writer's output, the parse, and the plan of the steps (their
// workers, what each sees, the replay sources, the schedule). The batch / eval / GRPO executor
// (execute.ts runWorkflow) and the served one (interactive/turn.ts) differ only in how they run
// the steps and answer a parse failure.
import { formatUsd } from '@fugu/core';
import { parseWorkflow, scheduleOf, sourcesOf, visibleSteps, type ConductorOutput, type ConductorPool, type ParseResult, type Schedule, type Workflow } from '@fugu/conductor';
import type { WorkflowFinish, WorkflowStepSpec } from '@fugu/db';

export type WorkflowPlan = {
  /** the workflow row's fields from the writer's output (completion, the Conductor's tokens and cost) */
  base: WorkflowFinish;
  /** the Conductor's cost (picodollars) */
  conductorCost: bigint;
} & (
  | {
    ok: true;
    workflow: Workflow;
    schedule: Schedule;
    /** per step: its worker's name, the steps it sees, the other workers whose answers reach it (replay) */
    names: string[];
    sees: number[][];
    sources: string[][];
    specs: WorkflowStepSpec[];
    /** `base` with the parsed workflow's shape (steps, topology, size, critical path) */
    shape: WorkflowFinish;
  }
  | { ok: false; error: Extract<ParseResult, { ok: false }>['error'] }
);

/** The writer's output parsed (ids into `pool`, at most `maxSteps` steps) and planned. */
export function planWorkflow(out: ConductorOutput, pool: ConductorPool, maxSteps: number): WorkflowPlan {
  const conductorCost = out.costPico ?? 0n;
  const base: WorkflowFinish = {
    completion: out.text,
    promptVersion: out.promptVersion ?? null,
    logprob: out.logprob ?? null,
    conductorTokensIn: out.usage?.inputTokens ?? 0,
    conductorTokensOut: out.usage?.outputTokens ?? 0,
    conductorCost: formatUsd(conductorCost),
    ...(out.decisions !== undefined && { decisions: out.decisions }),
  };
  const parsed = parseWorkflow(out.text, { poolSize: pool.workers.length, maxSteps });
  if (!parsed.ok) return { ok: false, error: parsed.error, base, conductorCost };
  const workflow = parsed.workflow;
  const schedule = scheduleOf(workflow);
  const names = workflow.steps.map((s) => pool.workers[s.worker]!.name);
  const sees = workflow.steps.map((_, i) => visibleSteps(workflow, i));
  const specs: WorkflowStepSpec[] = workflow.steps.map((s, i) => ({ worker: s.worker, name: names[i]!, subtask: s.subtask, access: s.access === 'all' || s.access === 'none' ? s.access : [...s.access] }));
  return {
    ok: true, base, conductorCost, workflow, schedule, names, sees, specs,
    sources: sourcesOf(names.map((worker, i) => ({ worker, sees: sees[i]! }))),
    shape: { ...base, parseOk: true, parseError: null, steps: specs, topology: schedule.topology, nSteps: schedule.size, criticalPath: schedule.criticalPath },
  };
}
