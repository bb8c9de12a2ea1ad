// The Anthropic Messages API (docs/anthropic-api.md): POST /v1/messages over the model registry
// (`fugu`, each worker by name, further kinds such as `fugu-ultra`), called exactly as chat
// completions calls it (visibility, quota, handler.complete / handler.stream, charge, one request
// row), the answer as a `message` object or as Anthropic's SSE events; POST
// /v1/messages/count_tokens (the gateway's estimate). Errors on these routes are Anthropic's
// shape (`{"type": "error", "error": {"type", "message"}}`), with a `request-id` header; keys come
// as `x-api-key` (Anthropic's clients) or `Authorization: Bearer` (context.ts). Claude Code adds
// `?beta=true` to the URL and sends `anthropic-version` and `anthropic-beta` headers: accepted.
import { performance } from 'node:perf_hooks';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { StreamEvent } from '@fugu/providers';
import type { GatewayContext } from '../context.ts';
import { GatewayError, unknownModel } from '../errors.ts';
import { type ChatInput, type ModelRegistry, type StreamAnswer } from '../models.ts';
import {
  MessageEventWriter,
  anthropicErrorBody,
  estimateInputTokens,
  fuguOptionsOf,
  inMessagesTerms,
  messageOf,
  messagesUsage,
  parseMessagesRequest,
  stopReasonOf,
  toMessagesChatRequest,
} from '../anthropic-wire.ts';
import { MESSAGES_HINTS, hintsOf } from '../hints.ts';
import { clientSignal, idempotencyKeyOf, openEventStream, settleBrokenStream } from './shared.ts';

/** The gateway's error handler with another error body (server.ts: its draining, charging and logging, once). */
export type ScopedErrorHandler = (err: FastifyError, req: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

export type MessagesPluginOptions = {
  ctx: GatewayContext;
  models: ModelRegistry;
  /** the gateway's error handler writing this body (server.ts errorHandler) */
  onError: (body: (e: GatewayError, req: FastifyRequest) => unknown) => ScopedErrorHandler;
};

export async function messagesPlugin(app: FastifyInstance, { ctx, models, onError }: MessagesPluginOptions): Promise<void> {
  // this scope's errors (the key's check, the body's parsing, the handlers') in Anthropic's shape
  app.setErrorHandler(onError((e, req) => anthropicErrorBody(e, ctx.record(req).requestId)));
  app.addHook('onRequest', async (req, reply) => {
    void reply.header('request-id', ctx.record(req).requestId);
  });

  app.post('/v1/messages', async (request, reply) => {
    const caller = ctx.callerOf(request);
    const rec = ctx.record(request);
    const body = parseMessagesRequest(request.body);
    rec.model = body.model;
    rec.stream = body.stream === true;
    const { req, terms } = toMessagesChatRequest(body);
    req.timeoutMs = ctx.g.callTimeoutMs;
    if (req.user !== undefined) rec.endUser = req.user;
    rec.hints = hintsOf(body, MESSAGES_HINTS);
    const handler = models.get(body.model);
    if (!handler || !handler.visibleTo(caller)) throw unknownModel(body.model, models.visibleTo(caller).map((h) => h.id));
    if (ctx.g.logMessages) rec.messages = req.messages;
    ctx.checkQuota(caller);
    const input: ChatInput = { req, caller, options: fuguOptionsOf(body), record: rec, signal: clientSignal(reply), ...idempotencyKeyOf(request) };
    if (body.stream) {
      const t0 = performance.now();
      const answer = await inMessagesTerms(() => handler.stream(input), terms);
      await writeMessageStream(ctx, answer, input, estimateInputTokens(req), reply, t0);
      return reply;
    }
    const c = await inMessagesTerms(() => handler.complete(input), terms);
    rec.worker = c.worker;
    rec.tokensIn = c.result.usage.inputTokens;
    rec.tokensOut = c.result.usage.outputTokens;
    ctx.charge(caller, rec, c.cost);
    return reply.headers(c.headers).send(messageOf(c));
  });

  // the same body (max_tokens not needed): the gateway's estimate of its input tokens, nothing called
  app.post('/v1/messages/count_tokens', async (request) => {
    const caller = ctx.callerOf(request);
    const body = parseMessagesRequest(request.body, { countTokens: true });
    const { req } = toMessagesChatRequest(body);
    const handler = models.get(body.model);
    if (!handler || !handler.visibleTo(caller)) throw unknownModel(body.model, models.visibleTo(caller).map((h) => h.id));
    return { input_tokens: estimateInputTokens(req) };
  });
}

/** Anthropic's SSE events of one answer (the first event of the model in hand: the worker is known). */
async function writeMessageStream(ctx: GatewayContext, a: StreamAnswer, input: ChatInput, inputEstimate: number, reply: FastifyReply, t0: number): Promise<void> {
  const rec = input.record;
  rec.worker = a.worker;
  const raw = openEventStream(reply, a.headers);
  const w = new MessageEventWriter();
  // the row goes into the record journal before the answer's final events
  const seal = async () => {
    rec.providerMs = performance.now() - t0 - (rec.routingMs ?? 0);
    await ctx.seal(rec, 200);
  };
  raw.write(w.start(a.model ?? a.worker, inputEstimate));
  try {
    let finish: Extract<StreamEvent, { type: 'finish' }> | undefined;
    let toolCalls = 0;
    for (let ev = a.first; !ev.done; ev = await a.events.next()) {
      const e = ev.value;
      if (e.type === 'text-delta') raw.write(w.text(e.text));
      else if (e.type === 'tool-call') {
        toolCalls += 1;
        raw.write(w.toolCall(e.toolCall));
      } else if (e.type === 'progress') raw.write(w.ping());
      else finish = e;
    }
    if (!finish) throw new GatewayError(502, `worker "${a.worker}": the stream ended without finishing`, { code: 'provider_error' });
    // the stream has ended (its call row is written): its exact cost is known
    const cost = await a.cost(finish.usage);
    rec.tokensIn = finish.usage.inputTokens;
    rec.tokensOut = finish.usage.outputTokens;
    ctx.charge(input.caller, rec, cost);
    await seal();
    raw.write(w.finish(stopReasonOf(finish.finishReason, toolCalls), messagesUsage(finish.usage, cost, a.usageExtra?.())));
  } catch (e) {
    const ge = await settleBrokenStream(ctx, a, input, e, seal, 'message');
    if (ge) raw.write(w.error(anthropicErrorBody(ge, rec.requestId)));
  }
  raw.end();
}
