// Queue names: the one place they are spelled. Kubernetes scalers and dashboards are generated
// from `allQueueNames()`, never typed twice.
//
// Every name carries a Redis Cluster hash tag, the part in braces: its slot group. BullMQ keeps a
// queue in keys `<prefix>:<name>:<suffix>` and its Lua scripts touch several of them at once, so
// on a Redis Cluster they must hash to one slot; the tag makes it so. Different queues have
// different tags, so a cluster spreads them over its masters; the queues of a flow (a parent job
// whose children are on another queue) share one tag, since BullMQ's scripts for a child also
// update its parent: es-eval and es-fanin share `{es}`, conduct and grpo-fanin share `{conduct}`.
// On one Redis the braces are just characters of the name.
import { PROVIDERS, type ProviderKind } from '@fugu/core';
import { keySlot, SLOTS } from './slots.ts';

/** Most shards a provider queue can be split into (FUGU_PROVIDER_QUEUE_SHARDS). */
export const MAX_PROVIDER_QUEUE_SHARDS = 256;

const shardTags = new Map<string, string>();

/**
 * The slot group of shard `shard` of `shards` of a provider's queue. With one shard it is
 * `provider-call.<provider>`; with more, `provider-call.<provider>.<i>of<n>`, followed by `~<k>`
 * for the first k >= 0 (none for 0) that puts its slot in the middle half of the i-th n-th of the
 * slot range: a cluster whose masters hold equal slot ranges (as `redis-cli --cluster create`
 * deals them) gets the shards spread evenly over its masters, not wherever CRC16 throws them.
 */
function shardTag(provider: ProviderKind, shard: number, shards: number): string {
  if (shards === 1) return `provider-call.${provider}`;
  const id = `${provider}\u0000${shard}\u0000${shards}`;
  let tag = shardTags.get(id);
  if (tag === undefined) {
    const base = `provider-call.${provider}.${shard}of${shards}`;
    const width = SLOTS / shards;
    const lo = shard * width + width / 4;
    const hi = shard * width + (3 * width) / 4;
    for (let k = 0; ; k++) {
      const t = k === 0 ? base : `${base}~${k}`;
      const slot = keySlot(`{${t}}`);
      if (slot >= lo && slot < hi) {
        tag = t;
        break;
      }
    }
    shardTags.set(id, tag);
  }
  return tag;
}

function checkShards(shards: number): void {
  if (!Number.isInteger(shards) || shards < 1 || shards > MAX_PROVIDER_QUEUE_SHARDS) {
    throw new RangeError(`provider queue shards must be an integer from 1 to ${MAX_PROVIDER_QUEUE_SHARDS} (FUGU_PROVIDER_QUEUE_SHARDS), not ${shards}`);
  }
}

/**
 * A provider's call queue, so each provider has its own rate limit and its own scaling:
 * `{provider-call.<provider>}`, or with `shards` > 1 shard `shard` of them (see shardTag).
 */
export function providerCallQueue(provider: ProviderKind, shard = 0, shards = 1): string {
  checkShards(shards);
  if (!Number.isInteger(shard) || shard < 0 || shard >= shards) throw new RangeError(`shard ${shard} of ${shards} does not exist`);
  return `{${shardTag(provider, shard, shards)}}`;
}

/** Every shard of a provider's call queue (what its workers consume and its scaler counts). */
export function providerCallQueues(provider: ProviderKind, shards = 1): string[] {
  checkShards(shards);
  return Array.from({ length: shards }, (_, i) => providerCallQueue(provider, i, shards));
}

/** FNV-1a (32 bits) of a job id: the shard it goes to, the same in every process and release. */
export function shardOf(jobId: string, shards: number): number {
  if (shards === 1) return 0;
  let h = 0x811c9dc5;
  for (let i = 0; i < jobId.length; i++) {
    h ^= jobId.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % shards;
}

/**
 * The shard queue of a provider call job: chosen from its job id, so the same id always lands on
 * the same queue and BullMQ's job-id dedupe still holds across re-submissions.
 */
export const providerCallQueueFor = (provider: ProviderKind, jobId: string, shards = 1): string => providerCallQueue(provider, shardOf(jobId, shards), shards);

/** Routing decisions for the gateway in pool mode, consumed by apps/router-worker. */
export const routeQueue = '{route}';

/** ES stage: one job per (candidate, replica) evaluation, consumed by the evaluators (apps/trainer). */
export const esEvalQueue = 'es-eval{es}';

/** ES stage: the fan-in (parent) job of a generation's flow (children on esEvalQueue, same slot group), consumed by the coordinator. */
export const esFaninQueue = 'es-fanin{es}';

/** Workflows to execute (the Conductor, fugu-ultra), consumed by apps/conductor. */
export const conductQueue = '{conduct}';

/** GRPO stage: the fan-in (parent) job of an iteration's flow of conduct jobs (same slot group as conductQueue), consumed by the GRPO coordinator. */
export const grpoFaninQueue = 'grpo-fanin{conduct}';

/** Every queue of a deployment whose provider queues have `shards` shards. */
export const allQueueNames = (shards = 1): string[] => [
  ...PROVIDERS.flatMap((p) => providerCallQueues(p, shards)),
  routeQueue,
  esEvalQueue,
  esFaninQueue,
  conductQueue,
  grpoFaninQueue,
];

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
