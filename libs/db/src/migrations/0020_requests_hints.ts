// The hints and metadata a request sent (`hints`, jsonb, null when it sent none): the fields that
// change no answer, as the client wrote them, other than the end user (end_user, 0019): on
// /v1/responses `client_metadata` (Codex: its turn, session and thread ids), `metadata`,
// `prompt_cache_key`, `service_tier`; on chat completions `metadata`, `prompt_cache_key`,
// `service_tier`, `store`. Kept with the request's row so that a client's requests can be found by
// its own ids; never a secret (the gateway's keys are never in a body).
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('requests').addColumn('hints', 'jsonb').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('requests').dropColumn('hints').execute();
}
