// RouteClient through the `route` queue: the multi-replica gateway's router. A job per decision
// (removed when done), its result awaited with QueueEvents up to the timeout. Router workers
// publish heartbeats; with none alive, route() fails at once with RouterUnavailableError and
// leaves one wake job in the queue, so that a router pool scaled to zero on the queue's depth
// (KEDA, k8s/) sees demand and starts a worker.
import { randomUUID } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import { Queue, QueueEvents } from 'bullmq';
import type { FuguConfig } from '@fugu/config';
import { createRedis, ROUTE_TEXT_MAX_CHARS, routeQueue, type RedisClient, type RouteJob } from '@fugu/queue';
import { decodeWireError, fromWireError, InputError, type WireError } from '@fugu/core';
import { RouterUnavailableError } from './errors.ts';
import { checkRouteRequest } from './in-process-client.ts';
import type { RouteClient, RouteDecision, RouteRequest } from './types.ts';
import { bullTelemetry } from '@fugu/telemetry';

/** Sorted set of router worker ids scored by their last heartbeat (epoch ms). */
export const routerHeartbeatKey = (prefix: string): string => `${prefix}:router:heartbeats`;
/** a router worker beats every HEARTBEAT_MS; it counts as alive while seen within HEARTBEAT_TTL_MS */
export const HEARTBEAT_MS = 1_000;
export const HEARTBEAT_TTL_MS = 3_000;
/** The id of the wake job: one for any number of requests while no router worker is alive. */
export const WAKE_JOB_ID = 'wake';

/** Router workers seen within HEARTBEAT_TTL_MS. */
export async function liveRouterWorkers(redis: RedisClient, prefix: string, now = Date.now()): Promise<string[]> {
  return redis.zrangebyscore(routerHeartbeatKey(prefix), now - HEARTBEAT_TTL_MS, '+inf');
}

/** What a router worker returns for a route job: a decision, or the error that request has (not retried), as a WireError. */
export type RouteJobResult = { ok: true; decision: Omit<RouteDecision, 'routingMs'> } | { ok: false; error: WireError };

export type QueueRouteClientOptions = {
  config: Pick<FuguConfig, 'redisUrl' | 'queuePrefix' | 'router'>;
  /** how long a liveness answer is reused (default 250 ms) */
  livenessCacheMs?: number;
};

export class QueueRouteClient implements RouteClient {
  private readonly prefix: string;
  private readonly timeoutMs: number;
  private readonly redis: RedisClient;
  private readonly eventsRedis: RedisClient;
  private readonly queue: Queue;
  private readonly events: QueueEvents;
  private readonly livenessCacheMs: number;
  private alive: { at: number; value: Promise<boolean> } | undefined;

  private constructor(opts: QueueRouteClientOptions, redis: RedisClient, lastEventId: string) {
    this.prefix = opts.config.queuePrefix;
    this.timeoutMs = opts.config.router.timeoutMs;
    this.livenessCacheMs = opts.livenessCacheMs ?? 250;
    this.redis = redis;
    this.eventsRedis = createRedis(opts.config.redisUrl, 'worker');
    this.queue = new Queue(routeQueue, { connection: this.redis, prefix: this.prefix, ...bullTelemetry() });
    // Read the events stream from an explicit id, never '$': with '$' BullMQ's reader misses what
    // is written between its reads until the first event arrives (and before its first read), so
    // a fast decision could complete unseen and its request time out.
    this.events = new QueueEvents(routeQueue, { connection: this.eventsRedis, prefix: this.prefix, lastEventId });
    this.events.on('error', () => {});
    // every waiting request listens on these: many at once is normal
    this.queue.setMaxListeners(0);
    this.events.setMaxListeners(0);
  }

  static async create(opts: QueueRouteClientOptions): Promise<QueueRouteClient> {
    const redis = createRedis(opts.config.redisUrl, 'producer');
    // stream ids are Redis server time in ms: start from now on the server's clock
    const [seconds, micros] = await redis.time();
    const c = new QueueRouteClient(opts, redis, `${Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)}-0`);
    await c.events.waitUntilReady();
    return c;
  }

  async route(req: RouteRequest): Promise<RouteDecision> {
    checkRouteRequest(req);
    const t0 = performance.now();
    if (!(await this.anyAlive())) {
      this.wake();
      throw new RouterUnavailableError('no router worker is alive (start apps/router-worker)');
    }
    const timeoutMs = req.timeoutMs ?? this.timeoutMs;
    const data: RouteJob = {
      v: 1,
      text: req.text.slice(0, ROUTE_TEXT_MAX_CHARS),
      ...(req.allowed && { allowed: [...req.allowed] }),
      ...(req.lambda !== undefined && { lambda: req.lambda }),
      deadline: Date.now() + timeoutMs,
    };
    // listen before adding (a custom job id): a decision can come back before add() returns, and
    // Job.waitUntilFinished's state check then races the job's removal (removeOnComplete)
    const jobId = randomUUID();
    // QueueEvents emits `completed:<id>` / `failed:<id>`, names its typing does not list
    const events = this.events as unknown as EventEmitter;
    const result = await new Promise<RouteJobResult>((resolve, reject) => {
      const done = (): void => {
        clearTimeout(timer);
        events.off(`completed:${jobId}`, onCompleted);
        events.off(`failed:${jobId}`, onFailed);
      };
      const onCompleted = (args: { returnvalue: unknown }): void => {
        done();
        resolve(args.returnvalue as RouteJobResult);
      };
      const onFailed = (args: { failedReason?: string }): void => {
        done();
        reject(new RouterUnavailableError(`routing failed: ${args.failedReason ? decodeWireError(args.failedReason).message : 'unknown error'}`));
      };
      const timer = setTimeout(() => {
        done();
        reject(new RouterUnavailableError(`no routing decision within ${timeoutMs} ms`));
      }, timeoutMs);
      events.on(`completed:${jobId}`, onCompleted);
      events.on(`failed:${jobId}`, onFailed);
      this.queue.add('route', data, { jobId, removeOnComplete: true, removeOnFail: true, attempts: 3, backoff: { type: 'fixed', delay: 0 } }).catch((e: unknown) => {
        done();
        reject(new RouterUnavailableError(`cannot add a route job: ${(e as Error).message}`, { cause: e }));
      });
    });
    if (!result.ok) {
      const e = fromWireError(result.error);
      if (e instanceof InputError) throw e;
      throw new RouterUnavailableError(`routing failed: ${e.message}`);
    }
    const d = result.decision;
    return { worker: d.worker, workers: d.workers, probs: d.probs, checkpointId: d.checkpointId, routingMs: performance.now() - t0 };
  }

  /** true while at least one router worker is alive */
  async ready(): Promise<boolean> {
    return this.anyAlive(true);
  }

  async close(): Promise<void> {
    await this.events.close().catch(() => {});
    await this.queue.close().catch(() => {});
    this.redis.disconnect();
    this.eventsRedis.disconnect();
  }

  /**
   * One job in the route queue while none is alive (a fixed id: BullMQ adds it once). It carries
   * no request text and a deadline long past, so the worker that starts drops it at once.
   */
  private wake(): void {
    const data: RouteJob = { v: 1, text: 'wake', deadline: 1 };
    this.queue.add('wake', data, { jobId: WAKE_JOB_ID, removeOnComplete: true, removeOnFail: true }).catch(() => {});
  }

  private anyAlive(fresh = false): Promise<boolean> {
    const now = Date.now();
    if (!fresh && this.alive && now - this.alive.at < this.livenessCacheMs) return this.alive.value;
    const value = liveRouterWorkers(this.redis, this.prefix, now).then(
      (ids) => ids.length > 0,
      () => false,
    );
    this.alive = { at: now, value };
    return value;
  }
}
