// Typed provider errors. Every adapter turns its SDK's errors into one of these, so the queue
// decides about retries from `transient` and `retryAfterMs` without knowing any SDK.
// Messages never carry an API key: adapters pass their key to `redactSecrets`, and the SDK
// error is not kept as `cause` (SDK errors hold request headers and raw bodies).

import { FuguError, registerWireError, type JsonValue, type ProviderKind, type WireError } from '@fugu/core';

export type ProviderErrorKind =
  | 'rate-limit'
  | 'overloaded'
  | 'server'
  | 'bad-request'
  | 'auth'
  | 'timeout'
  | 'connection'
  | 'aborted';

export type ProviderErrorFields = {
  status?: number;
  retryAfterMs?: number;
  /** the provider's request id, for support tickets */
  requestId?: string;
};

export class ProviderError extends FuguError {
  readonly provider: ProviderKind;
  readonly kind: ProviderErrorKind;
  readonly status: number | undefined;
  /** true when the same request may succeed later (the queue retries it) */
  readonly transient: boolean;
  /** how long the provider asked us to wait before retrying */
  readonly retryAfterMs: number | undefined;
  readonly requestId: string | undefined;

  constructor(
    provider: ProviderKind,
    kind: ProviderErrorKind,
    transient: boolean,
    message: string,
    fields: ProviderErrorFields = {},
  ) {
    super(`provider-${kind}`, message);
    this.name = 'ProviderError';
    this.provider = provider;
    this.kind = kind;
    this.transient = transient;
    this.status = fields.status;
    this.retryAfterMs = fields.retryAfterMs;
    this.requestId = fields.requestId;
  }

  override wireFields(): Record<string, JsonValue> {
    return {
      provider: this.provider,
      kind: this.kind,
      transient: this.transient,
      ...(this.status !== undefined && { status: this.status }),
      ...(this.retryAfterMs !== undefined && { retryAfterMs: this.retryAfterMs }),
      ...(this.requestId !== undefined && { requestId: this.requestId }),
    };
  }

  /** JSON-safe form for job payloads and logs. */
  toJSON(): Record<string, unknown> {
    return {
      name: this.name,
      code: this.code,
      provider: this.provider,
      kind: this.kind,
      status: this.status,
      transient: this.transient,
      retryAfterMs: this.retryAfterMs,
      requestId: this.requestId,
      message: this.message,
    };
  }
}

/** 429: too many requests or tokens; transient, with the wait the provider asked for. */
export class RateLimitError extends ProviderError {
  constructor(provider: ProviderKind, message: string, fields: ProviderErrorFields = {}) {
    super(provider, 'rate-limit', true, message, { status: 429, ...fields });
    this.name = 'RateLimitError';
  }
}

/** 529 (Anthropic overloaded) and 503: the provider sheds load; transient. */
export class OverloadedError extends ProviderError {
  constructor(provider: ProviderKind, message: string, fields: ProviderErrorFields = {}) {
    super(provider, 'overloaded', true, message, fields);
    this.name = 'OverloadedError';
  }
}

/** Other 5xx (and 409, which providers use for transient conflicts); transient. */
export class ServerError extends ProviderError {
  constructor(provider: ProviderKind, message: string, fields: ProviderErrorFields = {}) {
    super(provider, 'server', true, message, fields);
    this.name = 'ServerError';
  }
}

/** 400/404/422 and other 4xx: the request itself is wrong; retrying will not help. */
export class BadRequestError extends ProviderError {
  constructor(provider: ProviderKind, message: string, fields: ProviderErrorFields = {}) {
    super(provider, 'bad-request', false, message, fields);
    this.name = 'BadRequestError';
  }
}

/** 401/403 (and 402): the key or the account is wrong; retrying will not help. */
export class AuthError extends ProviderError {
  constructor(provider: ProviderKind, message: string, fields: ProviderErrorFields = {}) {
    super(provider, 'auth', false, message, fields);
    this.name = 'AuthError';
  }
}

/** The call ran past its time limit (ours, the SDK's, or a 408); transient. */
export class TimeoutError extends ProviderError {
  constructor(provider: ProviderKind, message: string, fields: ProviderErrorFields = {}) {
    super(provider, 'timeout', true, message, fields);
    this.name = 'TimeoutError';
  }
}

/** The provider could not be reached, or a stream broke off; transient. */
export class ConnectionError extends ProviderError {
  constructor(provider: ProviderKind, message: string, fields: ProviderErrorFields = {}) {
    super(provider, 'connection', true, message, fields);
    this.name = 'ConnectionError';
  }
}

/** The caller cancelled the call through its AbortSignal; not retried. */
export class AbortedError extends ProviderError {
  constructor(provider: ProviderKind, message: string) {
    super(provider, 'aborted', false, message);
    this.name = 'AbortedError';
  }
}

/**
 * A ProviderError back from its WireError (code `provider-<kind>`): the class of its kind, with
 * its provider, status, retry-after and request id. Registered with @fugu/core's wire format when
 * this module is imported.
 */
export function reviveProviderError(w: WireError): ProviderError {
  const f = w.fields ?? {};
  const provider = (typeof f.provider === 'string' ? f.provider : 'unknown') as ProviderKind;
  const kind = (typeof f.kind === 'string' ? f.kind : w.code.slice('provider-'.length)) as ProviderErrorKind;
  const fields: ProviderErrorFields = {
    ...(typeof f.status === 'number' && { status: f.status }),
    ...(typeof f.retryAfterMs === 'number' && { retryAfterMs: f.retryAfterMs }),
    ...(typeof f.requestId === 'string' && { requestId: f.requestId }),
  };
  switch (kind) {
    case 'rate-limit': return new RateLimitError(provider, w.message, fields);
    case 'overloaded': return new OverloadedError(provider, w.message, fields);
    case 'server': return new ServerError(provider, w.message, fields);
    case 'bad-request': return new BadRequestError(provider, w.message, fields);
    case 'auth': return new AuthError(provider, w.message, fields);
    case 'timeout': return new TimeoutError(provider, w.message, fields);
    case 'connection': return new ConnectionError(provider, w.message, fields);
    case 'aborted': return new AbortedError(provider, w.message);
    default: {
      const e = new ProviderError(provider, kind, f.transient === true, w.message, fields);
      if (w.name) e.name = w.name;
      return e;
    }
  }
}

registerWireError('provider-', reviveProviderError);

export function isProviderError(e: unknown): e is ProviderError {
  return e instanceof ProviderError;
}

/** Whether a failed call may be retried: transient provider errors only. */
export function isTransientError(e: unknown): boolean {
  return e instanceof ProviderError && e.transient;
}

// ---------------------------------------------------------------------------------------------
// Helpers shared by the SDK mappers

type HeaderSource = Headers | Record<string, string | string[] | undefined> | undefined | null;

function header(headers: HeaderSource, name: string): string | undefined {
  if (!headers) return undefined;
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const rec = headers as Record<string, string | string[] | undefined>;
  const key = Object.keys(rec).find((k) => k.toLowerCase() === name);
  const v = key === undefined ? undefined : rec[key];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * The wait a response asks for, in ms: `retry-after-ms` (OpenAI, Anthropic), else `retry-after`
 * as seconds (fractions allowed) or as an HTTP date. Undefined when absent or unparseable.
 */
export function parseRetryAfter(headers: HeaderSource, now: number = Date.now()): number | undefined {
  const ms = header(headers, 'retry-after-ms')?.trim();
  if (ms && /^\d+(\.\d+)?$/.test(ms)) return Math.ceil(Number(ms));
  const ra = header(headers, 'retry-after')?.trim();
  if (!ra) return undefined;
  if (/^\d+(\.\d+)?$/.test(ra)) return Math.ceil(Number(ra) * 1000);
  const at = Date.parse(ra);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}

// Shapes of keys that providers echo back (OpenAI masks the middle, but the ends are real).
const KEY_SHAPES = [/\bsk-[A-Za-z0-9_*-]{8,}/g, /\bAIza[0-9A-Za-z_-]{16,}/g, /\bBearer\s+[A-Za-z0-9._~+/=-]{8,}/gi];

/** Remove the given secrets, and anything shaped like an API key, from a text. */
export function redactSecrets(text: string, secrets: ReadonlyArray<string | undefined> = []): string {
  let out = text;
  for (const s of secrets) {
    // very short "keys" (e.g. a placeholder) would blank out ordinary words
    if (s && s.length >= 6) out = out.split(s).join('[redacted]');
  }
  for (const re of KEY_SHAPES) out = out.replace(re, '[redacted]');
  return out;
}

/** Make a ProviderError from an HTTP status, the one place the status table lives. */
export function errorForStatus(
  provider: ProviderKind,
  status: number,
  message: string,
  fields: ProviderErrorFields = {},
): ProviderError {
  const f = { ...fields, status };
  if (status === 429) return new RateLimitError(provider, message, f);
  if (status === 529 || status === 503) return new OverloadedError(provider, message, f);
  if (status === 408) return new TimeoutError(provider, message, f);
  if (status === 409) return new ServerError(provider, message, f);
  if (status >= 500) return new ServerError(provider, message, f);
  if (status === 401 || status === 402 || status === 403) return new AuthError(provider, message, f);
  return new BadRequestError(provider, message, f);
}

/** Errors thrown by fetch itself (undici), before any HTTP status: a connection problem. */
export function isFetchNetworkError(e: unknown): boolean {
  if (!(e instanceof Error)) return false;
  if (e.name === 'TypeError' && /fetch failed|terminated|network/i.test(e.message)) return true;
  const code = (e as { code?: unknown }).code ?? (e.cause as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && /^(ECONN|ENOTFOUND|EAI_AGAIN|EPIPE|ETIMEDOUT|UND_ERR)/.test(code);
}

export function isAbortLike(e: unknown): boolean {
  return e instanceof Error && (e.name === 'AbortError' || e.name === 'APIUserAbortError');
}
