// POST /v1/rewards: rewards of Conductor completions for an external RL engine (OpenRLHF's
// remote reward model protocol, or fugu's own shape), each executed as a workflow on the cluster.
// The logic is @fugu/ultra-training's reward service (libs/ultra-training/src/rewards,
// docs/rewards.md); this module is apps/gateway's only import of @fugu/ultra-training (main.ts
// takes createRewardsService from here; the fugu-ultra serving path, ultra.ts, imports only
// @fugu/ultra). This route reads the body, authenticates like every API route (a key as a Bearer
// token, or as the password of HTTP Basic: OpenRLHF's client sends no header of its own, but
// `requests` sends Basic from ~/.netrc or from user:password@ in the URL), checks the key's
// spend, and charges it.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { parseRewardsRequest, REWARD_LIMITS, type RewardsService } from '@fugu/ultra-training';
import type { GatewayContext } from '../context.ts';
import { GatewayError } from '../errors.ts';
import { clientSignal } from './shared.ts';

// for main.ts, which builds the service this route runs
export { createRewardsService, REWARD_LIMITS } from '@fugu/ultra-training';

export type RewardsPluginOptions = { ctx: GatewayContext; service: RewardsService; bodyLimitBytes?: number };

export async function rewardsPlugin(app: FastifyInstance, { ctx, service, bodyLimitBytes }: RewardsPluginOptions): Promise<void> {
  const limit = bodyLimitBytes ?? REWARD_LIMITS.bodyLimitBytes;
  // runs before the auth plugin's preHandler: a Basic password becomes the Bearer key it checks
  app.addHook('onRequest', async (req) => {
    basicToBearer(req);
    const n = Number(req.headers['content-length']);
    if (Number.isFinite(n) && n > limit) {
      throw new GatewayError(413, `body: the request body is ${n} bytes, more than the reward service's limit of ${limit} bytes (FUGU_REWARDS_BODY_LIMIT_BYTES); send fewer completions per request`, {
        param: 'body', code: 'request_too_large',
      });
    }
  });

  app.post('/v1/rewards', { bodyLimit: limit }, async (request, reply) => {
    const caller = ctx.callerOf(request);
    ctx.record(request).model = 'rewards';
    ctx.checkQuota(caller);
    const req = parseRewardsRequest(request.body, (request.query ?? {}) as Record<string, unknown>);
    const out = await service.score(req, { keyId: caller.key?.id ?? null, workers: caller.allowed }, clientSignal(reply));
    ctx.charge(caller, ctx.record(request), out.costPico);
    const r = out.response;
    if (req.unscored === 'error' && r.unscored.length > 0) {
      const shown = r.unscored.slice(0, 20).join(', ') + (r.unscored.length > 20 ? ', ...' : '');
      throw new GatewayError(
        503,
        `${r.unscored.length} of ${r.rewards.length} completions were not scored within the deadline of ${r.deadline_s} s (indices ${shown}); ` +
          'send the same request again: their workflows keep running and nothing is paid twice',
        { code: 'unscored', headers: { 'retry-after': '5' } },
      );
    }
    return reply.send(r);
  });
}

/** `Authorization: Basic base64(user:key)` -> `Bearer key` (the user part is ignored). */
function basicToBearer(req: FastifyRequest): void {
  const h = req.headers.authorization;
  const m = typeof h === 'string' ? /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(h) : null;
  if (!m) return;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const key = colon >= 0 ? decoded.slice(colon + 1) : '';
  if (key !== '') req.headers.authorization = `Bearer ${key}`;
}
