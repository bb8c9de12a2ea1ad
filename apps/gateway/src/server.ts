// The OpenAI-compatible gateway as a Fastify instance (buildGateway), testable without a process:
//
//   POST /v1/chat/completions  model "fugu": the router picks a worker among the key's allowed
//                              ones (scoring the whole conversation, routingText); a worker's name
//                              calls it directly. JSON or SSE; tools pass through unchanged.
//   GET  /v1/models            fugu + the key's workers
//   POST /v1/route             the decision and probabilities, without calling a worker
//   /admin/queues              Bull Board over every queue, behind the admin key
//   /healthz /readyz /metrics
//
// Provider failures: a retryable error (429, 5xx, timeout, connection) falls back to the
// next-best allowed worker by the router's probabilities (streaming: only before the first byte
// went out); a provider's 400 is a 400 with its message. Errors use OpenAI's error format.
import { timingSafeEqual } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import { InputError, tokenCost, type Usage, type WorkerPool } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import { addApiKeySpend, findApiKey, type ApiKeyRecord, type Db } from '@fugu/db';
import { isProviderError, type ChatModel, type ChatRequest, type ChatResult, type Env, type ReplayStoreSource } from '@fugu/providers';
import { allQueueNames } from '@fugu/queue';
import { RouterUnavailableError, routingText, type RouteClient, type RouteDecision } from '@fugu/serving';
import { Counter, Histogram, Registry, createLogger, scrub, type Logger } from '@fugu/telemetry';
import { GatewayError, invalidJson, unknownModel } from './errors.ts';
import { ChunkWriter, chatRequestSchema, completionBody, parseBody, routeRequestSchema, toChatMessages, toChatRequest } from './wire.ts';
import { checkRouterWorkers, createWorkerModels } from './workers.ts';

export const ROUTER_MODEL = 'fugu';

export type GatewayOptions = {
  config: FuguConfig;
  pool: WorkerPool;
  routeClient: RouteClient;
  /** the deployed checkpoint's workers when known at start (see main.ts); kept up to date from decisions */
  routerWorkers?: readonly string[];
  /** API keys (required when gateway.auth is `keys`) */
  db?: Db;
  /** provider API keys are read from here (default process.env) */
  env?: Env;
  /** recorded outcomes for the pool's replay workers */
  replayStore?: ReplayStoreSource;
  /** models by worker name; default: createChatModel for each worker */
  models?: Map<string, ChatModel>;
  /** Bull Board's connection; with adminKey, the dashboard is served at /admin/queues */
  redis?: Redis;
  /** FUGU_ADMIN_KEY: Bull Board's password (HTTP Basic) or bearer token; unset: no dashboard */
  adminKey?: string;
  log?: Logger;
  registry?: Registry;
};

/** Who is calling: their key (null with auth none) and the workers they may use, in pool order. */
type Caller = { key: ApiKeyRecord | null; allowed: string[] };

type Routed = { decision?: RouteDecision; candidates: string[]; routingMs: number };

export async function buildGateway(opts: GatewayOptions): Promise<FastifyInstance> {
  const g = opts.config.gateway;
  const log = opts.log ?? createLogger({ name: 'gateway', level: opts.config.logLevel });
  const registry = opts.registry ?? new Registry();
  if (g.auth === 'keys' && !opts.db) throw new Error('buildGateway: gateway.auth is "keys" but no database was given');
  const specs = new Map(opts.pool.workers.map((w) => [w.name, w]));
  const poolNames = opts.pool.workers.map((w) => w.name);
  const models = opts.models ?? createWorkerModels(opts.pool, opts.env ?? process.env, { replayStore: opts.replayStore, timeoutMs: g.callTimeoutMs });
  if (g.fallbackWorker !== undefined && !specs.has(g.fallbackWorker)) {
    throw new InputError(`gateway.fallbackWorker "${g.fallbackWorker}" is not in the pool "${opts.pool.name}" (workers: ${poolNames.join(', ')})`, { field: 'FUGU_GATEWAY_FALLBACK_WORKER' });
  }
  let routerWorkers = opts.routerWorkers ? [...opts.routerWorkers] : undefined;
  if (routerWorkers) checkRouterWorkers('(deployed)', routerWorkers, opts.pool);

  const metrics = {
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

  const app = Fastify({ logger: false, bodyLimit: g.bodyLimitBytes, return503OnClosing: true });

  // ---- errors and metrics -------------------------------------------------------------------
  app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, req, reply) => {
    const e = toGatewayError(err);
    if (e.status >= 500) log.error({ route: req.url, status: e.status, err: scrub(err.message) }, 'request failed');
    void reply.code(e.status).headers(e.headers).send(e.body());
  });
  app.setNotFoundHandler((req, reply) => {
    void reply.code(404).send(new GatewayError(404, `no such endpoint: ${req.method} ${req.url.split('?')[0]}`, { code: 'unknown_url' }).body());
  });
  app.addHook('onRequest', async (req, reply) => {
    const t0 = performance.now();
    reply.raw.once('close', () => {
      const route = req.routeOptions.url ?? 'unmatched';
      const worker = reply.raw.getHeader('x-fugu-worker');
      metrics.requests.inc({ route, status: String(reply.raw.statusCode), worker: typeof worker === 'string' ? worker : '' });
      metrics.latency.observe({ route }, (performance.now() - t0) / 1000);
    });
  });

  // ---- auth ---------------------------------------------------------------------------------
  async function authenticate(req: FastifyRequest): Promise<Caller> {
    if (g.auth === 'none') return { key: null, allowed: poolNames };
    const h = req.headers.authorization;
    const m = typeof h === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(h) : null;
    if (!m) throw new GatewayError(401, 'missing API key: send "Authorization: Bearer fugu-sk-..." (create one with `fugu keys create --name NAME`)', { code: 'missing_api_key' });
    const key = await findApiKey(opts.db!, m[1]!);
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

  function checkQuota(caller: Caller): void {
    const k = caller.key;
    if (k && k.spendLimit !== null && k.spent >= k.spendLimit) {
      throw new GatewayError(429, `the API key "${k.name}" reached its spend limit ($${usd(k.spent)} spent of $${usd(k.spendLimit)})`, { type: 'insufficient_quota', code: 'insufficient_quota' });
    }
  }

  /** Adds the call's cost to the key's spend (one atomic update). */
  async function charge(caller: Caller, worker: string, usage: Usage): Promise<void> {
    if (!caller.key) return;
    const cost = tokenCost(usage.inputTokens, usage.outputTokens, specs.get(worker)!.prices);
    if (cost === 0n) return;
    try {
      await addApiKeySpend(opts.db!, caller.key.id, cost);
    } catch (e) {
      log.error({ key: caller.key.name, worker, err: scrub((e as Error).message) }, 'could not record the spend of a call');
    }
  }

  // ---- routing ------------------------------------------------------------------------------
  /** The router's workers this caller may use; undefined: all of them (no restriction to send). */
  function allowedFor(caller: Caller, known: readonly string[]): string[] | undefined {
    const inRouter = caller.allowed.filter((w) => known.includes(w));
    if (inRouter.length === 0) {
      throw new GatewayError(403, `none of this key's workers (${caller.allowed.join(', ')}) is among the router's workers (${known.join(', ')}); call a worker by name instead`, {
        param: 'model',
        code: 'no_allowed_workers',
      });
    }
    return inRouter.length === known.length ? undefined : inRouter;
  }

  function learn(d: RouteDecision): void {
    if (!routerWorkers || routerWorkers.join('\n') !== d.workers.join('\n')) {
      try {
        checkRouterWorkers(d.checkpointId, d.workers, opts.pool);
      } catch (e) {
        log.error({ checkpoint: d.checkpointId }, (e as Error).message);
        throw new GatewayError(503, `the router is misconfigured: ${(e as Error).message}`, { code: 'router_unavailable' });
      }
      routerWorkers = [...d.workers];
    }
  }

  async function route(text: string, caller: Caller, lambda: number | undefined): Promise<Routed> {
    const restricted = caller.allowed.length !== poolNames.length;
    const ask = (allowed: string[] | undefined) => opts.routeClient.route({ text, ...(allowed && { allowed }), ...(lambda !== undefined && { lambda }) });
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
          decision = await ask(allowedFor(caller, routerWorkers!));
        } catch (e) {
          // a newly published checkpoint with other workers: learn them, then ask again once
          if (!(e instanceof InputError && e.field === 'allowed')) throw e;
          learn(await ask(undefined));
          decision = await ask(allowedFor(caller, routerWorkers!));
        }
      }
    } catch (e) {
      if (isRouterUnavailable(e)) {
        const fb = g.fallbackWorker;
        if (fb !== undefined && caller.allowed.includes(fb)) {
          log.warn({ worker: fb, err: (e as Error).message }, 'no router available: using the fallback worker');
          return { candidates: [fb], routingMs: performance.now() - t0 };
        }
        throw new GatewayError(503, `the router is unavailable: ${(e as Error).message}`, { code: 'router_unavailable' });
      }
      if (e instanceof InputError) throw new GatewayError(400, e.message, { param: e.field ?? null, code: 'invalid_value' });
      throw e;
    }
    const routingMs = performance.now() - t0;
    metrics.routing.observe(routingMs);
    learn(decision);
    const chosen = decision;
    const next = chosen.workers
      .map((w, i) => ({ w, p: chosen.probs[i] ?? 0 }))
      .filter(({ w }) => w !== chosen.worker && caller.allowed.includes(w) && specs.has(w))
      .sort((a, b) => b.p - a.p)
      .map(({ w }) => w);
    return { decision: chosen, candidates: [chosen.worker, ...next], routingMs };
  }

  /** The workers to try, in order: the chosen one, then (next-best policy) the fallbacks. */
  const attemptsOf = (candidates: string[]): string[] => (g.fallback === 'next-best' ? candidates.slice(0, 1 + g.fallbackAttempts) : candidates.slice(0, 1));

  function routingHeaders(r: Routed, worker: string, failed: string[]): Record<string, string> {
    return {
      'x-fugu-worker': worker,
      'x-fugu-routing-ms': r.routingMs.toFixed(2),
      ...(r.decision && { 'x-fugu-checkpoint': r.decision.checkpointId }),
      ...(failed.length > 0 && { 'x-fugu-fallback-from': failed.join(',') }),
    };
  }

  /** A failed call: retryable -> undefined (try the next worker); otherwise the error to return. */
  function classify(worker: string, e: unknown): GatewayError | undefined {
    if (isProviderError(e)) {
      if (e.transient) return undefined;
      if (e.kind === 'bad-request') return new GatewayError(400, `worker "${worker}": ${e.message}`, { code: 'provider_bad_request' });
      if (e.kind === 'aborted') return new GatewayError(499, 'the client closed the request', { code: 'client_closed' });
      return new GatewayError(502, `worker "${worker}" failed (${e.kind}${e.status ? ` ${e.status}` : ''}): ${e.message}`, { code: 'provider_error' });
    }
    return new GatewayError(500, `worker "${worker}": ${(e as Error).message}`, { type: 'server_error' });
  }

  function failedAll(failed: string[], last: unknown): GatewayError {
    return new GatewayError(502, `${failed.length === 1 ? 'the worker' : 'every worker tried'} failed (${failed.join(', ')}): ${(last as Error).message}`, {
      type: 'server_error',
      code: 'provider_error',
    });
  }

  function noteFallback(worker: string, e: unknown, left: boolean): void {
    if (!left) return;
    metrics.fallbacks.inc({ worker });
    log.warn({ worker, err: scrub((e as Error).message) }, 'provider failed: falling back to the next-best worker');
  }

  /**
   * The fallback policy: `attempt` on the chosen worker, then (next-best) on the following ones
   * while the failure is retryable; a fatal failure or the last one is thrown.
   */
  async function withFallback<T>(r: Routed, signal: AbortSignal, attempt: (worker: string) => Promise<T>): Promise<{ value: T; worker: string; failed: string[] }> {
    const order = attemptsOf(r.candidates);
    const failed: string[] = [];
    let last: unknown;
    for (const [i, worker] of order.entries()) {
      try {
        return { value: await attempt(worker), worker, failed };
      } catch (e) {
        const fatal = signal.aborted ? new GatewayError(499, 'the client closed the request') : classify(worker, e);
        if (fatal) throw fatal;
        failed.push(worker);
        last = e;
        noteFallback(worker, e, i < order.length - 1);
      }
    }
    throw failedAll(failed, last);
  }

  async function generate(req: ChatRequest, r: Routed, signal: AbortSignal): Promise<{ result: ChatResult; worker: string; failed: string[] }> {
    const { value, worker, failed } = await withFallback(r, signal, (w) => models.get(w)!.generate({ ...req, signal }));
    return { result: value, worker, failed };
  }

  async function stream(req: ChatRequest, r: Routed, caller: Caller, includeUsage: boolean, reply: FastifyReply, signal: AbortSignal): Promise<void> {
    // a worker has answered once its first event is in hand: until then a failure falls back
    const { value, worker, failed } = await withFallback(r, signal, async (w) => {
      const it = models.get(w)!.stream({ ...req, signal })[Symbol.asyncIterator]();
      return { it, first: await it.next() };
    });
    const { it, first } = value;
    // first event in hand: from here on the answer is this worker's
    reply.hijack();
    const raw = reply.raw;
    const headers: Record<string, string> = {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      ...routingHeaders(r, worker, failed),
    };
    for (const [k, v] of Object.entries(headers)) raw.setHeader(k, v);
    raw.writeHead(200);
    const w = new ChunkWriter(worker);
    raw.write(w.role());
    try {
      for (let ev = first; !ev.done; ev = await it.next()) {
        const e = ev.value;
        if (e.type === 'text-delta') raw.write(w.text(e.text));
        else if (e.type === 'tool-call') raw.write(w.toolCall(e.toolCall));
        else {
          raw.write(w.finish(e.finishReason));
          if (includeUsage) raw.write(w.usage(e.usage));
          await charge(caller, worker, e.usage);
        }
      }
      raw.write(ChunkWriter.done());
    } catch (e) {
      if (!signal.aborted) {
        log.warn({ worker, err: scrub((e as Error).message) }, 'stream failed after its first byte');
        const ge = classify(worker, e) ?? new GatewayError(502, `worker "${worker}": the stream broke off: ${(e as Error).message}`, { code: 'provider_error' });
        raw.write(ChunkWriter.error(ge.body()));
      }
    }
    raw.end();
  }

  /** Aborts the provider call when the client goes away before the answer is complete. */
  function clientSignal(reply: FastifyReply): AbortSignal {
    const ac = new AbortController();
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) ac.abort();
    });
    return ac.signal;
  }

  // ---- endpoints ----------------------------------------------------------------------------
  app.post('/v1/chat/completions', async (request, reply) => {
    const caller = await authenticate(request);
    const body = parseBody(chatRequestSchema, request.body);
    const req = toChatRequest(body);
    req.timeoutMs = g.callTimeoutMs;
    let routed: Routed;
    if (body.model === ROUTER_MODEL) {
      checkQuota(caller);
      routed = await route(routingTextOf(req), caller, undefined);
    } else {
      if (!caller.allowed.includes(body.model)) throw unknownModel(body.model, [ROUTER_MODEL, ...caller.allowed]);
      checkQuota(caller);
      routed = { candidates: [body.model], routingMs: 0 };
    }
    const signal = clientSignal(reply);
    if (body.stream) {
      await stream(req, routed, caller, body.stream_options?.include_usage === true, reply, signal);
      return reply;
    }
    const { result, worker, failed } = await generate(req, routed, signal);
    await charge(caller, worker, result.usage);
    return reply.headers(routingHeaders(routed, worker, failed)).send(completionBody(result, worker));
  });

  app.get('/v1/models', async (request) => {
    const caller = await authenticate(request);
    return {
      object: 'list',
      data: [
        { id: ROUTER_MODEL, object: 'model', created: 0, owned_by: 'fugu' },
        ...caller.allowed.map((w) => ({ id: w, object: 'model', created: 0, owned_by: specs.get(w)!.provider })),
      ],
    };
  });

  app.post('/v1/route', async (request, reply) => {
    const caller = await authenticate(request);
    const body = parseBody(routeRequestSchema, request.body);
    if ((body.messages === undefined) === (body.text === undefined)) {
      throw new GatewayError(400, 'give either messages (a conversation) or text, not both', { param: body.messages ? 'text' : 'messages', code: 'invalid_value' });
    }
    const text = body.text ?? routingTextOf({ messages: toChatMessages(body.messages!) });
    const r = await route(text, caller, body.lambda);
    const d = r.decision;
    if (!d) {
      // no router: the configured fallback worker
      return reply.headers(routingHeaders(r, r.candidates[0]!, [])).send({ object: 'fugu.route', worker: r.candidates[0], checkpoint: null, routing_ms: r.routingMs, fallback: true, workers: [] });
    }
    return reply.headers(routingHeaders(r, d.worker, [])).send({
      object: 'fugu.route',
      worker: d.worker,
      checkpoint: d.checkpointId,
      routing_ms: r.routingMs,
      router_ms: d.routingMs,
      lambda: body.lambda ?? 0,
      workers: d.workers.map((name, i) => ({ name, prob: d.probs[i] ?? 0, allowed: caller.allowed.includes(name) })),
    });
  });

  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    const ready = await opts.routeClient.ready().catch(() => false);
    return reply.code(ready ? 200 : 503).send({ ready });
  });
  app.get('/metrics', async (_req, reply) => reply.header('content-type', registry.contentType).send(await registry.metrics()));

  // ---- queue dashboard ----------------------------------------------------------------------
  if (opts.adminKey && opts.redis) {
    const adminKey = Buffer.from(opts.adminKey);
    const queues = allQueueNames().map((n) => new Queue(n, { connection: opts.redis!, prefix: opts.config.queuePrefix }));
    const serverAdapter = new FastifyAdapter();
    serverAdapter.setBasePath('/admin/queues');
    createBullBoard({ queues: queues.map((q) => new BullMQAdapter(q, { readOnlyMode: false })), serverAdapter });
    await app.register(async (scope) => {
      scope.addHook('onRequest', async (req, reply) => {
        if (!adminAuthorized(req.headers.authorization, adminKey)) {
          return reply
            .code(401)
            .header('www-authenticate', 'Basic realm="fugu admin", charset="UTF-8"')
            .send(new GatewayError(401, 'the queue dashboard needs the admin key (FUGU_ADMIN_KEY) as the HTTP Basic password or a Bearer token', { code: 'invalid_admin_key' }).body());
        }
      });
      await scope.register(serverAdapter.registerPlugin(), { prefix: '/admin/queues' });
    });
    app.addHook('onClose', async () => {
      await Promise.all(queues.map((q) => q.close().catch(() => {})));
    });
  }

  return app;
}

function routingTextOf(req: Pick<ChatRequest, 'messages'>): string {
  try {
    return routingText(req.messages);
  } catch (e) {
    if (e instanceof InputError) throw new GatewayError(400, e.message, { param: 'messages', code: 'invalid_value' });
    throw e;
  }
}

function usd(pico: bigint): string {
  return (Number(pico) / 1e12).toFixed(6).replace(/0+$/, '').replace(/\.$/, '');
}

function isRouterUnavailable(e: unknown): boolean {
  // by name too: a decision that came through a queue or a thread is rebuilt, not the same class
  return e instanceof RouterUnavailableError || (e instanceof Error && e.name === 'RouterUnavailableError');
}

function adminAuthorized(header: string | undefined, key: Buffer): boolean {
  if (!header) return false;
  let secret: string | undefined;
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (bearer) secret = bearer[1];
  const basic = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  if (basic) {
    const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    secret = colon >= 0 ? decoded.slice(colon + 1) : undefined;
  }
  if (secret === undefined) return false;
  const s = Buffer.from(secret);
  return s.length === key.length && timingSafeEqual(s, key);
}

/** Fastify's own errors (JSON, size, media type) and ours, as OpenAI error bodies. */
function toGatewayError(err: Error & { statusCode?: number; code?: string }): GatewayError {
  if (err instanceof GatewayError) return err;
  if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || err.statusCode === 413) return new GatewayError(413, `the request body is larger than the limit (${err.message})`, { code: 'request_too_large' });
  if (err.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || err.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || (err instanceof SyntaxError && err.statusCode === 400)) return invalidJson(err.message);
  if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || err.statusCode === 415) return new GatewayError(415, 'send the body as JSON (content-type: application/json)', { code: 'unsupported_media_type' });
  if (err instanceof InputError) return new GatewayError(400, err.message, { param: err.field ?? null, code: 'invalid_value' });
  if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) return new GatewayError(err.statusCode, err.message);
  return new GatewayError(500, `internal error: ${scrub(err.message)}`, { type: 'server_error' });
}

