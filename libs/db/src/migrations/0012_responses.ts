// The Responses API's stored responses (POST /v1/responses with store: true; repository in
// responses.ts): one row per response, scoped to the API key that made it. A row keeps this
// request's own input items and its output items (OpenAI item shapes, normalised), the whole
// response object as it was returned, and its place in a conversation: the response it continued
// (`previous_response_id`) and the first response of its chain (`conversation_id`, the root; equal
// to `id` for a response that continued none). No API key or secret is ever stored.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('responses')
    // `resp_` + 48 hex characters
    .addColumn('id', 'text', (c) => c.primaryKey())
    // the API key's id (null: gateway.auth none); only this key may read, delete or continue it
    .addColumn('key_id', 'text')
    // the model asked for (fugu, a worker, fugu-ultra, ...) and the worker that answered
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('worker', 'text')
    .addColumn('previous_response_id', 'text')
    // the root of the chain this response belongs to (its own id when it continued none)
    .addColumn('conversation_id', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    // this request's own input items (not the earlier turns'), OpenAI item shapes with ids
    .addColumn('input_items', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('output_items', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    // the response object as returned (GET /v1/responses/{id} answers it)
    .addColumn('response', 'jsonb', (c) => c.notNull())
    // this request's instructions (never carried over to the next response)
    .addColumn('instructions', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('responses_key_created_at').on('responses').columns(['key_id', 'created_at']).execute();
  await db.schema.createIndex('responses_conversation').on('responses').column('conversation_id').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('responses').ifExists().execute();
}
