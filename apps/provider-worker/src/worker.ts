// The provider-call worker: consumes `provider-call.<provider>` jobs, calls the worker's model
// (or replays a recorded answer), verifies the answer, and records call + reward in Postgres.
//
// Retries: a 429 moves the job back with the provider's retry-after as a queue-wide rate limit
// (no attempt is used); other transient errors are retried by BullMQ with exponential backoff
// and jitter; a permanent error, or a transient one on the last attempt, is recorded as an
// error row so the run still completes with exactly one row per call.
import { Queue, RateLimitError as QueueRateLimitError, UnrecoverableError, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { ConfigError, estimateTokens, formatUsd, InputError, parseUsd, tokenCost, type ProviderKind } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import { getCachedResponse, putCachedResponse, setRunStatus, type Db, type RunProgress, type StoredWorker } from '@fugu/db';
import { createChatModel, isProviderError, requestHash, type ChatModel, type ChatRequest, type ChatResult } from '@fugu/providers';
import { verify } from '@fugu/datasets';
import { callJobId, createRedis, parseJob, providerCallJobSchema, providerCallQueue, TokenBucket, type ProviderCallJob, type ProviderCallResult } from '@fugu/queue';
import type { Logger, Registry } from '@fugu/telemetry';
import { CallWriter } from '@fugu/calls';
import { ItemLoader, RunStatusCache, WorkerCache } from './caches.ts';
import { createWorkerMetrics } from './metrics.ts';

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

/** Redis hash counting every provider call started (the fault test reads re-executions from it). */
export const providerCallCounterKey = (prefix: string): string => `${prefix}:stats:provider-calls`;

export async function startProviderWorker(opts: ProviderWorkerOptions): Promise<ProviderWorkerHandle> {
  const { config, db, log } = opts;
  const env = opts.env ?? process.env;
  const metrics = createWorkerMetrics(opts.registry);
  const connection = createRedis(config.redisUrl, 'worker');
  const items = new ItemLoader(db);
  const workers = new WorkerCache(db);
  const runs = new RunStatusCache(db);
  const models = new Map<number, ChatModel>();
  const counterKey = providerCallCounterKey(config.queuePrefix);

  const writer = new CallWriter(db, {
    maxBatch: config.worker.writeBatchSize,
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

  function modelFor(w: StoredWorker): ChatModel {
    let m = models.get(w.id);
    if (!m) {
      m = createChatModel(w, env, {
        timeoutMs: config.worker.callTimeoutMs,
        replayStore: {
          lookup: (_prompt: string, itemId?: string) => {
            const it = itemId ? items.peek(Number(itemId)) : undefined;
            const outcome = it?.recorded?.[w.name];
            return it && outcome ? { itemId: String(it.dbId), outcome } : undefined;
          },
        },
      });
      models.set(w.id, m);
    }
    return m;
  }

  const queues = new Map<ProviderKind, Queue>();
  const buckets = new Map<ProviderKind, TokenBucket>();
  const bullWorkers: Worker[] = [];

  for (const provider of config.worker.providers) {
    const name = providerCallQueue(provider);
    const queue = new Queue(name, { connection, prefix: config.queuePrefix });
    queues.set(provider, queue);
    const limits = config.rateLimits[provider];
    if (limits?.tokensPerMinute) buckets.set(provider, new TokenBucket(connection, `${config.queuePrefix}:ratelimit:tokens:${provider}`, limits.tokensPerMinute));

    const processor = async (job: Job): Promise<ProviderCallResult> => {
      let data: ProviderCallJob;
      try {
        data = parseJob(providerCallJobSchema, job.data, name, job.id);
      } catch (e) {
        metrics.invalid.inc({ provider });
        log.error({ queue: name, job: job.id, err: e }, 'rejected a job whose payload failed validation');
        throw e;
      }
      const status = await runs.get(data.runId);
      if (status === undefined) throw new UnrecoverableError(`run ${data.runId} does not exist`);
      if (status !== 'running') {
        metrics.skipped.inc({ provider });
        return { outcome: 'skipped', reason: `run is ${status}` };
      }
      const [worker, item] = await Promise.all([workers.get(data.workerId), items.get(data.itemId)]);
      const request: ChatRequest = {
        messages: [{ role: 'user', content: item.prompt }],
        metadata: { itemId: String(item.dbId) },
        timeoutMs: config.worker.callTimeoutMs,
      };
      const hash = requestHash(worker, request, data.repetition);
      const attempt = job.attemptsMade + 1;
      const base = { runId: data.runId, itemId: data.itemId, workerId: data.workerId, repetition: data.repetition, requestHash: hash, attempts: attempt };
      const useCache = config.worker.responseCache && worker.provider !== 'replay';

      const callKey = callJobId(data.runId, data.itemId, data.workerId, data.repetition);
      let result: ChatResult | undefined;
      let cached = false;
      // a cached answer costs nothing, unless this very call paid for it in an earlier attempt
      // whose row was never written (a crash between the call and the write)
      let paidEarlier = false;
      let latencyMs = 0;
      if (useCache) {
        const hit = await getCachedResponse(db, hash);
        if (hit) {
          result = hit.response as unknown as ChatResult;
          cached = true;
          paidEarlier = hit.paidBy === callKey;
        }
      }
      if (!result) {
        const bucket = buckets.get(provider);
        if (bucket) {
          const wait = await bucket.take(estimateTokens(item.prompt) + (worker.settings.maxTokens ?? 256));
          if (wait > 0) {
            await queue.rateLimit(wait);
            throw new QueueRateLimitError();
          }
        }
        // counted before the call, without waiting for the answer: the command is on the wire
        // before the call starts, so even a worker killed mid-call has counted it
        void connection.hincrby(counterKey, provider, 1).catch(() => {});
        const started = performance.now();
        try {
          result = await modelFor(worker).generate(request);
        } catch (e) {
          latencyMs = Math.round(performance.now() - started);
          if (isProviderError(e)) {
            metrics.errors.inc({ provider, kind: e.kind });
            if (e.kind === 'rate-limit') {
              // honour retry-after for the whole queue (every process), without using an attempt
              await queue.rateLimit(Math.max(e.retryAfterMs ?? 1_000, 50));
              throw new QueueRateLimitError();
            }
            if (e.transient && attempt < (job.opts.attempts ?? 1)) throw e;
          } else if (!(e instanceof ConfigError) && attempt < (job.opts.attempts ?? 1)) {
            throw e;
          }
          // a missing API key is recorded at once: retrying cannot fix it, the message names the variable
          const kind = isProviderError(e) ? e.kind : e instanceof ConfigError ? 'config' : 'internal';
          await writer.write({ ...base, status: 'error', response: null, tokensIn: 0, tokensOut: 0, cost: '0', latencyMs, cached: false, errorKind: kind, error: (e as Error).message.slice(0, 2000), score: null, verifier: null });
          metrics.calls.inc({ provider, worker: worker.name, status: 'error' });
          return { outcome: 'recorded', status: 'error', cached: false };
        }
        latencyMs = Math.round(performance.now() - started);
        metrics.latency.observe({ provider }, latencyMs / 1000);
        if (useCache) await putCachedResponse(db, { requestHash: hash, provider, model: worker.model, response: result as unknown as Record<string, unknown>, tokensIn: result.usage.inputTokens, tokensOut: result.usage.outputTokens, paidBy: callKey });
      }

      // an answer that cannot be checked here (e.g. code from a live model: nothing executes
      // it) is recorded without a reward, with the reason
      let reward: { score: number; verifier: string } | null = null;
      let unverifiable: string | null = null;
      try {
        reward = verify(item, result.text, result.providerMetadata);
      } catch (e) {
        if (!(e instanceof InputError)) throw e;
        unverifiable = e.message;
      }
      const cost = cached && !paidEarlier ? 0n : tokenCost(result.usage.inputTokens, result.usage.outputTokens, worker.prices);
      await writer.write({
        ...base,
        status: 'ok',
        response: { text: result.text, toolCalls: result.toolCalls, finishReason: result.finishReason, model: result.model, ...(result.providerMetadata && { providerMetadata: result.providerMetadata }) },
        tokensIn: result.usage.inputTokens,
        tokensOut: result.usage.outputTokens,
        cost: formatUsd(cost),
        latencyMs,
        cached,
        errorKind: unverifiable ? 'unverifiable' : null,
        error: unverifiable,
        score: reward?.score ?? null,
        verifier: reward?.verifier ?? null,
      });
      metrics.calls.inc({ provider, worker: worker.name, status: cached ? 'cached' : 'ok' });
      metrics.tokens.inc({ provider, direction: 'in' }, result.usage.inputTokens);
      metrics.tokens.inc({ provider, direction: 'out' }, result.usage.outputTokens);
      if (cost > 0n) metrics.spend.inc({ provider }, Number(cost) / 1e12);
      return { outcome: 'recorded', status: 'ok', cached };
    };

    const limiter = limiterFor(limits?.requestsPerMinute ?? 0);
    const w = new Worker(name, processor, {
      connection,
      prefix: config.queuePrefix,
      concurrency: config.worker.concurrency,
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

  log.info({ queues: [...queues.keys()].map(providerCallQueue), concurrency: config.worker.concurrency }, 'provider worker started');

  return {
    queues: [...queues.keys()].map(providerCallQueue),
    isRunning: () => bullWorkers.every((w) => w.isRunning()),
    close: async (deadline = Date.now() + config.worker.drainTimeoutMs) => {
      const left = () => Math.max(0, deadline - Date.now());
      // stop fetching and wait for the jobs in hand, bounded; past the bound, force-close: the
      // unfinished jobs' locks expire and another worker takes them
      const graceful = Promise.all(bullWorkers.map((w) => w.close()));
      const timedOut = await Promise.race([graceful.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), left()).unref())]);
      if (timedOut) {
        log.warn('drain timed out; force-closing workers');
        await Promise.all(bullWorkers.map((w) => w.close(true)));
      }
      await writer.flush();
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
export function startNoopWorker(opts: { redis: Redis | string; prefix: string; queue: string; concurrency: number }): Worker {
  const connection = typeof opts.redis === 'string' ? createRedis(opts.redis, 'worker') : opts.redis;
  return new Worker(opts.queue, async () => ({ outcome: 'skipped', reason: 'noop' }), { connection, prefix: opts.prefix, concurrency: opts.concurrency });
}
