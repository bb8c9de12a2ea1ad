// fugu-ultra's durable executor (issue 27): shared-memory appends are idempotent. `call_id` is the
// client-visible (signed) id of the tool call an entry records; a request run again after its
// gateway died appends the same calls again, and the unique index lets only the first in.
// Entries written before this migration have none.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('ultra_tool_log').addColumn('call_id', 'text').execute();
  await db.schema.createIndex('ultra_tool_log_call').unique().on('ultra_tool_log').columns(['conversation_id', 'call_id']).where(sql.ref('call_id'), 'is not', null).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('ultra_tool_log_call').ifExists().execute();
  await db.schema.alterTable('ultra_tool_log').dropColumn('call_id').execute();
}
