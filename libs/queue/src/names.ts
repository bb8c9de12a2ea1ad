// Queue names: the one place they are spelled. Kubernetes scalers and dashboards are generated
// from `allQueueNames()`, never typed twice.
import { PROVIDERS, type ProviderKind } from '@fugu/core';

/** One queue per provider, so each has its own rate limit and its own scaling. */
export const providerCallQueue = (provider: ProviderKind): string => `provider-call.${provider}`;

/** Routing decisions for the gateway in pool mode, consumed by apps/router-worker. */
export const routeQueue = 'route';

export const allQueueNames = (): string[] => [...PROVIDERS.map(providerCallQueue), routeQueue];

/** BullMQ's Redis keys of a queue's pending jobs (for KEDA-style scalers on queue depth). */
export const queueKeys = (prefix: string, queue: string): { wait: string; prioritized: string; delayed: string; active: string } => ({
  wait: `${prefix}:${queue}:wait`,
  prioritized: `${prefix}:${queue}:prioritized`,
  delayed: `${prefix}:${queue}:delayed`,
  active: `${prefix}:${queue}:active`,
});

/** A BullMQ custom job id (no ':' allowed) for one call of an evaluation run. */
export const callJobId = (runId: string, itemId: number, workerId: number, repetition: number): string => `${runId}.${itemId}.${workerId}.${repetition}`;
