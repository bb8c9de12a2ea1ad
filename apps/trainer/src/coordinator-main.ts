// `node apps/trainer/src/coordinator-main.ts` — the ES coordinator process for one run (the same
// command a Kubernetes Job runs). The run is created by `fugu train es ... --no-wait` (or any
// earlier `fugu train es`); this process drives it to the end and may be killed and started
// again at any point: it resumes from Postgres. Exit status: 0 when the run completed, 3 when it
// ended otherwise (failed, cancelled), 143 when stopped by SIGTERM/SIGINT before it completed.
// Environment: FUGU_ES_RUN (required), FUGU_REDIS_URL, FUGU_DATABASE_URL, FUGU_QUEUE_PREFIX,
// FUGU_ES_COORDINATOR_PORT (9470; 0 = any), FUGU_ES_POLL_MS (500), FUGU_ES_CRASH_AT (tests only:
// fanout|fanin|commit:<generation> kills the process with SIGKILL there).
import { ConfigError } from '@fugu/core';
import { loadConfig } from '@fugu/config';
import { connectDb, migrate } from '@fugu/db';
import { assertRedis, createRedis } from '@fugu/queue';
import { parseCrashAt, runCoordinator } from '@fugu/training';
import { createLogger, Gauge, Registry, startOpsServer, startTracing } from '@fugu/telemetry';
import { collectDefaultMetrics } from 'prom-client';
import { envInt } from './env.ts';
import { superviseCoordinator } from './supervise.ts';

const log = createLogger({ name: 'es-coordinator' });

async function main(): Promise<void> {
  // spans to an OTLP endpoint when OTEL_EXPORTER_OTLP_ENDPOINT is set (else off); first, so every queue carries them (an iteration's flow is one trace)
  const tracing = await startTracing('fugu-es-coordinator', process.env, log);
  const env = process.env;
  const runId = env.FUGU_ES_RUN;
  if (!runId) throw new ConfigError('FUGU_ES_RUN: set it to the ES run to coordinate (fugu train es --no-wait creates one)', 'FUGU_ES_RUN');
  const config = loadConfig();
  await assertRedis(config.redisUrl);
  const db = await connectDb(config.databaseUrl, { applicationName: 'fugu-es-coordinator' });
  await migrate(db);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const genGauge = new Gauge({ name: 'fugu_es_generation', help: 'generations committed', registers: [registry] });
  const bestGauge = new Gauge({ name: 'fugu_es_best_fitness', help: 'best fitness so far', registers: [registry] });
  const sigmaGauge = new Gauge({ name: 'fugu_es_sigma', help: 'step size after the last generation', registers: [registry] });
  const connection = createRedis(config.redisUrl, 'producer');
  const workerConnection = createRedis(config.redisUrl, 'worker');
  const ac = new AbortController();
  let generation = -1;
  const ops = await startOpsServer({ port: envInt(env, 'FUGU_ES_COORDINATOR_PORT', 9470), registry, ready: () => true, details: () => ({ run: runId, generation }) });
  const done = runCoordinator({
    db, connection, workerConnection, prefix: config.queuePrefix, runId, signal: ac.signal,
    pollMs: envInt(env, 'FUGU_ES_POLL_MS', 500, 10),
    crashAt: parseCrashAt(env.FUGU_ES_CRASH_AT),
    log: (msg, extra) => log.info(extra ?? {}, msg),
    onDispatch: (e) => log.info(e, 'dispatched evaluations'),
    onGeneration: (e) => {
      generation = e.generation;
      genGauge.set(e.generation + 1);
      bestGauge.set(e.bestSoFar);
      sigmaGauge.set(e.sigmaAfter);
      log.info({ generation: e.generation, mean: e.meanFitness, best: e.bestFitness, bestSoFar: e.bestSoFar, sigma: e.sigmaAfter, wallMs: e.wallMs }, 'generation committed');
    },
  });
  if (process.send) process.send({ type: 'ready', port: ops.port });
  await superviseCoordinator({
    done, abort: ac, log,
    close: async () => {
      connection.disconnect();
      workerConnection.disconnect();
      await ops.close();
      await db.destroy();
      await tracing?.shutdown();
    },
  });
}

main().catch((e: unknown) => {
  process.stderr.write(`es-coordinator: ${(e as Error).message}\n`);
  process.exit(e instanceof ConfigError ? 2 : 1);
});
