// The provider-call worker: a thin consumer of the `{provider-call.<provider>}` queues (all their
// shards, FUGU_PROVIDER_QUEUE_SHARDS) on top of the call pipeline (@fugu/calls), for two job kinds:
//   `call`       one call of an evaluation run: the item's prompt to the worker (or a replay of a
//                recorded answer), verified, recorded as calls + rewards by the batched CallWriter;
//   `chat-call`  a chat request stored in Postgres (chat_requests), recorded as one chat_calls row.
//
// Retries: a rate limit (the pipeline's shared limit, or a provider's 429) moves the job back
// without using an attempt (queue.rateLimit for the provider's limit, a delay for a worker's);
// other transient errors are retried by BullMQ with exponential backoff and jitter; a permanent
// error, or a transient one on the last attempt, is recorded as an error row so there is exactly
// one row per call.
import { DelayedError, Queue, RateLimitError as QueueRateLimitError, UnrecoverableError, Worker, type Job } from 'bullmq';
import { ConfigError, formatUsd, InputError, parseUsd } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import { getChatCallJobStates, recordChatCalls, setRunStatus, type ChatCallRecord, type Db, type RunProgress } from '@fugu/db';
import { isProviderError, requestHash, type ChatRequest } from '@fugu/providers';
import { verify } from '@fugu/datasets';
import { answerReplayRequest } from '@fugu/conductor';
import {
  callJobId, CHAT_CALL_JOB, chatCallJobSchema, closeWorkers, createRedis, parseJob, providerCallJobSchema, providerCallQueues,
  type ChatCallJob, type ChatCallJobResult, type ProviderCallJob, type ProviderCallResult,
  type RedisClient,
} from '@fugu/queue';
import { bullTelemetry, type Logger, type Registry } from '@fugu/telemetry';
import { BatchLoader, CallWriter, createCallPipeline, isTransientDbError, LimitExceededError, loadChatCallJob, providerCallCounterKey, retryTransient, WriteBatcher, type CallOutcome } from '@fugu/calls';
import { ItemLoader, RunStatusCache, WorkerCache } from './caches.ts';
import { createWorkerMetrics } from './metrics.ts';

export { providerCallCounterKey };

export type ProviderWorkerOptions = {
  config: FuguConfig;
  db: Db;
  log: Logger;
  registry: Registry;
  /** where API keys are read (by the variable names the worker pool gives) */
  env?: Record<string, string | undefined>;
};

export type ProviderWorkerHandle = {
  queues: string[];
  isRunning(): boolean;
  /** stops taking jobs, waits for running ones (until `deadline`), flushes rows, closes connections */
  close(deadline?: number): Promise<void>;
};

export async function startProviderWorker(opts: ProviderWorkerOptions): Promise<ProviderWorkerHandle> {
  const { config, db, log } = opts;
  const env = opts.env ?? process.env;
  const metrics = createWorkerMetrics(opts.registry);
  const connection = createRedis(config.redisUrl, 'worker');
  const items = new ItemLoader(db);
  const workers = new WorkerCache(db);
  const runs = new RunStatusCache(db);
  // chat-call jobs: the states they read and the rows they write, many jobs' to a statement
  const chatRows = new WriteBatcher<ChatCallRecord>({
    maxBatch: config.worker.writeBatchSize,
    lingerMs: config.worker.writeLingerMs,
    write: (rows) => retryTransient(() => recordChatCalls(db, rows)),
    splitOn: (e) => !isTransientDbError(e),
  });
  const chatStates = new BatchLoader((ids: string[]) => getChatCallJobStates(db, ids));
  const pipeline = createCallPipeline({
    db, redis: connection, config, log, env,
    recordRow: (row) => chatRows.write(row),
    callCounterKey: providerCallCounterKey(config.queuePrefix),
    // a replay worker answers from the item's recorded outcomes (items are loaded before the call)
    // (a Conductor step carries `replayStep` in its metadata: answered by the replay step model)
    replayStore: (name) => ({
      lookup: (prompt: string, itemId?: string, metadata?: Readonly<Record<string, string>>) => {
        const it = itemId ? items.peek(Number(itemId)) : undefined;
        const a = it && answerReplayRequest(name, it, prompt, metadata);
        return a && { itemId: String(it.dbId), ...a };
      },
    }),
  });

  const writer = new CallWriter(db, {
    maxBatch: config.worker.writeBatchSize,
    lingerMs: config.worker.writeLingerMs,
    onProgress: async (progress: RunProgress[]) => {
      for (const r of progress) {
        if (r.status !== 'running') continue;
        if (r.spendCap !== null && parseUsd(r.spent) >= parseUsd(r.spendCap)) {
          const reason = `spend cap $${trimUsd(r.spendCap)} reached (spent $${trimUsd(r.spent)}); resume with \`fugu eval --resume ${r.id} --spend-cap <higher>\``;
          if (await setRunStatus(db, r.id, 'paused', { reason, from: ['running'] })) log.warn({ run: r.id, spent: r.spent }, reason);
          runs.set(r.id, 'paused');
        } else if (r.doneCalls + r.failedCalls >= r.totalCalls) {
          if (await setRunStatus(db, r.id, 'completed', { from: ['running'] })) log.info({ run: r.id, done: r.doneCalls, failed: r.failedCalls }, 'run completed');
          runs.set(r.id, 'completed');
        }
      }
    },
  });

  const queues = new Map<string, Queue>();
  const bullWorkers: Worker[] = [];
  // a provider's queue may be split into shards (FUGU_PROVIDER_QUEUE_SHARDS): one BullMQ Worker
  // per shard, each with its share of the provider's concurrency and request limit
  const shards = config.providerQueueShards;

  for (const provider of config.worker.providers) {
    const names = providerCallQueues(provider, shards);
    const providerQueues = names.map((n) => new Queue(n, { connection, prefix: config.queuePrefix }));
    names.forEach((n, i) => queues.set(n, providerQueues[i]!));
    const limits = config.rateLimits[provider];
    for (const name of names) {
      /**
       * A rate limit moves the job back without using an attempt: the provider's (a 429, or the
       * shared limit of the provider) pauses the whole queue in every process for the wait; a
       * worker's own limit delays just this job. Returns normally for any other error.
       */
      async function backOffIfLimited(e: unknown, job: Job, token: string | undefined): Promise<void> {
        if (!isProviderError(e) || e.kind !== 'rate-limit') return;
        const wait = Math.max(e.retryAfterMs ?? 1_000, 50);
        if (e instanceof LimitExceededError && e.scope === 'worker' && token) {
          await job.moveToDelayed(Date.now() + wait, token);
          throw new DelayedError();
        }
        // every shard of the provider: the limit is the provider's, whichever shard met it
        await Promise.all(providerQueues.map((q) => q.rateLimit(wait)));
        throw new QueueRateLimitError();
      }

      function noteError(e: unknown): void {
        if (isProviderError(e) && !(e instanceof LimitExceededError)) metrics.errors.inc({ provider, kind: e.kind });
      }

      /** Whether a failed attempt is the call's final outcome (recorded) rather than retried. */
      const isFinal = (e: unknown, job: Job): boolean => {
        if (isProviderError(e) && e.kind === 'rate-limit') return false;
        const last = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
        if (isProviderError(e)) return !e.transient || last;
        // a missing API key is final at once: retrying cannot fix it, the message names the variable
        return e instanceof ConfigError || last;
      };

      function observe(workerName: string, o: CallOutcome): void {
        metrics.calls.inc({ provider, worker: workerName, status: o.cached ? 'cached' : 'ok' });
        if (!o.cached) metrics.latency.observe({ provider }, o.latencyMs / 1000);
        metrics.tokens.inc({ provider, direction: 'in' }, o.result.usage.inputTokens);
        metrics.tokens.inc({ provider, direction: 'out' }, o.result.usage.outputTokens);
        if (o.cost > 0n) metrics.spend.inc({ provider }, Number(o.cost) / 1e12);
      }

      /** The job's payload, checked; one that fails is counted, logged and rethrown. */
      function validJob<S extends Parameters<typeof parseJob>[0]>(schema: S, job: Job): ReturnType<typeof parseJob<S>> {
        try {
          return parseJob(schema, job.data, name, job.id);
        } catch (e) {
          metrics.invalid.inc({ provider });
          log.error({ queue: name, job: job.id, err: e }, 'rejected a job whose payload failed validation');
          throw e;
        }
      }

      async function evaluationJob(job: Job, token: string | undefined): Promise<ProviderCallResult> {
        const data: ProviderCallJob = validJob(providerCallJobSchema, job);
        const status = await runs.get(data.runId);
        if (status === undefined) throw new UnrecoverableError(`run ${data.runId} does not exist`);
        if (status !== 'running') {
          metrics.skipped.inc({ provider });
          return { outcome: 'skipped', reason: `run is ${status}` };
        }
        const [worker, item] = await Promise.all([workers.get(data.workerId), items.get(data.itemId)]);
        const request: ChatRequest = { messages: [{ role: 'user', content: item.prompt }], metadata: { itemId: String(item.dbId) } };
        const attempt = job.attemptsMade + 1;
        const key = callJobId(data.runId, data.itemId, data.workerId, data.repetition);
        const base = { runId: data.runId, itemId: data.itemId, workerId: data.workerId, repetition: data.repetition, attempts: attempt };

        let o: CallOutcome;
        try {
          o = await pipeline.execute({ worker, request, key, sample: data.repetition, attempt, maxWaitMs: 0 });
        } catch (e) {
          noteError(e);
          await backOffIfLimited(e, job, token);
          if (!isFinal(e, job)) throw e;
          const kind = isProviderError(e) ? e.kind : e instanceof ConfigError ? 'config' : 'internal';
          await writer.write({ ...base, requestHash: requestHash(worker, request, data.repetition), status: 'error', response: null, tokensIn: 0, tokensOut: 0, cost: '0', latencyMs: 0, cached: false, errorKind: kind, error: (e as Error).message.slice(0, 2000), score: null, verifier: null });
          metrics.calls.inc({ provider, worker: worker.name, status: 'error' });
          return { outcome: 'recorded', status: 'error', cached: false };
        }

        // an answer that cannot be checked here (e.g. code from a live model: nothing executes
        // it) is recorded without a reward, with the reason
        const { result } = o;
        let reward: { score: number; verifier: string } | null = null;
        let unverifiable: string | null = null;
        try {
          reward = verify(item, result.text, result.providerMetadata);
        } catch (e) {
          if (!(e instanceof InputError)) throw e;
          unverifiable = e.message;
        }
        await writer.write({
          ...base,
          requestHash: o.requestHash,
          status: 'ok',
          response: { text: result.text, toolCalls: result.toolCalls, finishReason: result.finishReason, model: result.model, ...(result.providerMetadata && { providerMetadata: result.providerMetadata }) },
          tokensIn: result.usage.inputTokens,
          tokensOut: result.usage.outputTokens,
          cost: formatUsd(o.cost),
          latencyMs: o.cached ? 0 : o.latencyMs,
          cached: o.cached,
          errorKind: unverifiable ? 'unverifiable' : null,
          error: unverifiable,
          score: reward?.score ?? null,
          verifier: reward?.verifier ?? null,
        });
        observe(worker.name, o);
        return { outcome: 'recorded', status: 'ok', cached: o.cached };
      }

      async function chatCallJob(job: Job, token: string | undefined): Promise<ChatCallJobResult> {
        const data: ChatCallJob = validJob(chatCallJobSchema, job);
        // the id's row and its stored request in one query; answered already (a re-run after a
        // crash, or the same id submitted again): no call
        const stored = await loadChatCallJob(db, data, (id) => chatStates.get(id));
        if (stored?.existing) return { outcome: 'existing', status: stored.existing };
        if (!stored) throw new UnrecoverableError(`chat call ${data.id}: no stored request (chat_requests) under this id`);
        const itemId = stored.request.metadata?.itemId;
        // a replay worker answers an item's recorded outcome: the item must be loaded first
        const [worker] = await Promise.all([workers.get(data.workerId), itemId && /^\d+$/.test(itemId) ? items.get(Number(itemId)) : undefined]);
        const attempt = job.attemptsMade + 1;
        try {
          const o = await pipeline.call({
            worker, request: stored.request, sample: stored.sample, origin: 'chat-call', key: data.id, attempt, maxWaitMs: 0,
            recordError: (e) => isFinal(e, job),
          });
          observe(worker.name, o);
          return { outcome: 'recorded', status: 'ok', cached: o.cached };
        } catch (e) {
          noteError(e);
          await backOffIfLimited(e, job, token);
          if (!isFinal(e, job)) throw e;
          metrics.calls.inc({ provider, worker: worker.name, status: 'error' });
          return { outcome: 'recorded', status: 'error', cached: false };
        }
      }

      const processor = (job: Job, token?: string): Promise<ProviderCallResult | ChatCallJobResult> =>
        job.name === CHAT_CALL_JOB ? chatCallJob(job, token) : evaluationJob(job, token);

      const limiter = limiterFor((limits?.requestsPerMinute ?? 0) / shards);
      const w = new Worker(name, processor, {
        ...bullTelemetry(),
        connection,
        prefix: config.queuePrefix,
        concurrency: Math.ceil(config.worker.concurrency / shards),
        ...(limiter && { limiter }),
        lockDuration: config.worker.lockDurationMs,
        // check for stalled jobs as often as a lock lasts; a job may stall (its worker died) a few
        // times before BullMQ gives up on it
        stalledInterval: config.worker.lockDurationMs,
        maxStalledCount: 3,
      });
      w.on('error', (e) => log.warn({ queue: name, err: e }, 'worker error'));
      w.on('failed', (job, e) => log.warn({ queue: name, job: job?.id, attempts: job?.attemptsMade, err: e }, 'job attempt failed'));
      bullWorkers.push(w);
    }
  }

  log.info({ queues: [...queues.keys()], concurrency: config.worker.concurrency, shards }, 'provider worker started');

  return {
    queues: [...queues.keys()],
    isRunning: () => bullWorkers.every((w) => w.isRunning()),
    close: async (deadline = Date.now() + config.worker.drainTimeoutMs) => {
      // stop fetching and wait for the jobs in hand, bounded; past the bound, disconnect: the
      // unfinished jobs' locks expire and another worker takes them (closeWorkers: also when a
      // cluster master died under a worker's blocking command)
      if (!(await closeWorkers(bullWorkers, deadline))) log.warn('drain timed out; disconnected the workers');
      await Promise.all([writer.flush(), chatRows.flush()]);
      await Promise.all([...queues.values()].map((q) => q.close()));
      connection.disconnect();
    },
  };
}

/**
 * requests per minute -> BullMQ limiter, paced in windows of 200 ms (one job per 1/rate seconds
 * below 5 a second). Providers count requests over sliding windows, so a burst of a whole
 * minute's budget at the start of a window would earn 429s; and windows much shorter than
 * 200 ms lose throughput to the limiter's own round trips.
 */
export function limiterFor(rpm: number): { max: number; duration: number } | undefined {
  if (rpm <= 0) return undefined;
  if (rpm >= 300) return { max: Math.floor(rpm / 300), duration: 200 };
  return { max: 1, duration: Math.ceil(60_000 / rpm) };
}

function trimUsd(s: string): string {
  return s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s;
}

/** A worker that completes every job of a queue at once: the no-op baseline of `bench:eval`. */
export function startNoopWorker(opts: { redis: RedisClient | string; prefix: string; queue: string; concurrency: number }): Worker {
  const connection = typeof opts.redis === 'string' ? createRedis(opts.redis, 'worker') : opts.redis;
  return new Worker(opts.queue, async () => ({ outcome: 'skipped', reason: 'noop' }), { connection, prefix: opts.prefix, concurrency: opts.concurrency });
}
