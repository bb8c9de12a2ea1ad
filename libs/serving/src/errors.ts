import { registerWireError, ServiceUnavailableError } from '@fugu/core';

/**
 * No router can answer: no live router worker (pool mode), no checkpoint loaded yet, or the
 * request ran past its timeout. The gateway maps it to a 503 or a configured fallback worker.
 * Its wire code is `router-unavailable` (registered with @fugu/core's wire format here).
 */
export class RouterUnavailableError extends ServiceUnavailableError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('router', message, { ...options, code: 'router-unavailable' });
    this.name = 'RouterUnavailableError';
  }
}

registerWireError('router-unavailable', (w) => new RouterUnavailableError(w.message));
