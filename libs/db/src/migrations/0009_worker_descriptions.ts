// A worker's description and size (the pool file's `description` and `size`, an LLMRouter card's
// `feature` and `size`): what a Conductor reads about each worker, and the replay model's size class.
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('workers').addColumn('description', 'text').addColumn('size', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('workers').dropColumn('description').dropColumn('size').execute();
}
