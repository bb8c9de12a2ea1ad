// The Batch API (issue 18; repository in batches.ts, driver in libs/batch): uploaded files, the
// batches that run them, and one row per line of a batch.
//
// - `files`: an uploaded JSONL file (purpose `batch`) or a batch's output or error file
//   (`batch_output`), owned by an API key (null: gateway.auth none); its bytes are `file_parts`.
// - `file_parts`: a file cut at line ends into parts of at most about a MiB (a part holds whole
//   lines; `first_line` is the 1-based number of its first), so a file is written and read a part
//   at a time, never whole in memory, and a batch's driver takes its input a part at a time.
// - `batches`: OpenAI's batch object (status, timestamps, counts, files) plus the driver's state:
//   the parts submitted so far (`next_part`), the spend charged to the key so far, and a lease
//   (owner, until) so that one gateway drives a batch at a time and another takes over when it dies.
// - `batch_lines`: one row per line the driver has read: its custom_id, the chat-call id that
//   runs it (`<batch id>.<line>`, the chat_calls row's key: exactly one call row per line), or the
//   error that kept it from running. Among runnable lines a custom_id is unique (a duplicate is an
//   error line naming the first).
// - `batch_parts`: the input parts the driver has submitted, and which of them have every line
//   answered (with their counts): what a driver taking over reads to go on.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('files')
    // `file-` + 24 base62 characters
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('api_key_id', 'text')
    .addColumn('purpose', 'text', (c) => c.notNull())
    .addColumn('filename', 'text', (c) => c.notNull())
    .addColumn('bytes', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('lines', 'integer', (c) => c.notNull().defaultTo(0))
    // uploading (parts still coming), processed (complete)
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('files_key_created_at').on('files').columns(['api_key_id', 'created_at']).execute();
  await db.schema
    .createTable('file_parts')
    .addColumn('file_id', 'text', (c) => c.notNull().references('files.id').onDelete('cascade'))
    .addColumn('part', 'integer', (c) => c.notNull())
    .addColumn('first_line', 'integer', (c) => c.notNull())
    .addColumn('lines', 'integer', (c) => c.notNull())
    .addColumn('data', 'bytea', (c) => c.notNull())
    .addPrimaryKeyConstraint('file_parts_pk', ['file_id', 'part'])
    .execute();
  await db.schema
    .createTable('batches')
    // `batch_` + 24 base62 characters
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('api_key_id', 'text')
    .addColumn('endpoint', 'text', (c) => c.notNull())
    .addColumn('input_file_id', 'text', (c) => c.notNull())
    .addColumn('completion_window', 'text', (c) => c.notNull())
    // validating, in_progress, finalizing, completed, failed, expired, cancelling, cancelled
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('metadata', 'jsonb')
    // the workers the key allowed when the batch was made (null: all of the pool)
    .addColumn('allowed', 'jsonb')
    .addColumn('errors', 'jsonb')
    .addColumn('output_file_id', 'text')
    .addColumn('error_file_id', 'text')
    .addColumn('total', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('completed', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('failed', 'integer', (c) => c.notNull().defaultTo(0))
    // the driver: parts of the input submitted, whether every part is, spend charged so far (picodollars)
    .addColumn('next_part', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('submitted', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('charged', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('lease_owner', 'text')
    .addColumn('lease_until', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('in_progress_at', 'timestamptz')
    .addColumn('finalizing_at', 'timestamptz')
    .addColumn('completed_at', 'timestamptz')
    .addColumn('failed_at', 'timestamptz')
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expired_at', 'timestamptz')
    .addColumn('cancelling_at', 'timestamptz')
    .addColumn('cancelled_at', 'timestamptz')
    .execute();
  await db.schema.createIndex('batches_key_created_at').on('batches').columns(['api_key_id', 'created_at']).execute();
  await sql`create index batches_open on batches (created_at) where status in ('validating', 'in_progress', 'finalizing', 'cancelling')`.execute(db);
  await db.schema
    .createTable('batch_lines')
    .addColumn('batch_id', 'text', (c) => c.notNull().references('batches.id').onDelete('cascade'))
    .addColumn('line', 'integer', (c) => c.notNull())
    .addColumn('custom_id', 'text')
    // the model asked for and the worker that runs the line (fugu: the router's choice)
    .addColumn('model', 'text')
    .addColumn('worker', 'text')
    // the chat-call id (null: the line did not run)
    .addColumn('call_id', 'text')
    // {code, message, param} when the line could not run
    .addColumn('error', 'jsonb')
    .addPrimaryKeyConstraint('batch_lines_pk', ['batch_id', 'line'])
    .execute();
  await sql`create unique index batch_lines_custom_id on batch_lines (batch_id, custom_id) where error is null`.execute(db);
  await db.schema
    .createTable('batch_parts')
    .addColumn('batch_id', 'text', (c) => c.notNull().references('batches.id').onDelete('cascade'))
    .addColumn('part', 'integer', (c) => c.notNull())
    .addColumn('first_line', 'integer', (c) => c.notNull())
    .addColumn('lines', 'integer', (c) => c.notNull())
    // every line of the part answered (or failed); its counts then
    .addColumn('done', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('completed', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('failed', 'integer', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('batch_parts_pk', ['batch_id', 'part'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('batch_parts').ifExists().execute();
  await db.schema.dropTable('batch_lines').ifExists().execute();
  await db.schema.dropTable('batches').ifExists().execute();
  await db.schema.dropTable('file_parts').ifExists().execute();
  await db.schema.dropTable('files').ifExists().execute();
}
