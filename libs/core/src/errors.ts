// Errors a user sees: each names what is wrong and where (file and line, field, variable, step).

export class FuguError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'FuguError';
    this.code = code;
  }
}

/** Bad input: names the file and line, or the field. */
export class InputError extends FuguError {
  readonly file: string | undefined;
  readonly line: number | undefined;
  readonly field: string | undefined;
  constructor(message: string, where: { file?: string; line?: number; field?: string } = {}, options?: { cause?: unknown }) {
    const loc = [where.file && (where.line ? `${where.file}:${where.line}` : where.file), where.field && `field ${where.field}`]
      .filter(Boolean)
      .join(', ');
    super('bad-input', loc ? `${loc}: ${message}` : message, options);
    this.name = 'InputError';
    this.file = where.file;
    this.line = where.line;
    this.field = where.field;
  }
}

/** Configuration missing or wrong: names the variable to set. */
export class ConfigError extends FuguError {
  readonly variable: string | undefined;
  constructor(message: string, variable?: string, options?: { cause?: unknown }) {
    super('config', message, options);
    this.name = 'ConfigError';
    this.variable = variable;
  }
}

/** A service (Redis, Postgres) cannot be reached: names the setting that points at it. */
export class ServiceUnavailableError extends FuguError {
  readonly service: string;
  constructor(service: string, message: string, options?: { cause?: unknown }) {
    super('service-unavailable', message, options);
    this.name = 'ServiceUnavailableError';
    this.service = service;
  }
}
