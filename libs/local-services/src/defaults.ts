// Defaults shared by the modules of @fugu/local-services: the project's own ports, the Postgres
// names `up` creates, how long to wait for a service, the URLs of a local Redis and Postgres, and
// the default progress log (stderr).

export const DEFAULT_REDIS_PORT = 6390;
export const DEFAULT_PG_PORT = 5440;
/** Database and role that `up` creates for the application. */
export const PG_APP_NAME = 'fugu';
/** Superuser of a cluster created here (trust auth on loopback only). */
export const PG_SUPERUSER = 'postgres';

export const DEFAULT_READY_TIMEOUT_MS = 60_000;
export const STOP_TIMEOUT_MS = 60_000;

export type Log = (line: string) => void;

export const stderrLog: Log = (line) => process.stderr.write(`${line}\n`);

export function redisUrlFor(port: number): string {
  return `redis://127.0.0.1:${port}`;
}

export function postgresUrlFor(port: number, user = PG_APP_NAME, database = PG_APP_NAME): string {
  return `postgres://${user}@127.0.0.1:${port}/${database}`;
}
