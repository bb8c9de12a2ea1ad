// Datasets and items, worker pools and workers, evaluation runs, calls, rewards, response cache.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('datasets')
    .addColumn('id', 'integer', (c) => c.primaryKey().generatedAlwaysAsIdentity())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('content_hash', 'text', (c) => c.notNull().unique())
    .addColumn('item_count', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('items')
    .addColumn('id', 'bigint', (c) => c.primaryKey().generatedAlwaysAsIdentity())
    .addColumn('dataset_id', 'integer', (c) => c.notNull().references('datasets.id').onDelete('cascade'))
    .addColumn('idx', 'integer', (c) => c.notNull())
    .addColumn('ext_id', 'text', (c) => c.notNull())
    .addColumn('task', 'text', (c) => c.notNull())
    .addColumn('prompt', 'text', (c) => c.notNull())
    .addColumn('ground_truth', 'text')
    .addColumn('metric', 'text')
    .addColumn('choices', 'jsonb')
    .addColumn('source_split', 'text')
    .addColumn('recorded', 'jsonb')
    .addUniqueConstraint('items_dataset_ext_id', ['dataset_id', 'ext_id'])
    .addUniqueConstraint('items_dataset_idx', ['dataset_id', 'idx'])
    .execute();

  await db.schema
    .createTable('worker_pools')
    .addColumn('id', 'integer', (c) => c.primaryKey().generatedAlwaysAsIdentity())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('content_hash', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('workers')
    .addColumn('id', 'integer', (c) => c.primaryKey().generatedAlwaysAsIdentity())
    .addColumn('pool_id', 'integer', (c) => c.notNull().references('worker_pools.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('provider', 'text', (c) => c.notNull())
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('base_url', 'text')
    .addColumn('api_key_env', 'text')
    .addColumn('settings', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('input_price', sql`numeric(24,12)`, (c) => c.notNull().check(sql`input_price >= 0`))
    .addColumn('output_price', sql`numeric(24,12)`, (c) => c.notNull().check(sql`output_price >= 0`))
    .addUniqueConstraint('workers_pool_name', ['pool_id', 'name'])
    .execute();

  await db.schema
    .createTable('eval_runs')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('dataset_id', 'integer', (c) => c.notNull().references('datasets.id'))
    .addColumn('pool_id', 'integer', (c) => c.notNull().references('worker_pools.id'))
    .addColumn('repetitions', 'integer', (c) => c.notNull().check(sql`repetitions > 0`))
    .addColumn('sample_size', 'integer')
    .addColumn('seed', 'integer', (c) => c.notNull())
    .addColumn('item_count', 'integer', (c) => c.notNull())
    .addColumn('total_calls', 'integer', (c) => c.notNull())
    .addColumn('enqueued_calls', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('done_calls', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('failed_calls', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('spent', sql`numeric(24,12)`, (c) => c.notNull().defaultTo(0))
    .addColumn('spend_cap', sql`numeric(24,12)`)
    .addColumn('status', 'text', (c) =>
      c.notNull().check(sql`status in ('pending','running','paused','completed','failed','cancelled')`),
    )
    .addColumn('status_reason', 'text')
    .addColumn('options', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('started_at', 'timestamptz')
    .addColumn('finished_at', 'timestamptz')
    .execute();

  await db.schema
    .createTable('calls')
    .addColumn('id', 'bigint', (c) => c.primaryKey().generatedAlwaysAsIdentity())
    .addColumn('run_id', 'text', (c) => c.notNull().references('eval_runs.id').onDelete('cascade'))
    .addColumn('item_id', 'bigint', (c) => c.notNull().references('items.id'))
    .addColumn('worker_id', 'integer', (c) => c.notNull().references('workers.id'))
    .addColumn('repetition', 'integer', (c) => c.notNull())
    .addColumn('request_hash', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('ok','error')`))
    .addColumn('response', 'jsonb')
    .addColumn('tokens_in', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('tokens_out', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('cost', sql`numeric(24,12)`, (c) => c.notNull().defaultTo(0))
    .addColumn('latency_ms', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('cached', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('error_kind', 'text')
    .addColumn('error', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    // one row per (run, item, worker, repetition): retries and re-executions are idempotent
    .addUniqueConstraint('calls_run_item_worker_rep', ['run_id', 'item_id', 'worker_id', 'repetition'])
    .execute();

  await db.schema
    .createTable('rewards')
    .addColumn('call_id', 'bigint', (c) => c.primaryKey().references('calls.id').onDelete('cascade'))
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('item_id', 'bigint', (c) => c.notNull())
    .addColumn('worker_id', 'integer', (c) => c.notNull())
    .addColumn('repetition', 'integer', (c) => c.notNull())
    .addColumn('score', 'double precision', (c) => c.notNull().check(sql`score >= 0 and score <= 1`))
    .addColumn('verifier', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('rewards_run_item').on('rewards').columns(['run_id', 'item_id', 'worker_id']).execute();

  await db.schema
    .createTable('response_cache')
    .addColumn('request_hash', 'text', (c) => c.primaryKey())
    .addColumn('provider', 'text', (c) => c.notNull())
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('response', 'jsonb', (c) => c.notNull())
    .addColumn('tokens_in', 'integer', (c) => c.notNull())
    .addColumn('tokens_out', 'integer', (c) => c.notNull())
    // the call (run.item.worker.repetition) that paid for this response
    .addColumn('paid_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const t of ['response_cache', 'rewards', 'calls', 'eval_runs', 'workers', 'worker_pools', 'items', 'datasets']) {
    await db.schema.dropTable(t).ifExists().execute();
  }
}
