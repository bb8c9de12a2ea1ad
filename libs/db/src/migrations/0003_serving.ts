// Serving: which router checkpoint each deployment serves. `fugu router publish` sets a row;
// router workers and in-process gateways load it at start, swap on the publish message, and
// poll this table as a backstop.
import { type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('router_deployments')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('checkpoint_id', 'text', (c) => c.notNull().references('router_checkpoints.id'))
    .addColumn('published_at', 'timestamptz')
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('router_deployments').ifExists().execute();
}
