// `model: "fugu-ultra"`: the Conductor behind the OpenAI API, one more ModelHandler of the
// registry. The deployment (`fugu ultra publish`: a Conductor spec, its pool and options) is read
// from Postgres and reused for gateway.ultraCacheMs (FUGU_GATEWAY_ULTRA_CACHE_MS, 1 s); a publish
// tells the gateways on Redis (`<prefix>:ultra:published`) and they drop it at once, so a new
// publish takes effect from the next request, without a restart. Each request
// is one turn of libs/ultra's interactive state machine: a new workflow for a user message, or
// the client's tool results going back to the agents that asked; the agents' calls go through
// the gateway's call seam (rate limits, cache, exact cost, a chat_calls row each). The response
// names the workflow (`x-fugu-workflow`, `x-fugu-conversation`, the `fugu` object with the steps'
// workers) and counts the Conductor's and the workers' tokens apart (`usage.conductor`,
// `usage.workers`, each with its cost). Streaming: the final step's tokens as they come, and the
// workflow's progress as extension chunks (`choices: []`, a `fugu` object) that standard clients skip.
// A Batch API line (ChatInput.batch) runs the same turn with its agents' calls through the batch's
// seam (chat-call jobs), in its own conversation `conv_<batch id>.<line>` and under the workflow
// key `<batch id>.<line>`: run again after its driver died, it runs the same workflow again and
// every agent call it had made is answered by its row.
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { GatewayError, badField } from './errors.ts';
import { checkConductorSpec, parseConductorSpec } from '@fugu/conductor';
import { InputError, type ChatResult, type ToolCall, type Usage } from '@fugu/core';
import { getUltraDeployment, type Db, type StoredWorker, type UltraDeployment } from '@fugu/db';
import { createRedis, type RedisClient } from '@fugu/queue';
import {
  defaultConductor, runTurn, UltraRequestError, ultraPublishedChannel, validateInteractiveOptions, type InteractiveDeps, type TurnInput, type TurnResult, type UltraDeploymentRef, type UltraPublishedMessage, type WorkflowHolds,
} from '@fugu/ultra';
import type { GatewayContext } from './context.ts';
import { ALL_PARAMS, REQUEST_PARAMS, requestedParams, type ChatRequest, type RequestParam } from '@fugu/providers';
import type { ProviderKind } from '@fugu/core';
import type { Completion } from './chat-types.ts';
import { capableWorkers, type AnswerEvent, type ChatInput, type ModelHandler, type StreamAnswer } from './models.ts';
import { usdNumber } from './wire.ts';

export const ULTRA_MODEL = 'fugu-ultra';

export type UltraServingOptions = {
  /** the model name and deployment (default fugu-ultra) */
  name?: string;
  db: Db;
  /** the gateway's pool as stored (savePool): the workflows' pool id and workers */
  poolId: number;
  workers: readonly StoredWorker[];
  /** everything of InteractiveDeps but the calls, which go through the gateway's seam, and the holds (default: the gateway's) */
  deps: Omit<InteractiveDeps, 'call' | 'stream' | 'db' | 'holds'> & { holds?: WorkflowHolds };
  /** how long a deployment read is reused, from the start of its read (default gateway.ultraCacheMs; 0: read on every request) */
  cacheMs?: number;
  /**
   * where publishes are heard (`fugu ultra publish`'s message drops the reused deployment at once):
   * default the config's Redis and queue prefix; false: none (a publish is served within cacheMs)
   */
  invalidations?: { redisUrl: string; queuePrefix: string } | false;
  /** reads the deployment (default getUltraDeployment; a test counts the reads) */
  read?: (db: Db, name: string) => Promise<UltraDeployment | undefined>;
};

/** A deployment as served: `byDefault` says why the default Conductor serves it (none published for this pool). */
type ServedDeployment = UltraDeploymentRef & { byDefault?: string };

/** What fugu-ultra uses of the gateway's context: its pool, its config, its log, the calls on the workers, and the holds on its workflows. */
export type UltraContext = Pick<GatewayContext, 'config' | 'log' | 'pool' | 'specs' | 'calls' | 'holds'>;

export function ultraModel(ctx: UltraContext, o: UltraServingOptions): ModelHandler {
  const name = o.name ?? ULTRA_MODEL;
  const deps: InteractiveDeps = {
    ...o.deps,
    holds: o.deps.holds ?? ctx.holds,
    db: o.db,
    call: (worker, req, key) => ctx.calls.generate(worker, req, { key, attempt: 1 }),
    stream: (worker, req, key) => ctx.calls.stream(worker, req, { key, attempt: 1 }),
  };
  // a batch line's agents call through the batch's seam (it never streams), an llm: Conductor's call is named to it, its replay items named as the provider workers know them
  const depsOf = ({ batch }: ChatInput): InteractiveDeps =>
    batch
      ? { ...deps, writer: { ...deps.writer, made: batch.made }, call: batch.call, stream: () => Promise.reject(new Error('a batch line does not stream')), ...(batch.itemOf && { itemOf: batch.itemOf }) }
      : deps;

  const cache = deploymentCache({
    name,
    ttlMs: o.cacheMs ?? ctx.config.gateway.ultraCacheMs,
    load: readDeployment,
    invalidations: o.invalidations ?? { redisUrl: ctx.config.redisUrl, queuePrefix: ctx.config.queuePrefix },
    log: ctx.log,
  });
  const deployment = (): Promise<ServedDeployment> => cache.get();

  /** The deployment as stored, checked against this gateway's pool, its options validated: a 503 when it cannot be served. */
  async function readDeployment(): Promise<ServedDeployment> {
    const d = await (o.read ?? getUltraDeployment)(o.db, name);
    if (!d || d.pool !== ctx.pool.name) {
      // none published for this pool: the default Conductor, said in every answer (any pool is served from its first minute)
      const why = !d ? `no Conductor is published as "${name}"` : `"${name}" is published for the pool "${d.pool}", not this gateway's "${ctx.pool.name}"`;
      return { name, conductor: defaultConductor(o.workers), poolId: o.poolId, workers: o.workers, options: validateInteractiveOptions({}), byDefault: `${why}: \`fugu ultra publish --conductor <spec> --pool ${ctx.pool.name}\` publishes one` };
    }
    let options;
    try {
      options = validateInteractiveOptions(d.options);
    } catch (e) {
      throw new GatewayError(503, `"${name}"'s published options are invalid: ${(e as Error).message}`, { code: 'model_not_published' });
    }
    return { name, conductor: d.conductor, poolId: o.poolId, workers: o.workers, options };
  }

  async function turnInput(input: ChatInput, stream: boolean): Promise<TurnInput> {
    const { req, options } = input;
    if (options.lambda !== undefined) throw badField('fugu.lambda', `the cost preference applies to model "fugu" only (this request calls "${name}")`);
    // the Responses API's conversations are its chains' first response ids: named through previous_response_id only
    if (options.conversation?.startsWith('resp_')) throw badField('fugu.conversation', 'a Responses API conversation is continued with /v1/responses and previous_response_id');
    for (const p of ALL_PARAMS) {
      if (ULTRA_PARAMS[p] === false && requestedParams(req).includes(p)) throw badField(REQUEST_PARAMS[p].chat, `is not supported by "${name}" (its answer is a workflow's)`);
    }
    let workers = input.caller.allowed;
    if (options.workers) {
      const bad = options.workers.filter((w) => !workers.includes(w));
      if (bad.length > 0) throw badField('fugu.workers', `${bad.map((w) => `"${w}"`).join(', ')} ${bad.length === 1 ? 'is' : 'are'} not among this key's workers (${workers.join(', ')})`);
      workers = workers.filter((w) => options.workers!.includes(w));
    }
    const d = await deployment();
    if (workers.length < d.workers.length) checkRestrictedPool(d, workers, options.workers !== undefined);
    workers = capableOf(d, workers, req);
    return {
      deployment: d,
      keyId: input.caller.key?.id ?? null,
      workers,
      messages: req.messages,
      ...(req.tools && { tools: req.tools }),
      ...(req.toolChoice !== undefined && { toolChoice: req.toolChoice }),
      ...(req.parallelToolCalls !== undefined && { parallelToolCalls: req.parallelToolCalls }),
      ...(req.temperature !== undefined && { temperature: req.temperature }),
      ...(req.maxTokens !== undefined && { maxTokens: req.maxTokens }),
      ...(req.seed !== undefined && { seed: req.seed }),
      ...stepParams(req),
      ...(input.batch
        ? { conversation: `conv_${input.batch.key}`, workflowKey: input.batch.key, resumable: false }
        : (input.conversation ?? options.conversation) !== undefined && { conversation: input.conversation ?? options.conversation }),
      ...(input.newConversation !== undefined && { newConversation: input.newConversation }),
      ...(options.shared_memory !== undefined && { sharedMemory: options.shared_memory }),
      ...(options.merge_tool_calls !== undefined && { mergeToolCalls: options.merge_tool_calls }),
      ...(input.idempotencyKey !== undefined && !input.batch && { idempotencyKey: input.idempotencyKey }),
      stream,
    };
  }

  /**
   * The workers whose adapters can honour every parameter the request asks of its steps (seed is
   * the workflow's own: never a reason to leave a worker out): fugu-ultra runs its workflow on
   * them, as `fugu` routes only among them. None, or too few for the deployment's fixed topology:
   * a 400 naming the parameter.
   */
  function capableOf(d: UltraDeploymentRef, workers: string[], req: ChatRequest): string[] {
    const providerOf = (w: string): ProviderKind => (o.workers.find((x) => x.name === w) ?? ctx.specs.get(w)!).provider;
    const asked = { ...req };
    delete asked.seed;
    const c = capableWorkers(workers, providerOf, asked);
    if (c.capable.length === workers.length) return workers;
    if (c.capable.length === 0) throw c.refusal();
    const why = restrictedPoolProblem(d, c.capable);
    if (why !== undefined) {
      const { param, message } = c.refusal();
      throw badField(param!, `${message.slice(param!.length + 2)}, and the workers that can (${c.capable.join(', ')}) cannot run "${name}"'s Conductor: ${why}`);
    }
    return c.capable;
  }

  const described = (t: TurnResult, byDefault: string | undefined) => ({
    headers: {
      'x-fugu-workflow': String(t.workflowId), 'x-fugu-conversation': t.conversationId, 'x-fugu-worker': t.worker,
      // the stored answer of the same request sent before (Stripe's header): charged then, not now
      ...(t.replayed && { 'idempotent-replayed': 'true' }),
    },
    extension: {
      workflow: t.workflowId,
      conversation: t.conversationId,
      conductor: t.conductor,
      ...(byDefault !== undefined && { conductor_default: byDefault }),
      topology: t.topology,
      status: t.status,
      finish_reason: t.workflowFinish,
      steps: t.steps.map((s) => ({ step: s.step, worker: s.worker, access: s.access, status: s.status, tool_turns: s.toolTurns, finish: s.finish })),
    },
    usageExtra: {
      conductor: { prompt_tokens: t.usage.conductor.inputTokens, completion_tokens: t.usage.conductor.outputTokens, cost: usdNumber(t.usage.conductor.cost) },
      workers: { prompt_tokens: t.usage.workers.inputTokens, completion_tokens: t.usage.workers.outputTokens, cost: usdNumber(t.usage.workers.cost) },
    },
  });
  const totalUsage = (t: TurnResult): Usage => ({ inputTokens: t.usage.conductor.inputTokens + t.usage.workers.inputTokens, outputTokens: t.usage.conductor.outputTokens + t.usage.workers.outputTokens });
  // a stored answer sent again was charged when it was made
  const totalCost = (t: TurnResult): bigint => (t.replayed ? 0n : t.usage.conductor.cost + t.usage.workers.cost);

  return {
    id: name,
    ownedBy: 'fugu',
    visibleTo: (caller) => caller.allowed.some((w) => o.workers.some((x) => x.name === w)),
    batchable: true,
    close: () => cache.close(),

    async complete(input): Promise<Completion> {
      // the request's row names its workflow from the moment it is written (a workflow that fails too)
      const ti = await turnInput(input, false);
      const t = await turn(depsOf(input), ti, (e) => {
        if (e.type === 'progress' && typeof e.progress.workflow === 'number') input.record.workflowId = e.progress.workflow;
      });
      const result: ChatResult = {
        text: t.text,
        content: [...(t.text ? [{ type: 'text' as const, text: t.text }] : []), ...t.toolCalls.map((c) => ({ type: 'tool-call' as const, ...c }))],
        toolCalls: t.toolCalls,
        usage: totalUsage(t),
        finishReason: t.finishReason,
        model: name,
      };
      return { result, worker: t.worker, model: name, cost: totalCost(t), ...described(t, (ti.deployment as ServedDeployment).byDefault) };
    },

    async stream(input): Promise<StreamAnswer> {
      const ti = await turnInput(input, true);
      const ch = new Channel<AnswerEvent>();
      let done: TurnResult | undefined;
      void turn(deps, ti, (e) => ch.push(e.type === 'text-delta' ? { type: 'text-delta', text: e.text } : { type: 'progress', progress: e.progress })).then(
        (t) => {
          done = t;
          input.record.worker = t.worker;
          // a stored answer comes whole (its final step's tokens went to the request that made it)
          if (t.replayed && t.text) ch.push({ type: 'text-delta', text: t.text });
          for (const c of t.toolCalls) ch.push({ type: 'tool-call', toolCall: c as ToolCall });
          ch.push({ type: 'finish', finishReason: t.finishReason, usage: totalUsage(t), model: name });
          ch.end();
        },
        (e: unknown) => ch.fail(e),
      );
      // the first event (the workflow written or resumed) in hand: until then an error is the response's
      const first = await ch.next();
      const p = !first.done && first.value.type === 'progress' ? first.value.progress : {};
      if (typeof p.workflow === 'number') input.record.workflowId = p.workflow;
      // x-fugu-worker: the final step's worker (the one whose tokens stream), known before the first byte
      // (the workflow written: its last step; resumed: final_worker); a stored answer
      // sent again has its turn in hand already
      const steps = Array.isArray(p.steps) ? (p.steps as Array<{ worker?: unknown }>) : [];
      const finalWorker = typeof p.final_worker === 'string' ? p.final_worker : typeof steps.at(-1)?.worker === 'string' ? (steps.at(-1)!.worker as string) : done?.worker;
      return {
        worker: name,
        model: name,
        headers: {
          ...(typeof p.workflow === 'number' && { 'x-fugu-workflow': String(p.workflow) }),
          ...(typeof p.conversation === 'string' && { 'x-fugu-conversation': p.conversation }),
          ...(finalWorker !== undefined && { 'x-fugu-worker': finalWorker }),
        },
        events: ch,
        first,
        cost: async () => (done ? totalCost(done) : 0n),
        extension: () => done && described(done, (ti.deployment as ServedDeployment).byDefault).extension,
        usageExtra: () => done && described(done, undefined).usageExtra,
      };
    },
  };
}

/**
 * The deployment of one model name, reused for `ttlMs` from the start of the read that got it
 * (the key cache's rule, context.ts; 0: a read on every request): requests in that time share one
 * read, and concurrent requests share one read too. Only a deployment this gateway can serve is
 * kept (a 503 is read again at the next request). With `invalidations`, a subscriber hears
 * `fugu ultra publish`'s message on `<prefix>:ultra:published` and the kept deployment is dropped
 * at once (a read already in flight then is not kept either: it may predate the publish); when its
 * connection comes back (messages may have been missed) everything kept is dropped too. Without
 * Redis, a publish is served within ttlMs.
 */
export function deploymentCache(o: {
  name: string;
  ttlMs: number;
  load: () => Promise<UltraDeploymentRef>;
  invalidations: { redisUrl: string; queuePrefix: string } | false;
  log?: { warn(obj: object, msg: string): void };
}): { get(): Promise<UltraDeploymentRef>; forget(): void; close(): Promise<void> } {
  let kept: { ref: UltraDeploymentRef; until: number } | undefined;
  let loading: Promise<UltraDeploymentRef> | undefined;
  // bumped by every invalidation: a read started before one is not kept
  let generation = 0;
  const forget = (): void => {
    generation += 1;
    kept = undefined;
    loading = undefined;
  };

  let sub: RedisClient | undefined;
  if (o.ttlMs > 0 && o.invalidations) {
    const channel = ultraPublishedChannel(o.invalidations.queuePrefix);
    sub = createRedis(o.invalidations.redisUrl, 'worker');
    sub.on('message', (ch: string, text: string) => {
      if (ch !== channel) return;
      let named: string | undefined;
      try {
        named = (JSON.parse(text) as Partial<UltraPublishedMessage>).name;
      } catch {
        // unreadable: dropped all the same
      }
      if (named === undefined || named === o.name) forget();
    });
    // (re)connected: a publish may have gone by while the connection was down
    sub.on('ready', forget);
    sub.subscribe(channel).catch((e: unknown) => sub && o.log?.warn({ channel, err: (e as Error).message }, `fugu-ultra: cannot subscribe to publishes; "${o.name}" is read again every ${o.ttlMs} ms`));
  }

  return {
    get(): Promise<UltraDeploymentRef> {
      if (o.ttlMs === 0) return o.load();
      if (kept && kept.until > performance.now()) return Promise.resolve(kept.ref);
      if (!loading) {
        const at = generation;
        const started = performance.now();
        const p: Promise<UltraDeploymentRef> = o
          .load()
          .then((ref) => {
            if (at === generation) kept = { ref, until: started + o.ttlMs };
            return ref;
          })
          .finally(() => {
            if (loading === p) loading = undefined;
          });
        loading = p;
      }
      return loading;
    },
    forget,
    async close(): Promise<void> {
      sub?.disconnect();
      sub = undefined;
    },
  };
}

/**
 * What fugu-ultra does with each request parameter (docs/parameters.md): a string says how it is
 * honoured, false that it is refused (a 400 naming it). The step-level ones reach every step's
 * call (TurnInput.params), on workers whose adapters honour them (capableOf).
 */
export const ULTRA_PARAMS: Readonly<Record<RequestParam, string | false>> = {
  temperature: "every step (the deployment's temperature is its llm: Conductor's)",
  topP: 'every step',
  maxTokens: "the final step (its answer is the completion); the deployment's maxTokensPerStep bounds every step",
  reasoningEffort: 'every step',
  tools: 'the agents: the client runs their calls',
  toolChoice: 'every step given the tools; "required" or a named tool holds for an agent\'s first call only (then auto, or it could never answer)',
  parallelToolCalls: 'every step given the tools',
  stop: 'every step',
  seed: "the workflow's seed (its Conductor's sampling) and every step's",
  frequencyPenalty: 'every step',
  presencePenalty: 'every step',
  logitBias: 'every step',
  logprobs: false,
  topLogprobs: false,
  responseFormat: 'every step',
  verbosity: 'every step',
  user: 'every step',
  serviceTier: 'every step',
  store: 'every step',
  storeMetadata: 'every step',
  promptCacheKey: 'every step',
};

/** Fields TurnInput carries itself (tools and tool choice go to the agents that are given the tools). */
const TURN_FIELDS = new Set<RequestParam>(['tools', 'toolChoice', 'parallelToolCalls', 'temperature', 'maxTokens']);

/** The request's step-level parameters (TurnInput.params): every one ULTRA_PARAMS sends to the steps that TurnInput does not carry itself. */
export function stepParams(req: ChatRequest): { params?: Partial<ChatRequest> } {
  const params: Record<string, unknown> = {};
  for (const p of ALL_PARAMS) {
    if (ULTRA_PARAMS[p] === false || TURN_FIELDS.has(p) || req[p] === undefined) continue;
    params[p] = req[p];
  }
  return Object.keys(params).length > 0 ? { params: params as Partial<ChatRequest> } : {};
}

/**
 * A restricted pool (the key's workers, narrowed by fugu.workers) must be able to run the
 * deployment's fixed topology (fixed:moa:3 needs three workers, fixed:single:<w> needs w): a 400
 * naming fugu.workers (or the model, when the key's own workers are too few), before anything is
 * stored. llm: Conductors write for any pool, and a policy masks its choices to it.
 */
function checkRestrictedPool(d: UltraDeploymentRef, workers: readonly string[], fromRequest: boolean): void {
  const why = restrictedPoolProblem(d, workers);
  if (why === undefined) return;
  const whose = fromRequest ? 'the workers this request allows' : "this API key's workers";
  const message = `${whose} (${workers.join(', ')}) cannot run "${d.name}"'s Conductor: ${why}`;
  if (fromRequest) throw badField('fugu.workers', message);
  throw new GatewayError(400, message, { param: 'model', code: 'invalid_value' });
}

/** Why these workers cannot run the deployment's fixed topology; undefined when they can (or it is not fixed). */
function restrictedPoolProblem(d: UltraDeploymentRef, workers: readonly string[]): string | undefined {
  let spec;
  try {
    spec = parseConductorSpec(d.conductor);
  } catch {
    return undefined; // a spec that does not parse fails in the writer, as a conductor_error
  }
  if (spec.kind !== 'fixed') return undefined;
  try {
    checkConductorSpec(spec, { workers, maxSteps: d.options.workflow.maxSteps });
    return undefined;
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
    return e.message;
  }
}

/** A turn, its refusals as the gateway's errors. */
async function turn(deps: InteractiveDeps, input: TurnInput, emit?: Parameters<typeof runTurn>[2]): Promise<TurnResult> {
  try {
    return await runTurn(deps, input, emit);
  } catch (e) {
    if (e instanceof UltraRequestError) {
      throw new GatewayError(e.status, e.message, {
        param: e.param, code: e.code, cost: e.cost, ...(e.status >= 500 && { type: 'server_error' }), ...(e.retryAfterS !== undefined && { headers: { 'retry-after': String(e.retryAfterS) } }),
      });
    }
    if (e instanceof InputError) throw new GatewayError(400, e.message, { param: e.field ?? null, code: 'invalid_value' });
    throw e;
  }
}

/** An async iterator fed by a producer: push, end, fail. */
class Channel<T> implements AsyncIterator<T> {
  readonly #items: T[] = [];
  readonly #waiters: Array<{ resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void }> = [];
  #ended = false;
  #error: unknown;
  #failed = false;

  push(item: T): void {
    const w = this.#waiters.shift();
    if (w) w.resolve({ value: item, done: false });
    else this.#items.push(item);
  }

  end(): void {
    this.#ended = true;
    for (const w of this.#waiters.splice(0)) w.resolve({ value: undefined, done: true });
  }

  fail(e: unknown): void {
    this.#failed = true;
    this.#error = e;
    for (const w of this.#waiters.splice(0)) w.reject(e);
  }

  next(): Promise<IteratorResult<T>> {
    if (this.#items.length > 0) return Promise.resolve({ value: this.#items.shift()!, done: false });
    if (this.#failed) return Promise.reject(this.#error);
    if (this.#ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }
}

/**
 * The key that signs fugu-ultra's tool-call ids: FUGU_ULTRA_ID_SECRET (at least 32 characters;
 * every replica of a deployment needs the same), else FUGU_HOME/ultra-id-secret, made once
 * (mode 0600) when missing: replicas sharing FUGU_HOME share it. Never logged, never in a row.
 */
export async function loadUltraIdSecret(home: string, env: Record<string, string | undefined> = process.env): Promise<Buffer> {
  const given = env.FUGU_ULTRA_ID_SECRET?.trim();
  if (given) {
    if (given.length < 32) throw new InputError('FUGU_ULTRA_ID_SECRET must be at least 32 characters (e.g. `openssl rand -hex 32`)', { field: 'FUGU_ULTRA_ID_SECRET' });
    return Buffer.from(given);
  }
  const file = path.join(home, 'ultra-id-secret');
  await mkdir(home, { recursive: true });
  try {
    await writeFile(file, randomBytes(32).toString('hex'), { flag: 'wx', mode: 0o600 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  return Buffer.from((await readFile(file, 'utf8')).trim());
}
