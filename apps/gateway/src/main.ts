// `node apps/gateway/src/main.ts` (or `fugu gateway`): the OpenAI-compatible gateway process.
// Configuration from the environment (README): FUGU_GATEWAY_PORT, FUGU_GATEWAY_MODE
// (in-process | pool), FUGU_GATEWAY_POOL, FUGU_GATEWAY_AUTH, FUGU_ADMIN_KEY (Bull Board),
// FUGU_REWARDS_DATASET and FUGU_REWARDS_BODY_LIMIT_BYTES (POST /v1/rewards, docs/rewards.md),
// FUGU_ULTRA_DEPLOYMENT and FUGU_ULTRA_ID_SECRET (model fugu-ultra), ...
// Checks Redis and Postgres, loads the worker pool and the deployed router checkpoint's worker
// list (model `fugu` routes with it when every one is in the pool; else by the pool's default
// worker, said in each answer), listens, and shuts down gracefully on SIGTERM.
import { Queue } from 'bullmq';
import { loadConfig } from '@fugu/config';
import { connectDb, getCheckpoint, getDeployment, getUltraDeployment, migrate, savePool } from '@fugu/db';
import { createCallPipeline } from '@fugu/calls';
import { poolContentHash } from '@fugu/evaluation';
import { assertRedis, createRedis, installShutdown } from '@fugu/queue';
import { InProcessRouteClient, QueueRouteClient, type RouteClient } from '@fugu/serving';
import { startLocalWorkers } from '@fugu/local-services';
import { createLogger, Registry, startTracing, bullTelemetry } from '@fugu/telemetry';
import { defaultConductor, policyWriter, routerPicker } from '@fugu/ultra';
import { collectDefaultMetrics } from 'prom-client';
import { buildGateway } from './server.ts';
import { createRewardsService, REWARD_LIMITS } from './plugins/rewards.ts';
import { checkRouterWorkers, loadGatewayWorkers } from './workers.ts';
import { loadUltraIdSecret, ULTRA_MODEL, ultraModel } from './ultra.ts';
import type { DefaultRouting, GatewayContext } from './context.ts';
import { assertPortFree } from './port.ts';

const log = createLogger({ name: 'gateway' });

async function main(): Promise<void> {
  // spans to an OTLP endpoint when OTEL_EXPORTER_OTLP_ENDPOINT is set (else off); first, so every queue carries them
  const tracing = await startTracing('fugu-gateway', process.env, log);
  const config = loadConfig();
  const g = config.gateway;
  await assertPortFree(g.host, g.port); // before Redis, Postgres, the pool and the checkpoint: a taken port is said at once
  await assertRedis(config.redisUrl);
  const db = await connectDb(config.databaseUrl, { applicationName: 'fugu-gateway' });
  await migrate(db);
  const { pool, replayStore, example, itemOf } = await loadGatewayWorkers(g.pool, config.llmrouterDir);

  // model fugu: the published router when it was trained on this pool's workers; else the pool's default worker
  let routerWorkers: string[] | undefined;
  let defaultRouting: DefaultRouting | undefined;
  const deployment = await getDeployment(db, config.router.deployment);
  const checkpoint = deployment && (await getCheckpoint(db, deployment.checkpointId));
  const fallbackTo = (reason: string): DefaultRouting => ({ worker: pool.defaultWorker ?? pool.workers[0]!.name, reason });
  if (checkpoint) {
    try {
      checkRouterWorkers(checkpoint.id, checkpoint.workers.map((w) => w.name), pool);
      routerWorkers = checkpoint.workers.map((w) => w.name);
    } catch (e) {
      defaultRouting = fallbackTo(`the published router (deployment "${config.router.deployment}", checkpoint ${checkpoint.id}) was trained on other workers than pool "${pool.name}"'s: ${(e as Error).message.split(';')[0]}`);
    }
  } else {
    defaultRouting = fallbackTo(`no router checkpoint is published for deployment "${config.router.deployment}"`);
  }
  if (defaultRouting) {
    log.warn({ deployment: config.router.deployment, worker: defaultRouting.worker }, `model "fugu" answers with the pool's default worker ${defaultRouting.worker} (${defaultRouting.reason}); train and publish a router for pool "${pool.name}" to route`);
  }

  const servingLog = (level: 'info' | 'warn' | 'error', msg: string, extra?: Record<string, unknown>) => log[level](extra ?? {}, msg);
  const routeClient: RouteClient =
    g.mode === 'in-process' ? await InProcessRouteClient.create({ config, db, log: servingLog }) : await QueueRouteClient.create({ config });
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const adminKey = process.env.FUGU_ADMIN_KEY?.trim() || undefined;
  // the shared rate limits of the call pipeline, and Bull Board
  const redis = createRedis(config.redisUrl, 'producer');
  // POST /v1/rewards: workflows on the gateway's pool through the conduct queue; question ids
  // name FUGU_REWARDS_DATASET (default: the LLMRouter data when the pool is its replay pool)
  const queues = new Map<string, Queue>();
  const queue = (name: string): Queue => {
    let q = queues.get(name);
    if (!q) queues.set(name, (q = new Queue(name, { connection: redis, prefix: config.queuePrefix, ...bullTelemetry() })));
    return q;
  };
  const rewardsDataset = process.env.FUGU_REWARDS_DATASET?.trim() || (g.pool === 'llmrouter' || g.pool.startsWith('llmrouter:') ? g.pool : undefined);
  const bodyLimitBytes = Number(process.env.FUGU_REWARDS_BODY_LIMIT_BYTES ?? REWARD_LIMITS.bodyLimitBytes);
  if (!Number.isInteger(bodyLimitBytes) || bodyLimitBytes < 1) throw new Error(`FUGU_REWARDS_BODY_LIMIT_BYTES must be a positive whole number of bytes, got ${process.env.FUGU_REWARDS_BODY_LIMIT_BYTES}`);
  const rewards = {
    service: createRewardsService({ db, queue, config, pool: g.pool, ...(rewardsDataset !== undefined && { dataset: rewardsDataset }), log }),
    bodyLimitBytes,
  };
  // model fugu-ultra: the Conductor published as FUGU_ULTRA_DEPLOYMENT (default fugu-ultra) for
  // this pool; its workflows run here, their steps through the gateway's call seam
  const stored = await savePool(db, pool, poolContentHash(pool));
  const routerPick = routerPicker(db, config.home);
  const policyConductor = policyWriter(db, config.home);
  const ultraDeps = {
    writer: { db, config, pipeline: createCallPipeline({ db, redis, config, log, env: process.env }), log, routerPick, policyConductor },
    secret: await loadUltraIdSecret(config.home),
    log,
    ...(itemOf && { itemOf }),
  };
  const ultra = (ctx: GatewayContext) => ultraModel(ctx, { name: process.env.FUGU_ULTRA_DEPLOYMENT?.trim() || ULTRA_MODEL, db, poolId: stored.poolId, workers: stored.workers, deps: ultraDeps });
  // the Batch API: lines as chat-call jobs on the provider queues (replay workers answer from the LLMRouter data)
  const replayPool = g.pool === 'llmrouter' || g.pool.startsWith('llmrouter:');
  // (a batch whose lines find no provider worker: this gateway starts its own, the provider-worker
  // app's command as `fugu eval --local-workers` starts them; they exit with the gateway)
  const startWorkers = (o: { count: number; providers: string[] }) =>
    startLocalWorkers(config, { ...o, env: { FUGU_WORKER_EXIT_WITH_PARENT: '1' }, onEvent: (msg) => log.warn({}, msg) });
  const batches = { queue, workers: stored.workers, startWorkers, ...(replayPool && { replayDataset: g.pool }) };
  const app = await buildGateway({ config, pool, routeClient, routerWorkers, ...(defaultRouting && { defaultRouting }), db, env: process.env, replayStore, redis, adminKey, log, registry, rewards, batches, extraModels: [ultra] });
  await app.listen({ port: g.port, host: g.host });
  const port = (app.server.address() as { port: number }).port;
  log.info(
    { port, host: g.host, mode: g.mode, pool: pool.name, workers: pool.workers.length, auth: g.auth, dashboard: adminKey ? '/admin/queues' : 'off (set FUGU_ADMIN_KEY)' },
    `gateway listening on http://${g.host}:${port}/v1 (${g.mode}, pool ${pool.name}, auth ${g.auth})`,
  );
  // a parent process (fugu gateway, tests) reads this to learn the port
  // (and the fugu-ultra model's name, when a Conductor is published for it)
  const ultraName = process.env.FUGU_ULTRA_DEPLOYMENT?.trim() || ULTRA_MODEL;
  // (served either way: the default Conductor where none is published for this pool)
  const ultraPublished = (await getUltraDeployment(db, ultraName))?.pool === pool.name;
  if (process.send) {
    process.send({ type: 'ready', port, host: g.host, example, pool: pool.name, ultra: ultraName, ...(!ultraPublished && { ultraDefault: defaultConductor(pool.workers) }), ...(defaultRouting && { defaultRouting }) });
  }
  installShutdown(
    [
      { name: 'http server', close: () => app.close() },
      { name: 'router', close: () => routeClient.close() },
      { name: 'conductor writers', close: async () => void (await Promise.all([routerPick.release(), policyConductor.release()])) },
      { name: 'queues', close: async () => void (await Promise.all([...queues.values()].map((q) => q.close().catch(() => {})))) },
      { name: 'redis', close: async () => redis.disconnect() },
      { name: 'postgres', close: () => db.destroy() },
      ...(tracing ? [{ name: 'tracing', close: () => tracing.shutdown() }] : []),
    ],
    { timeoutMs: 15_000, log: (msg, extra) => log.info(extra ?? {}, msg) },
  );
}

main().catch((e: unknown) => {
  process.stderr.write(`gateway: ${(e as Error).message}\n`);
  process.exit(1);
});
