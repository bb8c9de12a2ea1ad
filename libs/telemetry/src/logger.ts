// JSON logs (pino) with secrets redacted: API keys, authorization headers, passwords in URLs.
import { pino, type Logger } from 'pino';

export type { Logger };

const SECRET_KEYS = ['apiKey', 'api_key', 'authorization', 'Authorization', 'x-api-key', 'x-goog-api-key', 'password', 'token', 'secret'];

/** Paths pino redacts at any of the first three levels. */
export const REDACT_PATHS = SECRET_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`, `headers["${k}"]`, `*.headers["${k}"]`]);

const URL_PASSWORD = /(\b[a-z][a-z0-9+.-]*:\/\/[^:/@\s]*:)[^@\s]+@/gi;
const BEARER = /\b(Bearer\s+)[A-Za-z0-9._~+/=-]{8,}/g;
const KEY_LIKE = /\b(sk-(?:ant-)?[A-Za-z0-9_-]{6})[A-Za-z0-9_-]{10,}/g;

/** Removes secrets from free text (error messages, URLs). */
export function scrub(text: string): string {
  return text.replace(URL_PASSWORD, '$1***@').replace(BEARER, '$1***').replace(KEY_LIKE, '$1***');
}

export function createLogger(opts: { name: string; level?: string; destination?: NodeJS.WritableStream } = { name: 'fugu' }): Logger {
  return pino(
    {
      name: opts.name,
      level: opts.level ?? process.env.FUGU_LOG_LEVEL ?? 'info',
      redact: { paths: REDACT_PATHS, censor: '***' },
      base: { pid: process.pid },
      formatters: { level: (label) => ({ level: label }) },
      hooks: {
        // scrub secrets from message strings and error messages too
        logMethod(args, method) {
          for (let i = 0; i < args.length; i++) {
            const a = args[i];
            if (typeof a === 'string') args[i] = scrub(a);
            else if (a instanceof Error) args[i] = { err: { type: a.name, message: scrub(a.message) } };
            else if (a && typeof a === 'object' && 'err' in a && a.err instanceof Error) {
              const err = a.err;
              args[i] = { ...a, err: { type: err.name, message: scrub(err.message), code: (err as { code?: unknown }).code } };
            }
          }
          return method.apply(this, args as Parameters<typeof method>);
        },
      },
    },
    (opts.destination as pino.DestinationStream | undefined) ?? pino.destination({ dest: 2, sync: false }),
  );
}
