// The gateway's side of the Batch API (libs/batch runs the batches): a line's body is checked and
// planned exactly as the same request on the batch's endpoint would be (`/v1/chat/completions`:
// wire.ts's checks; `/v1/responses`: responses-wire.ts's, its input items made the same
// ChatRequest), for the batch's key: its workers, `fugu` routed by the deployed router, a worker
// by name (each one chat-call job), or a model kind that runs in the driver's process
// (`batchable`: fugu-ultra, run through its handler, its agents' calls chat-call jobs keyed from
// the line). A line's answer is the body the endpoint returns for that call (the chat completion,
// or the `response` object, not stored: `store: false`). What a batch line cannot do there (stream,
// continue a stored response, store one) is the line's error. A replay worker's line carries its
// dataset item's id, as the provider workers need to answer it from the recorded outcomes.
import { messageText, parseUsd, type ChatRequest } from '@fugu/core';
import type { BatchCodec, ResolvedLine } from '@fugu/batch';
import { getApiKey, getDatasetItems, saveDataset, type ApiKeyRecord, type BatchRow, type Db, type StoredWorker } from '@fugu/db';
import { resolveDataset } from '@fugu/evaluation';
import { promptIndex } from '@fugu/datasets';
import type { ChatResult } from '@fugu/providers';
import type { Completion, FuguOptions } from './chat-types.ts';
import { newRecord, type Caller, type GatewayContext } from './context.ts';
import { GatewayError, toGatewayError, unknownModel } from './errors.ts';
import { eligibleWorkers, planWorker, routingTextOf, ROUTER_MODEL, type ChatInput, type ModelRegistry } from './models.ts';
import {
  completedResponse, conversationMessages, inResponsesTerms, normaliseInput, parseResponsesRequest, ResponseObject, toResponsesChatRequest, type MessageOrigin, type WireResponsesRequest,
} from './responses-wire.ts';
import { chatCompletionOf, chatRequestSchema, checkChatFields, parseBody, toChatRequest } from './wire.ts';

export type BatchCodecOptions = {
  ctx: GatewayContext;
  models: ModelRegistry;
  db: Db;
  /** the gateway's pool, stored (workers with their ids) */
  workers: readonly StoredWorker[];
  /** the LLMRouter directory, when the pool is a replay pool over it (`gateway.pool` llmrouter[:dir]) */
  replayDataset?: string;
};

/** Lines routed at once (the router's largest batch). */
const ROUTE_CHUNK = 64;

const RESPONSES = '/v1/responses';

/** A line's request as its endpoint reads it; on /v1/responses also the request as parsed and where each chat message came from. */
type LineRequest = { model: string; req: ChatRequest; options: FuguOptions; responses?: { body: WireResponsesRequest; origins: MessageOrigin[] } };

const batchRefusal = (param: string, message: string): GatewayError => new GatewayError(400, `${param}: ${message}`, { param: `body.${param}`, code: 'invalid_value' });

/** A line's body checked exactly as the batch's endpoint checks it, then what a batch line cannot do there. */
function readLine(endpoint: string, body: Record<string, unknown>): LineRequest {
  if (endpoint === RESPONSES) {
    const r = parseResponsesRequest(body);
    if (r.stream) throw batchRefusal('stream', 'a batch line cannot stream (leave stream out)');
    if (r.previous_response_id != null) throw batchRefusal('previous_response_id', 'a batch line cannot continue a stored response (send the whole conversation as its input)');
    if (r.store === true) throw batchRefusal('store', "a batch line's response is not stored (its output line is its record): leave store out or send false");
    const origins: MessageOrigin[] = [];
    const req = toResponsesChatRequest(r, conversationMessages([], normaliseInput(r.input), r.instructions, origins));
    return { model: r.model, req, options: r.fugu ?? {}, responses: { body: r, origins } };
  }
  const c = parseBody(chatRequestSchema, body);
  checkChatFields(body);
  if (c.stream) throw batchRefusal('stream', 'a batch line cannot stream (leave stream out)');
  return { model: c.model, req: toChatRequest(c), options: c.fugu ?? {} };
}

/** A call of the line's model, its refusals in the endpoint's terms (on /v1/responses: the input item a chat message came from). */
const inEndpointTerms = <T>(l: LineRequest, f: () => Promise<T>): Promise<T> => (l.responses ? inResponsesTerms(f, l.responses.origins) : f());

/** The endpoint's body of a whole answer. */
const bodyOf = (l: { responses?: { body: WireResponsesRequest } }, c: Completion): Record<string, unknown> =>
  l.responses ? completedResponse(new ResponseObject(l.responses.body, false), c).response : chatCompletionOf(c);

/** The batch's key as a line's handler sees it: its id (fugu-ultra scopes its conversations by it) and the workers allowed when the batch was made. */
function callerOf(ctx: GatewayContext, b: BatchRow): Caller {
  const allowed = b.allowed ?? ctx.poolNames;
  const key: ApiKeyRecord | null =
    b.apiKeyId === null ? null : { id: b.apiKeyId, name: '', prefix: '', allowedWorkers: b.allowed, spendLimit: null, spent: 0n, createdAt: b.createdAt, revokedAt: null };
  return { key, allowed };
}

export function gatewayBatchCodec(o: BatchCodecOptions): BatchCodec {
  const { ctx, models } = o;
  const byName = new Map(o.workers.map((w) => [w.name, w]));
  let items: Promise<(prompt: string) => number | undefined> | undefined;
  // prompt -> the stored item's id (matched as the replay workers match: promptIndex), loaded once (the dataset is stored once per content)
  const itemIds = (): Promise<(prompt: string) => number | undefined> => {
    items ??= (async () => {
      const ds = await resolveDataset(o.replayDataset!, ctx.config.llmrouterDir);
      const saved = await saveDataset(o.db, { name: ds.name, source: ds.source, contentHash: ds.contentHash, items: ds.items });
      const find = promptIndex(await getDatasetItems(o.db, saved.id));
      return (prompt) => find(prompt)?.dbId;
    })();
    items.catch(() => (items = undefined));
    return items;
  };
  const input = (b: BatchRow, line: number, l: LineRequest, signal = new AbortController().signal): ChatInput => ({
    req: l.req, caller: callerOf(ctx, b), options: l.options, record: newRecord(`batch-${b.id}-${line}`), signal,
  });

  async function plan(b: BatchRow, l: { line: number; worker?: string }, r: LineRequest): Promise<ResolvedLine> {
    const { req } = r;
    const i = input(b, l.line, r);
    const handler = models.get(r.model);
    if (!handler || !handler.visibleTo(i.caller)) throw unknownModel(r.model, models.visibleTo(i.caller).map((h) => h.id));
    let name: string;
    if (l.worker !== undefined) name = l.worker;
    else if (r.model === ROUTER_MODEL) {
      const routed = await ctx.route(routingTextOf(req), eligibleWorkers(ctx, i), i.options.lambda);
      name = routed.candidates[0]!;
    } else if (ctx.specs.has(r.model)) {
      // visible: among the key's workers (the check above)
      name = planWorker(ctx.specs.get(r.model)!, i).candidates[0]!;
    } else if (handler.batchable) {
      // each such line is a conversation of its own: no stored one, no waiting workflow to continue
      if (r.options.conversation !== undefined) throw batchRefusal('fugu.conversation', `a batch line cannot continue a conversation of "${r.model}" (each line is one of its own)`);
      if (req.messages.at(-1)?.role === 'tool') {
        throw batchRefusal(r.responses ? 'input' : 'messages', `a batch line cannot send tool results to a waiting workflow of "${r.model}" (send them to ${b.endpoint} itself)`);
      }
      return { line: l.line, ok: true, model: r.model, local: true };
    } else {
      const local = models.visibleTo(i.caller).filter((h) => h.batchable).map((h) => `"${h.id}"`);
      throw new GatewayError(400, `model "${r.model}" cannot run in a batch: a batch line runs "${ROUTER_MODEL}", a worker by name${local.length > 0 ? ` or ${local.join(', ')}` : ''}`, { param: 'model', code: 'model_not_supported' });
    }
    const worker = byName.get(name);
    if (!worker) throw new GatewayError(503, `worker "${name}" is not in this gateway's pool`, { code: 'worker_unavailable' });
    if (worker.provider === 'replay' && o.replayDataset !== undefined) {
      const id = (await itemIds())(lastUserText(req));
      if (id !== undefined) req.metadata = { ...req.metadata, itemId: String(id) };
    }
    // what the stored request holds: no deadline of this process
    delete req.timeoutMs;
    return { line: l.line, ok: true, model: r.model, worker, request: req };
  }

  async function resolveOne(b: BatchRow, l: { line: number; body: Record<string, unknown>; worker?: string }): Promise<ResolvedLine> {
    try {
      const r = readLine(b.endpoint, l.body);
      return await inEndpointTerms(r, () => plan(b, l, r));
    } catch (e) {
      // the router or the pool unavailable for now: not the line's fault, the part is read again later
      if (e instanceof GatewayError && (e.status >= 500 || e.status === 429)) throw e;
      // (the field named in the line's terms: its body's)
      if (e instanceof GatewayError) return { line: l.line, ok: false, error: { code: e.errorCode ?? e.type, message: `line ${l.line}: ${e.message}`, param: e.param && (e.param.startsWith('body.') ? e.param : `body.${e.param}`) } };
      return { line: l.line, ok: false, error: { code: 'invalid_request', message: `line ${l.line}: ${(e as Error).message}` } };
    }
  }

  return {
    async resolve(b, lines) {
      // a router batch at a time (its micro-batcher takes them together), not a part's thousands at once
      const out: ResolvedLine[] = [];
      for (let i = 0; i < lines.length; i += ROUTE_CHUNK) out.push(...(await Promise.all(lines.slice(i, i + ROUTE_CHUNK).map((l) => resolveOne(b, l)))));
      return out;
    },

    answer(b, line, call, body) {
      if (call.status === 'ok') {
        const c: Completion = { result: call.response as unknown as ChatResult, worker: line.worker ?? call.worker, cost: parseUsd(call.cost), headers: {} };
        return { statusCode: 200, body: bodyOf(b.endpoint === RESPONSES ? { responses: { body: parseResponsesRequest(body) } } : {}, c) };
      }
      const e = call.error;
      const status = e?.code === 'provider-bad-request' ? 400 : e?.code === 'provider-rate-limit' ? 429 : 502;
      return {
        statusCode: status,
        body: { error: { message: `worker "${call.worker}": ${e?.message ?? 'failed'}`, type: status === 400 ? 'invalid_request_error' : 'server_error', param: null, code: status === 400 ? 'provider_bad_request' : 'provider_error' } },
      };
    },

    // the batch's key as a live request of it is checked (its revocation, ctx.checkQuota), read
    // from Postgres each time rather than through the key cache, so a revocation stops the batch
    // well within the cache's time; its spend: the row's, this gateway's charges not written yet,
    // and the batch's own not charged yet
    async keyState(b, uncharged) {
      if (b.apiKeyId === null) return { room: null };
      const key = await getApiKey(o.db, b.apiKeyId);
      if (!key) return { stop: { code: 'key_revoked', message: `the API key ${b.apiKeyId} no longer exists` }, room: null };
      if (key.revokedAt) return { stop: { code: 'key_revoked', message: `the API key "${key.name}" was revoked on ${key.revokedAt.toISOString()}` }, room: null };
      key.spent += (ctx.writer?.unwritten(key.id) ?? 0n) + uncharged;
      try {
        ctx.checkQuota({ key, allowed: [] });
      } catch (e) {
        if (e instanceof GatewayError) return { stop: { code: 'spend_limit_reached', message: e.message }, room: 0n };
        throw e;
      }
      return { room: key.spendLimit === null ? null : key.spendLimit - key.spent };
    },

    // a local line (fugu-ultra): the endpoint's answer, its refusals included, as the endpoint gives it
    async run(b, l, { call, made }, signal) {
      // a replay pool's steps name their item by its stored id (the provider workers' key); not loaded: no answer yet
      const ids = o.replayDataset !== undefined ? await itemIds() : undefined;
      const itemOf = ids && ((q: string) => {
        const id = ids(q);
        return id === undefined ? undefined : String(id);
      });
      try {
        const r = readLine(b.endpoint, l.body);
        const handler = models.get(r.model);
        if (!handler?.batchable) throw unknownModel(r.model, models.visibleTo(callerOf(ctx, b)).map((h) => h.id));
        const c = await inEndpointTerms(r, () => handler.complete({ ...input(b, l.line, r, signal), batch: { key: `${b.id}.${l.line}`, call, made, ...(itemOf && { itemOf }) } }));
        return { statusCode: 200, body: bodyOf(r, c), cost: c.cost };
      } catch (e) {
        const ge = toGatewayError(e as Error);
        // a workflow that failed after some of its calls paid for them
        return { statusCode: ge.status, body: ge.body() as unknown as Record<string, unknown>, cost: ge.cost };
      }
    },
  };
}

function lastUserText(req: ChatRequest): string {
  const m = req.messages.findLast((x) => x.role === 'user');
  return m ? messageText(m) : '';
}
