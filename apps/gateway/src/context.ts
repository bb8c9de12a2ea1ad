// What the gateway's plugins share: configuration, the pool, metrics, the caller of a request,
// its record (what the access log and the `requests` row say), the router and the one seam
// through which every provider call goes (`ProviderCalls`).
import { performance } from 'node:perf_hooks';
import type { FastifyRequest } from 'fastify';
import { InputError, tokenCost, type ChatMessage, type Usage, type WorkerPool, type WorkerSpec } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import { findApiKey, hashApiKey, type ApiKeyRecord, type ChatCallRecord, newRequestRowId, type Db, type NewRequestRow, type RequestProb } from '@fugu/db';
import type { CallPipeline } from '@fugu/calls';
import type { ChatModel, ChatRequest, ChatResult, StreamEvent } from '@fugu/providers';
import { RouterUnavailableError, type RouteClient, type RouteDecision } from '@fugu/serving';
import { Counter, Histogram, type Logger, type Registry } from '@fugu/telemetry';
import { GatewayError } from './errors.ts';
import { checkRouterWorkers } from './workers.ts';
import { RecordWriter } from './record-writer.ts';
import type { Cooldowns } from './cooldown.ts';
import { localHolds, type WorkflowHolds } from '@fugu/ultra';

/** Who is calling: their key (null with auth none) and the workers they may use, in pool order. */
export type Caller = { key: ApiKeyRecord | null; allowed: string[] };

/** A routing outcome: the decision (absent: the no-router fallback worker), the workers to try in order. */
/** `cooled`: the workers the routing moved last because they are cooled down (cooldown.ts) */
/** `byDefault`: routed by the pool's default (no router trained on the pool is published): why */
export type Routed = { decision?: RouteDecision; candidates: string[]; routingMs: number; cooled?: string[]; byDefault?: string };

/**
 * Model `fugu` on a pool no published router was trained on: every request goes to the pool's
 * default worker (its `default_worker`, else its first), the rest of the pool in order as the
 * fallbacks; `reason` says why, in the answer's `fugu` object.
 */
export type DefaultRouting = { worker: string; reason: string };

/** What one request did, filled as it goes; the access log line and the `requests` row are written from it. */
export type RequestRecord = {
  /** the `requests` row id (server-made, unique); provider calls are keyed `<id>.<attempt>` */
  id: string;
  /** the x-request-id echoed to the client */
  requestId: string;
  /** set once the caller is known (rows are written for authenticated requests only) */
  authenticated: boolean;
  keyId: string | null;
  /** the model asked for */
  model?: string;
  /** the worker that answered (or the last one tried) */
  worker?: string;
  stream: boolean;
  topProbs?: RequestProb[];
  /** workers that failed, in order, before the one that answered */
  fallbacks: string[];
  tokensIn: number;
  tokensOut: number;
  /** picodollars */
  cost: bigint;
  routingMs?: number;
  providerMs?: number;
  errorCode?: string;
  /** fugu-ultra: the workflow this request ran or continued */
  workflowId?: number;
  /** the end user the request names (chat `user` / `safety_identifier`, Anthropic `metadata.user_id`): the row's end_user */
  endUser?: string;
  /** the hints and metadata the request sent other than the end user (Responses `client_metadata`, `metadata`, ...; hintsOf): the row's hints */
  hints?: Record<string, unknown>;
  /** the client session the request belongs to (sessions.ts): the row's session */
  session?: string;
  /** the names of the tool calls the answer gave the client, in order (ModelRegistry notes them): the row's tool_calls */
  toolCalls?: string[];
  /** only with gateway.logMessages (debug): the request's messages, for the access log */
  messages?: ChatMessage[];
  /** when the request came in (performance.now()) and its route (recorded routes get a row) */
  startedAt: number;
  route?: string;
  /** its row is in the record journal (sealed before the answer's last byte) */
  sealed?: boolean;
  /**
   * the client went away before its answer was complete: the row waits for the handler's end (what
   * its calls cost is charged then) and says so (status 499, `client_closed`)
   */
  clientClosed?: boolean;
};

/** Which call of a request this is: `key` is unique per provider call (the request's row id + attempt). */
export type CallMeta = { key: string; attempt: number };

/** A stream whose events come from the provider; `cost` resolves the exact cost once it has ended. */
export type ProviderStream = { events: AsyncIterator<StreamEvent>; cost(usage: Usage): Promise<bigint> };

/**
 * The seam every provider call of the gateway goes through (fallbacks and streams included):
 * the call pipeline (libs/calls: shared rate limits, response cache, exact cost, one chat_calls
 * row per call) when the gateway has a database, else straight to each worker's ChatModel.
 * Provider errors are thrown unchanged (a transient one moves the request to the next worker).
 */
export interface ProviderCalls {
  generate(worker: WorkerSpec, req: ChatRequest, call: CallMeta): Promise<{ result: ChatResult; cost: bigint }>;
  /** resolves once the call may go (rate limits); the provider's errors come from the first next() */
  stream(worker: WorkerSpec, req: ChatRequest, call: CallMeta): Promise<ProviderStream>;
  /** waits for what is still being written (the gateway's close calls it) */
  close?(): Promise<void>;
}

/** Provider calls straight to the workers' ChatModels (no row, no limit, no cache). */
export function directCalls(models: Map<string, ChatModel>): ProviderCalls {
  const model = (w: WorkerSpec): ChatModel => {
    const m = models.get(w.name);
    if (!m) throw new Error(`no ChatModel for worker "${w.name}"`);
    return m;
  };
  const cost = (w: WorkerSpec, u: Usage): bigint => tokenCost(u.inputTokens, u.outputTokens, w.prices);
  return {
    generate: async (w, req) => {
      const result = await model(w).generate(req);
      return { result, cost: cost(w, result.usage) };
    },
    stream: async (w, req) => ({ events: model(w).stream(req)[Symbol.asyncIterator](), cost: async (u) => cost(w, u) }),
  };
}

/**
 * Provider calls through the call pipeline, origin `gateway`: a call waits up to `maxWaitMs`
 * for the shared rate limits, then fails with a transient LimitExceededError (no request sent).
 * A JSON call's `chat_calls` row is written behind the answer (writeBehind: without the client
 * waiting for the insert): by `writer` when given (the gateway's RecordWriter, in one batch with
 * the request rows), else by the pipeline (`close()` waits for the rows still being written); a
 * stream's row is the pipeline's, written as the stream ends.
 */
export function pipelineCalls(pipeline: CallPipeline, opts: { maxWaitMs: number; cache: boolean; writer?: RecordWriter }): ProviderCalls & { close(): Promise<void> } {
  const writer = opts.writer;
  const writeRow = writer && ((row: ChatCallRecord) => writer.call(row));
  const input = (worker: WorkerSpec, request: ChatRequest, call: CallMeta) => ({
    worker, request, origin: 'gateway' as const, key: call.key, attempt: call.attempt, maxWaitMs: opts.maxWaitMs, cache: opts.cache, writeBehind: true,
    ...(writeRow && { writeRow }),
  });
  return {
    generate: async (w, req, call) => {
      const o = await pipeline.call(input(w, req, call));
      return { result: o.result, cost: o.cost };
    },
    stream: async (w, req, call) => {
      const s = await pipeline.stream(input(w, req, call));
      return { events: s[Symbol.asyncIterator](), cost: async () => (await s.outcome).cost };
    },
    close: () => pipeline.flush(),
  };
}

export type GatewayMetrics = {
  requests: Counter;
  latency: Histogram;
  routing: Histogram;
  fallbacks: Counter;
};

export type GatewayContext = {
  config: FuguConfig;
  g: FuguConfig['gateway'];
  log: Logger;
  pool: WorkerPool;
  specs: Map<string, WorkerSpec>;
  poolNames: string[];
  routeClient: RouteClient;
  db: Db | undefined;
  calls: ProviderCalls;
  metrics: GatewayMetrics;
  registry: Registry;
  /** the request's record (made on its first use) */
  record(req: FastifyRequest): RequestRecord;
  /** the caller, checked once per request (401/403 otherwise) */
  authenticate(req: FastifyRequest): Promise<Caller>;
  /** the caller that authenticate found */
  callerOf(req: FastifyRequest): Caller;
  /** what is written behind the answers: `requests` rows and the keys' spend (with a database) */
  writer: RecordWriter | undefined;
  /** 429 when the key is at its spend limit */
  checkQuota(caller: Caller): void;
  /**
   * adds what the request cost to its record (its row's cost) and to the key's spend: at once in
   * this process (its next quota check sees it), in the key's row when the request's row is
   * written (the writer's next batch)
   */
  charge(caller: Caller, rec: RequestRecord, cost: bigint): void;
  /**
   * the request's row into the record journal, before its answer's last byte (record-writer.ts):
   * a JSON answer is sealed as it is sent (records plugin), a stream before its final chunks
   */
  seal(rec: RequestRecord, status: number): Promise<void>;
  /** routes a text among `allowed` (pool names) with the cost preference `lambda` */
  route(text: string, allowed: string[], lambda: number | undefined): Promise<Routed>;
  /** set when model `fugu` routes by the pool's default (no router for this pool) */
  defaultRouting?: DefaultRouting;
  /** workers cooled down for routing after repeated failures, shared by the gateways (with Redis) */
  cooldowns?: Cooldowns;
  /** fugu-ultra's holds on its workflows: shared by the gateways with Redis, else this process's own */
  holds: WorkflowHolds;
};

export function newRecord(requestId: string): RequestRecord {
  return { id: newRequestRowId(), requestId, authenticated: false, keyId: null, stream: false, fallbacks: [], tokensIn: 0, tokensOut: 0, cost: 0n, startedAt: performance.now() };
}

export function createContext(opts: {
  config: FuguConfig;
  pool: WorkerPool;
  routeClient: RouteClient;
  routerWorkers?: readonly string[];
  defaultRouting?: DefaultRouting;
  db?: Db;
  /** what is written behind the answers (default: one of its own, with a database) */
  writer?: RecordWriter;
  calls: ProviderCalls;
  log: Logger;
  registry: Registry;
  cooldowns?: Cooldowns;
  /** default: this process's own (localHolds) */
  holds?: WorkflowHolds;
}): GatewayContext {
  const g = opts.config.gateway;
  const { log, pool, registry } = opts;
  const specs = new Map(pool.workers.map((w) => [w.name, w]));
  const poolNames = pool.workers.map((w) => w.name);
  const routerWorkers = opts.routerWorkers ? [...opts.routerWorkers] : undefined;
  if (routerWorkers) checkRouterWorkers('(deployed)', routerWorkers, pool);
  const records = new WeakMap<FastifyRequest, RequestRecord>();
  const callers = new WeakMap<FastifyRequest, Caller>();
  const writer = opts.writer ?? (opts.db ? new RecordWriter(opts.db, log) : undefined);
  const keys = keyCache(opts.db, writer, g.keyCacheMs);

  const metrics = gatewayMetrics(registry);

  function record(req: FastifyRequest): RequestRecord {
    let r = records.get(req);
    if (!r) records.set(req, (r = newRecord(String(req.id))));
    return r;
  }

  async function authenticate(req: FastifyRequest): Promise<Caller> {
    const known = callers.get(req);
    if (known) return known;
    const caller = await findCaller(req);
    callers.set(req, caller);
    const rec = record(req);
    rec.authenticated = true;
    rec.keyId = caller.key?.id ?? null;
    return caller;
  }

  async function findCaller(req: FastifyRequest): Promise<Caller> {
    if (g.auth === 'none') return { key: null, allowed: poolNames };
    // the key as OpenAI's clients send it (Authorization: Bearer), or as Anthropic's do (x-api-key)
    const h = req.headers.authorization;
    const x = req.headers['x-api-key'];
    const secret = (typeof h === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(h)?.[1] : undefined) ?? (typeof x === 'string' && x.trim() !== '' ? x.trim() : undefined);
    if (secret === undefined) {
      throw new GatewayError(401, 'missing API key: send "Authorization: Bearer fugu-sk-..." or "x-api-key: fugu-sk-..." (create one with `fugu keys create --name NAME`)', { code: 'missing_api_key' });
    }
    const key = await keys.find(secret);
    if (!key) throw new GatewayError(401, 'invalid API key (check the key, or create one with `fugu keys create --name NAME`)', { code: 'invalid_api_key' });
    if (key.revokedAt) throw new GatewayError(401, `the API key "${key.name}" was revoked on ${key.revokedAt.toISOString()}`, { code: 'invalid_api_key' });
    const allowed = key.allowedWorkers ? poolNames.filter((w) => key.allowedWorkers!.includes(w)) : poolNames;
    if (allowed.length === 0) {
      throw new GatewayError(403, `the API key "${key.name}" allows workers [${key.allowedWorkers!.join(', ')}], none of which is in this gateway's pool (${poolNames.join(', ')})`, {
        code: 'no_allowed_workers',
      });
    }
    return { key, allowed };
  }

  function callerOf(req: FastifyRequest): Caller {
    const c = callers.get(req);
    if (!c) throw new Error(`no caller for ${req.method} ${req.url}: the route is outside the auth plugin's scope`);
    return c;
  }

  function checkQuota(caller: Caller): void {
    const k = caller.key;
    if (k && k.spendLimit !== null && k.spent >= k.spendLimit) {
      throw new GatewayError(429, `the API key "${k.name}" reached its spend limit ($${usd(k.spent)} spent of $${usd(k.spendLimit)})`, { type: 'insufficient_quota', code: 'insufficient_quota' });
    }
  }

  function charge(caller: Caller, rec: RequestRecord, cost: bigint): void {
    rec.cost += cost;
    if (!caller.key || cost === 0n || !writer) return;
    keys.spent(caller.key, cost);
    writer.charge(caller.key.id, cost);
  }

  async function seal(rec: RequestRecord, status: number): Promise<void> {
    if (!writer || rec.sealed || !rec.authenticated || rec.route === undefined || !RECORDED_ROUTES.has(rec.route)) return;
    rec.sealed = true;
    if (rec.clientClosed) rec.errorCode ??= 'client_closed';
    await writer.seal(requestRow(rec, rec.clientClosed ? CLIENT_CLOSED : status, performance.now() - rec.startedAt));
  }

  const route = routing({ g, log, pool, poolNames, specs, routeClient: opts.routeClient, routing: metrics.routing, ...(routerWorkers && { routerWorkers }), ...(opts.defaultRouting && { defaultRouting: opts.defaultRouting }) });

  return {
    config: opts.config,
    g,
    log,
    pool,
    specs,
    poolNames,
    routeClient: opts.routeClient,
    db: opts.db,
    calls: opts.calls,
    metrics,
    registry,
    writer,
    record,
    authenticate,
    callerOf,
    checkQuota,
    charge,
    seal,
    route,
    ...(opts.defaultRouting && { defaultRouting: opts.defaultRouting }),
    ...(opts.cooldowns && { cooldowns: opts.cooldowns }),
    holds: opts.holds ?? localHolds(),
  };
}

/** The gateway's Prometheus metrics, registered in `registry`. */
function gatewayMetrics(registry: Registry): GatewayMetrics {
  return {
    requests: new Counter({ name: 'fugu_gateway_requests_total', help: 'requests by route, status and answering worker', labelNames: ['route', 'status', 'worker'], registers: [registry] }),
    latency: new Histogram({
      name: 'fugu_gateway_request_duration_seconds',
      help: 'request latency (streams: until the last byte)',
      labelNames: ['route'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers: [registry],
    }),
    routing: new Histogram({
      name: 'fugu_gateway_routing_ms',
      help: 'time of one routing decision as the gateway sees it (queue hop included in pool mode)',
      buckets: [0.5, 1, 2, 5, 10, 20, 50, 100, 250, 1000, 5000],
      registers: [registry],
    }),
    fallbacks: new Counter({ name: 'fugu_gateway_fallbacks_total', help: 'provider failures that moved a request to the next-best worker', labelNames: ['worker'], registers: [registry] }),
  };
}

/**
 * Model `fugu`'s routing decisions for one gateway: the router's (its worker list learnt from its
 * decisions and checked against the pool), the fallback worker when the router is unavailable,
 * or the pool's default (DefaultRouting). The rest of the context does not see its state.
 */
function routing(o: {
  g: FuguConfig['gateway'];
  log: Logger;
  pool: WorkerPool;
  poolNames: readonly string[];
  specs: ReadonlyMap<string, WorkerSpec>;
  routeClient: RouteClient;
  routing: Histogram;
  routerWorkers?: readonly string[];
  defaultRouting?: DefaultRouting;
}): GatewayContext['route'] {
  const { g, log, pool, poolNames, specs } = o;
  let routerWorkers = o.routerWorkers ? [...o.routerWorkers] : undefined;
  /** The router's workers among `allowed`; undefined: all of them (no restriction to send). */
  function allowedFor(allowed: string[], known: readonly string[]): string[] | undefined {
    const inRouter = allowed.filter((w) => known.includes(w));
    if (inRouter.length === 0) {
      throw new GatewayError(403, `none of the workers this request may use (${allowed.join(', ')}) is among the router's workers (${known.join(', ')}); call a worker by name instead`, {
        param: 'model',
        code: 'no_allowed_workers',
      });
    }
    return inRouter.length === known.length ? undefined : inRouter;
  }

  function learn(d: RouteDecision): void {
    if (!routerWorkers || routerWorkers.join('\n') !== d.workers.join('\n')) {
      try {
        checkRouterWorkers(d.checkpointId, d.workers, pool);
      } catch (e) {
        log.error({ checkpoint: d.checkpointId }, (e as Error).message);
        throw new GatewayError(503, `the router is misconfigured: ${(e as Error).message}`, { code: 'router_unavailable' });
      }
      routerWorkers = [...d.workers];
    }
  }

  async function route(text: string, allowed: string[], lambda: number | undefined): Promise<Routed> {
    const byDefault = o.defaultRouting;
    if (byDefault) {
      // the default worker first (when the caller may use it), then the others in pool order
      const order = [byDefault.worker, ...poolNames.filter((w) => w !== byDefault.worker)].filter((w) => allowed.includes(w));
      return { candidates: order, routingMs: 0, byDefault: byDefault.reason };
    }
    const restricted = allowed.length !== poolNames.length;
    const ask = (only: string[] | undefined) => o.routeClient.route({ text, ...(only && { allowed: only }), ...(lambda !== undefined && { lambda }) });
    const t0 = performance.now();
    let decision: RouteDecision | undefined;
    try {
      // the router's worker list is learnt from its decisions (and given at start): an allowed
      // set must name only the checkpoint's workers
      if (!routerWorkers) {
        const d = await ask(undefined);
        learn(d);
        if (!restricted) decision = d;
      }
      if (!decision) {
        try {
          decision = await ask(allowedFor(allowed, routerWorkers!));
        } catch (e) {
          // a newly published checkpoint with other workers: learn them, then ask again once
          if (!(e instanceof InputError && e.field === 'allowed')) throw e;
          learn(await ask(undefined));
          decision = await ask(allowedFor(allowed, routerWorkers!));
        }
      }
    } catch (e) {
      if (isRouterUnavailable(e)) {
        const fb = g.fallbackWorker;
        if (fb !== undefined && allowed.includes(fb)) {
          log.warn({ worker: fb, err: (e as Error).message }, 'no router available: using the fallback worker');
          return { candidates: [fb], routingMs: performance.now() - t0 };
        }
        throw new GatewayError(503, `the router is unavailable: ${(e as Error).message}`, { code: 'router_unavailable' });
      }
      if (e instanceof InputError) throw new GatewayError(400, e.message, { param: e.field ?? null, code: 'invalid_value' });
      throw e;
    }
    const routingMs = performance.now() - t0;
    o.routing.observe(routingMs);
    learn(decision);
    const chosen = decision;
    const next = chosen.workers
      .map((w, i) => ({ w, p: chosen.probs[i] ?? 0 }))
      .filter(({ w }) => w !== chosen.worker && allowed.includes(w) && specs.has(w))
      .sort((a, b) => b.p - a.p)
      .map(({ w }) => w);
    return { decision: chosen, candidates: [chosen.worker, ...next], routingMs };
  }

  return route;
}

/** Routes whose authenticated requests get a `requests` row. */
export const RECORDED_ROUTES = new Set(['/v1/chat/completions', '/v1/responses', '/v1/messages', '/v1/rewards']);

/** A request's `requests` row as its record stands. */
/** The status of a request whose client went away before its answer (nginx's 499). */
export const CLIENT_CLOSED = 499;

export function requestRow(rec: RequestRecord, status: number, totalMs: number): NewRequestRow {
  return {
    id: rec.id,
    requestId: rec.requestId,
    apiKeyId: rec.keyId,
    route: rec.route!,
    model: rec.model ?? null,
    worker: rec.worker ?? null,
    stream: rec.stream,
    topProbs: rec.topProbs ?? null,
    fallbacks: rec.fallbacks,
    tokensIn: rec.tokensIn,
    tokensOut: rec.tokensOut,
    cost: rec.cost,
    routingMs: rec.routingMs ?? null,
    providerMs: rec.providerMs ?? null,
    totalMs,
    status,
    errorCode: rec.errorCode ?? null,
    workflowId: rec.workflowId ?? null,
    endUser: rec.endUser ?? null,
    hints: rec.hints ?? null,
    session: rec.session ?? null,
    toolCalls: rec.toolCalls && rec.toolCalls.length > 0 ? rec.toolCalls : null,
  };
}

/**
 * API keys by their hash, each record reused for `ttlMs` from the start of the lookup that read
 * it (0: read on every request): a revocation, a new worker list or limit reaches this gateway
 * within ttlMs. Concurrent lookups of one key share one query; unknown keys are not kept. The
 * spend of a kept record is the row's plus what this process has charged since (queued or being
 * written included), so this gateway's quota checks see its own charges at once; other gateways'
 * charges within ttlMs.
 */
function keyCache(db: Db | undefined, writer: RecordWriter | undefined, ttlMs: number) {
  const kept = new Map<string, { record: ApiKeyRecord; until: number }>();
  const loading = new Map<string, Promise<ApiKeyRecord | undefined>>();
  /** the kept record of each key id (the one charges update) */
  const byId = new Map<string, ApiKeyRecord>();
  const MAX_KEPT = 10_000;

  async function load(secret: string, hash: string): Promise<ApiKeyRecord | undefined> {
    const started = performance.now();
    const record = await findApiKey(db!, secret);
    if (!record) {
      kept.delete(hash);
      return undefined;
    }
    record.spent += writer?.unwritten(record.id) ?? 0n;
    if (ttlMs === 0) return record;
    if (kept.size >= MAX_KEPT) {
      const now = performance.now();
      for (const [h, e] of kept) if (e.until <= now) kept.delete(h);
      if (kept.size >= MAX_KEPT) kept.clear();
    }
    kept.set(hash, { record, until: started + ttlMs });
    byId.set(record.id, record);
    return record;
  }

  return {
    find(secret: string): Promise<ApiKeyRecord | undefined> {
      if (ttlMs === 0) return load(secret, '');
      const hash = hashApiKey(secret);
      const hit = kept.get(hash);
      if (hit && hit.until > performance.now()) return Promise.resolve(hit.record);
      let p = loading.get(hash);
      if (!p) {
        p = load(secret, hash).finally(() => loading.delete(hash));
        loading.set(hash, p);
      }
      return p;
    },
    /** a charge of this process: the kept record of the key (and the caller's, when older) */
    spent(key: ApiKeyRecord, cost: bigint): void {
      key.spent += cost;
      const current = byId.get(key.id);
      if (current && current !== key) current.spent += cost;
    },
  };
}

export function usd(pico: bigint): string {
  return (Number(pico) / 1e12).toFixed(6).replace(/0+$/, '').replace(/\.$/, '');
}

function isRouterUnavailable(e: unknown): boolean {
  // by name too: a decision that came through a queue or a thread is rebuilt, not the same class
  return e instanceof RouterUnavailableError || (e instanceof Error && e.name === 'RouterUnavailableError');
}
