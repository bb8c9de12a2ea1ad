// Errors in OpenAI's wire format: {"error": {"message", "type", "param", "code"}}, with the HTTP
// status an OpenAI client expects for each case (its SDK maps the status to an error class).

export type OpenAIErrorBody = { error: { message: string; type: string; param: string | null; code: string | null } };

export class GatewayError extends Error {
  readonly status: number;
  readonly type: string;
  readonly param: string | null;
  readonly errorCode: string | null;
  readonly headers: Record<string, string>;

  constructor(status: number, message: string, opts: { type?: string; param?: string | null; code?: string | null; headers?: Record<string, string> } = {}) {
    super(message);
    this.name = 'GatewayError';
    this.status = status;
    this.type = opts.type ?? typeForStatus(status);
    this.param = opts.param ?? null;
    this.errorCode = opts.code ?? null;
    this.headers = opts.headers ?? {};
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
