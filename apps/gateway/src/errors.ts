// Errors in OpenAI's wire format: {"error": {"message", "type", "param", "code"}}, with the HTTP
// status an OpenAI client expects for each case (its SDK maps the status to an error class).
import { InputError } from '@fugu/core';
import { scrub } from '@fugu/telemetry';

export type OpenAIErrorBody = { error: { message: string; type: string; param: string | null; code: string | null } };

export class GatewayError extends Error {
  readonly status: number;
  readonly type: string;
  readonly param: string | null;
  readonly errorCode: string | null;
  readonly headers: Record<string, string>;
  /** what the request's calls cost before it failed (picodollars; fugu-ultra's paid steps): charged like an answer's */
  readonly cost: bigint;

  constructor(status: number, message: string, opts: { type?: string; param?: string | null; code?: string | null; headers?: Record<string, string>; cost?: bigint } = {}) {
    super(message);
    this.name = 'GatewayError';
    this.status = status;
    this.type = opts.type ?? typeForStatus(status);
    this.param = opts.param ?? null;
    this.errorCode = opts.code ?? null;
    this.headers = opts.headers ?? {};
    this.cost = opts.cost ?? 0n;
  }

  body(): OpenAIErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.errorCode } };
  }
}

function typeForStatus(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'invalid_request_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return status === 503 ? 'service_unavailable' : 'server_error';
  return 'invalid_request_error';
}

export const badField = (param: string, message: string): GatewayError =>
  new GatewayError(400, `${param}: ${message}`, { param, code: 'invalid_value' });

export const invalidJson = (detail: string): GatewayError =>
  new GatewayError(400, `the request body is not valid JSON (${detail})`, { code: 'invalid_json' });

export const unknownModel = (model: string, known: readonly string[]): GatewayError =>
  new GatewayError(404, `the model "${model}" does not exist or this key may not use it (models: ${known.join(', ')})`, { param: 'model', code: 'model_not_found' });

/** Fastify's own errors (JSON, size, media type) and ours, as OpenAI error bodies. */
export function toGatewayError(err: Error & { statusCode?: number; code?: string }): GatewayError {
  if (err instanceof GatewayError) return err;
  if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || err.statusCode === 413) return new GatewayError(413, `the request body is larger than the limit (${err.message})`, { code: 'request_too_large' });
  if (err.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || err.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || (err instanceof SyntaxError && err.statusCode === 400)) return invalidJson(err.message);
  if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || err.statusCode === 415) return new GatewayError(415, 'send the body as JSON (content-type: application/json)', { code: 'unsupported_media_type' });
  if (err instanceof InputError) return new GatewayError(400, err.message, { param: err.field ?? null, code: 'invalid_value' });
  if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) return new GatewayError(err.statusCode, err.message);
  return new GatewayError(500, `internal error: ${scrub(err.message)}`, { type: 'server_error' });
}
