// One row per gateway request (chat completions, after authentication; errors included): who
// asked for which model, the worker that answered, the router's top probabilities, the
// fallbacks tried, tokens, the exact cost and where the time went. No message text, no secret.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('requests')
    .addColumn('id', 'text', (c) => c.primaryKey())
    // the x-request-id echoed to the client (theirs when they sent a sane one, else = id)
    .addColumn('request_id', 'text', (c) => c.notNull())
    // null: gateway.auth none (no key)
    .addColumn('api_key_id', 'text')
    .addColumn('route', 'text', (c) => c.notNull())
    .addColumn('model', 'text')
    .addColumn('worker', 'text')
    .addColumn('stream', 'boolean', (c) => c.notNull().defaultTo(false))
    // [{worker, prob}] best first, a few
    .addColumn('top_probs', 'jsonb')
    // workers that failed before the one that answered (or before giving up), in order
    .addColumn('fallbacks', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('tokens_in', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('tokens_out', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('cost', 'numeric(24, 12)', (c) => c.notNull().defaultTo(0))
    .addColumn('routing_ms', 'double precision')
    .addColumn('provider_ms', 'double precision')
    .addColumn('total_ms', 'double precision', (c) => c.notNull())
    .addColumn('status', 'integer', (c) => c.notNull())
    .addColumn('error_code', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('requests_created_at').on('requests').column('created_at').execute();
  await db.schema.createIndex('requests_key_created_at').on('requests').columns(['api_key_id', 'created_at']).execute();
  await db.schema.createIndex('requests_request_id').on('requests').column('request_id').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('requests').ifExists().execute();
}
