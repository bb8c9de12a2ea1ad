// The conductor process's work: a BullMQ Worker on the `conduct` queue calling executeWorkflow
// (@fugu/ultra) for each job. Invalid payloads are rejected (InvalidJobError, never retried); a
// workflow whose job failed for good is marked failed with the error, so no row stays running.
import { Queue, Worker, type Job } from 'bullmq';
import { PROVIDERS, toWireError } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import { finishWorkflow, type Db } from '@fugu/db';
import { closeWorkers, conductJobSchema, conductQueue, createRedis, parseJob, providerCallQueues, type ConductJob, type ConductJobResult } from '@fugu/queue';
import { ChatCallEvents, createCallPipeline, providerCallCounterKey } from '@fugu/calls';
import { executeWorkflow, policyWriter, routerPicker, type PolicyConductorFactory } from '@fugu/ultra';
import { Counter, type Logger, type Registry, bullTelemetry } from '@fugu/telemetry';

export type ConductorWorkerOptions = {
  config: FuguConfig;
  db: Db;
  log: Logger;
  registry: Registry;
  /** where API keys of llm: Conductors are read (default process.env) */
  env?: Record<string, string | undefined>;
  /** the writer of policy: specs (default: the embedded policy from its stored checkpoint) */
  policyConductor?: PolicyConductorFactory;
};

export type ConductorWorkerHandle = {
  isRunning(): boolean;
  close(deadline?: number): Promise<void>;
};

export async function startConductorWorker(opts: ConductorWorkerOptions): Promise<ConductorWorkerHandle> {
  const { config, db, log } = opts;
  const connection = createRedis(config.redisUrl, 'worker');
  const pipeline = createCallPipeline({ db, redis: connection, config, log, env: opts.env ?? process.env, callCounterKey: providerCallCounterKey(config.queuePrefix) });
  const queues = new Map<string, Queue>();
  const queue = (name: string): Queue => {
    let q = queues.get(name);
    if (!q) {
      q = new Queue(name, { connection, prefix: config.queuePrefix, ...bullTelemetry() });
      queues.set(name, q);
    }
    return q;
  };
  // steps' completions wake their workflows (one blocking connection per provider queue shard)
  const stepEvents = config.conductor.stepEvents ? new ChatCallEvents({ connection: () => createRedis(config.redisUrl, 'worker'), prefix: config.queuePrefix }) : undefined;
  await stepEvents?.listen(PROVIDERS.flatMap((p) => providerCallQueues(p, config.providerQueueShards)));
  const router = routerPicker(db, config.home);
  const policy = opts.policyConductor ?? policyWriter(db, config.home);
  const done = new Counter({ name: 'fugu_conductor_workflows_total', help: 'workflows finished by this process, by finish reason', labelNames: ['finish_reason'], registers: [opts.registry] });
  const invalid = new Counter({ name: 'fugu_conductor_invalid_jobs_total', help: 'conduct jobs rejected for an invalid payload', registers: [opts.registry] });

  const processor = async (job: Job): Promise<ConductJobResult> => {
    let data: ConductJob;
    try {
      data = parseJob(conductJobSchema, job.data, conductQueue, job.id);
    } catch (e) {
      invalid.inc();
      log.error({ job: job.id, err: e }, 'rejected a conduct job whose payload failed validation');
      throw e;
    }
    const r = await executeWorkflow({ db, config, queue, pipeline, log, routerPick: router, policyConductor: policy, ...(stepEvents && { stepEvents }) }, data.workflowId);
    if (r.outcome === 'done') done.inc({ finish_reason: r.finishReason });
    return r;
  };

  const w = new Worker(conductQueue, processor, {
    ...bullTelemetry(),
    connection,
    prefix: config.queuePrefix,
    concurrency: config.conductor.concurrency,
    lockDuration: config.conductor.lockDurationMs,
    stalledInterval: config.conductor.lockDurationMs,
    maxStalledCount: 3,
  });
  w.on('error', (e) => log.warn({ err: e }, 'conductor worker error'));
  w.on('failed', (job, e) => {
    log.warn({ job: job?.id, attempts: job?.attemptsMade, err: e }, 'conduct job attempt failed');
    const id = (job?.data as Partial<ConductJob> | undefined)?.workflowId;
    const final = job && (e.name === 'InvalidJobError' || e.name === 'UnrecoverableError' || job.attemptsMade >= (job.opts.attempts ?? 1));
    if (final && typeof id === 'number') void finishWorkflow(db, id, { status: 'failed', error: toWireError(e) }).catch(() => {});
  });
  log.info({ concurrency: config.conductor.concurrency }, 'conductor started');

  return {
    isRunning: () => w.isRunning(),
    close: async (deadline = Date.now() + config.worker.drainTimeoutMs) => {
      // the workflows in hand finish until the deadline; past it the worker is disconnected and
      // another conductor takes them when their locks expire (closeWorkers: also after a failover)
      if (!(await closeWorkers([w], deadline))) log.warn('drain timed out; disconnected the conductor worker');
      await pipeline.flush();
      await router.release();
      if ('release' in policy) await (policy as { release(): Promise<void> }).release();
      await Promise.all([...queues.values()].map((q) => q.close()));
      await stepEvents?.close();
      connection.disconnect();
    },
  };
}
