// The Conductor (fugu-ultra): evaluation batches of workflows (`conductor_runs`), one row per
// workflow however often it was executed (`workflows`, unique by the submitter's `key`), one row
// per step (`workflow_steps`), and the embedded policy's checkpoints (`conductor_checkpoints`).
// Money is numeric(24,12) USD, as everywhere.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('conductor_checkpoints')
    .addColumn('id', 'text', (c) => c.primaryKey())
    // the pool the policy chooses from: worker names in ordinal-id order
    .addColumn('workers', 'jsonb', (c) => c.notNull())
    // the router backbone whose features the policy reads, and their dimension
    .addColumn('backbone_id', 'text', (c) => c.notNull())
    .addColumn('feature_dim', 'integer', (c) => c.notNull().check(sql`feature_dim > 0`))
    // the policy's settings (max steps, subtask kinds, template version, ...)
    .addColumn('config', 'jsonb', (c) => c.notNull())
    // parameters as float32 little-endian bytes, and their layout [{name, offset, shape}]
    .addColumn('theta', 'bytea', (c) => c.notNull())
    .addColumn('theta_layout', 'jsonb', (c) => c.notNull())
    .addColumn('training', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('metrics', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('parent_id', 'text', (c) => c.references('conductor_checkpoints.id'))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('conductor_runs')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('dataset_id', 'integer', (c) => c.references('datasets.id'))
    .addColumn('pool_id', 'integer', (c) => c.notNull().references('worker_pools.id'))
    // canonical conductor specs, in the order given
    .addColumn('specs', 'jsonb', (c) => c.notNull())
    // split, sample, seed, repeats, maxSteps, budgets, reward config, replay config, ...
    .addColumn('options', 'jsonb', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('pending','running','paused','completed','failed','cancelled')`))
    .addColumn('status_reason', 'text')
    .addColumn('total', 'integer', (c) => c.notNull().defaultTo(0).check(sql`total >= 0`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('finished_at', 'timestamptz')
    .execute();

  await db.schema
    .createTable('workflows')
    .addColumn('id', 'bigint', (c) => c.primaryKey().generatedAlwaysAsIdentity())
    // the submitter's idempotency key: `<run>.<item>.<spec index>.<repeat>` in a batch
    .addColumn('key', 'text', (c) => c.notNull().unique())
    .addColumn('run_id', 'text', (c) => c.references('conductor_runs.id'))
    .addColumn('item_id', 'integer', (c) => c.references('items.id'))
    .addColumn('pool_id', 'integer', (c) => c.notNull().references('worker_pools.id'))
    .addColumn('question', 'text', (c) => c.notNull())
    // canonical conductor spec (llm:..., policy:..., fixed:...)
    .addColumn('conductor', 'text', (c) => c.notNull())
    .addColumn('seed', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('repeat', 'integer', (c) => c.notNull().defaultTo(0).check(sql`repeat >= 0`))
    // maxSteps, maxTokensPerStep, maxUsd, reward config, replay config
    .addColumn('options', 'jsonb', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('pending').check(sql`status in ('pending','running','done','failed')`))
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    // answered | parse-error | step-error | budget-steps | budget-tokens | budget-usd | conductor-error
    .addColumn('finish_reason', 'text')
    .addColumn('completion', 'text')
    .addColumn('prompt_version', 'text')
    .addColumn('parse_ok', 'boolean')
    // {list, step, message} of a failed parse
    .addColumn('parse_error', 'jsonb')
    // the parsed steps [{worker (ordinal), name, subtask, access}]
    .addColumn('steps', 'jsonb')
    .addColumn('topology', 'text')
    .addColumn('n_steps', 'integer')
    .addColumn('critical_path', 'integer')
    .addColumn('final_answer', 'text')
    .addColumn('score', 'double precision')
    // unparsed | unanswered | correct | incorrect
    .addColumn('outcome', 'text')
    .addColumn('reward', 'double precision')
    // log-probability of the conductor's decisions or tokens, where the writer has it
    .addColumn('logprob', 'double precision')
    .addColumn('conductor_tokens_in', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('conductor_tokens_out', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('conductor_cost', sql`numeric(24,12)`, (c) => c.notNull().defaultTo(0).check(sql`conductor_cost >= 0`))
    .addColumn('worker_tokens_in', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('worker_tokens_out', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('worker_cost', sql`numeric(24,12)`, (c) => c.notNull().defaultTo(0).check(sql`worker_cost >= 0`))
    .addColumn('latency_ms', 'integer')
    // a wire error (@fugu/core toWireError) of a conductor that could not write
    .addColumn('error', 'jsonb')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('started_at', 'timestamptz')
    .addColumn('finished_at', 'timestamptz')
    .execute();
  await db.schema.createIndex('workflows_run_status').on('workflows').columns(['run_id', 'status']).execute();

  await db.schema
    .createTable('workflow_steps')
    .addColumn('workflow_id', 'bigint', (c) => c.notNull().references('workflows.id').onDelete('cascade'))
    // 0-based step index
    .addColumn('idx', 'integer', (c) => c.notNull().check(sql`idx >= 0`))
    .addColumn('worker_id', 'integer', (c) => c.notNull().references('workers.id'))
    .addColumn('worker', 'text', (c) => c.notNull())
    .addColumn('subtask', 'text', (c) => c.notNull())
    // 'all' | 'none' | [indices], as written; `sees` the resolved earlier step indices
    .addColumn('access', 'jsonb', (c) => c.notNull())
    .addColumn('sees', 'jsonb', (c) => c.notNull())
    // the chat-call id of the step (`wf<id>.s<idx>`): its request and call rows
    .addColumn('chat_call_id', 'text', (c) => c.notNull())
    // ok | error | skipped (a budget ended the workflow before it ran)
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('ok','error','skipped')`))
    .addColumn('answer', 'text')
    .addColumn('tokens_in', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('tokens_out', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('cost', sql`numeric(24,12)`, (c) => c.notNull().defaultTo(0).check(sql`cost >= 0`))
    .addColumn('latency_ms', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('cached', 'boolean', (c) => c.notNull().defaultTo(false))
    // replay: the step's simulated outcome and the model's cell; the wire error of a failed step
    .addColumn('replay', 'jsonb')
    .addColumn('error', 'jsonb')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('workflow_steps_pk', ['workflow_id', 'idx'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('workflow_steps').ifExists().execute();
  await db.schema.dropTable('workflows').ifExists().execute();
  await db.schema.dropTable('conductor_runs').ifExists().execute();
  await db.schema.dropTable('conductor_checkpoints').ifExists().execute();
}
