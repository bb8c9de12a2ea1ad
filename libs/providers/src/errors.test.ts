import { describe, expect, it } from 'vitest';
import {
  AuthError,
  BadRequestError,
  OverloadedError,
  ProviderError,
  RateLimitError,
  ServerError,
  TimeoutError,
  errorForStatus,
  isTransientError,
  parseRetryAfter,
  redactSecrets,
} from './errors.ts';
import { googleRetryDelay } from './sdk-errors.ts';

describe('parseRetryAfter', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  it('reads retry-after-ms first, then retry-after seconds or an HTTP date', () => {
    expect(parseRetryAfter(new Headers({ 'retry-after-ms': '250.5', 'retry-after': '9' }), now)).toBe(251);
    expect(parseRetryAfter(new Headers({ 'retry-after': '2' }), now)).toBe(2000);
    expect(parseRetryAfter(new Headers({ 'retry-after': '0.5' }), now)).toBe(500);
    expect(parseRetryAfter({ 'Retry-After': 'Thu, 01 Jan 2026 00:00:30 GMT' }, now)).toBe(30_000);
    expect(parseRetryAfter({ 'retry-after': 'Wed, 31 Dec 2025 23:59:00 GMT' }, now)).toBe(0);
  });
  it('is undefined when absent or unparseable', () => {
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
    expect(parseRetryAfter(new Headers(), now)).toBeUndefined();
    expect(parseRetryAfter(new Headers({ 'retry-after': 'soon' }), now)).toBeUndefined();
  });
});

describe('errorForStatus', () => {
  it('maps statuses to the typed errors with transient flags', () => {
    const cases: Array<[number, new (...args: never[]) => ProviderError, boolean]> = [
      [429, RateLimitError, true],
      [529, OverloadedError, true],
      [503, OverloadedError, true],
      [500, ServerError, true],
      [502, ServerError, true],
      [408, TimeoutError, true],
      [400, BadRequestError, false],
      [404, BadRequestError, false],
      [422, BadRequestError, false],
      [401, AuthError, false],
      [403, AuthError, false],
    ];
    for (const [status, cls, transient] of cases) {
      const e = errorForStatus('openai', status, 'm');
      expect(e, String(status)).toBeInstanceOf(cls);
      expect(e.transient, String(status)).toBe(transient);
      expect(e.status).toBe(status);
      expect(isTransientError(e)).toBe(transient);
    }
    expect(isTransientError(new Error('x'))).toBe(false);
  });
  it('serialises to JSON-safe fields', () => {
    const e = new RateLimitError('anthropic', 'slow down', { retryAfterMs: 1200, requestId: 'req_1' });
    expect(JSON.parse(JSON.stringify(e))).toEqual({
      name: 'RateLimitError',
      code: 'provider-rate-limit',
      provider: 'anthropic',
      kind: 'rate-limit',
      status: 429,
      transient: true,
      retryAfterMs: 1200,
      requestId: 'req_1',
      message: 'slow down',
    });
  });
});

describe('redactSecrets', () => {
  it('removes the given secrets and key-shaped strings', () => {
    expect(redactSecrets('bad key my-own-secret-123 here', ['my-own-secret-123'])).toBe('bad key [redacted] here');
    expect(redactSecrets('Incorrect API key provided: sk-proj-abc********************wxyz.')).toBe('Incorrect API key provided: [redacted].');
    expect(redactSecrets('key=AIzaSyA1234567890abcdefghij')).toBe('key=[redacted]');
    expect(redactSecrets('header Bearer abcdefghijkl')).toBe('header [redacted]');
    expect(redactSecrets('short keys like abc are kept', ['abc'])).toBe('short keys like abc are kept');
  });
});

describe('googleRetryDelay', () => {
  it('reads google.rpc.RetryInfo from an error body', () => {
    const body = JSON.stringify({
      error: { code: 429, status: 'RESOURCE_EXHAUSTED', details: [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '25.5s' }] },
    });
    expect(googleRetryDelay(body)).toBe(25_500);
    expect(googleRetryDelay('{"error":{"code":429}}')).toBeUndefined();
    expect(googleRetryDelay('not json')).toBeUndefined();
  });
});

describe('ProviderError on the wire (@fugu/core toWireError / fromWireError)', () => {
  it('comes back as the class of its kind with provider, status, retry-after and request id', async () => {
    const { fromWireError, toWireError } = await import('@fugu/core');
    const through = (e: unknown) => fromWireError(JSON.parse(JSON.stringify(toWireError(e))));
    const rl = through(new RateLimitError('openai', 'slow down', { retryAfterMs: 1500, requestId: 'req_1' }));
    expect(rl).toBeInstanceOf(RateLimitError);
    expect(rl).toMatchObject({ provider: 'openai', kind: 'rate-limit', transient: true, status: 429, retryAfterMs: 1500, requestId: 'req_1', code: 'provider-rate-limit', message: 'slow down' });
    for (const status of [400, 401, 408, 500, 503]) {
      const e = errorForStatus('anthropic', status, `status ${status}`);
      const back = through(e) as ProviderError;
      expect(back.constructor).toBe(e.constructor);
      expect(back).toMatchObject({ kind: e.kind, transient: e.transient, status, provider: 'anthropic' });
      expect(isTransientError(back)).toBe(isTransientError(e));
    }
    // a redacted message stays redacted
    const auth = new AuthError('openai', redactSecrets('bad key sk-abcdefghijklmnopqrstuvwx', ['sk-abcdefghijklmnopqrstuvwx']));
    expect(JSON.stringify(toWireError(auth))).not.toContain('abcdefghijkl');
  });
});
