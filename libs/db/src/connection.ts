// Postgres connections (kysely + pg) and migrations.
import pg from 'pg';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { Migrator, type MigrationResult } from 'kysely/migration';
import { ServiceUnavailableError } from '@fugu/core';
import { redactUrl } from '@fugu/config';
import type { Database } from './schema.ts';
import { migrations } from './migrations/index.ts';

// int8 (counts, bigint ids) as JS numbers: ids and counts stay far below 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

export type Db = Kysely<Database>;

/**
 * SQL text that begins with this comment runs as a prepared statement on each connection: Postgres
 * parses and plans it once per connection and then only binds and runs it (on the served tool
 * loop's turn ends, where the parse and plan of a long statement cost more than its run). For hot
 * statements of few shapes only: a connection keeps each text it prepared, up to 200.
 * (A pooler in front of Postgres must keep a client's prepared statements: PgBouncer 1.21 and
 * later in transaction mode does, with max_prepared_statements set.)
 */
export const PREPARED = '/* fugu:prepared */ ';

/** The prepared statements one connection keeps at most; texts past them run unnamed. */
const PREPARED_PER_CONNECTION = 200;

export function createDb(url: string, opts: { max?: number; applicationName?: string } = {}): Db {
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? 10,
    connectionTimeoutMillis: 5_000,
    application_name: opts.applicationName ?? 'fugu',
  });
  // an idle client's error (server restart) must not crash the process; the pool replaces it
  pool.on('error', () => {});
  pool.on('connect', preparing);
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}

/** A new connection's `query` runs PREPARED texts as named statements (see PREPARED), named in the order it first meets them. */
function preparing(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...a: unknown[]) => unknown;
  const names = new Map<string, string>();
  client.query = ((text: unknown, ...rest: unknown[]) => {
    if (typeof text !== 'string' || !text.startsWith(PREPARED) || !Array.isArray(rest[0])) return query(text, ...rest);
    let name = names.get(text);
    if (name === undefined) {
      if (names.size >= PREPARED_PER_CONNECTION) return query(text, ...rest);
      names.set(text, (name = `fugu_${names.size + 1}`));
    }
    return query({ name, text, values: rest[0] }, ...rest.slice(1));
  }) as typeof client.query;
}

/** Fails with one clear line naming FUGU_DATABASE_URL when Postgres cannot be reached. */
export async function connectDb(url: string, opts: { max?: number; applicationName?: string; variable?: string } = {}): Promise<Db> {
  const db = createDb(url, opts);
  try {
    await sql`select 1`.execute(db);
  } catch (e) {
    await db.destroy().catch(() => {});
    const why = (e as { code?: string }).code ?? (e as Error).message;
    throw new ServiceUnavailableError(
      'postgres',
      `cannot reach Postgres at ${redactUrl(url)} (${why}): start it with \`fugu up\` or set ${opts.variable ?? 'FUGU_DATABASE_URL'}`,
      { cause: e },
    );
  }
  return db;
}

/** Runs every pending migration; safe to call from many processes at once (kysely takes a lock). */
export async function migrate(db: Kysely<unknown> | Db): Promise<MigrationResult[]> {
  const migrator = new Migrator({
    db: db as Kysely<unknown>,
    provider: { getMigrations: async () => migrations },
    migrationTableName: 'fugu_migrations',
    migrationLockTableName: 'fugu_migrations_lock',
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error');
    throw new Error(`migration ${failed?.migrationName ?? ''} failed: ${(error as Error).message ?? String(error)}`, { cause: error });
  }
  return results ?? [];
}
