// `node apps/trainer/src/evaluator-main.ts` — an ES evaluator process (scale it out: any number,
// on any machine that reaches Redis and Postgres). Consumes `es-eval`, writes es_evaluations.
// Environment: FUGU_REDIS_URL, FUGU_DATABASE_URL, FUGU_QUEUE_PREFIX, FUGU_HOME,
// FUGU_ES_EVAL_CONCURRENCY (8: jobs in hand, evaluated together per generation and replica),
// FUGU_ES_LOCK_MS (30000: a killed evaluator's jobs come back after about this long),
// FUGU_ES_THREADS (ONNX Runtime threads; default one per core), FUGU_ES_EVALUATOR_PORT (9471; 0 = any),
// FUGU_WORKER_DRAIN_TIMEOUT_MS (drain on SIGTERM); FUGU_ES_EVAL_HANG_AT (tests only: take the jobs
// of that generation and never finish them).
import { loadConfig } from '@fugu/config';
import { connectDb, migrate } from '@fugu/db';
import { assertRedis, createRedis, installShutdown } from '@fugu/queue';
import { startEvaluator } from '@fugu/training';
import { createLogger, Gauge, Registry, startOpsServer, startTracing } from '@fugu/telemetry';
import { collectDefaultMetrics } from 'prom-client';
import { envInt } from './env.ts';

const log = createLogger({ name: 'es-evaluator' });

async function main(): Promise<void> {
  // spans to an OTLP endpoint when OTEL_EXPORTER_OTLP_ENDPOINT is set (else off): a job's span continues its iteration's trace
  const tracing = await startTracing('fugu-es-evaluator', process.env, log);
  const env = process.env;
  const config = loadConfig();
  await assertRedis(config.redisUrl);
  const db = await connectDb(config.databaseUrl, { applicationName: 'fugu-es-evaluator' });
  await migrate(db);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const connection = createRedis(config.redisUrl, 'worker');
  const threads = envInt(env, 'FUGU_ES_THREADS', 0);
  const evaluator = await startEvaluator({
    db, connection, prefix: config.queuePrefix, home: config.home,
    concurrency: envInt(env, 'FUGU_ES_EVAL_CONCURRENCY', 8, 1),
    lockDurationMs: envInt(env, 'FUGU_ES_LOCK_MS', 30_000, 500),
    ...(threads > 0 && { taskOptions: { threads } }),
    log: (msg, extra) => log.warn(extra ?? {}, msg),
    ...(env.FUGU_ES_EVAL_HANG_AT && { hangAt: envInt(env, 'FUGU_ES_EVAL_HANG_AT', 0) }),
  });
  const evaluated = new Gauge({ name: 'fugu_es_evaluations_total', help: 'evaluations this process recorded', registers: [registry], collect() { this.set(evaluator.stats().evaluated); } });
  void evaluated;
  const ops = await startOpsServer({ port: envInt(env, 'FUGU_ES_EVALUATOR_PORT', 9471), registry, ready: () => true, details: () => ({ id: evaluator.id, ...evaluator.stats() }) });
  log.info({ id: evaluator.id, port: ops.port }, 'evaluator ready');
  if (process.send) process.send({ type: 'ready', port: ops.port, id: evaluator.id });
  const drainMs = config.worker.drainTimeoutMs;
  installShutdown(
    [
      { name: 'evaluator', close: (deadline) => evaluator.close(Math.min(deadline, Date.now() + drainMs)) },
      { name: 'ops server', close: () => ops.close() },
      { name: 'redis', close: async () => connection.disconnect() },
      { name: 'postgres', close: () => db.destroy() },
      ...(tracing ? [{ name: 'tracing', close: () => tracing.shutdown() }] : []),
    ],
    { timeoutMs: drainMs + 5_000, log: (msg, extra) => log.info(extra ?? {}, msg) },
  );
}

main().catch((e: unknown) => {
  process.stderr.write(`es-evaluator: ${(e as Error).message}\n`);
  process.exit(1);
});
