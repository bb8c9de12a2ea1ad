// The end user a request names (`end_user`, null when it names none): OpenAI's `user` /
// `safety_identifier` on chat completions, Anthropic's `metadata.user_id` on /v1/messages. An
// opaque id the client chose (a hash, a uuid, Claude Code's device and session ids as JSON), kept
// with the request's row so that a key's traffic can be told apart by its end users; never a secret.
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('requests').addColumn('end_user', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('requests').dropColumn('end_user').execute();
}
