// Records of every request: the `x-request-id` header (the client's own when it is sane, else a
// new one), the metrics, one access-log line (method, route, status, model, worker, tokens,
// cost, latency, request id; never a secret, message text only with gateway.logMessages), and
// for an authenticated request of a recorded route one `requests` row: sealed into the record
// journal as its JSON answer is sent (a stream's: before its final chunks, by its route), else
// queued when the request ends, and written in the next batch of ctx.writer (record-writer.ts:
// batches, the journal, durability).
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { FastifyRequest } from 'fastify';
import { formatUsd } from '@fugu/core';
import { CLIENT_CLOSED, RECORDED_ROUTES, requestRow, type GatewayContext } from '../context.ts';
import { unencapsulated } from './shared.ts';

const SANE_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** Fastify's genReqId: the client's x-request-id when it is 1-128 safe characters, else `req_` + 96 random bits. */
export function requestIdOf(req: { headers: Record<string, string | string[] | undefined> }): string {
  const h = req.headers['x-request-id'];
  if (typeof h === 'string' && SANE_ID.test(h)) return h;
  return `req_${randomBytes(12).toString('base64url')}`;
}

export const recordsPlugin = unencapsulated<{ ctx: GatewayContext }>(async (app, { ctx }) => {
  app.addHook('onRequest', async (req, reply) => {
    const rec = ctx.record(req);
    rec.route = req.routeOptions.url ?? 'unmatched';
    void reply.header('x-request-id', rec.requestId);
    reply.raw.once('close', () => {
      // the client went away mid-answer: the handler goes on (a workflow finishes, its calls are
      // paid), and its end writes the row with what it cost (ctx.seal), not this moment's
      if (!reply.raw.writableFinished && !rec.sealed) rec.clientClosed = true;
      finish(req, rec.clientClosed ? CLIENT_CLOSED : reply.raw.statusCode, performance.now() - rec.startedAt);
    });
  });

  // the row is in the journal before the JSON answer goes out (streams seal their own)
  app.addHook('onSend', async (req, reply, payload) => {
    await ctx.seal(ctx.record(req), reply.statusCode);
    return payload;
  });

  function finish(req: FastifyRequest, status: number, ms: number): void {
    const route = req.routeOptions.url ?? 'unmatched';
    const rec = ctx.record(req);
    ctx.metrics.requests.inc({ route, status: String(status), worker: rec.worker && status < 400 ? rec.worker : '' });
    ctx.metrics.latency.observe({ route }, ms / 1000);
    ctx.log.info(
      {
        reqId: rec.requestId,
        method: req.method,
        route,
        status,
        ...(rec.model !== undefined && { model: rec.model }),
        ...(rec.worker !== undefined && { worker: rec.worker }),
        ...(rec.fallbacks.length > 0 && { fallbacks: rec.fallbacks }),
        ...((rec.tokensIn > 0 || rec.tokensOut > 0) && { tokensIn: rec.tokensIn, tokensOut: rec.tokensOut, cost: formatUsd(rec.cost) }),
        ...(rec.errorCode !== undefined && { error: rec.errorCode }),
        ...(rec.routingMs !== undefined && { routingMs: round(rec.routingMs) }),
        ...(rec.providerMs !== undefined && { providerMs: round(rec.providerMs) }),
        ms: round(ms),
        ...(rec.messages && { messages: rec.messages }),
      },
      'request',
    );
    if (!ctx.writer || rec.sealed || rec.clientClosed || !rec.authenticated || !RECORDED_ROUTES.has(route)) return;
    ctx.writer.row(requestRow(rec, status, ms));
  }

  // the rows and spend of answered requests are written before the gateway closes
  app.addHook('onClose', async () => {
    await ctx.writer?.stop();
  });
});

const round = (ms: number): number => Math.round(ms * 100) / 100;
