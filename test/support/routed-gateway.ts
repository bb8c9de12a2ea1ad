// The gateway as the chat, responses, records and parameters tests build it in process: a fresh
// test database, a configuration of its own (queue prefix, FUGU_HOME), an anchor checkpoint
// published as the router deployment, the real router in process (InProcessRouteClient), and
// buildGateway listening on a free port. The test starts its stub providers and makes the pool;
// close() takes everything down but the stubs, which stay the test's to close.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { WorkerPool, WorkerSpec } from '@fugu/core';
import type { OpenAIStub, RecordedRequest, StubReply } from '@fugu/providers/testing';
import { loadConfig, type FuguConfig } from '@fugu/config';
import { publishDeployment, type CheckpointRecord } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { InProcessRouteClient } from '@fugu/serving';
import { saveAnchorCheckpoint, type AnchorCheckpointOptions } from '@fugu/serving/testing';
import { createLogger, type Logger } from '@fugu/telemetry';
import { createRedis, type RedisClient } from '@fugu/queue';
import { buildGateway, type GatewayOptions } from '../../apps/gateway/src/server.ts';
import { testRedisUrl } from './eval-env.ts';

/** What is there before buildGateway runs: what a test's further options are made from. */
export type GatewaySetup = {
  database: TestDatabase;
  home: string;
  config: FuguConfig;
  /** the producer connection, when `redis` was asked for */
  redis: RedisClient | undefined;
  ckpt: CheckpointRecord;
  routeClient: InProcessRouteClient;
  /** a silent logger named after the test */
  log: Logger;
};

export type RoutedGateway = GatewaySetup & {
  app: FastifyInstance;
  /** the gateway's OpenAI base URL (http://127.0.0.1:<port>/v1) */
  baseURL: string;
  /** closes the gateway, the route client and Redis (deleting the queue prefix's keys), drops the database and removes the home */
  close(): Promise<void>;
};

export type RoutedGatewayOptions = {
  /** names the temporary FUGU_HOME (fugu-<name>-…), the queue prefix and the logger */
  name: string;
  /** configuration beyond Redis, the database, the queue prefix, the home, silent logs and a 200 ms router poll */
  env?: Record<string, string>;
  pool: WorkerPool;
  /** the anchor checkpoint published as the router deployment (saveAnchorCheckpoint's options, home aside) */
  checkpoint: Omit<AnchorCheckpointOptions, 'home'>;
  /** a producer Redis connection, passed to the gateway (journal, shared rate limits, dashboard) */
  redis?: boolean;
  /** buildGateway's further options (default env: {}), made once the deployment is published; it may store more first */
  gateway?: (s: GatewaySetup) => Partial<GatewayOptions> | Promise<Partial<GatewayOptions>>;
};

/** A stub's replies that name its worker; with tools and a user message last, it calls get_weather. */
export function replyAs(name: string) {
  return (req: RecordedRequest): StubReply => {
    const last = (req.body?.messages ?? []).at(-1);
    if (req.body?.tools && last?.role === 'user') return { type: 'tool-calls', calls: [{ id: `call_${name}`, name: 'get_weather', arguments: '{"city":"Paris"}' }] };
    return { type: 'text', text: `answer from ${name}` };
  };
}

/** A pool worker played by an OpenAI stub (free unless priced). */
export const worker = (name: string, stub: OpenAIStub, price: [string, string] = ['0', '0']): WorkerSpec => ({
  name, provider: 'openai-compatible', model: `${name}-model`, baseUrl: stub.baseURL, settings: {}, prices: { inputPerMTok: price[0], outputPerMTok: price[1] },
});

export async function startRoutedGateway(opts: RoutedGatewayOptions): Promise<RoutedGateway> {
  const parts: Partial<RoutedGateway> = {};
  const close = async (): Promise<void> => {
    await parts.app?.close();
    await parts.routeClient?.close();
    const { redis, config } = parts;
    // this gateway's queue prefix only (route queue events, router heartbeats, the journal)
    const keys = redis && config ? await redis.keys(`${config.queuePrefix}:*`).catch(() => [] as string[]) : [];
    if (redis && keys.length > 0) await redis.del(...keys).catch(() => {});
    redis?.disconnect();
    await parts.database?.drop();
    if (parts.home) await rm(parts.home, { recursive: true, force: true });
  };
  try {
    const database = (parts.database = await createTestDatabase());
    const home = (parts.home = await mkdtemp(path.join(tmpdir(), `fugu-${opts.name}-`)));
    const config = (parts.config = loadConfig({
      FUGU_REDIS_URL: testRedisUrl(),
      FUGU_DATABASE_URL: database.url,
      FUGU_QUEUE_PREFIX: `fugu${opts.name.replace(/[^a-z0-9]/gi, '')}${randomBytes(4).toString('hex')}`,
      FUGU_HOME: home,
      FUGU_LOG_LEVEL: 'silent',
      FUGU_ROUTER_POLL_MS: '200',
      ...opts.env,
    }));
    const ckpt = (parts.ckpt = await saveAnchorCheckpoint(database.db, { home, ...opts.checkpoint }));
    await publishDeployment(database.db, config.router.deployment, ckpt.id);
    const routeClient = (parts.routeClient = await InProcessRouteClient.create({ config, db: database.db, subscribe: false }));
    const redis = (parts.redis = opts.redis ? createRedis(testRedisUrl(), 'producer') : undefined);
    const log = (parts.log = createLogger({ name: `${opts.name}-test`, level: 'silent' }));
    const setup: GatewaySetup = { database, home, config, redis, ckpt, routeClient, log };
    const more = (await opts.gateway?.(setup)) ?? {};
    const app = (parts.app = await buildGateway({
      config,
      pool: opts.pool,
      routeClient,
      routerWorkers: ckpt.workers.map((w) => w.name),
      db: database.db,
      env: {},
      log,
      ...(redis && { redis }),
      ...more,
    }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    const baseURL = `http://127.0.0.1:${(app.server.address() as { port: number }).port}/v1`;
    return { ...setup, app, baseURL, close };
  } catch (e) {
    await close().catch(() => {});
    throw e;
  }
}
