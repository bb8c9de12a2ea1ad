// `node apps/router-worker/src/main.ts` — the router worker process (the same command its
// container runs). Configuration: environment (see README), e.g. FUGU_REDIS_URL,
// FUGU_DATABASE_URL, FUGU_ROUTER_DEPLOYMENT, FUGU_ROUTER_THREADS, FUGU_ROUTER_MAX_BATCH,
// FUGU_ROUTER_MAX_WAIT_MS, FUGU_ROUTER_EXECUTION_PROVIDER, FUGU_ROUTER_PORT.
import { loadConfig } from '@fugu/config';
import { connectDb, migrate } from '@fugu/db';
import { assertRedis, installShutdown } from '@fugu/queue';
import { createLogger, Registry, startOpsServer, startTracing } from '@fugu/telemetry';
import { collectDefaultMetrics } from 'prom-client';
import { startRouterWorker } from './worker.ts';

const log = createLogger({ name: 'router-worker' });

async function main(): Promise<void> {
  // spans to an OTLP endpoint when OTEL_EXPORTER_OTLP_ENDPOINT is set (else off); first, so every queue carries them
  const tracing = await startTracing('fugu-router-worker', process.env, log);
  const config = loadConfig();
  await assertRedis(config.redisUrl);
  const db = await connectDb(config.databaseUrl, { applicationName: 'fugu-router-worker' });
  await migrate(db);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const worker = await startRouterWorker({ config, db, log, registry });
  const ops = await startOpsServer({
    port: config.router.port,
    registry,
    ready: () => worker.isReady(),
    details: () => ({ id: worker.id, ...worker.pool.stats() }),
  });
  log.info({ port: ops.port }, 'health and metrics on /healthz, /readyz, /metrics');
  // a parent process (tests) reads this line to learn the port
  if (process.send) process.send({ type: 'ready', port: ops.port, id: worker.id });
  const drainMs = 10_000;
  installShutdown(
    [
      { name: 'router worker', close: (deadline) => worker.close(Math.min(deadline, Date.now() + drainMs)) },
      { name: 'ops server', close: () => ops.close() },
      { name: 'postgres', close: () => db.destroy() },
      ...(tracing ? [{ name: 'tracing', close: () => tracing.shutdown() }] : []),
    ],
    { timeoutMs: drainMs + 5_000, log: (msg, extra) => log.info(extra ?? {}, msg) },
  );
}

main().catch((e: unknown) => {
  process.stderr.write(`router-worker: ${(e as Error).message}\n`);
  process.exit(1);
});
