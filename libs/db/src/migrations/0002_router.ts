// Router model: checkpoints (theta with its layout, lineage, training data and metrics) and the
// feature cache (the frozen part of the backbone, computed once per backbone and text).
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('router_checkpoints')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('stage', 'text', (c) => c.notNull().check(sql`stage in ('init','sft','es','import')`))
    .addColumn('backbone_id', 'text', (c) => c.notNull())
    // kind, version, adapted matrices: what theta's z entries belong to
    .addColumn('backbone', 'jsonb', (c) => c.notNull())
    // worker names in head order, with the prices cost-aware selection uses
    .addColumn('workers', 'jsonb', (c) => c.notNull())
    // float32 little-endian, laid out as theta_layout says
    .addColumn('theta', 'bytea', (c) => c.notNull())
    .addColumn('theta_layout', 'jsonb', (c) => c.notNull())
    .addColumn('tau', 'double precision')
    // evaluation run, split seed and fractions, optimiser settings
    .addColumn('training', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('metrics', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('parent_id', 'text', (c) => c.references('router_checkpoints.id'))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('router_features')
    .addColumn('backbone_id', 'text', (c) => c.notNull())
    .addColumn('text_hash', 'text', (c) => c.notNull())
    .addColumn('dim', 'integer', (c) => c.notNull())
    // float32 little-endian
    .addColumn('data', 'bytea', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('router_features_pk', ['backbone_id', 'text_hash'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('router_features').ifExists().execute();
  await db.schema.dropTable('router_checkpoints').ifExists().execute();
}
