// The client session a request belongs to (`session`, text, null when the request names none) and
// the tool calls its answer gave the client (`tool_calls`, jsonb: their names in order, null when
// none). The session is what the client sends as its own (apps/gateway/src/sessions.ts): the
// generic `x-fugu-session` header or `fugu.session` field, Claude Code's `x-claude-code-session-id`
// header (and metadata.user_id's session_id), Codex's `session-id` header (and
// client_metadata.session_id), OpenCode's `x-session-id` header; at most 128 visible ASCII
// characters, never a key. `fugu requests --session S` and `fugu report session:S` list a session's
// turns in order: indexed with created_at.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('requests').addColumn('session', 'text').addColumn('tool_calls', 'jsonb').execute();
  await db.schema.createIndex('requests_session_created_at').on('requests').columns(['session', 'created_at']).where(sql.ref('session'), 'is not', null).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('requests_session_created_at').ifExists().execute();
  await db.schema.alterTable('requests').dropColumn('tool_calls').dropColumn('session').execute();
}
