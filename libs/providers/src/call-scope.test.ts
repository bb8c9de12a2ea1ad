import { describe, expect, it } from 'vitest';
import { CallScope } from './call-scope.ts';
import { AbortedError, TimeoutError } from './errors.ts';

describe('CallScope', () => {
  it('reports a deadline as TimeoutError and a caller abort as AbortedError', async () => {
    const timed = new CallScope('openai', 20);
    await new Promise((r) => timed.signal.addEventListener('abort', r));
    expect(timed.abortError()).toBeInstanceOf(TimeoutError);
    timed.dispose();

    const ac = new AbortController();
    const cancelled = new CallScope('anthropic', 60_000, ac.signal);
    expect(cancelled.abortError()).toBeUndefined();
    ac.abort();
    expect(cancelled.abortError()).toBeInstanceOf(AbortedError);
    expect(() => cancelled.throwIfAborted()).toThrow(AbortedError);
    cancelled.dispose();
  });

  it('is aborted from the start when the caller signal already is', () => {
    const scope = new CallScope('google', 60_000, AbortSignal.abort());
    expect(scope.signal.aborted).toBe(true);
    expect(scope.failure(new Error('sdk error'), (e) => e)).toBeInstanceOf(AbortedError);
    scope.dispose();
  });

  it('passes SDK errors through the mapper when nothing aborted', () => {
    const scope = new CallScope('google', 60_000);
    const e = new Error('x');
    expect(scope.failure(e, (x) => ({ mapped: x }))).toEqual({ mapped: e });
    scope.dispose();
  });

  it('rejects a non-positive time limit and clamps a huge one', () => {
    expect(() => new CallScope('openai', 0)).toThrow(RangeError);
    expect(() => new CallScope('openai', Number.NaN)).toThrow(RangeError);
    const huge = new CallScope('openai', Number.POSITIVE_INFINITY);
    expect(huge.timeoutMs).toBe(2 ** 31 - 1);
    expect(huge.signal.aborted).toBe(false);
    huge.dispose();
  });
});
