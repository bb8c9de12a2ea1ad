import { InputError, ServiceUnavailableError } from '@fugu/core';

/**
 * No router can answer: no live router worker (pool mode), no checkpoint loaded yet, or the
 * request ran past its timeout. The gateway maps it to a 503 or a configured fallback worker.
 */
export class RouterUnavailableError extends ServiceUnavailableError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('router', message, options);
    this.name = 'RouterUnavailableError';
  }
}

/**
 * An InputError rebuilt on this side of a thread or queue boundary from its name, message and
 * field: the message already starts with "field <f>: ", which the constructor would add again.
 */
export function reviveInputError(e: { message: string; field?: string | undefined }): InputError {
  const prefix = e.field ? `field ${e.field}: ` : '';
  const message = prefix && e.message.startsWith(prefix) ? e.message.slice(prefix.length) : e.message;
  return new InputError(message, e.field ? { field: e.field } : {});
}
