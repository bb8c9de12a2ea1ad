// The one set of stop rules of a workflow, whichever path runs it (a conduct job, `fugu ultra
// eval`, GRPO rollouts, the reward service, a served or batched fugu-ultra turn):
//   budget-usd     no step starts once the Conductor and the steps have spent options.maxUsd;
//   budget-tokens  a step cut at options.maxTokensPerStep ends the workflow (the steps that read
//                  it would read a cut answer): nothing new starts, the steps in flight finish;
//   step-error     a step that failed (after its call's retries) ends the workflow.
// The workflow's finish reason is the first of these that ended it, else `answered` (a served
// workflow whose agent passed its tool-turn bound: `budget-tool-turns`).
import { parseUsd, type FinishReason } from '@fugu/core';
import type { WorkflowFinishReason } from '@fugu/db';
import type { WorkflowOptions } from './options.ts';

/** What ended a workflow before its steps had all run. */
export type WorkflowEnd = 'budget-usd' | 'budget-tokens' | 'step-error';

/** The workflow's budget in picodollars (undefined: none). */
export const budgetPico = (options: Pick<WorkflowOptions, 'maxUsd'>): bigint | undefined => (options.maxUsd !== undefined ? parseUsd(options.maxUsd) : undefined);

/** No step starts once `spent` (the Conductor's and the steps' picodollars) has reached the budget. */
export const overBudget = (budget: bigint | undefined, spent: bigint): boolean => budget !== undefined && spent >= budget;

/** A step's answer cut at the workflow's per-step token bound ends the workflow (`budget-tokens`). */
export const cutAtTokenBound = (options: Pick<WorkflowOptions, 'maxTokensPerStep'>, finish: FinishReason): boolean => options.maxTokensPerStep !== undefined && finish === 'length';

/** The workflow's finish reason: what ended it, else `answered` (or the tool-turn bound an agent passed). */
export const finishReasonOf = (ended: WorkflowEnd | undefined, toolTurnsBound = false): WorkflowFinishReason => ended ?? (toolTurnsBound ? 'budget-tool-turns' : 'answered');
