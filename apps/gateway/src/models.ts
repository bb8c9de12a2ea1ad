// The model registry: what a request's `model` name means. `fugu` is the router (a worker chosen
// per request among the caller's eligible workers), each worker's name calls that worker, and
// further kinds (`fugu-ultra`, the Conductor) are one more registered ModelHandler: the chat
// plugin only looks a name up here.
import { performance } from 'node:perf_hooks';
import type { ProviderKind, Usage, WorkerSpec } from '@fugu/core';
import { isProviderError, unsupportedParams, type ChatRequest, type StreamEvent } from '@fugu/providers';
import { routingText } from '@fugu/serving';
import { InputError } from '@fugu/core';
import { scrub } from '@fugu/telemetry';
import type { BatchCall } from '@fugu/batch';
import type { CallMeta, Caller, GatewayContext, RequestRecord, Routed } from './context.ts';
import { skipCooled } from './cooldown.ts';
import { GatewayError, badField } from './errors.ts';
import type { Completion, FuguOptions } from './chat-types.ts';

export const ROUTER_MODEL = 'fugu';

/** How many of the router's probabilities a request row keeps (best first). */
export const TOP_PROBS = 3;

/** One chat request as a model handler gets it. */
export type ChatInput = {
  req: ChatRequest;
  caller: Caller;
  /** the `fugu` extension object of the request */
  options: FuguOptions;
  /** fill in what the handler learns (worker, probabilities, fallbacks, routing/provider ms) */
  record: RequestRecord;
  /** aborts when the client goes away */
  signal: AbortSignal;
  /** an explicit conversation identity (the Responses API's first response of the chain); fugu-ultra keys its state on it */
  conversation?: string;
  /** the id a new conversation takes (the Responses API's new chain: this response's id); no constraint on a continuation */
  newConversation?: string;
  /** the request's Idempotency-Key header (fugu-ultra: the same key again gets the stored answer) */
  idempotencyKey?: string;
  /**
   * a Batch API line run in the batch driver's process (a handler with `batchable`): its key
   * (`<batch id>.<line>`, the same when the line is run again after a crash), and the seam its
   * provider calls go through instead of the gateway's (chat-call jobs by id: a call made again
   * under the same id is answered by the first one's row, never paid twice); `made` names a call
   * made in this process instead (an llm: Conductor's), charged with the line if it is stopped; on
   * a replay pool, the dataset item a question is as the provider workers key it (its stored id)
   */
  batch?: { key: string; call: BatchCall; made(id: string): void; itemOf?: (question: string) => string | undefined };
};

/**
 * A model's progress while it streams (fugu-ultra: a workflow's steps starting and finishing),
 * written as an extension chunk that standard clients ignore. Not a provider event.
 */
export type ProgressEvent = { type: 'progress'; progress: Record<string, unknown> };

/** What a StreamAnswer yields: the provider's events, and progress where the model has any. */
export type AnswerEvent = StreamEvent | ProgressEvent;

/** A stream whose first event is in hand (until then a failure may still fall back). */
export type StreamAnswer = {
  worker: string;
  /** the chunks' `model` when it is not `worker` (see Completion) */
  model?: string;
  headers: Record<string, string>;
  events: AsyncIterator<AnswerEvent>;
  first: IteratorResult<AnswerEvent>;
  /** the exact cost of the stream, once it has ended (its final usage) */
  cost(usage: Usage): Promise<bigint>;
  /** once it has ended: the `fugu` extension object and extra usage fields (see Completion) */
  extension?(): Record<string, unknown> | undefined;
  usageExtra?(): Record<string, unknown> | undefined;
};

export interface ModelHandler {
  /** the `model` name */
  readonly id: string;
  /** /v1/models `owned_by` */
  readonly ownedBy: string;
  /** listed in /v1/models and callable by this caller */
  visibleTo(caller: Caller): boolean;
  complete(input: ChatInput): Promise<Completion>;
  stream(input: ChatInput): Promise<StreamAnswer>;
  /**
   * a Batch API line of this model runs in the batch driver's process through `complete`
   * (ChatInput.batch), every provider call through the batch's seam under keys that are the same
   * when the line runs again (fugu-ultra); absent: a batch line cannot name it. `fugu` and the
   * workers run as one chat-call job each instead (libs/batch).
   */
  readonly batchable?: boolean;
  /** releases what the handler holds (fugu-ultra: its subscription to publishes), when the gateway closes */
  close?(): Promise<void>;
}

export class ModelRegistry {
  readonly #handlers = new Map<string, ModelHandler>();

  /** Registers a handler; its answers note their tool calls in the request's record (noteToolCalls). */
  register(h: ModelHandler): this {
    if (this.#handlers.has(h.id)) throw new Error(`model "${h.id}" is registered twice`);
    this.#handlers.set(h.id, noteToolCalls(h));
    return this;
  }

  get(id: string): ModelHandler | undefined {
    return this.#handlers.get(id);
  }

  /** The models a caller may use, in registration order. */
  visibleTo(caller: Caller): ModelHandler[] {
    return [...this.#handlers.values()].filter((h) => h.visibleTo(caller));
  }
}

/**
 * What a model handler of the gateway uses of its context (BullMQ's habit of narrow worker
 * contexts): a call on the workers (with the fallback policy), and, for the router, a routing
 * decision. Handlers are given no more (no keys, records or writer: the plugins own those).
 */
export type CallContext = Pick<GatewayContext, 'g' | 'log' | 'specs' | 'calls' | 'metrics' | 'cooldowns'>;
export type RouterContext = CallContext & Pick<GatewayContext, 'route'>;

/** The registry of a gateway: the router, then each worker of the pool. */
export function defaultRegistry(ctx: GatewayContext): ModelRegistry {
  const reg = new ModelRegistry().register(routerModel(ctx));
  for (const w of ctx.pool.workers) reg.register(workerModel(ctx, w));
  return reg;
}

/**
 * A handler whose answers note, in the request's record, the names of the tool calls they give
 * the client (the row's tool_calls, in order): a whole answer's, a stream's as its events pass.
 * Everything else (the handler's id, batchable, close) is the handler's own.
 */
function noteToolCalls(h: ModelHandler): ModelHandler {
  const noted = (input: ChatInput): string[] => (input.record.toolCalls ??= []);
  return {
    id: h.id,
    ownedBy: h.ownedBy,
    visibleTo: (caller) => h.visibleTo(caller),
    ...(h.batchable !== undefined && { batchable: h.batchable }),
    ...(h.close && { close: () => h.close!() }),
    complete: async (input: ChatInput): Promise<Completion> => {
      const c = await h.complete(input);
      noted(input).push(...c.result.toolCalls.map((t) => t.name));
      return c;
    },
    stream: async (input: ChatInput): Promise<StreamAnswer> => {
      const a = await h.stream(input);
      const names = noted(input);
      const note = (r: IteratorResult<AnswerEvent>): IteratorResult<AnswerEvent> => {
        if (!r.done && r.value.type === 'tool-call') names.push(r.value.toolCall.name);
        return r;
      };
      const events = a.events;
      return {
        ...a,
        first: note(a.first),
        events: {
          next: async () => note(await events.next()),
          ...(events.return && { return: (v?: unknown) => events.return!(v) }),
          ...(events.throw && { throw: (e?: unknown) => events.throw!(e) }),
        },
      };
    },
  };
}

// ---- the router (`fugu`) ----------------------------------------------------------------------

export function routerModel(ctx: RouterContext): ModelHandler {
  async function plan(input: ChatInput): Promise<Routed> {
    const allowed = eligibleWorkers(ctx, input);
    const routed = await ctx.route(routingTextOf(input.req), allowed, input.options.lambda);
    // a worker cooled down after repeated failures is tried last (the next-best takes its place)
    const cool = ctx.cooldowns && skipCooled(routed.candidates, await ctx.cooldowns.cooling());
    const r: Routed = cool && cool.cooled.length > 0 ? { ...routed, candidates: cool.candidates, cooled: cool.cooled } : routed;
    input.record.routingMs = r.routingMs;
    const d = r.decision;
    if (d) {
      input.record.topProbs = d.workers
        .map((worker, i) => ({ worker, prob: d.probs[i] ?? 0 }))
        .sort((a, b) => b.prob - a.prob)
        .slice(0, TOP_PROBS);
    }
    return r;
  }
  return {
    id: ROUTER_MODEL,
    ownedBy: 'fugu',
    visibleTo: () => true,
    complete: async (input) => generateOn(ctx, await plan(input), input),
    stream: async (input) => streamOn(ctx, await plan(input), input),
  };
}

/**
 * `fugu.conversation`, `fugu.shared_memory` and `fugu.merge_tool_calls` are fugu-ultra's (its
 * conversation state, its agents' tool calls): a model that has none (the router, a worker)
 * refuses them, naming the field, rather than ignore them.
 */
export function refuseUltraOptions(options: FuguOptions, model: string): void {
  for (const k of ['conversation', 'shared_memory', 'merge_tool_calls'] as const) {
    if (options[k] !== undefined) throw badField(`fugu.${k}`, `is fugu-ultra's (its conversations and agents); model "${model}" has none: leave it out`);
  }
}

/**
 * The workers the router may choose for this request: the caller's, narrowed by `fugu.workers`,
 * then to those whose adapter can honour every parameter asked for (PARAM_SUPPORT: the router
 * routes around a worker that cannot, rather than refuse). None left: a 400 naming the parameter.
 */
export function eligibleWorkers(ctx: Pick<GatewayContext, 'specs'>, input: ChatInput): string[] {
  refuseUltraOptions(input.options, ROUTER_MODEL);
  let pool = input.caller.allowed;
  const only = input.options.workers;
  if (only) {
    const bad = only.filter((w) => !pool.includes(w));
    if (bad.length > 0) throw badField('fugu.workers', `${bad.map((w) => `"${w}"`).join(', ')} ${bad.length === 1 ? 'is' : 'are'} not among this key's workers (${pool.join(', ')})`);
    pool = pool.filter((w) => only.includes(w));
  }
  const c = capableWorkers(pool, (w) => ctx.specs.get(w)!.provider, input.req);
  if (c.capable.length > 0) return c.capable;
  throw c.refusal();
}

/**
 * The workers of `pool` whose adapter can honour every parameter `req` asks for (PARAM_SUPPORT),
 * and the 400 to answer when too few are left: it names the parameter the most of the others
 * cannot honour, and each worker with its provider.
 */
export function capableWorkers(pool: readonly string[], providerOf: (worker: string) => ProviderKind, req: ChatRequest): { capable: string[]; refusal(): GatewayError } {
  const missing = new Map(pool.map((w) => [w, unsupportedParams(providerOf(w), req)]));
  return {
    capable: pool.filter((w) => missing.get(w)!.length === 0),
    refusal: () => {
      const counts = new Map<string, number>();
      for (const ps of missing.values()) for (const p of ps) counts.set(p, (counts.get(p) ?? 0) + 1);
      const param = [...counts.entries()].sort((a, b) => b[1] - a[1])[0]![0];
      const cannot = pool.filter((w) => missing.get(w)!.includes(param));
      return badField(param, `no worker this request may use can honour it (${cannot.length === 1 ? 'the worker' : 'workers'} ${cannot.map((w) => `${w} (${providerOf(w)})`).join(', ')} cannot)`);
    },
  };
}

// ---- a worker called by name ------------------------------------------------------------------

/** A request to a worker by name, checked (no cost preference, within fugu.workers, parameters it can honour): a 400 naming the field otherwise. */
export function planWorker(spec: WorkerSpec, input: ChatInput): Routed {
  if (input.options.lambda !== undefined) throw badField('fugu.lambda', `the cost preference applies to model "${ROUTER_MODEL}" only (this request calls the worker "${spec.name}")`);
  if (input.options.workers && !input.options.workers.includes(spec.name)) throw badField('fugu.workers', `does not include the worker "${spec.name}" that this request calls`);
  refuseUltraOptions(input.options, spec.name);
  const missing = unsupportedParams(spec.provider, input.req);
  if (missing.length > 0) throw badField(missing[0]!, `the worker "${spec.name}" (${spec.provider}) cannot honour it; leave it out or call a worker that can`);
  return { candidates: [spec.name], routingMs: 0 };
}

export function workerModel(ctx: CallContext, spec: WorkerSpec): ModelHandler {
  const plan = (input: ChatInput): Routed => planWorker(spec, input);
  return {
    id: spec.name,
    ownedBy: spec.provider,
    visibleTo: (caller) => caller.allowed.includes(spec.name),
    complete: async (input) => generateOn(ctx, plan(input), input),
    stream: async (input) => streamOn(ctx, plan(input), input),
  };
}

// ---- calls with the fallback policy -----------------------------------------------------------

/** A whole answer from the routed workers (fallbacks included). */
export async function generateOn(ctx: CallContext, r: Routed, input: ChatInput): Promise<Completion> {
  const { value, worker, failed } = await withFallback(ctx, r, input, (spec, call) => ctx.calls.generate(spec, { ...input.req, signal: input.signal }, call));
  const extension = answerExtension(ctx, r, worker);
  return { result: value.result, worker, cost: value.cost, headers: routingHeaders(r, worker, failed), ...(extension && { extension }) };
}

/**
 * The `fugu` object of a router's or a worker's answer, when there is something to say: that
 * `fugu` routed by the pool's default (no router trained on the pool), and that the worker is a
 * scripted one (a simulation, not a model's answer nor a recorded outcome).
 */
function answerExtension(ctx: Pick<GatewayContext, 'specs'>, r: Routed, worker: string): Record<string, unknown> | undefined {
  const scripted = ctx.specs.get(worker)?.provider === 'scripted';
  if (r.byDefault === undefined && !scripted) return undefined;
  return {
    worker,
    ...(r.byDefault !== undefined && { routing: 'default', routing_reason: r.byDefault }),
    ...(scripted && { simulation: 'scripted: a simulated answer (provider scripted) for trying fugu, not a model\'s answer nor a recorded outcome' }),
  };
}

/** A stream from the routed workers: a failure before the first event falls back. */
export async function streamOn(ctx: CallContext, r: Routed, input: ChatInput): Promise<StreamAnswer> {
  const { value, worker, failed } = await withFallback(ctx, r, input, async (spec, call) => {
    const s = await ctx.calls.stream(spec, { ...input.req, signal: input.signal }, call);
    return { s, first: await s.events.next() };
  });
  const extension = answerExtension(ctx, r, worker);
  return { worker, headers: routingHeaders(r, worker, failed), events: value.s.events, first: value.first, cost: (u) => value.s.cost(u), ...(extension && { extension: () => extension }) };
}

export function routingHeaders(r: Routed, worker: string, failed: string[]): Record<string, string> {
  return {
    'x-fugu-worker': worker,
    'x-fugu-routing-ms': r.routingMs.toFixed(2),
    ...(r.decision && { 'x-fugu-checkpoint': r.decision.checkpointId }),
    ...(r.byDefault !== undefined && { 'x-fugu-routing': 'default' }),
    ...(failed.length > 0 && { 'x-fugu-fallback-from': failed.join(',') }),
    ...(r.cooled && { 'x-fugu-cooled-down': r.cooled.join(',') }),
  };
}

/**
 * The fallback policy: `attempt` on the chosen worker, then (next-best) on the following ones
 * while the failure is retryable; a fatal failure or the last one is thrown. Fills the record's
 * worker, fallbacks and provider ms.
 */
async function withFallback<T>(ctx: CallContext, r: Routed, input: ChatInput, attempt: (w: WorkerSpec, call: CallMeta) => Promise<T>): Promise<{ value: T; worker: string; failed: string[] }> {
  const order = ctx.g.fallback === 'next-best' ? r.candidates.slice(0, 1 + ctx.g.fallbackAttempts) : r.candidates.slice(0, 1);
  const rec = input.record;
  const failed = rec.fallbacks;
  let last: unknown;
  const t0 = performance.now();
  try {
    for (const [i, worker] of order.entries()) {
      rec.worker = worker;
      try {
        return { value: await attempt(ctx.specs.get(worker)!, { key: `${rec.id}.${i + 1}`, attempt: i + 1 }), worker, failed: [...failed] };
      } catch (e) {
        const fatal = input.signal.aborted ? new GatewayError(499, 'the client closed the request', { code: 'client_closed' }) : classify(worker, e, input.req);
        if (fatal) throw fatal;
        ctx.cooldowns?.failed(worker);
        failed.push(worker);
        last = e;
        if (i < order.length - 1) {
          ctx.metrics.fallbacks.inc({ worker });
          ctx.log.warn({ reqId: rec.requestId, worker, err: scrub((e as Error).message) }, 'provider failed: falling back to the next-best worker');
        }
      }
    }
  } finally {
    rec.providerMs = performance.now() - t0;
  }
  if (isProviderError(last) && last.kind === 'rate-limit') {
    // every worker tried was at its rate limit (the provider's or the shared one): a 429 to retry
    const ms = last.retryAfterMs;
    throw new GatewayError(429, `${failed.length === 1 ? 'the worker' : 'every worker tried'} is at its rate limit (${failed.join(', ')}): ${last.message}`, {
      type: 'rate_limit_error',
      code: 'rate_limit_exceeded',
      ...(ms !== undefined && { headers: { 'retry-after': String(Math.max(1, Math.ceil(ms / 1000))) } }),
    });
  }
  throw new GatewayError(502, `${failed.length === 1 ? 'the worker' : 'every worker tried'} failed (${failed.join(', ')}): ${(last as Error).message}`, {
    type: 'server_error',
    code: 'provider_error',
  });
}

/**
 * A failed call: retryable -> undefined (try the next worker); otherwise the error to return. A
 * replay worker's refusal (the user's message is not a question of its dataset; its message
 * quotes it and says what to do) names the last user message (`req`: the request's messages).
 */
export function classify(worker: string, e: unknown, req?: Pick<ChatRequest, 'messages'>): GatewayError | undefined {
  if (isProviderError(e)) {
    if (e.transient) return undefined;
    if (e.kind === 'bad-request' && e.provider === 'replay' && req) {
      const at = req.messages.findLastIndex((m) => m.role === 'user');
      return new GatewayError(400, e.message.replace(/^replay: /, ''), { param: at < 0 ? 'messages' : `messages[${at}].content`, code: 'provider_bad_request' });
    }
    if (e.kind === 'bad-request') return new GatewayError(400, `worker "${worker}": ${e.message}`, { code: 'provider_bad_request' });
    if (e.kind === 'aborted') return new GatewayError(499, 'the client closed the request', { code: 'client_closed' });
    return new GatewayError(502, `worker "${worker}" failed (${e.kind}${e.status ? ` ${e.status}` : ''}): ${e.message}`, { code: 'provider_error' });
  }
  if (e instanceof GatewayError) return e;
  return new GatewayError(500, `worker "${worker}": ${(e as Error).message}`, { type: 'server_error' });
}

export function routingTextOf(req: Pick<ChatRequest, 'messages'>): string {
  try {
    return routingText(req.messages);
  } catch (e) {
    if (e instanceof InputError) throw new GatewayError(400, e.message, { param: 'messages', code: 'invalid_value' });
    throw e;
  }
}
