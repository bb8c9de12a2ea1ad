// Typed job contracts, validated with zod where a job is made AND where it is processed: a
// payload that fails validation is rejected with a message naming the field, never processed.
// Payloads carry ids only (never prompts, keys or parameter vectors).
import { z } from 'zod';
import { UnrecoverableError } from 'bullmq';
import { PROVIDERS } from '@fugu/core';

export const providerCallJobSchema = z
  .object({
    v: z.literal(1),
    runId: z.string().min(1).max(100).regex(/^[A-Za-z0-9_-]+$/, 'letters, digits, _ and - only'),
    itemId: z.number().int().positive(),
    workerId: z.number().int().positive(),
    repetition: z.number().int().nonnegative(),
    provider: z.enum(PROVIDERS),
  })
  .strict();
export type ProviderCallJob = z.infer<typeof providerCallJobSchema>;

/** A chat-call id: also its BullMQ job id and its chat_calls key (no ':', which BullMQ rejects). */
export const chatCallIdSchema = z.string().min(1).max(200).regex(/^[A-Za-z0-9_.-]+$/, 'letters, digits, _, . and - only');

/** Job name of a chat-call job on a provider-call queue (an evaluation job is named `call`). */
export const CHAT_CALL_JOB = 'chat-call';

/** A stored chat request to call (libs/calls): ids only; the request is in Postgres (chat_requests). */
export const chatCallJobSchema = z
  .object({
    v: z.literal(1),
    id: chatCallIdSchema,
    workerId: z.number().int().positive(),
    provider: z.enum(PROVIDERS),
  })
  .strict();
export type ChatCallJob = z.infer<typeof chatCallJobSchema>;

export type ChatCallJobResult = { outcome: 'recorded'; status: 'ok' | 'error'; cached: boolean } | { outcome: 'existing'; status: 'ok' | 'error' };

export type ProviderCallResult =
  | { outcome: 'recorded'; status: 'ok' | 'error'; cached: boolean }
  | { outcome: 'skipped'; reason: string };

/** Most characters of a route job's text: the router reads only the first 128 tokens, which fit
 *  well inside this (QueueRouteClient cuts longer texts), so a queue payload stays small. */
export const ROUTE_TEXT_MAX_CHARS = 8_192;

/** A routing decision to make (the gateway in pool mode -> apps/router-worker). The one payload
 *  that carries text: the router has to read it, and it is not stored (removeOnComplete/Fail). */
export const routeJobSchema = z
  .object({
    v: z.literal(1),
    text: z.string().min(1).max(ROUTE_TEXT_MAX_CHARS),
    allowed: z.array(z.string().min(1)).min(1).optional(),
    lambda: z.number().finite().nonnegative().optional(),
    /** epoch ms; a worker drops the job after it (the caller has given up) */
    deadline: z.number().int().positive(),
  })
  .strict();
export type RouteJob = z.infer<typeof routeJobSchema>;

const esRunId = z.string().min(1).max(100).regex(/^[A-Za-z0-9_-]+$/, 'letters, digits, _ and - only');

/** One ES evaluation: candidate k of a generation on replica r (apps/trainer's evaluator). Indices
 *  and a state hash only: the evaluator regenerates the candidate from the generation's optimiser
 *  state in Postgres (SepCmaEs.fromState(state).candidate(k)); parameter vectors never travel. */
export const esEvalJobSchema = z
  .object({
    v: z.literal(1),
    runId: esRunId,
    generation: z.number().int().nonnegative(),
    candidate: z.number().int().nonnegative(),
    replica: z.number().int().nonnegative(),
    /** hash of the state that asks this generation: an evaluator never evaluates against another */
    stateVersion: z.string().regex(/^[0-9a-f]{16}$/, '16 hex digits'),
  })
  .strict();
export type EsEvalJob = z.infer<typeof esEvalJobSchema>;

export type EsEvalResult = { outcome: 'recorded'; fitness: number } | { outcome: 'skipped'; reason: 'stale' | 'duplicate' | 'run-not-running' };

/** The fan-in (parent) job of one generation's flow (the coordinator processes it). */
export const esFaninJobSchema = z
  .object({
    v: z.literal(1),
    runId: esRunId,
    generation: z.number().int().nonnegative(),
    stateVersion: z.string().regex(/^[0-9a-f]{16}$/, '16 hex digits'),
    dispatch: z.string().regex(/^d[0-9a-z]+$/),
  })
  .strict();
export type EsFaninJob = z.infer<typeof esFaninJobSchema>;

/** The fan-in (parent) job of one GRPO iteration's flow of conduct jobs (the GRPO coordinator processes it). */
export const grpoFaninJobSchema = z
  .object({
    v: z.literal(1),
    runId: esRunId,
    iteration: z.number().int().nonnegative(),
    dispatch: z.string().regex(/^d[0-9a-z]+$/),
  })
  .strict();
export type GrpoFaninJob = z.infer<typeof grpoFaninJobSchema>;

/** Job name of a conduct job on the conduct queue. */
export const CONDUCT_JOB = 'conduct';

/** A workflow to execute (apps/conductor): the id of its `workflows` row, which holds the question
 *  or item, the pool, the conductor spec, the seed and the options. Ids only. */
export const conductJobSchema = z
  .object({
    v: z.literal(1),
    workflowId: z.number().int().positive(),
  })
  .strict();
export type ConductJob = z.infer<typeof conductJobSchema>;

export type ConductJobResult = { outcome: 'done'; finishReason: string; reward: number | null } | { outcome: 'existing'; status: string };

/** A job payload that does not match its contract; never retried. */
export class InvalidJobError extends UnrecoverableError {
  readonly field: string;
  constructor(queue: string, jobId: string | undefined, field: string, message: string) {
    super(`invalid ${queue} job ${jobId ?? '?'}: field ${field || '(root)'}: ${message}`);
    this.name = 'InvalidJobError';
    this.field = field;
  }
}

export function parseJob<S extends z.ZodType>(schema: S, data: unknown, queue: string, jobId?: string): z.infer<S> {
  const r = schema.safeParse(data);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    throw new InvalidJobError(queue, jobId, issue.path.join('.'), issue.message);
  }
  return r.data;
}
