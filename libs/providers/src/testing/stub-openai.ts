// OpenAI Chat Completions as the real API speaks it: POST {baseURL}/chat/completions, JSON
// answers, SSE streams of `data: {chunk}` lines ending with `data: [DONE]`, usage in a last
// chunk with no choices when stream_options.include_usage is set, and `{"error": {...}}` bodies.
// Also serves OpenAI-compatible adapters (same wire format).

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

const CREATED = 1_760_000_000;

function toolCalls(reply: Answer, ctx: ReplyContext): Array<{ id: string; name: string; arguments: string }> {
  if (reply.type !== 'tool-calls') return [];
  return reply.calls.map((c, i) => ({ id: c.id ?? `call_stub_${ctx.seq}_${i}`, name: c.name, arguments: c.arguments }));
}

function finishReason(reply: Answer): string {
  if (reply.type === 'tool-calls') return 'tool_calls';
  return reply.finish ?? 'stop';
}

function usageBody(reply: Answer, ctx: ReplyContext, text: string): Record<string, unknown> {
  const u = stubUsage(ctx.req, text, reply.usage);
  return {
    prompt_tokens: u.input,
    completion_tokens: u.output,
    total_tokens: u.input + u.output,
    prompt_tokens_details: { cached_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0 },
  };
}

const ERROR_TYPES: Record<number, [type: string, code: string | null]> = {
  400: ['invalid_request_error', null],
  401: ['invalid_request_error', 'invalid_api_key'],
  403: ['invalid_request_error', 'unsupported_country_region_territory'],
  404: ['invalid_request_error', 'model_not_found'],
  429: ['requests', 'rate_limit_exceeded'],
  500: ['server_error', null],
  503: ['server_error', null],
};

export const openAIDialect: Dialect = {
  name: 'openai',
  baseURL: (origin) => `${origin}/v1`,
  route(req) {
    if (req.method !== 'POST' || !req.path.endsWith('/chat/completions')) return undefined;
    return { kind: req.body?.stream === true ? 'stream' : 'generate', model: String(req.body?.model ?? '') };
  },
  apiKeyOf: bearer,

  writeGenerate(res, reply, ctx) {
    const text = reply.type === 'text' ? reply.text : (reply.text ?? '');
    const calls = toolCalls(reply, ctx);
    writeJson(res, 200, {
      id: `chatcmpl-stub-${ctx.seq}`,
      object: 'chat.completion',
      created: CREATED,
      model: reply.model ?? ctx.route.model,
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: reply.type === 'tool-calls' && !text ? null : text,
            refusal: null,
            ...(calls.length
              ? { tool_calls: calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) }
              : {}),
          },
          logprobs: null,
          finish_reason: finishReason(reply),
        },
      ],
      usage: usageBody(reply, ctx, text),
      system_fingerprint: 'fp_stub',
    });
  },

  writeStream(res: ServerResponse, reply, ctx, stallAfterFirst = false) {
    const id = `chatcmpl-stub-${ctx.seq}`;
    const model = reply.model ?? ctx.route.model;
    const chunk = (choices: unknown[], extra: Record<string, unknown> = {}): void => {
      res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: CREATED, model, system_fingerprint: 'fp_stub', choices, ...extra })}\n\n`);
    };
    const delta = (d: Record<string, unknown>, finish: string | null = null): void =>
      chunk([{ index: 0, delta: d, logprobs: null, finish_reason: finish }]);

    startSse(res);
    const text = reply.type === 'text' ? reply.text : (reply.text ?? '');
    delta({ role: 'assistant', content: '', refusal: null });
    for (const p of pieces(text, ctx.chunkSize)) {
      delta({ content: p });
      if (stallAfterFirst) return; // leave the stream open without finishing it
    }
    toolCalls(reply, ctx).forEach((c, index) => {
      // the first fragment names the call; the arguments follow in pieces
      delta({ tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] });
      for (const p of pieces(c.arguments, ctx.chunkSize)) delta({ tool_calls: [{ index, function: { arguments: p } }] });
    });
    delta({}, finishReason(reply));
    if (ctx.req.body?.stream_options?.include_usage) chunk([], { usage: usageBody(reply, ctx, text) });
    res.write('data: [DONE]\n\n');
    res.end();
  },

  writeError(res, status, message, headers) {
    const [type, code] = ERROR_TYPES[status] ?? (status >= 500 ? ['server_error', null] : ['invalid_request_error', null]);
    writeJson(res, status, { error: { message, type, param: null, code } }, { 'x-request-id': `req_stub_${status}`, ...headers });
  },
};

export type OpenAIStub = StubServer;

/** Start an OpenAI Chat Completions stub on 127.0.0.1 (random port); give the SDK `stub.baseURL`. */
export function startOpenAIStub(opts: StubServerOptions = {}): Promise<OpenAIStub> {
  return StubServer.start(openAIDialect, opts);
}
