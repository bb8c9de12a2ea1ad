// GET /v1/models (the models of the registry this caller may use) and POST /v1/route (the
// router's decision and every worker's probability, nothing called).
import type { FastifyInstance } from 'fastify';
import type { GatewayContext } from '../context.ts';
import { GatewayError } from '../errors.ts';
import { routingHeaders, routingTextOf, type ModelRegistry } from '../models.ts';
import { parseBody, routeRequestSchema, toChatMessages } from '../wire.ts';

export async function modelsPlugin(app: FastifyInstance, { ctx, models }: { ctx: GatewayContext; models: ModelRegistry }): Promise<void> {
  app.get('/v1/models', async (request) => {
    const caller = ctx.callerOf(request);
    return { object: 'list', data: models.visibleTo(caller).map((h) => ({ id: h.id, object: 'model', created: 0, owned_by: h.ownedBy })) };
  });
}

export async function routePlugin(app: FastifyInstance, { ctx }: { ctx: GatewayContext }): Promise<void> {
  app.post('/v1/route', async (request, reply) => {
    const caller = ctx.callerOf(request);
    const body = parseBody(routeRequestSchema, request.body);
    if ((body.messages === undefined) === (body.text === undefined)) {
      throw new GatewayError(400, 'give either messages (a conversation) or text, not both', { param: body.messages ? 'text' : 'messages', code: 'invalid_value' });
    }
    const text = body.text ?? routingTextOf({ messages: toChatMessages(body.messages!) });
    const r = await ctx.route(text, caller.allowed, body.lambda);
    const d = r.decision;
    if (!d) {
      // no router: the configured fallback worker
      return reply.headers(routingHeaders(r, r.candidates[0]!, [])).send({ object: 'fugu.route', worker: r.candidates[0], checkpoint: null, routing_ms: r.routingMs, fallback: true, workers: [] });
    }
    return reply.headers(routingHeaders(r, d.worker, [])).send({
      object: 'fugu.route',
      worker: d.worker,
      checkpoint: d.checkpointId,
      routing_ms: r.routingMs,
      router_ms: d.routingMs,
      lambda: body.lambda ?? 0,
      workers: d.workers.map((name, i) => ({ name, prob: d.probs[i] ?? 0, allowed: caller.allowed.includes(name) })),
    });
  });
}
