// The gateway's side of the Batch API (libs/batch runs the batches): a line's body is checked and
// planned exactly as the same request on /v1/chat/completions would be (the wire checks, the
// key's workers, `fugu` routed by the deployed router, a worker by name), and a line's answer is
// the body /v1/chat/completions returns. A replay worker's line carries its dataset item's id, as
// the provider workers need to answer it from the recorded outcomes.
import { messageText, parseUsd, type ChatRequest } from '@fugu/core';
import type { BatchCodec, ResolvedLine } from '@fugu/batch';
import { getDatasetItems, saveDataset, type BatchLineRow, type BatchRow, type ChatCallRow, type Db, type StoredWorker } from '@fugu/db';
import { resolveDataset } from '@fugu/evaluation';
import type { ChatResult } from '@fugu/providers';
import { newRecord, type GatewayContext } from './context.ts';
import { GatewayError, unknownModel } from './errors.ts';
import { eligibleWorkers, planWorker, routingTextOf, ROUTER_MODEL, type ChatInput, type ModelRegistry } from './models.ts';
import { chatRequestSchema, checkChatFields, completionBody, parseBody, toChatRequest } from './wire.ts';

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

export function gatewayBatchCodec(o: BatchCodecOptions): BatchCodec {
  const { ctx, models } = o;
  const byName = new Map(o.workers.map((w) => [w.name, w]));
  let items: Promise<Map<string, number>> | undefined;
  // prompt -> the stored item's id, loaded once (the dataset is stored once per content)
  const itemIds = (): Promise<Map<string, number>> => {
    items ??= (async () => {
      const ds = await resolveDataset(o.replayDataset!, ctx.config.llmrouterDir);
      const saved = await saveDataset(o.db, { name: ds.name, source: ds.source, contentHash: ds.contentHash, items: ds.items });
      const m = new Map<string, number>();
      for (const it of await getDatasetItems(o.db, saved.id)) if (!m.has(it.prompt.trim())) m.set(it.prompt.trim(), it.dbId);
      return m;
    })();
    items.catch(() => (items = undefined));
    return items;
  };

  async function resolveOne(b: BatchRow, l: { line: number; body: Record<string, unknown>; worker?: string }): Promise<ResolvedLine> {
    const at = (e: unknown): ResolvedLine => {
      // the router or the pool unavailable for now: not the line's fault, the part is read again later
      if (e instanceof GatewayError && (e.status >= 500 || e.status === 429)) throw e;
      if (e instanceof GatewayError) return { line: l.line, ok: false, error: { code: e.errorCode ?? e.type, message: `line ${l.line}: ${e.message}`, param: e.param } };
      return { line: l.line, ok: false, error: { code: 'invalid_request', message: `line ${l.line}: ${(e as Error).message}` } };
    };
    try {
      const body = parseBody(chatRequestSchema, l.body);
      checkChatFields(l.body);
      if (body.stream) throw new GatewayError(400, 'stream: a batch line cannot stream (leave stream out)', { param: 'body.stream', code: 'invalid_value' });
      const req: ChatRequest = toChatRequest(body);
      const caller = { key: null, allowed: b.allowed ?? ctx.poolNames };
      const handler = models.get(body.model);
      if (!handler || !handler.visibleTo(caller)) throw unknownModel(body.model, models.visibleTo(caller).map((h) => h.id));
      const input: ChatInput = { req, caller, options: body.fugu ?? {}, record: newRecord(`batch-${b.id}-${l.line}`), signal: new AbortController().signal };
      let name: string;
      if (l.worker !== undefined) name = l.worker;
      else if (body.model === ROUTER_MODEL) {
        const r = await ctx.route(routingTextOf(req), eligibleWorkers(ctx, input), input.options.lambda);
        name = r.candidates[0]!;
      } else if (ctx.specs.has(body.model)) {
        // visible: among the key's workers (the check above)
        name = planWorker(ctx.specs.get(body.model)!, input).candidates[0]!;
      } else throw new GatewayError(400, `model "${body.model}" cannot run in a batch: a batch line runs "${ROUTER_MODEL}" or a worker by name`, { param: 'model', code: 'model_not_supported' });
      const worker = byName.get(name);
      if (!worker) throw new GatewayError(503, `worker "${name}" is not in this gateway's pool`, { code: 'worker_unavailable' });
      if (worker.provider === 'replay' && o.replayDataset !== undefined) {
        const id = (await itemIds()).get(lastUserText(req).trim());
        if (id !== undefined) req.metadata = { ...req.metadata, itemId: String(id) };
      }
      // what the stored request holds: no deadline of this process
      delete req.timeoutMs;
      return { line: l.line, ok: true, model: body.model, worker, request: req };
    } catch (e) {
      return at(e);
    }
  }

  return {
    async resolve(b, lines) {
      // a router batch at a time (its micro-batcher takes them together), not a part's thousands at once
      const out: ResolvedLine[] = [];
      for (let i = 0; i < lines.length; i += ROUTE_CHUNK) out.push(...(await Promise.all(lines.slice(i, i + ROUTE_CHUNK).map((l) => resolveOne(b, l)))));
      return out;
    },
    answer(line: BatchLineRow, call: ChatCallRow) {
      if (call.status === 'ok') {
        const result = call.response as unknown as ChatResult;
        return { statusCode: 200, body: completionBody(result, line.worker ?? call.worker, parseUsd(call.cost)) };
      }
      const e = call.error;
      const status = e?.code === 'provider-bad-request' ? 400 : e?.code === 'provider-rate-limit' ? 429 : 502;
      return {
        statusCode: status,
        body: { error: { message: `worker "${call.worker}": ${e?.message ?? 'failed'}`, type: status === 400 ? 'invalid_request_error' : 'server_error', param: null, code: status === 400 ? 'provider_bad_request' : 'provider_error' } },
      };
    },
  };
}

function lastUserText(req: ChatRequest): string {
  const m = req.messages.findLast((x) => x.role === 'user');
  return m ? messageText(m) : '';
}
