// A server span per request when tracing is on (libs/telemetry tracing.ts: OTEL_EXPORTER_OTLP_ENDPOINT):
// `<METHOD> <route>`, continuing the client's `traceparent`, with the request's code run in its
// context, so the provider calls, route jobs and chat-call jobs it makes are its children. Ended
// when the response closes, with the status and what the request's record says (model, worker,
// workflow, tokens, cost, error code); never a message or a key.
import { formatUsd } from '@fugu/core';
import { SpanStatusCode, startServerSpan, tracingOn, withContext } from '@fugu/telemetry';
import type { GatewayContext } from '../context.ts';
import { unencapsulated } from './shared.ts';

export const tracingPlugin = unencapsulated<{ ctx: GatewayContext }>(async (app, { ctx }) => {
  if (!tracingOn()) return;
  app.addHook('onRequest', (req, reply, done) => {
    const route = req.routeOptions.url ?? 'unmatched';
    const rec = ctx.record(req);
    const s = startServerSpan(`${req.method} ${route}`, req.headers, {
      'http.request.method': req.method, 'http.route': route, 'url.path': req.url.split('?')[0]!, 'fugu.request_id': rec.requestId,
    });
    if (!s) return done();
    reply.raw.once('close', () => {
      const status = reply.raw.statusCode;
      s.span.setAttributes({
        'http.response.status_code': status,
        ...(rec.model !== undefined && { 'fugu.model': rec.model }),
        ...(rec.worker !== undefined && { 'fugu.worker': rec.worker }),
        ...(rec.workflowId !== undefined && { 'fugu.workflow_id': rec.workflowId }),
        ...((rec.tokensIn > 0 || rec.tokensOut > 0) && { 'gen_ai.usage.input_tokens': rec.tokensIn, 'gen_ai.usage.output_tokens': rec.tokensOut }),
        ...(rec.cost > 0n && { 'fugu.cost_usd': Number(formatUsd(rec.cost)) }),
        ...(rec.errorCode !== undefined && { 'error.type': rec.errorCode }),
      });
      // a server span is an error for a 5xx only (a 4xx is the client's)
      if (status >= 500) s.span.setStatus({ code: SpanStatusCode.ERROR });
      s.span.end();
    });
    // the rest of the request (its hooks, its handler) runs in the span's context
    withContext(s.context, done);
  });
});
