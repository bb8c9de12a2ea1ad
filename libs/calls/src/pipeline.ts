// The call pipeline: every model call fugu makes goes through one of these (one per process).
//
//   request hash -> response cache (hit: the cached answer, cost 0 unless this very call paid for
//   it in an earlier attempt) -> shared rate limits (Redis; RPM and TPM, per provider and per
//   worker; no limit configured: no Redis round trip) -> ChatModel (createChatModel) -> exact
//   cost (tokenCost, bigint picodollars) -> the call row.
//
// `execute` is the core (no row): the evaluation jobs use it and write `calls` + `rewards` through
// the batched CallWriter. `call` and `stream` also write one `chat_calls` row per key (status ok or
// error; the first row of a key wins, so a re-run writes nothing) and rethrow provider errors
// unchanged; `call` writes a fresh answer's cache entry and its row at once (one wait, not two).
import { estimateTokens, formatUsd, type JsonValue, messageText, tokenCost, type ChatModel, type ChatRequest, type ChatResult, type StreamEvent, type TextPart, type ToolCall, type ToolCallPart, type WorkerSpec } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import { getCachedResponse, putCachedResponse, recordChatCall, type ChatCallRecord, type Db } from '@fugu/db';
import { AbortedError, createChatModel, RateLimitError, requestHash, type Env, type ReplayStoreSource } from '@fugu/providers';
import type { RedisClient } from '@fugu/queue';
import { endSpan, inSpan, SpanKind, startSpan, tracingOn, type Attributes, type Logger } from '@fugu/telemetry';
import { RateLimiter, type Bucket, type LimitKind, type LimitScope } from './limits.ts';
import { toWireError } from './wire-error.ts';

/** A worker to call: a pool entry, with its database id when it is stored (`StoredWorker`). */
export type CallWorker = WorkerSpec & { id?: number };

/** Who made a (non-evaluation) call; the `origin` column of `chat_calls`. */
export type CallOrigin = 'chat-call' | 'gateway' | 'conductor' | (string & {});

export type CallPipelineOptions = {
  db: Db;
  /** needed when any rate limit is configured, and for the provider-call counter */
  redis?: RedisClient;
  config: Pick<FuguConfig, 'queuePrefix' | 'rateLimits' | 'workerRateLimits'> & { worker: Pick<FuguConfig['worker'], 'responseCache' | 'callTimeoutMs'> };
  log?: Logger;
  /** where API keys are read, by the variable names the workers give (default process.env) */
  env?: Env;
  /** recorded outcomes for replay workers */
  replayStore?: ReplayStoreSource;
  /** a model of one's own for a worker (tests, the gateway's injected models); undefined: createChatModel */
  models?: (worker: CallWorker) => ChatModel | undefined;
  /** a Redis hash counting every provider call started, by provider (the fault tests read it) */
  callCounterKey?: string;
  /** default time limit of one call (default config.worker.callTimeoutMs) */
  timeoutMs?: number;
  /**
   * writes a `chat_calls` row of `call`/`stream` and resolves once it is committed (default: one
   * insert each, recordChatCall; a worker process passes a WriteBatcher's, many rows a statement)
   */
  recordRow?: (row: ChatCallRecord) => Promise<unknown>;
};

export type ExecuteInput = {
  worker: CallWorker;
  request: ChatRequest;
  /** unique per call: the response cache's paid-by mark (a cached answer is paid by the call that filled it) */
  key: string;
  /** sample index: n repetitions of one request are n cache entries (default 0) */
  sample?: number;
  /** how long to wait for the rate limits before throwing a (transient) RateLimitError; default 0 */
  maxWaitMs?: number;
  /** use the response cache (default config.worker.responseCache; never for replay workers) */
  cache?: boolean;
  /** which attempt this is (1 = first), recorded in the row */
  attempt?: number;
};

export type CallInput = ExecuteInput & {
  origin: CallOrigin;
  /**
   * whether a failed call leaves its row (default: always). A queue job that will be retried
   * passes a test that is false for a retryable error, so its one row is the final outcome.
   */
  recordError?: (e: unknown) => boolean;
  /**
   * write the row after returning (or throwing) instead of before: a caller with someone waiting
   * (the gateway's client) does not hold the answer for a Postgres round trip. The pipeline keeps
   * the write in hand; `flush()` waits for all of them (before a process exits).
   */
  writeBehind?: boolean;
  /**
   * with writeBehind: the row goes to this writer instead (the caller writes it, e.g. in one
   * batch with rows of its own; `flush()` does not wait for it then)
   */
  writeRow?: (row: ChatCallRecord) => void;
};

export type CallOutcome = {
  result: ChatResult;
  /** picodollars: 0 for a cached answer unless this very call paid for it earlier */
  cost: bigint;
  cached: boolean;
  latencyMs: number;
  requestHash: string;
  attempts: number;
};

/** A stream of a call's events (limits already applied); `outcome` resolves once it has ended and its row is written. */
export type CallStream = AsyncIterable<StreamEvent> & { readonly outcome: Promise<CallOutcome>; readonly requestHash: string };

/** The pipeline's own rate limit (no request was sent): a transient rate-limit error naming the limit. */
export class LimitExceededError extends RateLimitError {
  readonly scope: LimitScope;
  readonly limit: LimitKind;
  constructor(worker: CallWorker, bucket: Bucket, waitMs: number) {
    const who = bucket.scope === 'provider' ? `provider ${worker.provider}` : `worker "${worker.name}"`;
    // no HTTP status: no request was sent
    super(worker.provider, `rate limit of ${who} reached (${bucket.perMinute} ${bucket.kind} per minute, shared by every process): retry in ${waitMs} ms`, { retryAfterMs: waitMs, status: undefined });
    this.name = 'LimitExceededError';
    this.scope = bucket.scope;
    this.limit = bucket.kind;
  }

  override wireFields(): Record<string, JsonValue> {
    return { ...super.wireFields(), scope: this.scope, limit: this.limit };
  }
}

/** A provider call's span attributes (OpenTelemetry's GenAI conventions, and fugu's own): never the messages. */
function callSpanAttributes(input: ExecuteInput): Attributes {
  const w = input.worker;
  return { 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': w.provider, 'gen_ai.request.model': w.model, 'fugu.worker': w.name, 'fugu.call.key': input.key };
}

/** What a call's span gets once it has answered: tokens, finish reason, cost, whether the cache answered. */
function outcomeSpanAttributes(o: CallOutcome): Attributes {
  const { usage, finishReason } = o.result;
  return {
    'gen_ai.usage.input_tokens': usage.inputTokens, 'gen_ai.usage.output_tokens': usage.outputTokens, 'gen_ai.response.finish_reasons': [finishReason],
    'fugu.cost_usd': Number(formatUsd(o.cost)), 'fugu.cached': o.cached,
  };
}

/** The tokens a request is charged before it is sent: its text (about 4 characters a token), tools, and the answer's bound. */
export function estimateRequestTokens(worker: CallWorker, request: ChatRequest): number {
  let n = 0;
  for (const m of request.messages) n += estimateTokens(messageText(m));
  if (request.tools) n += estimateTokens(JSON.stringify(request.tools));
  return n + (request.maxTokens ?? worker.settings.maxTokens ?? 256);
}

export type CallPipeline = ReturnType<typeof createCallPipeline>;

export function createCallPipeline(opts: CallPipelineOptions) {
  const { db, config } = opts;
  const env = opts.env ?? process.env;
  const limiter = new RateLimiter(opts.redis, config);
  const models = new Map<string, ChatModel>();
  const timeoutMs = opts.timeoutMs ?? config.worker.callTimeoutMs;

  function modelFor(w: CallWorker): ChatModel {
    const id = w.id !== undefined ? `#${w.id}` : `${w.name}\u0000${w.provider}\u0000${w.model}\u0000${w.baseUrl ?? ''}`;
    let m = models.get(id);
    if (!m) {
      m = opts.models?.(w) ?? createChatModel(w, env, { timeoutMs, ...(opts.replayStore && { replayStore: opts.replayStore }) });
      models.set(id, m);
    }
    return m;
  }

  const useCacheFor = (input: ExecuteInput): boolean => (input.cache ?? config.worker.responseCache) && input.worker.provider !== 'replay';

  /** Waits for the worker's rate limits (up to maxWaitMs), or throws LimitExceededError. */
  async function admit(input: ExecuteInput): Promise<void> {
    const buckets = limiter.bucketsOf(input.worker);
    if (buckets.length === 0) return;
    const tokens = estimateRequestTokens(input.worker, input.request);
    const deadline = Date.now() + (input.maxWaitMs ?? 0);
    for (;;) {
      const d = await limiter.take(buckets, tokens);
      if (!d.bucket) return;
      if (Date.now() + d.wait > deadline) throw new LimitExceededError(input.worker, d.bucket, d.wait);
      await sleep(d.wait, input.request.signal);
    }
  }

  // the calls started in one turn of the event loop are counted with one command: written to
  // Redis before any of them starts (each call waits for it), so even a process killed mid-call
  // has counted it
  let counts: Map<string, number> | undefined;
  let counted: Promise<void> | undefined;
  function countCall(provider: string): Promise<void> | undefined {
    const { callCounterKey: key, redis } = opts;
    if (!key || !redis) return undefined;
    if (!counts) {
      const batch = (counts = new Map());
      counted = new Promise<void>((resolve) =>
        process.nextTick(() => {
          counts = undefined;
          for (const [k, n] of batch) void redis.hincrby(key, k, n).catch(() => {});
          resolve();
        }),
      );
    }
    counts.set(provider, (counts.get(provider) ?? 0) + 1);
    return counted;
  }

  async function cachedOutcome(input: ExecuteInput, hash: string, paidBy: string, started: number): Promise<CallOutcome | undefined> {
    if (!useCacheFor(input)) return undefined;
    const hit = await getCachedResponse(db, hash);
    if (!hit) return undefined;
    const result = hit.response as unknown as ChatResult;
    // a cached answer costs nothing, unless this very call paid for it in an earlier attempt
    // whose row was never written (a crash between the call and the write)
    const cost = hit.paidBy === paidBy ? tokenCost(result.usage.inputTokens, result.usage.outputTokens, input.worker.prices) : 0n;
    return { result, cost, cached: true, latencyMs: Math.round(performance.now() - started), requestHash: hash, attempts: input.attempt ?? 1 };
  }

  async function fillCache(input: ExecuteInput, hash: string, paidBy: string, result: ChatResult): Promise<void> {
    if (!useCacheFor(input)) return;
    await putCachedResponse(db, {
      requestHash: hash, provider: input.worker.provider, model: input.worker.model, response: result as unknown as Record<string, unknown>,
      tokensIn: result.usage.inputTokens, tokensOut: result.usage.outputTokens, paidBy,
    });
  }

  function requestOf(input: ExecuteInput): ChatRequest {
    return input.request.timeoutMs === undefined ? { ...input.request, timeoutMs } : input.request;
  }

  /** The call without a row: cache, limits, provider, cost. Throws the provider's error unchanged. */
  async function execute(input: ExecuteInput, paidBy: string = input.key): Promise<CallOutcome> {
    const { outcome, fill } = await answer(input, paidBy);
    await fill?.();
    return outcome;
  }

  /**
   * execute without its last step: the cache fill of a fresh answer is left to the caller (`fill`).
   * Traced (tracing on): a client span `chat <model>` with the GenAI conventions' attributes.
   */
  function answer(input: ExecuteInput, paidBy: string): Promise<{ outcome: CallOutcome; fill?: () => Promise<void> }> {
    if (!tracingOn()) return answerUntraced(input, paidBy);
    return inSpan(`chat ${input.worker.model}`, { kind: SpanKind.CLIENT, attributes: callSpanAttributes(input) }, async (span) => {
      const a = await answerUntraced(input, paidBy);
      span?.setAttributes(outcomeSpanAttributes(a.outcome));
      return a;
    });
  }

  async function answerUntraced(input: ExecuteInput, paidBy: string): Promise<{ outcome: CallOutcome; fill?: () => Promise<void> }> {
    const started = performance.now();
    const hash = requestHash(input.worker, input.request, input.sample ?? 0);
    const hit = await cachedOutcome(input, hash, paidBy, started);
    if (hit) return { outcome: hit };
    await admit(input);
    await countCall(input.worker.provider);
    const t0 = performance.now();
    const result = await modelFor(input.worker).generate(requestOf(input));
    const latencyMs = Math.round(performance.now() - t0);
    const cost = tokenCost(result.usage.inputTokens, result.usage.outputTokens, input.worker.prices);
    return {
      outcome: { result, cost, cached: false, latencyMs, requestHash: hash, attempts: input.attempt ?? 1 },
      ...(useCacheFor(input) && { fill: () => fillCache(input, hash, paidBy, result) }),
    };
  }

  const okRow = (input: CallInput, o: CallOutcome): ChatCallRecord => ({
    key: input.key, origin: input.origin, workerId: input.worker.id ?? null, worker: input.worker.name, provider: input.worker.provider, model: input.worker.model,
    requestHash: o.requestHash, status: 'ok', response: o.result as unknown as Record<string, unknown>, tokensIn: o.result.usage.inputTokens,
    tokensOut: o.result.usage.outputTokens, cost: formatUsd(o.cost), latencyMs: o.latencyMs, attempts: o.attempts, cached: o.cached, error: null,
  });
  const errorRow = (input: CallInput, hash: string, e: unknown, latencyMs: number): ChatCallRecord => ({
    key: input.key, origin: input.origin, workerId: input.worker.id ?? null, worker: input.worker.name, provider: input.worker.provider, model: input.worker.model,
    requestHash: hash, status: 'error', response: null, tokensIn: 0, tokensOut: 0, cost: '0', latencyMs, attempts: input.attempt ?? 1, cached: false, error: toWireError(e),
  });

  const recordRow = opts.recordRow ?? ((row: ChatCallRecord) => recordChatCall(db, row));

  async function writeOk(input: CallInput, o: CallOutcome): Promise<void> {
    await recordRow(okRow(input, o));
  }

  async function writeError(input: CallInput, hash: string, e: unknown, latencyMs: number): Promise<void> {
    if (input.recordError && !input.recordError(e)) return;
    try {
      await recordRow(errorRow(input, hash, e, latencyMs));
    } catch (we) {
      opts.log?.warn({ key: input.key, err: (we as Error).message }, 'could not record a failed call');
    }
  }

  const paidByOf = (input: CallInput): string => `${input.origin}:${input.key}`;

  // row writes of writeBehind calls still in flight
  const behind = new Set<Promise<void>>();
  async function written(input: CallInput, write: Promise<void>): Promise<void> {
    if (!input.writeBehind) return write;
    const p: Promise<void> = write
      .catch((e: unknown) => opts.log?.error({ key: input.key, err: (e as Error).message }, 'could not write the row of a call'))
      .finally(() => behind.delete(p));
    behind.add(p);
  }

  /**
   * The row of a fresh answer and its cache entry, written at once (one round trip of waiting, not
   * two). The entry is what lets a re-run whose row never got written answer from the cache and pay
   * once; it goes out with the row, not after it, so that holds as before. Once the row is written
   * the call is recorded: a failed fill only loses a later call's cache hit (logged).
   */
  async function writeOkAndFill(input: CallInput, o: CallOutcome, fill: (() => Promise<void>) | undefined): Promise<void> {
    if (!fill) return writeOk(input, o);
    const [filled, row] = await Promise.allSettled([fill(), writeOk(input, o)]);
    if (row.status === 'rejected') throw row.reason;
    if (filled.status === 'rejected') opts.log?.warn({ key: input.key, err: (filled.reason as Error).message }, 'could not cache the answer of a recorded call');
  }

  /** One call with its `chat_calls` row (also when it fails: status error); rethrows errors unchanged. */
  async function call(input: CallInput): Promise<CallOutcome> {
    const started = performance.now();
    let outcome: CallOutcome;
    let fill: (() => Promise<void>) | undefined;
    try {
      ({ outcome, fill } = await answer(input, paidByOf(input)));
      // write-behind (someone waits for the answer): the answer is cached before it is returned,
      // the row follows
      if (input.writeBehind) await fill?.();
    } catch (e) {
      const hash = requestHash(input.worker, input.request, input.sample ?? 0);
      const ms = Math.round(performance.now() - started);
      if (input.writeBehind && input.writeRow) {
        if (!input.recordError || input.recordError(e)) input.writeRow(errorRow(input, hash, e, ms));
      } else await written(input, writeError(input, hash, e, ms));
      throw e;
    }
    if (input.writeBehind && input.writeRow) input.writeRow(okRow(input, outcome));
    else await written(input, input.writeBehind ? writeOk(input, outcome) : writeOkAndFill(input, outcome, fill));
    return outcome;
  }

  /**
   * A streamed call. Resolves once the rate limits let it go (or rejects with LimitExceededError
   * past maxWaitMs); the provider's own errors come from the first `next()`. The row is written
   * when the stream ends, fails, or its consumer stops early (an AbortedError row).
   */
  async function stream(input: CallInput): Promise<CallStream> {
    const started = performance.now();
    const hash = requestHash(input.worker, input.request, input.sample ?? 0);
    const paidBy = paidByOf(input);
    let settle!: { resolve: (o: CallOutcome) => void; reject: (e: unknown) => void };
    const outcome = new Promise<CallOutcome>((resolve, reject) => (settle = { resolve, reject }));
    // traced (tracing on): the call's span ends with the stream (its outcome)
    const span = tracingOn() ? startSpan(`chat ${input.worker.model}`, { kind: SpanKind.CLIENT, attributes: { ...callSpanAttributes(input), 'fugu.stream': true } }) : undefined;
    outcome.then(
      (o) => {
        if (span) endSpan(span.setAttributes(outcomeSpanAttributes(o)));
      },
      (e: unknown) => {
        if (span) endSpan(span, e);
      },
    );

    let hit: CallOutcome | undefined;
    try {
      hit = await cachedOutcome(input, hash, paidBy, started);
      if (!hit) await admit(input);
    } catch (e) {
      await writeError(input, hash, e, Math.round(performance.now() - started));
      settle.reject(e);
      throw e;
    }

    if (hit) {
      const cached = hit;
      const events = async function* (): AsyncGenerator<StreamEvent> {
        if (cached.result.text) yield { type: 'text-delta', text: cached.result.text };
        for (const tc of cached.result.toolCalls) yield { type: 'tool-call', toolCall: tc };
        yield { type: 'finish', finishReason: cached.result.finishReason, usage: cached.result.usage, model: cached.result.model };
        await writeOk(input, cached);
        settle.resolve(cached);
      };
      return Object.assign(events(), { outcome, requestHash: hash });
    }

    await countCall(input.worker.provider);
    const model = modelFor(input.worker);
    const events = async function* (): AsyncGenerator<StreamEvent> {
      const t0 = performance.now();
      let text = '';
      const toolCalls: ToolCall[] = [];
      let finish: Extract<StreamEvent, { type: 'finish' }> | undefined;
      let ended = false;
      try {
        for await (const ev of model.stream(requestOf(input))) {
          if (ev.type === 'text-delta') text += ev.text;
          else if (ev.type === 'tool-call') toolCalls.push(ev.toolCall);
          else finish = ev;
          yield ev;
        }
        ended = true;
      } catch (e) {
        ended = true;
        await writeError(input, hash, e, Math.round(performance.now() - t0));
        settle.reject(e);
        throw e;
      } finally {
        if (!ended) {
          // the consumer stopped before the end (a client went away)
          const e = new AbortedError(input.worker.provider, 'the stream was closed by its consumer before it ended');
          await writeError(input, hash, e, Math.round(performance.now() - t0));
          settle.reject(e);
        }
      }
      const latencyMs = Math.round(performance.now() - t0);
      const usage = finish?.usage ?? { inputTokens: 0, outputTokens: 0 };
      const content: Array<TextPart | ToolCallPart> = [
        ...(text ? [{ type: 'text' as const, text }] : []),
        ...toolCalls.map((tc) => ({ type: 'tool-call' as const, id: tc.id, name: tc.name, arguments: tc.arguments })),
      ];
      const result: ChatResult = { text, content, toolCalls, usage, finishReason: finish?.finishReason ?? 'other', model: finish?.model ?? input.worker.model };
      const o: CallOutcome = { result, cost: tokenCost(usage.inputTokens, usage.outputTokens, input.worker.prices), cached: false, latencyMs, requestHash: hash, attempts: input.attempt ?? 1 };
      try {
        await fillCache(input, hash, paidBy, result);
        await writeOk(input, o);
      } catch (e) {
        settle.reject(e);
        throw e;
      }
      settle.resolve(o);
    };
    return Object.assign(events(), { outcome, requestHash: hash });
  }

  return {
    execute,
    call,
    stream,
    /** waits until the rows of every writeBehind call made so far are written */
    flush: async (): Promise<void> => {
      while (behind.size > 0) await Promise.all([...behind]);
    },
    /** the shared limiter (e.g. to ask which buckets a worker has) */
    limiter,
    /** the ChatModel a worker's calls go to (made once per worker) */
    modelFor,
    /** whether a call of this worker is charged to any rate limit (none: no Redis round trip) */
    isLimited: (w: CallWorker): boolean => limiter.bucketsOf(w).length > 0,
  };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
