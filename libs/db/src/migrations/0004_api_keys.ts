// API keys of the gateway: stored as the sha256 of the key (keys are 256 random bits, so a plain
// hash is enough), never the key itself; an optional allowed worker pool and spend limit.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull().unique())
    // the first characters of the key, to recognise it in `fugu keys list`
    .addColumn('prefix', 'text', (c) => c.notNull())
    .addColumn('key_hash', 'text', (c) => c.notNull().unique())
    // worker names the key may use; null = every worker of the gateway's pool
    .addColumn('allowed_workers', 'jsonb')
    // picodollars; null = no limit
    .addColumn('spend_limit', 'bigint', (c) => c.check(sql`spend_limit is null or spend_limit >= 0`))
    .addColumn('spent', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('revoked_at', 'timestamptz')
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('api_keys').ifExists().execute();
}
