// fugu-ultra's conversation ids are per API key (issue 27): the same id under two keys is two
// conversations, each with its own turns, sessions and shared tool memory (was: the first key to
// use an id took it). `key_scope` is the key's id ('' without auth): computed from `api_key_id` in
// ultra_conversations and ultra_sessions, stored in ultra_tool_log (filled from its conversation).
// A conversation is (key_scope, id); the client-visible id stays `id`. Existing rows keep theirs.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  const scope = sql`text generated always as (coalesce(api_key_id, '')) stored`;
  await sql`alter table ultra_conversations add column key_scope ${scope}`.execute(db);
  await sql`alter table ultra_sessions add column key_scope ${scope}`.execute(db);
  await sql`alter table ultra_tool_log add column key_scope text not null default ''`.execute(db);
  await sql`update ultra_tool_log l set key_scope = c.key_scope from ultra_conversations c where c.id = l.conversation_id`.execute(db);
  await sql`alter table ultra_tool_log alter column key_scope drop default`.execute(db);

  await sql`alter table ultra_sessions drop constraint ultra_sessions_conversation_id_fkey`.execute(db);
  await sql`alter table ultra_tool_log drop constraint ultra_tool_log_conversation_id_fkey`.execute(db);
  await sql`alter table ultra_tool_log drop constraint ultra_tool_log_pk`.execute(db);
  await sql`alter table ultra_conversations drop constraint ultra_conversations_pkey`.execute(db);
  await sql`alter table ultra_conversations add constraint ultra_conversations_pkey primary key (key_scope, id)`.execute(db);
  await sql`alter table ultra_tool_log add constraint ultra_tool_log_pk primary key (key_scope, conversation_id, seq)`.execute(db);
  await sql`alter table ultra_sessions add constraint ultra_sessions_conversation_fkey foreign key (key_scope, conversation_id) references ultra_conversations (key_scope, id) on delete cascade`.execute(db);
  await sql`alter table ultra_tool_log add constraint ultra_tool_log_conversation_fkey foreign key (key_scope, conversation_id) references ultra_conversations (key_scope, id) on delete cascade`.execute(db);
  await sql`drop index ultra_sessions_conversation`.execute(db);
  await sql`create index ultra_sessions_conversation on ultra_sessions (key_scope, conversation_id)`.execute(db);
}

/** Back to one conversation per id: fails (a duplicate key) while two keys share an id. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index ultra_sessions_conversation`.execute(db);
  await sql`create index ultra_sessions_conversation on ultra_sessions (conversation_id)`.execute(db);
  await sql`alter table ultra_tool_log drop constraint ultra_tool_log_conversation_fkey`.execute(db);
  await sql`alter table ultra_sessions drop constraint ultra_sessions_conversation_fkey`.execute(db);
  await sql`alter table ultra_tool_log drop constraint ultra_tool_log_pk`.execute(db);
  await sql`alter table ultra_conversations drop constraint ultra_conversations_pkey`.execute(db);
  await sql`alter table ultra_conversations add constraint ultra_conversations_pkey primary key (id)`.execute(db);
  await sql`alter table ultra_tool_log add constraint ultra_tool_log_pk primary key (conversation_id, seq)`.execute(db);
  await sql`alter table ultra_sessions add constraint ultra_sessions_conversation_id_fkey foreign key (conversation_id) references ultra_conversations (id) on delete cascade`.execute(db);
  await sql`alter table ultra_tool_log add constraint ultra_tool_log_conversation_id_fkey foreign key (conversation_id) references ultra_conversations (id) on delete cascade`.execute(db);
  await sql`alter table ultra_tool_log drop column key_scope`.execute(db);
  await sql`alter table ultra_sessions drop column key_scope`.execute(db);
  await sql`alter table ultra_conversations drop column key_scope`.execute(db);
}
