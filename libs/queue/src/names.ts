// Queue names: the one place they are spelled. Kubernetes scalers and dashboards are generated
// from `allQueueNames()`, never typed twice.
import { PROVIDERS, type ProviderKind } from '@fugu/core';

/** One queue per provider, so each has its own rate limit and its own scaling. */
export const providerCallQueue = (provider: ProviderKind): string => `provider-call.${provider}`;

/** Routing decisions for the gateway in pool mode, consumed by apps/router-worker. */
export const routeQueue = 'route';

/** ES stage: one job per (candidate, replica) evaluation, consumed by the evaluators (apps/trainer). */
export const esEvalQueue = 'es-eval';

/** ES stage: the fan-in (parent) job of a generation's flow, consumed by the coordinator. */
export const esFaninQueue = 'es-fanin';

/** Workflows to execute (the Conductor, fugu-ultra), consumed by apps/conductor. */
export const conductQueue = 'conduct';

/** GRPO stage: the fan-in (parent) job of an iteration's flow of conduct jobs, consumed by the GRPO coordinator. */
export const grpoFaninQueue = 'grpo-fanin';

export const allQueueNames = (): string[] => [...PROVIDERS.map(providerCallQueue), routeQueue, esEvalQueue, esFaninQueue, conductQueue, grpoFaninQueue];

/** BullMQ's Redis keys of a queue's pending jobs (for KEDA-style scalers on queue depth). */
export const queueKeys = (prefix: string, queue: string): { wait: string; prioritized: string; delayed: string; active: string } => ({
  wait: `${prefix}:${queue}:wait`,
  prioritized: `${prefix}:${queue}:prioritized`,
  delayed: `${prefix}:${queue}:delayed`,
  active: `${prefix}:${queue}:active`,
});

/** A BullMQ custom job id (no ':' allowed) for one call of an evaluation run. */
export const callJobId = (runId: string, itemId: number, workerId: number, repetition: number): string => `${runId}.${itemId}.${workerId}.${repetition}`;

/** Job ids of an ES generation's flow: `dispatch` numbers the re-dispatches of a generation. */
export const esEvalJobId = (runId: string, generation: number, candidate: number, replica: number, dispatch: string): string =>
  `${runId}.g${generation}.k${candidate}.r${replica}.${dispatch}`;
export const esFaninJobId = (runId: string, generation: number, dispatch: string): string => `${runId}.g${generation}.fanin.${dispatch}`;

/** The BullMQ job id of a workflow's conduct job (one per workflow row). */
export const conductJobId = (workflowId: number): string => `wf${workflowId}`;

/** Job ids of a GRPO iteration's flow: a rollout's conduct job per dispatch, and the fan-in parent. */
export const grpoRolloutJobId = (workflowId: number, dispatch: string): string => `wf${workflowId}.${dispatch}`;
export const grpoFaninJobId = (runId: string, iteration: number, dispatch: string): string => `${runId}.i${iteration}.fanin.${dispatch}`;
