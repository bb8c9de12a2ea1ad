// Anthropic Messages API as the real API speaks it: POST {baseURL}/v1/messages, a Message JSON
// answer, or an SSE stream `event: message_start` / content_block_start / ping /
// content_block_delta (text_delta, input_json_delta) / content_block_stop / message_delta /
// message_stop, and `{"type":"error","error":{type,message}}` bodies (529 = overloaded).

import type { ServerResponse } from 'node:http';
import {
  StubServer,
  bearer,
  pieces,
  startSse,
  stubUsage,
  writeJson,
  type Dialect,
  type ReplyContext,
  type StubReply,
  type StubServerOptions,
} from './stub-server.ts';

type Answer = Extract<StubReply, { type: 'text' | 'tool-calls' }>;

function blocks(reply: Answer, ctx: ReplyContext): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  const text = reply.type === 'text' ? reply.text : (reply.text ?? '');
  if (text) out.push({ type: 'text', text, citations: null });
  if (reply.type === 'tool-calls') {
    reply.calls.forEach((c, i) => {
      out.push({ type: 'tool_use', id: c.id ?? `toolu_stub_${ctx.seq}_${i}`, name: c.name, input: JSON.parse(c.arguments || '{}'), caller: { type: 'direct' } });
    });
  }
  return out;
}

function stopReason(reply: Answer): string {
  return reply.type === 'tool-calls' ? 'tool_use' : (reply.finish ?? 'end_turn');
}

function usage(input: number, output: number): Record<string, unknown> {
  return {
    input_tokens: input,
    output_tokens: output,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    cache_creation: null,
    inference_geo: null,
    output_tokens_details: null,
    server_tool_use: null,
    service_tier: 'standard',
    speed: null,
  };
}

const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
};

export const anthropicDialect: Dialect = {
  name: 'anthropic',
  baseURL: (origin) => origin,
  route(req) {
    if (req.method !== 'POST' || req.path !== '/v1/messages') return undefined;
    return { kind: req.body?.stream === true ? 'stream' : 'generate', model: String(req.body?.model ?? '') };
  },
  apiKeyOf: (req) => {
    const k = req.headers['x-api-key'];
    return typeof k === 'string' ? k : bearer(req);
  },

  writeGenerate(res, reply, ctx) {
    const text = reply.type === 'text' ? reply.text : (reply.text ?? '');
    const u = stubUsage(ctx.req, text, reply.usage);
    writeJson(
      res,
      200,
      {
        id: `msg_stub_${ctx.seq}`,
        type: 'message',
        role: 'assistant',
        model: reply.model ?? ctx.route.model,
        content: blocks(reply, ctx),
        container: null,
        diagnostics: null,
        stop_details: null,
        stop_reason: stopReason(reply),
        stop_sequence: null,
        usage: usage(u.input, u.output),
      },
      { 'request-id': `req_stub_${ctx.seq}` },
    );
  },

  writeStream(res: ServerResponse, reply, ctx, stallAfterFirst = false) {
    const event = (name: string, data: Record<string, unknown>): void => {
      res.write(`event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`);
    };
    const text = reply.type === 'text' ? reply.text : (reply.text ?? '');
    const u = stubUsage(ctx.req, text, reply.usage);
    startSse(res, { 'request-id': `req_stub_${ctx.seq}` });
    event('message_start', {
      message: {
        id: `msg_stub_${ctx.seq}`,
        type: 'message',
        role: 'assistant',
        model: reply.model ?? ctx.route.model,
        content: [],
        container: null,
        diagnostics: null,
        stop_details: null,
        stop_reason: null,
        stop_sequence: null,
        usage: usage(u.input, 1),
      },
    });
    blocks(reply, ctx).forEach((b, index) => {
      if (b['type'] === 'text') {
        event('content_block_start', { index, content_block: { type: 'text', text: '', citations: null } });
        if (index === 0) res.write('event: ping\ndata: {"type": "ping"}\n\n');
        for (const p of pieces(String(b['text']), ctx.chunkSize)) {
          event('content_block_delta', { index, delta: { type: 'text_delta', text: p } });
          if (stallAfterFirst) return;
        }
      } else {
        event('content_block_start', { index, content_block: { ...b, input: {} } });
        for (const p of pieces(JSON.stringify(b['input']), ctx.chunkSize)) {
          event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: p } });
        }
      }
      event('content_block_stop', { index });
    });
    if (stallAfterFirst) return;
    event('message_delta', {
      delta: { stop_reason: stopReason(reply), stop_sequence: null, container: null, stop_details: null },
      usage: { input_tokens: u.input, output_tokens: u.output, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens_details: null, server_tool_use: null },
    });
    event('message_stop', {});
    res.end();
  },

  writeError(res, status, message, headers) {
    const type = ERROR_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
    writeJson(res, status, { type: 'error', error: { type, message }, request_id: `req_stub_${status}` }, { 'request-id': `req_stub_${status}`, ...headers });
  },
};

export type AnthropicStub = StubServer;

/** Start an Anthropic Messages stub on 127.0.0.1 (random port); give the SDK `stub.baseURL`. */
export function startAnthropicStub(opts: StubServerOptions = {}): Promise<AnthropicStub> {
  return StubServer.start(anthropicDialect, opts);
}
