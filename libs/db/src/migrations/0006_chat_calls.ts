// Calls that are not evaluation calls (libs/calls): chat-call jobs, gateway calls, later the
// Conductor's steps. `chat_requests` holds the stored request of a chat-call job (the job carries
// only its id); `chat_calls` holds one row per call, keyed by the caller's unique key, however
// often the call ran (retries, re-executions after a crash): the first final row wins.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('chat_requests')
    // the chat-call id (also its BullMQ job id and its chat_calls key)
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('worker_id', 'integer', (c) => c.notNull().references('workers.id'))
    // ChatRequest (messages with tool calls and results, tools, tool choice, sampling), JSON
    .addColumn('request', 'jsonb', (c) => c.notNull())
    // sample index of the request (n repetitions of one request are n cache entries)
    .addColumn('sample', 'integer', (c) => c.notNull().defaultTo(0).check(sql`sample >= 0`))
    .addColumn('origin', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('chat_calls')
    .addColumn('id', 'bigint', (c) => c.primaryKey().generatedAlwaysAsIdentity())
    // unique per call: a chat-call id, a gateway request id + attempt, ...
    .addColumn('key', 'text', (c) => c.notNull().unique())
    // chat-call | gateway | conductor | ...
    .addColumn('origin', 'text', (c) => c.notNull())
    // the stored worker, when the caller has one; the name always
    .addColumn('worker_id', 'integer', (c) => c.references('workers.id'))
    .addColumn('worker', 'text', (c) => c.notNull())
    .addColumn('provider', 'text', (c) => c.notNull())
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('request_hash', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('ok','error')`))
    .addColumn('response', 'jsonb')
    .addColumn('tokens_in', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('tokens_out', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('cost', sql`numeric(24,12)`, (c) => c.notNull().defaultTo(0).check(sql`cost >= 0`))
    .addColumn('latency_ms', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('cached', 'boolean', (c) => c.notNull().defaultTo(false))
    // the wire error's code (provider-rate-limit, config, ...) and message; the rest of its fields
    .addColumn('error_code', 'text')
    .addColumn('error_message', 'text')
    .addColumn('error', 'jsonb')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('chat_calls_origin_created').on('chat_calls').columns(['origin', 'created_at']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('chat_calls').ifExists().execute();
  await db.schema.dropTable('chat_requests').ifExists().execute();
}
