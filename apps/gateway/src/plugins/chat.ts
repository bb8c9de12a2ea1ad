// POST /v1/chat/completions: the request checked field by field, the model looked up in the
// registry (`fugu`, a worker, later `fugu-ultra`), the answer as JSON or SSE with usage.cost.
import { performance } from 'node:perf_hooks';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { StreamEvent } from '@fugu/providers';
import type { GatewayContext, RequestRecord } from '../context.ts';
import { badField, unknownModel } from '../errors.ts';
import { CHAT_HINTS, hintsOf } from '../hints.ts';
import { type ChatInput, type ModelRegistry, type StreamAnswer } from '../models.ts';
import { ChunkWriter, chatCompletionOf, chatRequestSchema, checkChatFields, parseBody, toChatRequest } from '../wire.ts';
import { clientSignal, idempotencyKeyOf, openEventStream, settleBrokenStream } from './shared.ts';

export async function chatPlugin(app: FastifyInstance, { ctx, models }: { ctx: GatewayContext; models: ModelRegistry }): Promise<void> {
  app.post('/v1/chat/completions', async (request, reply) => {
    const caller = ctx.callerOf(request);
    const rec = ctx.record(request);
    const body = parseBody(chatRequestSchema, request.body);
    checkChatFields(request.body as Record<string, unknown>);
    rec.model = body.model;
    rec.stream = body.stream === true;
    const req = toChatRequest(body);
    req.timeoutMs = ctx.g.callTimeoutMs;
    if (req.user !== undefined) rec.endUser = req.user;
    rec.hints = hintsOf(body, CHAT_HINTS);
    const handler = models.get(body.model);
    if (!handler || !handler.visibleTo(caller)) throw unknownModel(body.model, models.visibleTo(caller).map((h) => h.id));
    if (body.stream && req.logprobs) throw badField('logprobs', 'is not supported with stream: true (ask without streaming)');
    if (ctx.g.logMessages) rec.messages = req.messages;
    ctx.checkQuota(caller);
    const input: ChatInput = { req, caller, options: body.fugu ?? {}, record: rec, signal: clientSignal(reply), ...idempotencyKeyOf(request) };
    if (body.stream) {
      const t0 = performance.now();
      const answer = await handler.stream(input);
      await writeStream(ctx, answer, input, body.stream_options?.include_usage === true, reply, t0);
      return reply;
    }
    const c = await handler.complete(input);
    rec.worker = c.worker;
    rec.tokensIn = c.result.usage.inputTokens;
    rec.tokensOut = c.result.usage.outputTokens;
    ctx.charge(caller, rec, c.cost);
    return reply.headers(c.headers).send(chatCompletionOf(c));
  });
}

/** SSE chunks: role, content deltas, tool calls, the finish reason, usage (with cost) when asked, [DONE]. */
async function writeStream(ctx: GatewayContext, a: StreamAnswer, input: ChatInput, includeUsage: boolean, reply: FastifyReply, t0: number): Promise<void> {
  const rec: RequestRecord = input.record;
  rec.worker = a.worker;
  // first event in hand: from here on the answer is this worker's
  const raw = openEventStream(reply, a.headers);
  const w = new ChunkWriter(a.model ?? a.worker);
  // the row goes into the record journal before the answer's final chunks
  const seal = async () => {
    rec.providerMs = performance.now() - t0 - (rec.routingMs ?? 0);
    await ctx.seal(rec, 200);
  };
  raw.write(w.role());
  try {
    let finish: Extract<StreamEvent, { type: 'finish' }> | undefined;
    for (let ev = a.first; !ev.done; ev = await a.events.next()) {
      const e = ev.value;
      if (e.type === 'text-delta') raw.write(w.text(e.text));
      else if (e.type === 'tool-call') raw.write(w.toolCall(e.toolCall));
      else if (e.type === 'progress') raw.write(w.progress(e.progress));
      else finish = e;
    }
    if (finish) {
      // the stream has ended (its call row is written): its exact cost is known
      const cost = await a.cost(finish.usage);
      rec.tokensIn = finish.usage.inputTokens;
      rec.tokensOut = finish.usage.outputTokens;
      ctx.charge(input.caller, rec, cost);
      await seal();
      raw.write(w.finish(finish.finishReason));
      if (includeUsage) raw.write(w.usage(finish.usage, cost, a.usageExtra?.()));
    } else await seal();
    raw.write(ChunkWriter.done());
  } catch (e) {
    const ge = await settleBrokenStream(ctx, a, input, e, seal, 'chat');
    if (ge) raw.write(ChunkWriter.error(ge.body()));
  }
  raw.end();
}
