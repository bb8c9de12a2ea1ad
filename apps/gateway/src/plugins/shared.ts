// Helpers of the gateway's plugins.
import type { ServerResponse } from 'node:http';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';

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
