// Operations: /healthz, /readyz (the route client is ready), /metrics, and Bull Board at
// /admin/queues over every queue behind the admin key (HTTP Basic password or Bearer token).
import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Queue } from 'bullmq';
import type { RedisClient } from '@fugu/queue';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import { allQueueNames } from '@fugu/queue';
import type { GatewayContext } from '../context.ts';
import { GatewayError } from '../errors.ts';

export async function opsPlugin(app: FastifyInstance, { ctx }: { ctx: GatewayContext }): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    // routing by the pool's default needs no router
    const ready = ctx.defaultRouting !== undefined || (await ctx.routeClient.ready().catch(() => false));
    return reply.code(ready ? 200 : 503).send({ ready });
  });
  app.get('/metrics', async (_req, reply) => reply.header('content-type', ctx.registry.contentType).send(await ctx.registry.metrics()));
}

export async function adminPlugin(app: FastifyInstance, { ctx, redis, adminKey }: { ctx: GatewayContext; redis: RedisClient; adminKey: string }): Promise<void> {
  const key = Buffer.from(adminKey);
  const queues = allQueueNames().map((n) => new Queue(n, { connection: redis, prefix: ctx.config.queuePrefix }));
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath('/admin/queues');
  createBullBoard({ queues: queues.map((q) => new BullMQAdapter(q, { readOnlyMode: false })), serverAdapter });
  app.addHook('onRequest', async (req, reply) => {
    if (!adminAuthorized(req.headers.authorization, key)) {
      return reply
        .code(401)
        .header('www-authenticate', 'Basic realm="fugu admin", charset="UTF-8"')
        .send(new GatewayError(401, 'the queue dashboard needs the admin key (FUGU_ADMIN_KEY) as the HTTP Basic password or a Bearer token', { code: 'invalid_admin_key' }).body());
    }
  });
  await app.register(serverAdapter.registerPlugin(), { prefix: '/admin/queues' });
  app.addHook('onClose', async () => {
    await Promise.all(queues.map((q) => q.close().catch(() => {})));
  });
}

function adminAuthorized(header: string | undefined, key: Buffer): boolean {
  if (!header) return false;
  let secret: string | undefined;
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (bearer) secret = bearer[1];
  const basic = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  if (basic) {
    const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    secret = colon >= 0 ? decoded.slice(colon + 1) : undefined;
  }
  if (secret === undefined) return false;
  const s = Buffer.from(secret);
  return s.length === key.length && timingSafeEqual(s, key);
}
