// Errors a user sees: each names what is wrong and where (file and line, field, variable, step).
//
// Errors that cross a thread or queue boundary travel as one JSON-safe shape keyed on the error
// code (`WireError`, below): `toWireError` on the sending side, `fromWireError` on the receiving
// side rebuilds the class the code names. Libraries whose error classes core cannot import
// register a reviver for their codes at import time (`registerWireError('provider-', ...)`).

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** An error as it crosses a thread or queue boundary: JSON-safe, keyed on `code`. */
export type WireError = {
  /** the FuguError code (`bad-input`, `config`, `provider-rate-limit`, ...); `error` for any other Error or value */
  code: string;
  /** the error's message, secrets scrubbed */
  message: string;
  /** the class name (`InputError`, `TypeError`, ...) */
  name?: string;
  /** the class's own fields that cross (InputError: file, line, field; ConfigError: variable; ...) */
  fields?: Record<string, JsonValue>;
};

/** The code of a wire error made from something that is not a FuguError. */
export const GENERIC_ERROR_CODE = 'error';

export class FuguError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'FuguError';
    this.code = code;
  }

  /** The fields that travel with this error in its WireError (JSON-safe; subclasses add theirs). */
  wireFields(): Record<string, JsonValue> {
    return {};
  }
}

/** Bad input: names the file and line, or the field. */
export class InputError extends FuguError {
  readonly file: string | undefined;
  readonly line: number | undefined;
  readonly field: string | undefined;
  constructor(message: string, where: { file?: string; line?: number; field?: string } = {}, options?: { cause?: unknown }) {
    const loc = inputLocation(where);
    super('bad-input', loc ? `${loc}: ${message}` : message, options);
    this.name = 'InputError';
    this.file = where.file;
    this.line = where.line;
    this.field = where.field;
  }

  override wireFields(): Record<string, JsonValue> {
    return { ...(this.file !== undefined && { file: this.file }), ...(this.line !== undefined && { line: this.line }), ...(this.field !== undefined && { field: this.field }) };
  }
}

function inputLocation(where: { file?: string | undefined; line?: number | undefined; field?: string | undefined }): string {
  return [where.file && (where.line ? `${where.file}:${where.line}` : where.file), where.field && `field ${where.field}`].filter(Boolean).join(', ');
}

/** Configuration missing or wrong: names the variable to set. */
export class ConfigError extends FuguError {
  readonly variable: string | undefined;
  constructor(message: string, variable?: string, options?: { cause?: unknown }) {
    super('config', message, options);
    this.name = 'ConfigError';
    this.variable = variable;
  }

  override wireFields(): Record<string, JsonValue> {
    return this.variable !== undefined ? { variable: this.variable } : {};
  }
}

/** A service (Redis, Postgres) cannot be reached: names the setting that points at it. */
export class ServiceUnavailableError extends FuguError {
  readonly service: string;
  /** `code`: a subclass's own code (default `service-unavailable`) */
  constructor(service: string, message: string, options?: { cause?: unknown; code?: string }) {
    super(options?.code ?? 'service-unavailable', message, options);
    this.name = 'ServiceUnavailableError';
    this.service = service;
  }

  override wireFields(): Record<string, JsonValue> {
    return { service: this.service };
  }
}

// ---- the wire format -----------------------------------------------------------------------

// The shapes of secrets a message may carry (as @fugu/telemetry's scrub and @fugu/providers'
// redactSecrets): passwords in URLs, bearer tokens, API keys.
const URL_PASSWORD = /(\b[a-z][a-z0-9+.-]*:\/\/[^:/@\s]*:)[^@\s]+@/gi;
const BEARER = /\b(Bearer\s+)[A-Za-z0-9._~+/=-]{8,}/gi;
const KEY_SHAPES = [/\bsk-[A-Za-z0-9_*-]{8,}/g, /\bAIza[0-9A-Za-z_-]{16,}/g];

/** A text with anything shaped like a secret (URL password, bearer token, API key) replaced. */
export function scrubSecretShapes(text: string): string {
  let out = text.replace(URL_PASSWORD, '$1***@').replace(BEARER, '$1[redacted]');
  for (const re of KEY_SHAPES) out = out.replace(re, '[redacted]');
  return out;
}

export type WireReviver = (w: WireError) => Error;

const exactRevivers = new Map<string, WireReviver>();
const prefixRevivers = new Map<string, WireReviver>();

/**
 * Registers how the errors of a code come back: `code` names one code, or, ending in `-`, every
 * code with that prefix (`provider-` for provider-rate-limit, provider-auth, ...). A library
 * registers its codes when it is imported; a later registration of the same key replaces it.
 */
export function registerWireError(code: string, revive: WireReviver): void {
  (code.endsWith('-') ? prefixRevivers : exactRevivers).set(code, revive);
}

function jsonSafe(v: unknown, depth = 0): JsonValue | undefined {
  if (v === null) return null;
  switch (typeof v) {
    case 'string':
      return scrubSecretShapes(v);
    case 'boolean':
      return v;
    case 'number':
      return Number.isFinite(v) ? v : null;
    case 'object': {
      if (depth > 4) return undefined;
      if (Array.isArray(v)) return v.map((x) => jsonSafe(x, depth + 1) ?? null);
      const out: Record<string, JsonValue> = {};
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
        const j = jsonSafe(x, depth + 1);
        if (j !== undefined) out[k] = j;
      }
      return out;
    }
    default:
      return undefined;
  }
}

/** Whether a value has the WireError shape (a code and a message, both strings). */
export function isWireError(v: unknown): v is WireError {
  return !!v && typeof v === 'object' && !(v instanceof Error) && typeof (v as WireError).code === 'string' && typeof (v as WireError).message === 'string';
}

/**
 * Any thrown value as a WireError: a FuguError keeps its code, name and `wireFields()`; any other
 * Error is code `error` with its name; a non-Error value is code `error` with its text. Only the
 * declared fields cross (never `cause`, a stack, or an SDK's request), and every string is scrubbed
 * of secret shapes.
 */
export function toWireError(e: unknown): WireError {
  if (e instanceof FuguError) {
    const fields = jsonSafe(e.wireFields()) as Record<string, JsonValue>;
    return { code: e.code, message: scrubSecretShapes(e.message), name: e.name, ...(Object.keys(fields).length > 0 && { fields }) };
  }
  if (e instanceof Error) return { code: GENERIC_ERROR_CODE, message: scrubSecretShapes(e.message), name: e.name };
  if (isWireError(e)) {
    const fields = e.fields && (jsonSafe(e.fields) as Record<string, JsonValue>);
    return { code: e.code, message: scrubSecretShapes(e.message), ...(typeof e.name === 'string' && { name: e.name }), ...(fields && { fields }) };
  }
  let text: string;
  if (typeof e === 'string') text = e;
  else {
    try {
      text = JSON.stringify(e) ?? String(e);
    } catch {
      text = String(e);
    }
  }
  return { code: GENERIC_ERROR_CODE, message: scrubSecretShapes(text) };
}

const str = (v: JsonValue | undefined): string | undefined => (typeof v === 'string' ? v : undefined);
const num = (v: JsonValue | undefined): number | undefined => (typeof v === 'number' ? v : undefined);

/**
 * The Error a WireError stands for: the class its code names (InputError, ConfigError,
 * ServiceUnavailableError, and whatever libraries registered), with its fields; code `error` is a
 * plain Error with the name it had; an unknown code is a FuguError with that code (and name).
 */
export function fromWireError(w: WireError): Error {
  const exact = exactRevivers.get(w.code);
  if (exact) return exact(w);
  let best: string | undefined;
  for (const p of prefixRevivers.keys()) if (w.code.startsWith(p) && (!best || p.length > best.length)) best = p;
  if (best) return prefixRevivers.get(best)!(w);
  if (w.code === GENERIC_ERROR_CODE) {
    const err = new Error(w.message);
    if (w.name) err.name = w.name;
    return err;
  }
  const err = new FuguError(w.code, w.message);
  if (w.name) err.name = w.name;
  return err;
}

/** A WireError as one string (a BullMQ job's failedReason is the thrown error's message). */
export function encodeWireError(e: unknown): string {
  return JSON.stringify(toWireError(e));
}

/** The WireError in a string made by encodeWireError; any other text is code `error` with it as message. */
export function decodeWireError(text: string): WireError {
  if (text.startsWith('{')) {
    try {
      const v: unknown = JSON.parse(text);
      if (isWireError(v)) return v;
    } catch {
      // not ours: the text itself is the message
    }
  }
  return { code: GENERIC_ERROR_CODE, message: text };
}

/**
 * An Error whose message is its cause's encoded WireError, for a queue whose failure record is a
 * message (BullMQ's failedReason): throw `new WireFailure(e)` in a processor, read the failure back
 * with `fromWireError(decodeWireError(job.failedReason))`.
 */
export class WireFailure extends Error {
  readonly wire: WireError;
  constructor(e: unknown) {
    const wire = toWireError(e);
    super(JSON.stringify(wire));
    this.name = wire.name ?? 'WireFailure';
    this.wire = wire;
  }
}

registerWireError('bad-input', (w) => {
  const f = w.fields ?? {};
  const where = { ...(str(f.file) !== undefined && { file: str(f.file)! }), ...(num(f.line) !== undefined && { line: num(f.line)! }), ...(str(f.field) !== undefined && { field: str(f.field)! }) };
  // the message already carries "file:line, field f: ": the constructor would add it again
  const loc = inputLocation(where);
  const message = loc && w.message.startsWith(`${loc}: `) ? w.message.slice(loc.length + 2) : w.message;
  return new InputError(message, where);
});
registerWireError('config', (w) => new ConfigError(w.message, str(w.fields?.variable)));
registerWireError('service-unavailable', (w) => new ServiceUnavailableError(str(w.fields?.service) ?? 'unknown', w.message));
