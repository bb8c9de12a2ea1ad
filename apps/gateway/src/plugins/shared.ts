// Helpers of the gateway's plugins.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { scrub } from '@fugu/telemetry';
import type { GatewayContext } from '../context.ts';
import { GatewayError } from '../errors.ts';
import { classify, type ChatInput, type StreamAnswer } from '../models.ts';

/**
 * A plugin whose hooks and decorations apply to the scope it is registered in (what the
 * fastify-plugin package does, by the same symbol), instead of its own encapsulated child scope.
 */
export function unencapsulated<O extends Record<string, unknown>>(plugin: FastifyPluginAsync<O>): FastifyPluginAsync<O> {
  (plugin as unknown as Record<symbol, boolean>)[Symbol.for('skip-override')] = true;
  return plugin;
}

/** Aborts what the request waits for (a provider call, a workflow) when the client goes away before the answer is complete. */
export function clientSignal(reply: FastifyReply): AbortSignal {
  const ac = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) ac.abort();
  });
  return ac.signal;
}

/** The request's Idempotency-Key header, when it has one (fugu-ultra answers the same key again with its stored answer). */
export function idempotencyKeyOf(request: FastifyRequest): { idempotencyKey?: string } {
  const k = request.headers['idempotency-key'];
  return typeof k === 'string' && k !== '' ? { idempotencyKey: k } : {};
}

/**
 * Takes the response over for server-sent events (the first event of the answer in hand): the
 * headers set so far (x-request-id, ...), the SSE ones and `headers`, status 200; returns the raw
 * response to write events to.
 */
export function openEventStream(reply: FastifyReply, headers: Record<string, string>): ServerResponse {
  const all: Record<string, string> = {
    ...stringHeaders(reply.getHeaders()),
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
    ...headers,
  };
  reply.hijack();
  const raw = reply.raw;
  for (const [k, v] of Object.entries(all)) raw.setHeader(k, v);
  raw.writeHead(200);
  return raw;
}

function stringHeaders(h: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) if (typeof v === 'string' || typeof v === 'number') out[k] = String(v);
  return out;
}

/**
 * Reads and drops what is left of a request's body (one the gateway answers without reading it
 * all: over the limit, refused before its handler read it), so that a client still sending it
 * reads the answer instead of a reset connection; at most `maxBytes` more and `maxMs` long.
 * Resolves true when the body ended, false when it was cut off (the connection must then close).
 */
export function drainRequest(req: IncomingMessage, maxBytes: number, maxMs: number): Promise<boolean> {
  if (req.complete || req.destroyed) return Promise.resolve(req.complete);
  return new Promise((resolve) => {
    let bytes = 0;
    const finish = (ended: boolean) => {
      clearTimeout(timer);
      req.off('data', onData).off('end', onEnd).off('close', onClose).off('error', onClose);
      if (!ended) req.pause();
      resolve(ended);
    };
    const onData = (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > maxBytes) finish(false);
    };
    const onEnd = () => finish(true);
    const onClose = () => finish(false);
    const timer = setTimeout(() => finish(false), maxMs);
    req.on('data', onData).on('end', onEnd).on('close', onClose).on('error', onClose);
    req.resume();
  });
}

/**
 * A stream that broke off after its first byte (chat completions, the Responses API and the
 * Messages API write their events differently and settle it alike): the row charged with what was
 * paid so far (a fugu-ultra workflow's answered steps) and sealed, unless it already was, with the
 * error's code, or `client_closed` (status 499) when the client went away. Returns the error to
 * write to the client in the API's own shape, or undefined when the client is gone.
 */
export async function settleBrokenStream(ctx: GatewayContext, a: StreamAnswer, input: ChatInput, e: unknown, seal: () => Promise<void>, what: string): Promise<GatewayError | undefined> {
  const rec = input.record;
  const gone = input.signal.aborted;
  let ge: GatewayError | undefined;
  if (!gone) {
    ctx.log.warn({ reqId: rec.requestId, worker: a.worker, err: scrub((e as Error).message) }, `${what} stream failed after its first byte`);
    ge = e instanceof GatewayError ? e : (classify(a.worker, e) ?? new GatewayError(502, `worker "${a.worker}": the stream broke off: ${(e as Error).message}`, { code: 'provider_error' }));
    rec.errorCode = ge.errorCode ?? ge.type;
  } else rec.errorCode = 'client_closed';
  if (!rec.sealed) {
    ctx.charge(input.caller, rec, ge ? ge.cost : (classify(a.worker, e)?.cost ?? 0n));
    await seal();
  }
  return ge;
}
