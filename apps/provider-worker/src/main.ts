// `node apps/provider-worker/src/main.ts` — the provider-call worker process (the same command
// its container runs). Configuration: environment (see README), e.g. FUGU_REDIS_URL,
// FUGU_DATABASE_URL, FUGU_WORKER_PROVIDERS, FUGU_WORKER_CONCURRENCY, FUGU_WORKER_PORT.
import { loadConfig } from '@fugu/config';
import { connectDb, migrate } from '@fugu/db';
import { assertRedis, installShutdown } from '@fugu/queue';
import { createLogger, Registry, startOpsServer, startTracing } from '@fugu/telemetry';
import { collectDefaultMetrics } from 'prom-client';
import { startProviderWorker } from './worker.ts';

const log = createLogger({ name: 'provider-worker' });

async function main(): Promise<void> {
  // spans to an OTLP endpoint when OTEL_EXPORTER_OTLP_ENDPOINT is set (else off); first, so every queue carries them
  const tracing = await startTracing('fugu-provider-worker', process.env, log);
  const config = loadConfig();
  await assertRedis(config.redisUrl);
  const db = await connectDb(config.databaseUrl, { applicationName: 'fugu-provider-worker' });
  await migrate(db);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const worker = await startProviderWorker({ config, db, log, registry });
  const ops = await startOpsServer({
    port: config.worker.port,
    registry,
    ready: () => worker.isRunning(),
    details: () => ({ queues: worker.queues }),
  });
  log.info({ port: ops.port }, 'health and metrics on /healthz, /readyz, /metrics');
  // a parent process (fugu eval) reads this line to learn the port
  if (process.send) process.send({ type: 'ready', port: ops.port });
  const shutdown = installShutdown(
    [
      // the drain gets its own bound, so closing the rest still has time after it
      { name: 'workers', close: (deadline) => worker.close(Math.min(deadline, Date.now() + config.worker.drainTimeoutMs)) },
      { name: 'ops server', close: () => ops.close() },
      { name: 'postgres', close: () => db.destroy() },
      ...(tracing ? [{ name: 'tracing', close: () => tracing.shutdown() }] : []),
    ],
    { timeoutMs: config.worker.drainTimeoutMs + 5_000, log: (msg, extra) => log.info(extra ?? {}, msg) },
  );
  // a worker a gateway started for its batches drains and exits when that gateway is gone (even killed -9)
  // (not when it is draining on a signal already: a second shutdown would exit at once)
  if (process.env.FUGU_WORKER_EXIT_WITH_PARENT === '1' && process.send) {
    let signalled = false;
    for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => (signalled = true));
    process.once('disconnect', () => signalled || void shutdown());
  }
}

main().catch((e: unknown) => {
  // one clear line for the errors a user can fix (config, unreachable services)
  process.stderr.write(`provider-worker: ${(e as Error).message}\n`);
  process.exit(1);
});
