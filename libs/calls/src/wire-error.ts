// Errors as stored in a call row and returned to a chat-call's waiter: `{ code, message, ...fields }`
// keyed on the error code. (@fugu/core is getting one shared wire format, toWireError/fromWireError,
// on branch `core`; until it lands this is the same shape, local to libs/calls.)
import { ConfigError, FuguError } from '@fugu/core';
import { ProviderError, redactSecrets, type ProviderErrorKind } from '@fugu/providers';
import type { ProviderKind } from '@fugu/core';

export type WireError = { code: string; message: string; [field: string]: unknown };

const MAX_MESSAGE = 2000;

export function toWireError(e: unknown): WireError {
  if (e instanceof ProviderError) {
    return {
      code: e.code, message: clip(e.message), provider: e.provider, kind: e.kind, transient: e.transient,
      ...(e.status !== undefined && { status: e.status }),
      ...(e.retryAfterMs !== undefined && { retryAfterMs: e.retryAfterMs }),
      ...(e.requestId !== undefined && { requestId: e.requestId }),
    };
  }
  if (e instanceof ConfigError) return { code: e.code, message: clip(e.message), ...(e.variable !== undefined && { variable: e.variable }) };
  if (e instanceof FuguError) return { code: e.code, message: clip(e.message) };
  return { code: 'internal', message: clip(e instanceof Error ? e.message : String(e)) };
}

/** The error a wire error stands for: a ProviderError (same kind, transient, status), a ConfigError, or a FuguError. */
export function fromWireError(w: WireError): Error {
  if (w.code.startsWith('provider-') && typeof w.provider === 'string') {
    const kind = w.code.slice('provider-'.length) as ProviderErrorKind;
    return new ProviderError(w.provider as ProviderKind, kind, w.transient === true, w.message, {
      ...(typeof w.status === 'number' && { status: w.status }),
      ...(typeof w.retryAfterMs === 'number' && { retryAfterMs: w.retryAfterMs }),
      ...(typeof w.requestId === 'string' && { requestId: w.requestId }),
    });
  }
  if (w.code === 'config') return new ConfigError(w.message, typeof w.variable === 'string' ? w.variable : undefined);
  return new FuguError(w.code, w.message);
}

function clip(s: string): string {
  const r = redactSecrets(s);
  return r.length > MAX_MESSAGE ? r.slice(0, MAX_MESSAGE) : r;
}
