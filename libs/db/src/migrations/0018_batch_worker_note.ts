// What a batch's driver says about the provider workers its lines need (issue 28): `worker_note`
// (jsonb, null until there is something to say) holds whether lines wait on provider queues no
// worker consumes (the queues, since when, what to do) and whether the driving gateway runs them
// with provider workers of its own (how many, for which providers, since when). Written by the
// driver when it changes; read into the batch object's `fugu` extension.
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('batches').addColumn('worker_note', 'jsonb').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('batches').dropColumn('worker_note').execute();
}
