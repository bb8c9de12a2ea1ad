// RouteClient in this process: a RouterThreadPool (worker threads, no queue hop) serving the
// deployment's checkpoint, swapped when a new one is published. The single-replica gateway's router.
import { InputError } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import type { Db } from '@fugu/db';
import { DeploymentWatcher } from './deployment.ts';
import { RouterUnavailableError } from './errors.ts';
import { RouterThreadPool, type PoolBatchInfo } from './thread-pool.ts';
import type { RouteClient, RouteDecision, RouteRequest } from './types.ts';

export type ServingLog = (level: 'info' | 'warn' | 'error', msg: string, extra?: Record<string, unknown>) => void;

export type InProcessRouteClientOptions = {
  config: Pick<FuguConfig, 'home' | 'redisUrl' | 'queuePrefix' | 'router'>;
  db: Db;
  /** subscribe to publish messages (default true); without, only polling */
  subscribe?: boolean;
  log?: ServingLog;
  onBatch?: (info: PoolBatchInfo) => void;
};

/** Checks a request's fields; an InputError names the bad one. */
export function checkRouteRequest(req: RouteRequest): void {
  if (typeof req !== 'object' || req === null) throw new InputError('route request must be an object', { field: 'request' });
  if (typeof req.text !== 'string' || req.text.trim().length === 0) throw new InputError('text must be a non-empty string', { field: 'text' });
  if (req.allowed !== undefined && (!Array.isArray(req.allowed) || req.allowed.length === 0 || req.allowed.some((w) => typeof w !== 'string' || w.length === 0))) {
    throw new InputError('allowed must be a non-empty list of worker names', { field: 'allowed' });
  }
  if (req.lambda !== undefined && (typeof req.lambda !== 'number' || !Number.isFinite(req.lambda) || req.lambda < 0)) throw new InputError(`lambda must be a finite number >= 0, got ${String(req.lambda)}`, { field: 'lambda' });
  if (req.timeoutMs !== undefined && (typeof req.timeoutMs !== 'number' || !(req.timeoutMs > 0))) throw new InputError(`timeoutMs must be > 0, got ${String(req.timeoutMs)}`, { field: 'timeoutMs' });
}

export class InProcessRouteClient implements RouteClient {
  readonly pool: RouterThreadPool;
  readonly watcher: DeploymentWatcher;
  private readonly timeoutMs: number;

  private constructor(pool: RouterThreadPool, watcher: DeploymentWatcher, timeoutMs: number) {
    this.pool = pool;
    this.watcher = watcher;
    this.timeoutMs = timeoutMs;
  }

  /** Starts the threads and loads the deployment's checkpoint if one is published (else ready() is false until then). */
  static async create(opts: InProcessRouteClientOptions): Promise<InProcessRouteClient> {
    const r = opts.config.router;
    const pool = await RouterThreadPool.create({
      home: opts.config.home,
      threads: r.threads,
      maxBatch: r.maxBatch,
      maxWaitMs: r.maxWaitMs,
      executionProvider: r.executionProvider,
      log: (msg, extra) => opts.log?.('info', msg, extra),
      ...(opts.onBatch && { onBatch: opts.onBatch }),
    });
    const watcher = new DeploymentWatcher({
      db: opts.db,
      deployment: r.deployment,
      pollMs: r.pollMs,
      queuePrefix: opts.config.queuePrefix,
      ...(opts.subscribe !== false && { redisUrl: opts.config.redisUrl }),
      onCheckpoint: (ckpt) => pool.swap(ckpt),
      ...(opts.log && { log: opts.log }),
    });
    try {
      await watcher.start();
    } catch (e) {
      await pool.close();
      throw e;
    }
    return new InProcessRouteClient(pool, watcher, r.timeoutMs);
  }

  async route(req: RouteRequest): Promise<RouteDecision> {
    checkRouteRequest(req);
    const timeoutMs = req.timeoutMs ?? this.timeoutMs;
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        this.pool.route({ text: req.text, ...(req.allowed && { allowed: req.allowed }), ...(req.lambda !== undefined && { lambda: req.lambda }) }),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new RouterUnavailableError(`no routing decision within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  async ready(): Promise<boolean> {
    return this.pool.ready;
  }

  async close(): Promise<void> {
    await this.watcher.close();
    await this.pool.close();
  }
}
