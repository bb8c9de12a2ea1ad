// The OpenAI-compatible gateway as a Fastify instance (buildGateway), testable without a process.
// Plugins around a model registry (models.ts: `fugu` = the router, each worker by name, further
// kinds such as the Conductor registered as one more ModelHandler):
//
//   tracing  (plugins/tracing.ts)  a server span per request (tracing on: OTEL_EXPORTER_OTLP_ENDPOINT)
//   records  (plugins/records.ts)  x-request-id, metrics, one access-log line, a `requests` row
//   auth     (plugins/auth.ts)     the caller's key, for the API routes below
//   chat     (plugins/chat.ts)     POST /v1/chat/completions (JSON or SSE; usage.cost)
//   responses (plugins/responses.ts) POST/GET/DELETE /v1/responses: the Responses API, stored responses (docs/responses-api.md)
//   messages (plugins/messages.ts) POST /v1/messages, /v1/messages/count_tokens: the Anthropic Messages API (docs/anthropic-api.md), its errors in Anthropic's shape
//   models   (plugins/api.ts)      GET /v1/models: the registry's models this caller may use
//   route    (plugins/api.ts)      POST /v1/route: the decision and probabilities, nothing called
//   rewards  (plugins/rewards.ts)  POST /v1/rewards: Conductor completions scored as workflows (docs/rewards.md)
//   ops      (plugins/ops.ts)      /healthz /readyz /metrics, Bull Board at /admin/queues
//
// Every provider call goes through one seam (context.ts ProviderCalls). Provider failures: a
// retryable error (429, 5xx, timeout, connection) falls back to the next-best allowed worker by
// the router's probabilities (streaming: only before the first byte went out); a provider's 400
// is a 400 with its message. Errors use OpenAI's error format.
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { RedisClient } from '@fugu/queue';
import type { Queue } from 'bullmq';
import { BatchDriver, FILE_LIMITS, type BatchDriverOptions, type BatchWorkersOptions } from '@fugu/batch';
import { createCallPipeline, defaultChatCallJobOptions } from '@fugu/calls';
import { InputError, type WorkerPool } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import type { Db, StoredWorker } from '@fugu/db';
import type { ChatModel, Env, ReplayStoreSource } from '@fugu/providers';
import type { RouteClient } from '@fugu/serving';
import { Registry, createLogger, scrub, type Logger } from '@fugu/telemetry';
import { createContext, directCalls, pipelineCalls, type DefaultRouting, type GatewayContext, type ProviderCalls } from './context.ts';
import { GatewayError, toGatewayError } from './errors.ts';
import { defaultRegistry, type ModelHandler, type ModelRegistry } from './models.ts';
import { chatPlugin } from './plugins/chat.ts';
import { responsesPlugin } from './plugins/responses.ts';
import { messagesPlugin } from './plugins/messages.ts';
import { anthropicErrorBody } from './anthropic-wire.ts';
import { sessionsPlugin } from './plugins/sessions.ts';
import { authPlugin } from './plugins/auth.ts';
import { modelsPlugin, routePlugin } from './plugins/api.ts';
import { adminPlugin, opsPlugin } from './plugins/ops.ts';
import { recordsPlugin, requestIdOf } from './plugins/records.ts';
import { tracingPlugin } from './plugins/tracing.ts';
import { drainRequest } from './plugins/shared.ts';
import { rewardsPlugin, type RewardsPluginOptions } from './plugins/rewards.ts';
import { batchesPlugin } from './plugins/batches.ts';
import { gatewayBatchCodec } from './batch-codec.ts';
import { createWorkerModels } from './workers.ts';
import { databaseNameOf, journalKey, RecordWriter } from './record-writer.ts';
import { invalidUtf8Error } from './utf8.ts';
import { redisCooldowns } from './cooldown.ts';
import { redisHolds } from '@fugu/ultra';

export { ROUTER_MODEL } from './models.ts';

/** The rest of a body the gateway answers without reading (over the limit) is read and dropped up to this many times the limit, and this long; past either, the connection closes. */
const DRAIN_LIMITS = 16;
const DRAIN_MS = 10_000;

export type GatewayOptions = {
  config: FuguConfig;
  pool: WorkerPool;
  routeClient: RouteClient;
  /** the deployed checkpoint's workers when known at start (see main.ts); kept up to date from decisions */
  routerWorkers?: readonly string[];
  /** model `fugu` routes by the pool's default: no router trained on the pool is published (main.ts) */
  defaultRouting?: DefaultRouting;
  /** API keys (required when gateway.auth is `keys`) and the `requests` rows */
  db?: Db;
  /** what is written behind the answers (default: a RecordWriter of its own over `db`, journaled in `redis`); a test passes one to `flush()` it */
  writer?: RecordWriter;
  /** provider API keys are read from here (default process.env) */
  env?: Env;
  /** recorded outcomes for the pool's replay workers */
  replayStore?: ReplayStoreSource;
  /** models by worker name; default: createChatModel for each worker */
  models?: Map<string, ChatModel>;
  /** the provider-call seam; default: straight to `models` */
  calls?: ProviderCalls;
  /** further model kinds (e.g. `fugu-ultra`), each made from the context, registered after the workers */
  extraModels?: Array<(ctx: GatewayContext) => ModelHandler>;
  /** the shared rate limits' connection (needed when a limit is configured), and Bull Board's: with adminKey, the dashboard is served at /admin/queues */
  /** the queues' Redis: one server or a Redis Cluster (FUGU_REDIS_URL) */
  redis?: RedisClient;
  /** FUGU_ADMIN_KEY: Bull Board's password (HTTP Basic) or bearer token; unset: no dashboard */
  adminKey?: string;
  log?: Logger;
  registry?: Registry;
  /** POST /v1/rewards: the reward service (@fugu/ultra-training createRewardsService, through plugins/rewards.ts) and its body limit; absent: no such route */
  rewards?: Omit<RewardsPluginOptions, 'ctx'>;
  /** the Batch API (needs the database): the chat-call queues and the stored pool; absent: no such routes */
  batches?: {
    queue: (name: string) => Queue;
    workers: readonly StoredWorker[];
    /** the LLMRouter data the replay workers answer from (gateway.pool llmrouter[:dir]) */
    replayDataset?: string;
    /** driver settings (tests) */
    driver?: Pick<BatchDriverOptions, 'pollMs' | 'leaseMs' | 'stallMs'>;
    /**
     * starts provider-worker processes of the gateway's own, for a batch whose lines wait on a
     * queue no worker consumes (gateway.batchLocalWorkers of them; main.ts: the provider-worker
     * app's command); absent: none is started, the batch says its lines wait
     */
    startWorkers?: BatchWorkersOptions['start'];
  };
};

export async function buildGateway(opts: GatewayOptions): Promise<FastifyInstance> {
  const g = opts.config.gateway;
  const log = opts.log ?? createLogger({ name: 'gateway', level: opts.config.logLevel });
  if (g.auth === 'keys' && !opts.db) throw new Error('buildGateway: gateway.auth is "keys" but no database was given');
  const poolNames = opts.pool.workers.map((w) => w.name);
  if (g.fallbackWorker !== undefined && !poolNames.includes(g.fallbackWorker)) {
    throw new InputError(`gateway.fallbackWorker "${g.fallbackWorker}" is not in the pool "${opts.pool.name}" (workers: ${poolNames.join(', ')})`, { field: 'FUGU_GATEWAY_FALLBACK_WORKER' });
  }
  // request rows, call rows and spend, written behind the answers in batches, journaled in Redis first (record-writer.ts)
  const journal = opts.redis && { redis: opts.redis, key: journalKey(opts.config.queuePrefix, opts.config.databaseUrl), graceMs: g.journalGraceMs };
  const writer = opts.writer ?? (opts.db ? new RecordWriter(opts.db, log, journal || undefined, { lingerMs: g.recordLingerMs }) : undefined);
  writer?.start();
  const calls = opts.calls ?? defaultCalls(opts, writer);
  const ctx = createContext({
    config: opts.config,
    pool: opts.pool,
    routeClient: opts.routeClient,
    ...(opts.routerWorkers && { routerWorkers: opts.routerWorkers }),
    ...(opts.defaultRouting && { defaultRouting: opts.defaultRouting }),
    ...(opts.db && { db: opts.db }),
    ...(writer && { writer }),
    calls,
    log,
    registry: opts.registry ?? new Registry(),
    ...(opts.redis && g.cooldownFails > 0 && { cooldowns: redisCooldowns(opts.redis, opts.config.queuePrefix, { fails: g.cooldownFails, ms: g.cooldownMs, log }) }),
    // fugu-ultra's holds on its workflows, shared by the deployment's gateways (its queue prefix and
    // database: workflow ids are the database's)
    ...(opts.redis && { holds: redisHolds(opts.redis, [opts.config.queuePrefix, databaseNameOf(opts.config.databaseUrl)].filter((x) => x !== '').join(':')) }),
  });
  const models: ModelRegistry = defaultRegistry(ctx);
  const extraModels = (opts.extraModels ?? []).map((make) => make(ctx));
  for (const h of extraModels) models.register(h);

  const app = Fastify({
    logger: false, bodyLimit: g.bodyLimitBytes, return503OnClosing: true, requestIdHeader: false, genReqId: requestIdOf,
    // the router's own refusals (a path that does not decode, a path parameter past its length limit) as OpenAI error bodies too
    frameworkErrors: (err, _req, reply) => {
      const e = new GatewayError(err.statusCode ?? 400, `the request URL is invalid: ${err.message}`, { code: err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'url_too_long' : 'invalid_url' });
      // (typed for the route schema that did not match; any reply takes a JSON body)
      void (reply as unknown as FastifyReply).code(e.status).send(e.body());
    },
  });

  // JSON bodies as Fastify parses them, but one that is not UTF-8 is a 400 naming where (not decoded to U+FFFD)
  const json = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    const bad = invalidUtf8Error(body as Buffer);
    if (bad) done(bad, undefined);
    else json(req, (body as Buffer).toString('utf8'), done);
  });

  // the error handler, writing `format`'s body: OpenAI's (here), Anthropic's (the messages plugin's scope)
  const errorHandler = (format: (e: GatewayError, req: FastifyRequest) => unknown) => async (err: Error & { statusCode?: number; code?: string }, req: FastifyRequest, reply: FastifyReply) => {
    const bodyLimit = req.routeOptions.bodyLimit ?? g.bodyLimitBytes;
    const e =
      err.code === 'FST_ERR_CTP_BODY_TOO_LARGE'
        ? new GatewayError(413, `the request body is larger than the gateway's limit of ${bodyLimit} bytes${bodyLimit === g.bodyLimitBytes ? ' (FUGU_GATEWAY_BODY_LIMIT_BYTES)' : ''}`, { code: 'request_too_large' })
        : toGatewayError(err);
    const rec = ctx.record(req);
    rec.errorCode = e.errorCode ?? e.type;
    // a request that failed after paying for calls (a fugu-ultra workflow's answered steps) is charged them
    if (e.cost > 0n && rec.authenticated) ctx.charge(ctx.callerOf(req), rec, e.cost);
    if (e.status >= 500) log.error({ reqId: rec.requestId, route: req.url, status: e.status, err: scrub(err.message) }, 'request failed');
    // a body not read to its end (over the limit, refused before its handler read it): read and dropped first, so the client reads this answer rather than a reset
    if (!(await drainRequest(req.raw, DRAIN_LIMITS * bodyLimit, DRAIN_MS))) reply.header('connection', 'close');
    return reply.code(e.status).headers(e.headers).send(format(e, req));
  };
  app.setErrorHandler(errorHandler((e) => e.body()));
  app.setNotFoundHandler((req, reply) => {
    const rec = ctx.record(req);
    rec.errorCode = 'unknown_url';
    const e = new GatewayError(404, `no such endpoint: ${req.method} ${req.url.split('?')[0]}`, { code: 'unknown_url' });
    // under the Anthropic API's path, in its shape
    void reply.code(404).send(req.url.startsWith('/v1/messages') ? anthropicErrorBody(e, rec.requestId) : e.body());
  });

  app.addHook('onClose', async () => {
    await calls.close?.();
    await Promise.all(extraModels.map((h) => h.close?.()));
  });
  // the Batch API's driver: this gateway's share of the open batches (gateway.batchDrivers; 0: none, the routes stay)
  const batchDriver: BatchDriver | undefined | null =
    !opts.batches || !opts.db
      ? null
      : g.batchDrivers === 0
        ? undefined
        : new BatchDriver({
            db: opts.db,
            calls: { db: opts.db, queue: opts.batches.queue, jobOptions: defaultChatCallJobOptions(opts.config.worker), shards: opts.config.providerQueueShards },
            codec: gatewayBatchCodec({ ctx, models, db: opts.db, workers: opts.batches.workers, ...(opts.batches.replayDataset !== undefined && { replayDataset: opts.batches.replayDataset }) }),
            log,
            maxInFlight: g.batchMaxInFlight,
            maxLocal: g.batchMaxLocal,
            concurrency: g.batchDrivers,
            leaseMs: g.batchLeaseMs,
            workers: {
              localWorkers: g.batchLocalWorkers, waitMs: g.batchWorkerWaitMs, idleMs: g.batchLocalIdleMs,
              ...(opts.batches.startWorkers && { start: opts.batches.startWorkers }),
            },
            ...opts.batches.driver,
          });
  if (batchDriver) {
    app.addHook('onReady', async () => batchDriver.start());
    app.addHook('onClose', async () => batchDriver.stop());
  }
  await app.register(tracingPlugin, { ctx });
  await app.register(recordsPlugin, { ctx });
  // the API: every route in this scope authenticates first
  await app.register(async (api) => {
    await api.register(authPlugin, { ctx });
    await api.register(sessionsPlugin, { ctx });
    await api.register(chatPlugin, { ctx, models });
    await api.register(responsesPlugin, { ctx, models });
    await api.register(messagesPlugin, { ctx, models, onError: errorHandler });
    await api.register(modelsPlugin, { ctx, models });
    await api.register(routePlugin, { ctx });
    if (opts.rewards) await api.register(rewardsPlugin, { ctx, ...opts.rewards });
    if (batchDriver !== null) await api.register(batchesPlugin, { ctx, db: opts.db!, driver: batchDriver, limits: { ...FILE_LIMITS, maxBytes: g.filesMaxBytes, maxLines: g.batchMaxLines } });
  });
  await app.register(opsPlugin, { ctx });
  if (opts.adminKey && opts.redis) await app.register(adminPlugin, { ctx, redis: opts.redis, adminKey: opts.adminKey });
  return app;
}

/**
 * With a database: the call pipeline (shared rate limits, response cache, exact cost, one
 * chat_calls row per provider call) over the workers' models; without one: the models directly.
 * The models are made here, so a missing provider key stops the start.
 */
function defaultCalls(opts: GatewayOptions, writer: RecordWriter | undefined): ProviderCalls {
  const g = opts.config.gateway;
  const models = opts.models ?? createWorkerModels(opts.pool, opts.env ?? process.env, { replayStore: opts.replayStore, timeoutMs: g.callTimeoutMs });
  if (!opts.db) return directCalls(models);
  const pipeline = createCallPipeline({
    db: opts.db,
    ...(opts.redis && { redis: opts.redis }),
    config: opts.config,
    ...(opts.log && { log: opts.log }),
    models: (w) => models.get(w.name),
    timeoutMs: g.callTimeoutMs,
  });
  return pipelineCalls(pipeline, { maxWaitMs: g.limitWaitMs, cache: g.responseCache, ...(writer && { writer }) });
}

