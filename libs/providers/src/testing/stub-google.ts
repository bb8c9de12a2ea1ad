// The Gemini API as the real API speaks it: POST {baseUrl}/v1beta/models/{model}:generateContent
// (JSON) and :streamGenerateContent?alt=sse (`data: {GenerateContentResponse}` events separated
// by CRLF CRLF, usageMetadata and finishReason in the last one), the key in `x-goog-api-key`,
// and google.rpc error bodies `{"error":{code,message,status,details}}` (429 with RetryInfo).

import type { ServerResponse } from 'node:http';
import {
  StubServer,
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

const STATUS_NAMES: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

function callParts(reply: Answer): Array<Record<string, unknown>> {
  if (reply.type !== 'tool-calls') return [];
  return reply.calls.map((c) => ({
    functionCall: { ...(c.id ? { id: c.id } : {}), name: c.name, args: JSON.parse(c.arguments || '{}') },
    ...(c.thoughtSignature ? { thoughtSignature: c.thoughtSignature } : {}),
  }));
}

function usageMetadata(reply: Answer, ctx: ReplyContext, text: string): Record<string, unknown> {
  const u = stubUsage(ctx.req, text, reply.usage);
  return {
    promptTokenCount: u.input,
    candidatesTokenCount: u.output,
    totalTokenCount: u.input + u.output,
    promptTokensDetails: [{ modality: 'TEXT', tokenCount: u.input }],
  };
}

function response(ctx: ReplyContext, reply: Answer, parts: unknown[], last: { finishReason: string; usage: Record<string, unknown> } | undefined): Record<string, unknown> {
  return {
    candidates: [{ content: { parts, role: 'model' }, index: 0, ...(last ? { finishReason: last.finishReason } : {}) }],
    ...(last ? { usageMetadata: last.usage } : {}),
    modelVersion: reply.model ?? ctx.route.model,
    responseId: `stub-response-${ctx.seq}`,
  };
}

export const googleDialect: Dialect = {
  name: 'google',
  baseURL: (origin) => origin,
  route(req) {
    const m = /^\/v1beta\/models\/([^/:]+):(generateContent|streamGenerateContent)$/.exec(req.path);
    if (req.method !== 'POST' || !m) return undefined;
    if (m[2] === 'streamGenerateContent' && req.query.get('alt') !== 'sse') return undefined;
    return { kind: m[2] === 'generateContent' ? 'generate' : 'stream', model: decodeURIComponent(m[1]!) };
  },
  apiKeyOf: (req) => {
    const k = req.headers['x-goog-api-key'];
    return typeof k === 'string' ? k : (req.query.get('key') ?? undefined);
  },

  writeGenerate(res, reply, ctx) {
    const text = reply.type === 'text' ? reply.text : (reply.text ?? '');
    const parts = [...(text ? [{ text }] : []), ...callParts(reply)];
    const finishReason = reply.type === 'text' ? (reply.finish ?? 'STOP') : 'STOP';
    writeJson(res, 200, response(ctx, reply, parts, { finishReason, usage: usageMetadata(reply, ctx, text) }));
  },

  writeStream(res: ServerResponse, reply, ctx, stallAfterFirst = false) {
    const text = reply.type === 'text' ? reply.text : (reply.text ?? '');
    const finishReason = reply.type === 'text' ? (reply.finish ?? 'STOP') : 'STOP';
    const send = (body: unknown): void => {
      res.write(`data: ${JSON.stringify(body)}\r\n\r\n`);
    };
    startSse(res);
    const textPieces = pieces(text, ctx.chunkSize);
    const calls = callParts(reply);
    const last = { finishReason, usage: usageMetadata(reply, ctx, text) };
    if (textPieces.length === 0 && calls.length === 0) send(response(ctx, reply, [{ text: '' }], last));
    textPieces.forEach((p, i) => {
      if (stallAfterFirst && i > 0) return;
      send(response(ctx, reply, [{ text: p }], i === textPieces.length - 1 && calls.length === 0 ? last : undefined));
    });
    if (stallAfterFirst) return;
    // Gemini sends function calls whole, in the final chunk
    if (calls.length) send(response(ctx, reply, calls, last));
    res.end();
  },

  writeError(res, status, message, headers, retryAfterMs) {
    const details =
      status === 429 && retryAfterMs !== undefined
        ? [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: `${(retryAfterMs / 1000).toFixed(3).replace(/\.?0+$/, '')}s` }]
        : [];
    writeJson(res, status, { error: { code: status, message, status: STATUS_NAMES[status] ?? 'UNKNOWN', ...(details.length ? { details } : {}) } }, headers);
  },
};

export type GoogleStub = StubServer;

/** Start a Gemini API stub on 127.0.0.1 (random port); give the SDK `stub.baseURL` as httpOptions.baseUrl. */
export function startGoogleStub(opts: StubServerOptions = {}): Promise<GoogleStub> {
  return StubServer.start(googleDialect, opts);
}
