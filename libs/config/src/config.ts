// One zod schema for all of fugu's settings. Sources, later ones winning:
// defaults < the file named by FUGU_CONFIG (YAML or JSON) < environment variables.
// Every variable is listed in README.md with its default.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { ConfigError, PROVIDERS, type ProviderKind } from '@fugu/core';
import { parseRedisUrl, RedisUrlError } from './redis-url.ts';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

const positiveInt = z.coerce.number().int().positive();
const nonNegInt = z.coerce.number().int().nonnegative();
const bool = z.union([z.boolean(), z.enum(['true', 'false', '1', '0', 'yes', 'no']).transform((v) => ['true', '1', 'yes'].includes(v))]);

const rateLimitSchema = z
  .object({
    /** requests per minute shared by every worker process of the provider; 0 = unlimited */
    requestsPerMinute: nonNegInt.default(0),
    /** tokens (in + out, estimated before the call) per minute; 0 = unlimited */
    tokensPerMinute: nonNegInt.default(0),
  })
  .strict();
export type RateLimit = z.infer<typeof rateLimitSchema>;

export const configSchema = z
  .object({
    /**
     * Redis for the queues (BullMQ): redis://host:port, or a Redis Cluster by its seed nodes,
     * redis+cluster://host1:port1,host2:port2 (redis-url.ts). The default is the project's own
     * instance, started by `fugu up`.
     */
    redisUrl: z
      .string()
      .superRefine((url, ctx) => {
        try {
          parseRedisUrl(url);
        } catch (e) {
          ctx.addIssue({ code: 'custom', message: e instanceof RedisUrlError ? e.detail : (e as Error).message });
        }
      })
      .default('redis://127.0.0.1:6390'),
    /** Postgres for calls, rewards, runs, checkpoints. The default is the project's own instance. */
    databaseUrl: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').default('postgres://fugu@127.0.0.1:5440/fugu'),
    /** key prefix of every BullMQ queue */
    queuePrefix: z.string().regex(/^[A-Za-z0-9_-]+$/).default('fugu'),
    /**
     * shards of each provider's call queue (libs/queue names.ts): a job goes to the shard its job
     * id hashes to, workers consume them all; on a Redis Cluster the shards spread one provider's
     * load over the masters. 1 = one queue per provider. Every process of a deployment must agree.
     */
    providerQueueShards: z.coerce.number().int().min(1).max(256).default(1),
    /** where `fugu up` keeps the local services' data, and where reports and labels go by default */
    home: z.string().default(path.join(repoRoot, '.fugu')),
    logLevel: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
    /** directory of the LLMRouter data (the replay pool and the demo dataset) */
    llmrouterDir: z.string().default(path.resolve(repoRoot, 'data/llmrouter')),
    worker: z
      .object({
        /** providers whose queues this process consumes (comma list in env); default all */
        providers: z.array(z.enum(PROVIDERS)).default([...PROVIDERS]),
        /** jobs processed at once per provider queue in one process */
        concurrency: positiveInt.default(256),
        /** port of /healthz and /metrics; 0 picks a free port */
        port: nonNegInt.default(9464),
        /** bound on the drain at SIGTERM; keep it below the pod's termination grace period */
        drainTimeoutMs: positiveInt.default(20_000),
        /** attempts per call for transient errors (429s do not count) */
        attempts: positiveInt.default(6),
        /** base of the exponential backoff; each delay is jittered down by up to half */
        backoffMs: positiveInt.default(1_000),
        /** per-call timeout */
        callTimeoutMs: positiveInt.default(120_000),
        /** cache responses by request hash so retried or repeated calls do not pay twice */
        responseCache: bool.default(true),
        /** BullMQ job lock; a crashed worker's jobs return to the queue after about this long */
        lockDurationMs: positiveInt.default(30_000),
        /** rows written to Postgres per batch by one worker process */
        writeBatchSize: positiveInt.default(256),
        /**
         * how long a batch of rows waits for more before it is written (ms; 0: only what finished
         * in the same turn of the event loop). Larger batches cost Postgres less per row.
         */
        writeLingerMs: nonNegInt.default(0),
      })
      .strict()
      .prefault({}),
    rateLimits: z.partialRecord(z.enum(PROVIDERS), rateLimitSchema).default({}),
    /** optional limits of one worker (by its name in the pool), on top of its provider's; shared by every process */
    workerRateLimits: z.record(z.string().min(1), rateLimitSchema).default({}),
    /** router serving: worker threads, micro-batching, the deployed checkpoint (libs/serving, apps/router-worker) */
    router: z
      .object({
        /** the deployment whose published checkpoint is served (`fugu router publish <ckpt> --deployment <name>`) */
        deployment: z.string().min(1).default('fugu'),
        /** worker threads running inference (each with its own ONNX Runtime sessions) */
        threads: positiveInt.default(1),
        /** B: most requests in one inference batch */
        maxBatch: positiveInt.default(16),
        /** T: the longest a request waits for its batch to fill */
        maxWaitMs: nonNegInt.default(2),
        /** ONNX Runtime execution provider; auto = CUDA when its provider library is installed, else CPU */
        executionProvider: z.enum(['auto', 'cpu', 'cuda']).default('auto'),
        /** route-queue job lock: a killed router worker's jobs come back after about this long */
        lockDurationMs: positiveInt.default(3_000),
        /** how often serving processes re-read the deployment from Postgres (besides the publish message) */
        pollMs: positiveInt.default(5_000),
        /** port of the router worker's /healthz, /readyz, /metrics; 0 picks a free port */
        port: nonNegInt.default(9465),
        /** bound on one routing decision through the route queue */
        timeoutMs: positiveInt.default(5_000),
      })
      .strict()
      .prefault({}),
    /** the Conductor's workflow executor (apps/conductor, libs/ultra) */
    conductor: z
      .object({
        /** workflows executed at once by one conductor process */
        concurrency: positiveInt.default(32),
        /** port of the conductor's /healthz, /readyz, /metrics; 0 picks a free port */
        port: nonNegInt.default(9472),
        /** conduct-job lock: a killed conductor's workflows come back after about this long */
        lockDurationMs: positiveInt.default(30_000),
        /** sampling temperature of an `llm:` Conductor unless a workflow sets its own */
        temperature: z.coerce.number().min(0).max(2).default(0.7),
        /** how often a workflow polls Postgres for its steps' answers (with stepEvents: a backstop, at least 1 s) */
        pollMs: positiveInt.default(50),
        /** wake a workflow when its steps' chat-call jobs complete (BullMQ queue events) instead of waiting for the poll */
        stepEvents: bool.default(true),
        /**
         * OpenAI-compatible endpoints an `llm:<name>` Conductor may name besides the pool's workers
         * (e.g. a vLLM-served open model); the API key is read from `apiKeyEnv`, never stored here
         */
        endpoints: z
          .array(
            z
              .object({
                name: z.string().min(1).regex(/^[^\s,]+$/, 'an endpoint name has no whitespace or commas'),
                baseUrl: z.url({ protocol: /^https?$/ }),
                model: z.string().min(1),
                apiKeyEnv: z.string().regex(/^[A-Z_][A-Z0-9_]*$/, 'apiKeyEnv is the NAME of an environment variable').optional(),
                prices: z.object({ inputPerMTok: z.string().regex(/^\d+(\.\d+)?$/), outputPerMTok: z.string().regex(/^\d+(\.\d+)?$/) }).strict().default({ inputPerMTok: '0', outputPerMTok: '0' }),
              })
              .strict(),
          )
          .default([]),
      })
      .strict()
      .prefault({}),
    /** the OpenAI-compatible gateway (apps/gateway) */
    gateway: z
      .object({
        port: nonNegInt.default(8080),
        /** interface to listen on; 0.0.0.0 to serve other machines (a container) */
        host: z.string().min(1).default('127.0.0.1'),
        /** in-process: the router runs in this process (worker threads); pool: through the route queue */
        mode: z.enum(['in-process', 'pool']).default('in-process'),
        /** the workers the gateway calls: a pool file, or `llmrouter` (the replay pool of the LLMRouter data) */
        pool: z.string().min(1).default('llmrouter'),
        /** keys: every request needs a fugu API key (`fugu keys create`); none: local use, every worker allowed */
        auth: z.enum(['keys', 'none']).default('keys'),
        /** on a retryable provider error: try the next-best allowed worker, or fail at once */
        fallback: z.enum(['next-best', 'none']).default('next-best'),
        /** further workers tried after the chosen one fails (next-best only) */
        fallbackAttempts: nonNegInt.default(2),
        /** the worker used when no router answers (unset: 503) */
        fallbackWorker: z.string().min(1).optional(),
        bodyLimitBytes: positiveInt.default(1_048_576),
        /** bound on one provider call (a stream: until its last event) */
        callTimeoutMs: positiveInt.default(120_000),
        /**
         * answer a request seen before (same worker, messages and parameters) from the response
         * cache (libs/calls). Off by default: a client that samples twice expects two samples.
         */
        responseCache: bool.default(false),
        /** how long a call waits for the shared rate limits before it counts as rate-limited (next worker, or 429) */
        limitWaitMs: nonNegInt.default(2_000),
        /** debug only: put the request's message text in the access log (never on by default) */
        logMessages: bool.default(false),
        /**
         * how long a gateway reuses an API key's record (its revocation, workers and limit) before
         * reading it again: a revoked key is refused by every gateway within this time; 0: read on
         * every request
         */
        keyCacheMs: nonNegInt.default(1_000),
        /**
         * how long a gateway reuses the fugu-ultra deployment (its Conductor, pool and options)
         * before reading it again: `fugu ultra publish` also tells the gateways at once (Redis
         * pub/sub), so this bounds what a missed message (Redis down) can keep; 0: read on every
         * request
         */
        ultraCacheMs: nonNegInt.default(1_000),
        /**
         * how long the rows written behind the answers (requests, their provider calls) wait for
         * more before their statement goes (they are in the Redis journal meanwhile): a request's
         * call rows and its own row go in one commit; 0: at once
         */
        recordLingerMs: nonNegInt.default(5),
        /**
         * `fugu`'s routing skips a worker whose calls failed (retryably) this many times within
         * cooldownMs, for cooldownMs, on every gateway sharing the Redis (0: never)
         */
        cooldownFails: nonNegInt.default(3),
        cooldownMs: positiveInt.default(30_000),
        /**
         * the record journal (Redis): an entry older than this is a crashed gateway's, and the
         * sweeps of the live ones write it; they sweep every third of it
         */
        journalGraceMs: positiveInt.default(30_000),
        /** the Batch API: bytes of one uploaded file */
        filesMaxBytes: positiveInt.default(512 * 1024 * 1024),
        /** the Batch API: lines of one batch input file */
        batchMaxLines: positiveInt.default(1_000_000),
        /** the Batch API: unanswered lines one batch may have on the queues (the next part of its file waits for room) */
        batchMaxInFlight: positiveInt.default(20_000),
        /** the Batch API: lines of one batch that run in the gateway itself at once (fugu-ultra's workflows; their agents' calls are queued) */
        batchMaxLocal: positiveInt.default(8),
        /** the Batch API: batches this gateway drives at once (0: it drives none; other gateways do) */
        batchDrivers: nonNegInt.default(4),
        /** the Batch API: a batch whose driver (a gateway) stops renewing its lease for this long is taken over by another */
        batchLeaseMs: positiveInt.default(30_000),
        /**
         * the Batch API: provider-worker processes a gateway starts of its own when a batch's lines
         * wait on a provider queue no worker consumes (0: none; the batch object says they wait)
         */
        batchLocalWorkers: nonNegInt.default(1),
        /** the Batch API: how long a batch's lines wait with no provider worker connected before the gateway starts its own */
        batchWorkerWaitMs: nonNegInt.default(5_000),
        /** the Batch API: the gateway's own provider workers stop once no batch has needed them for this long */
        batchLocalIdleMs: positiveInt.default(60_000),
      })
      .strict()
      .prefault({}),
  })
  .strict();

export type FuguConfig = z.infer<typeof configSchema>;

/** Environment variable -> config path. */
export const ENV_VARS: Record<string, string> = {
  FUGU_REDIS_URL: 'redisUrl',
  FUGU_DATABASE_URL: 'databaseUrl',
  FUGU_QUEUE_PREFIX: 'queuePrefix',
  FUGU_PROVIDER_QUEUE_SHARDS: 'providerQueueShards',
  FUGU_HOME: 'home',
  FUGU_LOG_LEVEL: 'logLevel',
  FUGU_LLMROUTER_DIR: 'llmrouterDir',
  FUGU_WORKER_PROVIDERS: 'worker.providers',
  FUGU_WORKER_CONCURRENCY: 'worker.concurrency',
  FUGU_WORKER_PORT: 'worker.port',
  FUGU_WORKER_DRAIN_TIMEOUT_MS: 'worker.drainTimeoutMs',
  FUGU_CALL_ATTEMPTS: 'worker.attempts',
  FUGU_CALL_BACKOFF_MS: 'worker.backoffMs',
  FUGU_CALL_TIMEOUT_MS: 'worker.callTimeoutMs',
  FUGU_RESPONSE_CACHE: 'worker.responseCache',
  FUGU_WRITE_BATCH_SIZE: 'worker.writeBatchSize',
  FUGU_WRITE_LINGER_MS: 'worker.writeLingerMs',
  FUGU_WORKER_LOCK_MS: 'worker.lockDurationMs',
  FUGU_ROUTER_DEPLOYMENT: 'router.deployment',
  FUGU_ROUTER_THREADS: 'router.threads',
  FUGU_ROUTER_MAX_BATCH: 'router.maxBatch',
  FUGU_ROUTER_MAX_WAIT_MS: 'router.maxWaitMs',
  FUGU_ROUTER_EXECUTION_PROVIDER: 'router.executionProvider',
  FUGU_ROUTER_LOCK_MS: 'router.lockDurationMs',
  FUGU_ROUTER_POLL_MS: 'router.pollMs',
  FUGU_ROUTER_PORT: 'router.port',
  FUGU_ROUTER_TIMEOUT_MS: 'router.timeoutMs',
  FUGU_CONDUCTOR_CONCURRENCY: 'conductor.concurrency',
  FUGU_CONDUCTOR_PORT: 'conductor.port',
  FUGU_CONDUCTOR_LOCK_MS: 'conductor.lockDurationMs',
  FUGU_CONDUCTOR_TEMPERATURE: 'conductor.temperature',
  FUGU_CONDUCTOR_POLL_MS: 'conductor.pollMs',
  FUGU_CONDUCTOR_STEP_EVENTS: 'conductor.stepEvents',
  FUGU_GATEWAY_PORT: 'gateway.port',
  FUGU_GATEWAY_HOST: 'gateway.host',
  FUGU_GATEWAY_MODE: 'gateway.mode',
  FUGU_GATEWAY_POOL: 'gateway.pool',
  FUGU_GATEWAY_AUTH: 'gateway.auth',
  FUGU_GATEWAY_FALLBACK: 'gateway.fallback',
  FUGU_GATEWAY_FALLBACK_ATTEMPTS: 'gateway.fallbackAttempts',
  FUGU_GATEWAY_FALLBACK_WORKER: 'gateway.fallbackWorker',
  FUGU_GATEWAY_BODY_LIMIT_BYTES: 'gateway.bodyLimitBytes',
  FUGU_GATEWAY_CALL_TIMEOUT_MS: 'gateway.callTimeoutMs',
  FUGU_GATEWAY_LOG_MESSAGES: 'gateway.logMessages',
  FUGU_GATEWAY_RESPONSE_CACHE: 'gateway.responseCache',
  FUGU_GATEWAY_LIMIT_WAIT_MS: 'gateway.limitWaitMs',
  FUGU_GATEWAY_KEY_CACHE_MS: 'gateway.keyCacheMs',
  FUGU_GATEWAY_ULTRA_CACHE_MS: 'gateway.ultraCacheMs',
  FUGU_GATEWAY_RECORD_LINGER_MS: 'gateway.recordLingerMs',
  FUGU_GATEWAY_COOLDOWN_FAILS: 'gateway.cooldownFails',
  FUGU_GATEWAY_COOLDOWN_MS: 'gateway.cooldownMs',
  FUGU_GATEWAY_JOURNAL_GRACE_MS: 'gateway.journalGraceMs',
  FUGU_FILES_MAX_BYTES: 'gateway.filesMaxBytes',
  FUGU_BATCH_MAX_LINES: 'gateway.batchMaxLines',
  FUGU_BATCH_MAX_IN_FLIGHT: 'gateway.batchMaxInFlight',
  FUGU_BATCH_MAX_LOCAL: 'gateway.batchMaxLocal',
  FUGU_BATCH_DRIVERS: 'gateway.batchDrivers',
  FUGU_BATCH_LEASE_MS: 'gateway.batchLeaseMs',
  FUGU_BATCH_LOCAL_WORKERS: 'gateway.batchLocalWorkers',
  FUGU_BATCH_WORKER_WAIT_MS: 'gateway.batchWorkerWaitMs',
  FUGU_BATCH_LOCAL_IDLE_MS: 'gateway.batchLocalIdleMs',
};
// FUGU_RPM_<PROVIDER> and FUGU_TPM_<PROVIDER> (provider upper-cased, '-' as '_') set rateLimits.

function setPath(obj: Record<string, unknown>, dotted: string, value: unknown): void {
  const keys = dotted.split('.');
  let o = obj;
  for (const k of keys.slice(0, -1)) {
    if (typeof o[k] !== 'object' || o[k] === null) o[k] = {};
    o = o[k] as Record<string, unknown>;
  }
  o[keys.at(-1)!] = value;
}

function envName(provider: ProviderKind): string {
  return provider.toUpperCase().replace(/-/g, '_');
}

/** Where each config path came from, so errors can name the variable a user sets. */
function variableFor(pathKey: string, fromFile: string | undefined): string {
  const env = Object.entries(ENV_VARS).find(([, p]) => p === pathKey)?.[0];
  const m = /^rateLimits\.([a-z-]+)\.(requestsPerMinute|tokensPerMinute)/.exec(pathKey);
  const w = /^workerRateLimits\.(.+)\.(requestsPerMinute|tokensPerMinute)/.exec(pathKey);
  if (w) return `FUGU_WORKER_RATE_LIMITS (worker "${w[1]}", ${w[2]})`;
  if (/^conductor\.endpoints/.test(pathKey)) return `FUGU_CONDUCTOR_ENDPOINTS (${pathKey.slice('conductor.endpoints'.length).replace(/^\./, '') || 'the list'})`;
  if (m) return `FUGU_${m[2] === 'requestsPerMinute' ? 'RPM' : 'TPM'}_${envName(m[1] as ProviderKind)}`;
  return env ?? (fromFile ? `${pathKey} in ${fromFile}` : pathKey);
}

/** Load and validate the configuration. Throws ConfigError naming the variable to set. */
export function loadConfig(env: Record<string, string | undefined> = process.env, overrides: Record<string, unknown> = {}): FuguConfig {
  let raw: Record<string, unknown> = {};
  const file = env.FUGU_CONFIG;
  if (file) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (e) {
      throw new ConfigError(`FUGU_CONFIG=${file}: cannot read the file (${(e as Error).message})`, 'FUGU_CONFIG');
    }
    try {
      const parsed: unknown = file.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
      if (parsed !== null && typeof parsed !== 'object') throw new Error('not a mapping');
      raw = (parsed ?? {}) as Record<string, unknown>;
    } catch (e) {
      throw new ConfigError(`FUGU_CONFIG=${file}: not valid ${file.endsWith('.json') ? 'JSON' : 'YAML'} (${(e as Error).message})`, 'FUGU_CONFIG');
    }
  }
  for (const [name, p] of Object.entries(ENV_VARS)) {
    const v = env[name];
    if (v === undefined || v === '') continue;
    setPath(raw, p, p === 'worker.providers' ? v.split(',').map((s) => s.trim()).filter(Boolean) : v);
  }
  for (const provider of PROVIDERS) {
    for (const [prefix, key] of [['RPM', 'requestsPerMinute'], ['TPM', 'tokensPerMinute']] as const) {
      const v = env[`FUGU_${prefix}_${envName(provider)}`];
      if (v !== undefined && v !== '') setPath(raw, `rateLimits.${provider}.${key}`, v);
    }
  }
  // FUGU_WORKER_RATE_LIMITS: per-worker limits as JSON, e.g. {"gpt-4o":{"requestsPerMinute":60}}
  const perWorker = env.FUGU_WORKER_RATE_LIMITS;
  if (perWorker !== undefined && perWorker !== '') {
    try {
      raw.workerRateLimits = JSON.parse(perWorker) as unknown;
    } catch (e) {
      throw new ConfigError(`invalid configuration: FUGU_WORKER_RATE_LIMITS: not valid JSON (${(e as Error).message})`, 'FUGU_WORKER_RATE_LIMITS');
    }
  }
  // FUGU_CONDUCTOR_ENDPOINTS: OpenAI-compatible endpoints of llm: Conductors as JSON, e.g.
  // [{"name":"qwen","baseUrl":"http://vllm:8000/v1","model":"Qwen/Qwen2.5-7B-Instruct","apiKeyEnv":"VLLM_KEY"}]
  const endpoints = env.FUGU_CONDUCTOR_ENDPOINTS;
  if (endpoints !== undefined && endpoints !== '') {
    try {
      setPath(raw, 'conductor.endpoints', JSON.parse(endpoints) as unknown);
    } catch (e) {
      throw new ConfigError(`invalid configuration: FUGU_CONDUCTOR_ENDPOINTS: not valid JSON (${(e as Error).message})`, 'FUGU_CONDUCTOR_ENDPOINTS');
    }
  }
  for (const [p, v] of Object.entries(overrides)) if (v !== undefined) setPath(raw, p, v);
  const result = configSchema.safeParse(raw);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const key = issue.path.join('.');
    const variable = variableFor(key, file);
    throw new ConfigError(`invalid configuration: ${variable}: ${issue.message}`, variable);
  }
  return result.data;
}

/** URL with any password replaced, for logs and messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url.replace(/\/\/([^:/@]+):[^@]*@/, '//$1:***@');
  }
}

/**
 * The variables that make a child process (a worker, the gateway) load the same services,
 * queue prefix and home as `config`: spawn it with `{ ...serviceEnv(config), ...its own }`.
 */
export function serviceEnv(config: Pick<FuguConfig, 'redisUrl' | 'databaseUrl' | 'queuePrefix' | 'home'> & Partial<Pick<FuguConfig, 'providerQueueShards'>>): Record<string, string> {
  return {
    FUGU_REDIS_URL: config.redisUrl,
    FUGU_DATABASE_URL: config.databaseUrl,
    FUGU_QUEUE_PREFIX: config.queuePrefix,
    FUGU_HOME: config.home,
    ...(config.providerQueueShards !== undefined && { FUGU_PROVIDER_QUEUE_SHARDS: String(config.providerQueueShards) }),
  };
}
