// The router worker: consumes `route` jobs and feeds them to a RouterThreadPool's micro-batcher
// (inference in worker threads, so this thread keeps renewing job locks and answering probes).
// It serves the deployment's checkpoint from Postgres and swaps on publish; it takes jobs and
// sends heartbeats only once a checkpoint is loaded. A short job lock (router.lockDurationMs)
// and a 1 s stalled-job check bring a killed worker's jobs back to the others quickly.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Worker, type Job } from 'bullmq';
import type { FuguConfig } from '@fugu/config';
import { InputError, toWireError, WireFailure } from '@fugu/core';
import type { Db } from '@fugu/db';
import { closeWorkers, createRedis, parseJob, routeJobSchema, routeQueue, type RouteJob } from '@fugu/queue';
import { DeploymentWatcher, HEARTBEAT_MS, RouterUnavailableError, RouterThreadPool, routerHeartbeatKey, type RouteJobResult } from '@fugu/serving';
import { Counter, Histogram, type Logger, type Registry, bullTelemetry } from '@fugu/telemetry';

export type RouterWorkerOptions = {
  config: FuguConfig;
  db: Db;
  log: Logger;
  registry: Registry;
  /** this worker's id in the heartbeat set (default host-pid-random) */
  id?: string;
};

export type RouterWorkerHandle = {
  id: string;
  pool: RouterThreadPool;
  /** a checkpoint is loaded and jobs are being taken */
  isReady(): boolean;
  close(deadline?: number): Promise<void>;
};

function createMetrics(registry: Registry) {
  return {
    batchSize: new Histogram({ name: 'fugu_router_batch_size', help: 'requests per inference batch', buckets: [1, 2, 4, 8, 16, 32, 64, 128], registers: [registry] }),
    queueWait: new Histogram({
      name: 'fugu_router_queue_wait_ms',
      help: 'ms from a route job being added to its decision leaving for a thread (queue + batch wait)',
      buckets: [0.5, 1, 2, 5, 10, 20, 50, 100, 250, 1000],
      registers: [registry],
    }),
    inference: new Histogram({ name: 'fugu_router_inference_ms', help: 'ms a thread spent on one batch (encode + head + policy)', buckets: [0.5, 1, 2, 5, 10, 20, 50, 100, 250], registers: [registry] }),
    decisions: new Counter({ name: 'fugu_router_decisions_total', help: 'routing decisions by chosen worker', labelNames: ['worker'], registers: [registry] }),
    dropped: new Counter({ name: 'fugu_router_dropped_total', help: 'route jobs dropped past their deadline', registers: [registry] }),
  };
}

export async function startRouterWorker(opts: RouterWorkerOptions): Promise<RouterWorkerHandle> {
  const { config, db, log } = opts;
  const id = opts.id ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  const metrics = createMetrics(opts.registry);
  const r = config.router;
  const pool = await RouterThreadPool.create({
    home: config.home,
    threads: r.threads,
    maxBatch: r.maxBatch,
    maxWaitMs: r.maxWaitMs,
    executionProvider: r.executionProvider,
    log: (msg, extra) => log.info(extra ?? {}, msg),
    onBatch: (b) => {
      metrics.batchSize.observe(b.size);
      metrics.inference.observe(b.inferenceMs);
    },
  });

  const connection = createRedis(config.redisUrl, 'worker');
  const processor = async (job: Job): Promise<RouteJobResult> => {
    const data: RouteJob = parseJob(routeJobSchema, job.data, routeQueue, job.id);
    if (Date.now() > data.deadline) {
      metrics.dropped.inc();
      return { ok: false, error: toWireError(new RouterUnavailableError('the request was past its deadline when a router worker took it')) };
    }
    metrics.queueWait.observe(Math.max(0, Date.now() - job.timestamp));
    try {
      const d = await pool.route({ text: data.text, ...(data.allowed && { allowed: data.allowed }), ...(data.lambda !== undefined && { lambda: data.lambda }) });
      metrics.decisions.inc({ worker: d.worker });
      return { ok: true, decision: { worker: d.worker, workers: d.workers, probs: d.probs, checkpointId: d.checkpointId } };
    } catch (e) {
      // a bad request is its caller's answer (not retried); anything else is retried by BullMQ
      if (e instanceof InputError) return { ok: false, error: toWireError(e) };
      // BullMQ keeps a failure as the thrown error's message: the encoded WireError
      throw new WireFailure(e);
    }
  };
  const bull = new Worker(routeQueue, processor, {
    ...bullTelemetry(),
    connection,
    prefix: config.queuePrefix,
    // a job's processedBy names the router worker holding it
    name: id,
    autorun: false,
    concurrency: Math.max(16, r.maxBatch * r.threads * 2),
    lockDuration: r.lockDurationMs,
    stalledInterval: 1_000,
    maxStalledCount: 10,
  });
  bull.on('error', (e) => log.warn({ err: e.message }, 'route worker error'));

  const heartbeat = createRedis(config.redisUrl, 'producer');
  const hbKey = routerHeartbeatKey(config.queuePrefix);
  let running = false;
  let closing = false;
  const beat = async (): Promise<void> => {
    if (!running || closing) return;
    const now = Date.now();
    await heartbeat.zadd(hbKey, now, id).catch(() => {});
    await heartbeat.zremrangebyscore(hbKey, '-inf', now - 60_000).catch(() => {});
  };
  const hbTimer = setInterval(() => void beat(), HEARTBEAT_MS);

  const start = (): void => {
    if (running || closing) return;
    running = true;
    void beat();
    bull.run().catch((e: unknown) => log.error({ err: (e as Error).message }, 'route worker stopped'));
    log.info({ id, queue: routeQueue }, 'taking route jobs');
  };

  const watcher = new DeploymentWatcher({
    db,
    deployment: r.deployment,
    pollMs: r.pollMs,
    redisUrl: config.redisUrl,
    queuePrefix: config.queuePrefix,
    onCheckpoint: async (ckpt) => {
      await pool.swap(ckpt);
      start();
    },
    log: (level, msg, extra) => log[level](extra ?? {}, msg),
  });
  await watcher.start();
  if (!running) log.warn({ deployment: r.deployment }, `no checkpoint is published for router deployment ${r.deployment} yet: waiting (fugu router publish <checkpoint> --deployment ${r.deployment})`);

  return {
    id,
    pool,
    isReady: () => running && pool.ready && !closing,
    async close(deadline = Date.now() + 10_000) {
      closing = true;
      clearInterval(hbTimer);
      await heartbeat.zrem(hbKey, id).catch(() => {});
      await watcher.close();
      // stops taking jobs and waits for the active ones (their batches finish in the pool)
      // (bounded: past the deadline its connections are dropped, as after a Redis Cluster failover)
      await closeWorkers([bull], running ? deadline : Date.now() + 2_000);
      await pool.close(deadline);
      heartbeat.disconnect();
      connection.disconnect();
    },
  };
}
