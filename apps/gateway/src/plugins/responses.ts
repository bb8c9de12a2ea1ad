// The OpenAI Responses API (docs/responses-api.md): POST /v1/responses over the model registry
// (`fugu`, each worker by name, further kinds such as `fugu-ultra`), called exactly as chat
// completions calls it (visibility, quota, handler.complete / handler.stream, charge, the request
// record), the answer as a `response` object or as SSE events; GET and DELETE
// /v1/responses/{id} and GET /v1/responses/{id}/input_items over the stored responses.
//
// State: a response is stored (store: true, the default; needs the database) before it is sent,
// scoped to the API key. previous_response_id continues the chain of stored responses: each one's
// input items then its output items, oldest first, then this request's input. Instructions are
// the request's own and never carried over. The chain's first response is the conversation's
// identity: stored with each row and handed to the model as ChatInput.conversation. Another
// key's response, an unknown one or one stored with store: false reads as missing (GET: 404;
// previous_response_id: 400).
import { performance } from 'node:perf_hooks';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import type { StreamEvent } from '@fugu/providers';
import { deleteStoredResponse, getResponseChain, getStoredResponse, insertStoredResponse, type ResponseItemJson } from '@fugu/db';
import { scrub } from '@fugu/telemetry';
import type { Caller, GatewayContext } from '../context.ts';
import { GatewayError, badField, unknownModel } from '../errors.ts';
import { RESPONSES_HINTS, hintsOf } from '../hints.ts';
import { type ChatInput, type ModelRegistry, type StreamAnswer } from '../models.ts';
import {
  ResponseEventWriter,
  ResponseObject,
  completedResponse,
  conversationMessages,
  inResponsesTerms,
  normaliseInput,
  parseResponsesRequest,
  responseError,
  responsesUsage,
  statusOf,
  toResponsesChatRequest,
  type ConversationItem,
  type MessageOrigin,
  type WireResponsesRequest,
} from '../responses-wire.ts';
import { parseBody } from '../wire.ts';
import { clientSignal, idempotencyKeyOf, openEventStream, settleBrokenStream } from './shared.ts';

/** Stores a finished response (a no-op with store: false or without a database). */
type Save = (response: Record<string, unknown>, output: readonly ConversationItem[], worker: string, conversation?: string) => Promise<void>;

const previousNotFound = (id: string, asked: string): GatewayError =>
  new GatewayError(400, id === asked ? `Previous response with id '${id}' not found.` : `Previous response with id '${id}' not found (response '${asked}' continues it, and it is gone).`, {
    param: 'previous_response_id',
    code: 'previous_response_not_found',
  });

/** Every stored response's id is newResponseId()'s: any other names none (nor reaches Postgres, which cannot even compare a NUL character). */
const isResponseId = (id: string): boolean => /^resp_[0-9a-f]{48}$/.test(id);

const responseNotFound = (id: string): GatewayError => new GatewayError(404, `Response with id '${id}' not found.`, { param: 'response_id', code: 'response_not_found' });

const inputItemsQuery = z
  .object({
    limit: z.coerce.number().int().min(1).max(100).optional(),
    order: z.enum(['asc', 'desc']).optional(),
    after: z.string().min(1).optional(),
  })
  .loose();

export async function responsesPlugin(app: FastifyInstance, { ctx, models }: { ctx: GatewayContext; models: ModelRegistry }): Promise<void> {
  app.post('/v1/responses', async (request, reply) => {
    const caller = ctx.callerOf(request);
    const rec = ctx.record(request);
    const body = parseResponsesRequest(request.body);
    rec.model = body.model;
    rec.stream = body.stream === true;
    // the end user (safety_identifier replaces user in OpenAI's API) and the hints, kept with the request's row
    const endUser = body.safety_identifier ?? body.user;
    if (endUser != null) rec.endUser = endUser;
    rec.hints = hintsOf(body, RESPONSES_HINTS);
    const handler = models.get(body.model);
    if (!handler || !handler.visibleTo(caller)) throw unknownModel(body.model, models.visibleTo(caller).map((h) => h.id));
    const keyId = caller.key?.id ?? null;
    const history = await historyOf(ctx, body.previous_response_id ?? undefined, keyId);
    const own = normaliseInput(body.input);
    const origins: MessageOrigin[] = [];
    const req = toResponsesChatRequest(body, conversationMessages(history.items, own, body.instructions, origins));
    req.timeoutMs = ctx.g.callTimeoutMs;
    if (ctx.g.logMessages) rec.messages = req.messages;
    ctx.checkQuota(caller);
    const store = body.store !== false && ctx.db !== undefined;
    const shell = new ResponseObject(body, store);
    // the conversation's identity: the root of the chain (this response when it continues none)
    const conversation = history.conversationId ?? shell.id;
    // stored under the conversation the answer names (fugu-ultra: its workflow's, which a stateless tool loop continues)
    const save: Save = store
      ? (response, output, worker, named) => saveResponse(ctx, { shell, body, keyId, own, conversation: named ?? conversation, response, output, worker })
      : async () => {};
    // a chain continued by previous_response_id is that conversation; a new one is this response's,
    // unless its input continues a workflow by its tool calls' ids (a stateless tool loop: the
    // whole input sent again, with store: false or without previous_response_id)
    const input: ChatInput = {
      req, caller, options: body.fugu ?? {}, record: rec, signal: clientSignal(reply), ...idempotencyKeyOf(request),
      ...(history.conversationId !== undefined ? { conversation } : { newConversation: conversation }),
    };
    if (body.stream) {
      const t0 = performance.now();
      const answer = await inResponsesTerms(() => handler.stream(input), origins);
      await writeResponseStream(ctx, answer, input, shell, save, reply, t0);
      return reply;
    }
    const c = await inResponsesTerms(() => handler.complete(input), origins);
    rec.worker = c.worker;
    rec.tokensIn = c.result.usage.inputTokens;
    rec.tokensOut = c.result.usage.outputTokens;
    ctx.charge(caller, rec, c.cost);
    const { response, output } = completedResponse(shell, c);
    await save(response, output, c.worker, c.headers['x-fugu-conversation']);
    return reply.headers(c.headers).send(response);
  });

  app.get<{ Params: { id: string }; Querystring: Record<string, unknown> }>('/v1/responses/:id', async (request) => {
    const keyId = keyOf(ctx.callerOf(request));
    if (request.query.stream === 'true') throw badField('stream', 'replaying a stored response as a stream is not supported by the gateway');
    const row = ctx.db && isResponseId(request.params.id) && (await getStoredResponse(ctx.db, request.params.id, keyId));
    if (!row) throw responseNotFound(request.params.id);
    return row.response;
  });

  app.delete<{ Params: { id: string } }>('/v1/responses/:id', async (request) => {
    const keyId = keyOf(ctx.callerOf(request));
    const deleted = ctx.db !== undefined && isResponseId(request.params.id) && (await deleteStoredResponse(ctx.db, request.params.id, keyId));
    if (!deleted) throw responseNotFound(request.params.id);
    return { id: request.params.id, object: 'response', deleted: true };
  });

  // this response's own input items (not the earlier turns'), newest first unless order=asc
  app.get<{ Params: { id: string } }>('/v1/responses/:id/input_items', async (request) => {
    const keyId = keyOf(ctx.callerOf(request));
    const q = parseBody(inputItemsQuery, { ...(request.query as Record<string, unknown>) });
    const row = ctx.db && isResponseId(request.params.id) && (await getStoredResponse(ctx.db, request.params.id, keyId));
    if (!row) throw responseNotFound(request.params.id);
    let items = q.order === 'asc' ? [...row.inputItems] : [...row.inputItems].reverse();
    if (q.after !== undefined) {
      const at = items.findIndex((it) => it.id === q.after);
      if (at < 0) throw badField('after', `"${q.after}" is not an input item of response '${row.id}'`);
      items = items.slice(at + 1);
    }
    const limit = q.limit ?? 20;
    const data = items.slice(0, limit);
    return { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: items.length > limit };
  });
}

const keyOf = (caller: Caller): string | null => caller.key?.id ?? null;

type History = { items: ConversationItem[]; conversationId?: string };

/** The stored chain `previous` ends, as items oldest first (each response's input, then its output). */
async function historyOf(ctx: GatewayContext, previous: string | undefined, keyId: string | null): Promise<History> {
  if (previous === undefined) return { items: [] };
  if (!ctx.db) throw previousNotFound(previous, previous);
  const { chain, missing } = await getResponseChain(ctx.db, previous, keyId);
  if (missing !== undefined) throw previousNotFound(missing, previous);
  const items = chain.flatMap((r) => [...r.inputItems, ...r.outputItems]) as unknown as ConversationItem[];
  return { items, conversationId: chain.at(-1)!.conversationId };
}

async function saveResponse(
  ctx: GatewayContext,
  s: { shell: ResponseObject; body: WireResponsesRequest; keyId: string | null; own: ConversationItem[]; conversation: string; response: Record<string, unknown>; output: readonly ConversationItem[]; worker: string },
): Promise<void> {
  try {
    await insertStoredResponse(ctx.db!, {
      id: s.shell.id,
      keyId: s.keyId,
      model: s.body.model,
      worker: s.worker,
      previousResponseId: s.body.previous_response_id ?? null,
      conversationId: s.conversation,
      status: String(s.response.status),
      inputItems: s.own as unknown as ResponseItemJson[],
      outputItems: s.output as unknown as ResponseItemJson[],
      response: s.response,
      instructions: s.body.instructions ?? null,
    });
  } catch (e) {
    ctx.log.error({ response: s.shell.id, err: scrub((e as Error).message) }, 'could not store a response');
    throw new GatewayError(500, `the answer could not be stored (store: true): ${scrub((e as Error).message)}`, { type: 'server_error', code: 'storage_failed' });
  }
}

/**
 * SSE events of a streamed response (the first event is in hand: the worker is known): created,
 * in_progress, the output items' events, then completed / incomplete once the response is stored.
 * Progress events of a model (fugu-ultra's workflow) are not written: the openai client's stream
 * helper refuses event types it does not know (docs/responses-api.md).
 */
async function writeResponseStream(ctx: GatewayContext, a: StreamAnswer, input: ChatInput, shell: ResponseObject, save: Save, reply: FastifyReply, t0: number): Promise<void> {
  const rec = input.record;
  rec.worker = a.worker;
  const raw = openEventStream(reply, a.headers);
  const w = new ResponseEventWriter(shell.tools);
  const model = a.model ?? a.worker;
  // the row goes into the record journal before the answer's final events
  const seal = async () => {
    rec.providerMs = performance.now() - t0 - (rec.routingMs ?? 0);
    await ctx.seal(rec, 200);
  };
  raw.write(w.start(shell.build({ status: 'in_progress', model, output: [] })));
  try {
    let finish: Extract<StreamEvent, { type: 'finish' }> | undefined;
    for (let ev = a.first; !ev.done; ev = await a.events.next()) {
      const e = ev.value;
      if (e.type === 'text-delta') raw.write(w.text(e.text));
      else if (e.type === 'tool-call') raw.write(w.toolCall(e.toolCall));
      else if (e.type === 'finish') finish = e;
      // progress events are dropped (see above)
    }
    if (!finish) throw new GatewayError(502, `worker "${a.worker}": the stream ended without finishing`, { code: 'provider_error' });
    const { status, incomplete } = statusOf(finish.finishReason);
    // the message item is complete now (its events are written after the seal)
    const closing = w.closeMessage(status === 'incomplete' ? 'incomplete' : 'completed');
    // the stream has ended (its call row is written): its exact cost is known
    const cost = await a.cost(finish.usage);
    rec.tokensIn = finish.usage.inputTokens;
    rec.tokensOut = finish.usage.outputTokens;
    ctx.charge(input.caller, rec, cost);
    const extension = a.extension?.();
    const response = shell.build({ status, model, output: w.output, usage: responsesUsage(finish.usage, cost, a.usageExtra?.()), incomplete, ...(extension && { extension }) });
    await save(response, w.output, a.worker, a.headers['x-fugu-conversation']);
    await seal();
    raw.write(closing);
    raw.write(w.finish(response));
  } catch (e) {
    const ge = await settleBrokenStream(ctx, a, input, e, seal, 'response');
    if (ge) {
      w.abandon();
      raw.write(w.fail(ge.body().error, shell.build({ status: 'failed', model, output: w.output, error: responseError(ge.status, ge.message) })));
    }
  }
  raw.end();
}
