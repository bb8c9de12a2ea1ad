// One function per SDK that turns the SDK's error classes into our ProviderError family.
// Anything unrecognised (a bug of ours, say) is returned unchanged so it is not disguised as
// a provider failure.

import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { ApiError as GoogleApiError } from '@google/genai';
import type { ProviderKind } from '@fugu/core';
import {
  AbortedError,
  AuthError,
  BadRequestError,
  ConnectionError,
  ProviderError,
  RateLimitError,
  ServerError,
  TimeoutError,
  errorForStatus,
  isAbortLike,
  isFetchNetworkError,
  parseRetryAfter,
  redactSecrets,
} from './errors.ts';

export type ErrorContext = {
  provider: ProviderKind;
  /** secrets to scrub from messages (the adapter's API key) */
  secrets?: ReadonlyArray<string | undefined>;
};

function msg(ctx: ErrorContext, text: string): string {
  return redactSecrets(`${ctx.provider}: ${text}`, ctx.secrets);
}

function causeText(e: Error): string {
  const c = e.cause;
  return c instanceof Error && c.message ? `: ${c.message}` : '';
}

/** Errors of the `openai` SDK (also used by the openai-compatible adapter). */
export function mapOpenAIError(e: unknown, ctx: ErrorContext): unknown {
  if (e instanceof ProviderError) return e;
  const p = ctx.provider;
  if (e instanceof OpenAI.APIConnectionTimeoutError) return new TimeoutError(p, msg(ctx, 'request timed out'));
  if (e instanceof OpenAI.APIUserAbortError) return new AbortedError(p, msg(ctx, 'request aborted by the caller'));
  if (e instanceof OpenAI.APIConnectionError) return new ConnectionError(p, msg(ctx, `connection error${causeText(e)}`));
  if (e instanceof OpenAI.APIError) {
    const requestId = e.requestID ?? undefined;
    if (e.status !== undefined) {
      return errorForStatus(p, e.status, msg(ctx, e.message), { retryAfterMs: parseRetryAfter(e.headers), requestId });
    }
    // An error event inside a stream (no HTTP status): classify by the error's code/type.
    const code = `${e.code ?? ''} ${e.type ?? ''}`;
    const text = msg(ctx, `error in stream: ${e.message}`);
    if (/rate_limit/.test(code)) return new RateLimitError(p, text, { retryAfterMs: parseRetryAfter(e.headers) });
    if (/invalid_request|not_found|context_length/.test(code)) return new BadRequestError(p, text);
    if (/auth|permission|invalid_api_key/.test(code)) return new AuthError(p, text);
    return new ServerError(p, text);
  }
  return mapTransport(e, ctx);
}

// Anthropic's error `type` names, for errors that arrive without a status (inside a stream).
const ANTHROPIC_TYPE_STATUS: Record<string, number> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  overloaded_error: 529,
  timeout_error: 504,
};

/** Errors of `@anthropic-ai/sdk`. */
export function mapAnthropicError(e: unknown, ctx: ErrorContext): unknown {
  if (e instanceof ProviderError) return e;
  const p = ctx.provider;
  if (e instanceof Anthropic.APIConnectionTimeoutError) return new TimeoutError(p, msg(ctx, 'request timed out'));
  if (e instanceof Anthropic.APIUserAbortError) return new AbortedError(p, msg(ctx, 'request aborted by the caller'));
  if (e instanceof Anthropic.APIConnectionError) return new ConnectionError(p, msg(ctx, `connection error${causeText(e)}`));
  if (e instanceof Anthropic.APIError) {
    const fields = { retryAfterMs: parseRetryAfter(e.headers), requestId: e.requestID ?? undefined };
    if (e.status !== undefined) return errorForStatus(p, e.status, msg(ctx, e.message), fields);
    const status = ANTHROPIC_TYPE_STATUS[e.type ?? ''];
    const text = msg(ctx, `error in stream: ${e.message}`);
    if (status === undefined) return new ServerError(p, text, fields);
    if (status === 504) return new TimeoutError(p, text, fields);
    // the HTTP response was a 200; the status is the one Anthropic uses for this error type
    return errorForStatus(p, status, text, fields);
  }
  if (e instanceof Anthropic.AnthropicError && /Streaming is required/.test(e.message)) {
    return new BadRequestError(p, msg(ctx, e.message));
  }
  return mapTransport(e, ctx);
}

/**
 * Errors of `@google/genai`. Its ApiError has the status but no headers; the wait a 429 asks
 * for is in the body's google.rpc.RetryInfo (`"retryDelay": "25s"`), which the message holds.
 */
export function mapGoogleError(e: unknown, ctx: ErrorContext): unknown {
  if (e instanceof ProviderError) return e;
  const p = ctx.provider;
  if (e instanceof GoogleApiError) {
    const text = msg(ctx, `${e.status} ${googleMessage(e.message)}`);
    return errorForStatus(p, e.status, text, { retryAfterMs: googleRetryDelay(e.message) });
  }
  if (e instanceof Error && /^(exception parsing stream chunk|Incomplete JSON segment)/.test(e.message)) {
    return new ConnectionError(p, msg(ctx, `stream broke off: ${e.message.slice(0, 200)}`));
  }
  return mapTransport(e, ctx);
}

function mapTransport(e: unknown, ctx: ErrorContext): unknown {
  if (isAbortLike(e)) return new AbortedError(ctx.provider, msg(ctx, 'request aborted'));
  if (isFetchNetworkError(e)) return new ConnectionError(ctx.provider, msg(ctx, `connection error: ${(e as Error).message}${causeText(e as Error)}`));
  return e;
}

/** The human part of a Gemini error body (`{"error":{"message":...}}`), else the raw text. */
function googleMessage(raw: string): string {
  const body = parseJsonObject(raw);
  const inner = body?.['error'];
  if (inner && typeof inner === 'object') {
    const m = (inner as Record<string, unknown>)['message'];
    const s = (inner as Record<string, unknown>)['status'];
    if (typeof m === 'string') return typeof s === 'string' ? `${s}: ${m}` : m;
  }
  return raw.length > 500 ? `${raw.slice(0, 500)}...` : raw;
}

/** retryDelay of a google.rpc.RetryInfo detail ("25s", "1.5s"), in ms. */
export function googleRetryDelay(raw: string): number | undefined {
  const body = parseJsonObject(raw);
  const details = (body?.['error'] as Record<string, unknown> | undefined)?.['details'];
  if (!Array.isArray(details)) return undefined;
  for (const d of details) {
    const delay = (d as Record<string, unknown> | null)?.['retryDelay'];
    if (typeof delay === 'string') {
      const m = /^(\d+(?:\.\d+)?)s$/.exec(delay.trim());
      if (m) return Math.ceil(Number(m[1]) * 1000);
    }
  }
  return undefined;
}

function parseJsonObject(raw: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(raw);
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
