// `node apps/conductor/src/main.ts` — the conductor process (the same command its container
// runs): executes workflows from the `conduct` queue (@fugu/ultra). Configuration: environment
// (see README), e.g. FUGU_REDIS_URL, FUGU_DATABASE_URL, FUGU_CONDUCTOR_CONCURRENCY,
// FUGU_CONDUCTOR_PORT, FUGU_CONDUCTOR_ENDPOINTS, FUGU_CONDUCTOR_TEMPERATURE.
import { loadConfig } from '@fugu/config';
import { connectDb, migrate } from '@fugu/db';
import { assertRedis, installShutdown } from '@fugu/queue';
import { createLogger, Registry, startOpsServer, startTracing } from '@fugu/telemetry';
import { collectDefaultMetrics } from 'prom-client';
import { startConductorWorker } from './worker.ts';

async function main(): Promise<void> {
  const config = loadConfig();
  const log = createLogger({ name: 'conductor', level: config.logLevel });
  // spans to an OTLP endpoint when OTEL_EXPORTER_OTLP_ENDPOINT is set (else off); before any queue, so every queue carries them
  const tracing = await startTracing('fugu-conductor', process.env, log);
  await assertRedis(config.redisUrl);
  const db = await connectDb(config.databaseUrl, { applicationName: 'fugu-conductor' });
  await migrate(db);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const worker = await startConductorWorker({ config, db, log, registry });
  const ops = await startOpsServer({ port: config.conductor.port, registry, ready: () => worker.isRunning() });
  log.info({ port: ops.port }, 'health and metrics on /healthz, /readyz, /metrics');
  // a parent process (tests, the CLI's local processes) reads this to learn the port
  if (process.send) process.send({ type: 'ready', port: ops.port });
  const drainMs = config.worker.drainTimeoutMs;
  installShutdown(
    [
      { name: 'conductor', close: (deadline) => worker.close(Math.min(deadline, Date.now() + drainMs)) },
      { name: 'ops server', close: () => ops.close() },
      { name: 'postgres', close: () => db.destroy() },
      ...(tracing ? [{ name: 'tracing', close: () => tracing.shutdown() }] : []),
    ],
    { timeoutMs: drainMs + 5_000, log: (msg, extra) => log.info(extra ?? {}, msg) },
  );
}

main().catch((e: unknown) => {
  process.stderr.write(`conductor: ${(e as Error).message}\n`);
  process.exit(1);
});
