// One call's deadline and cancellation, the same for every SDK. The SDKs' own timeouts differ
// (Google's has none by default, and OpenAI's and Anthropic's streams end silently when their
// signal aborts), so each adapter hands the SDK our signal and asks the scope afterwards
// whether the call was cut by the deadline (TimeoutError) or by the caller (AbortedError).

import type { ProviderKind } from '@fugu/core';
import { AbortedError, ProviderError, TimeoutError } from './errors.ts';

const MAX_TIMER_MS = 2 ** 31 - 1;

export class CallScope {
  readonly signal: AbortSignal;
  readonly timeoutMs: number;
  readonly #provider: ProviderKind;
  readonly #controller = new AbortController();
  readonly #timer: ReturnType<typeof setTimeout>;
  readonly #callerSignal: AbortSignal | undefined;
  readonly #onCallerAbort = (): void => this.#controller.abort(new Error('aborted by the caller'));
  #timedOut = false;

  constructor(provider: ProviderKind, timeoutMs: number, callerSignal?: AbortSignal) {
    if (!(timeoutMs > 0)) throw new RangeError(`${provider}: timeoutMs must be a positive number of ms, got ${timeoutMs}`);
    this.#provider = provider;
    // setTimeout fires at once for delays above 2^31-1 ms (about 24.8 days)
    timeoutMs = Math.min(Math.ceil(timeoutMs), MAX_TIMER_MS); // SDKs want whole ms
    this.timeoutMs = timeoutMs;
    this.signal = this.#controller.signal;
    this.#timer = setTimeout(() => {
      this.#timedOut = true;
      this.#controller.abort(new Error(`timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    this.#callerSignal = callerSignal;
    if (callerSignal?.aborted) this.#onCallerAbort();
    else callerSignal?.addEventListener('abort', this.#onCallerAbort, { once: true });
  }

  /** The error to throw when the deadline or the caller ended the call, else undefined. */
  abortError(): ProviderError | undefined {
    if (!this.signal.aborted) return undefined;
    if (this.#timedOut) {
      return new TimeoutError(this.#provider, `${this.#provider}: no complete answer within ${this.timeoutMs} ms`);
    }
    return new AbortedError(this.#provider, `${this.#provider}: call aborted by the caller`);
  }

  throwIfAborted(): void {
    const e = this.abortError();
    if (e) throw e;
  }

  /** The error to throw for `e`: the deadline/caller reason wins over whatever the SDK threw. */
  failure(e: unknown, map: (e: unknown) => unknown): unknown {
    return this.abortError() ?? map(e);
  }

  dispose(): void {
    clearTimeout(this.#timer);
    this.#callerSignal?.removeEventListener('abort', this.#onCallerAbort);
  }
}
