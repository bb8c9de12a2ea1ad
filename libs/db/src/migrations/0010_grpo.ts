// GRPO training of the embedded Conductor (libs/ultra-training/src/grpo): one row per run (`grpo_runs`,
// its committed state: the iteration it asks, the sampling policy's checkpoint, Adam's moments),
// one per committed iteration (`grpo_iterations`) and one per rollout (`grpo_rollouts`: the
// sampled decisions with their log-probabilities under the sampling policy, the reward, the
// advantage). Everything of an iteration is written in one transaction. `workflows.decisions`
// keeps a writer's own record of what it decided (the embedded policy's decisions).
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('workflows').addColumn('decisions', 'jsonb').execute();

  await db.schema
    .createTable('grpo_runs')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('dataset_id', 'integer', (c) => c.notNull().references('datasets.id'))
    .addColumn('pool_id', 'integer', (c) => c.notNull().references('worker_pools.id'))
    // the starting policy (the documented initialisation or a warm start)
    .addColumn('start_checkpoint_id', 'text', (c) => c.notNull().references('conductor_checkpoints.id'))
    // Q, G, iterations, seed, optimiser, clip, advantage scaling, reward, replay, splits, ...
    .addColumn('config', 'jsonb', (c) => c.notNull())
    .addColumn('code_version', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('running','paused','completed','failed')`))
    .addColumn('status_reason', 'text')
    // the iteration the committed state asks, and the policy that samples it
    .addColumn('iteration', 'integer', (c) => c.notNull().defaultTo(0).check(sql`iteration >= 0`))
    .addColumn('policy_checkpoint_id', 'text', (c) => c.notNull().references('conductor_checkpoints.id'))
    // Adam: step count and the moments as float64 little-endian bytes (null before the first step)
    .addColumn('adam_step', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('adam_m', 'bytea')
    .addColumn('adam_v', 'bytea')
    // the best policy on the validation split so far
    .addColumn('best_checkpoint_id', 'text', (c) => c.references('conductor_checkpoints.id'))
    .addColumn('best_val_reward', 'double precision')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('finished_at', 'timestamptz')
    .execute();

  await db.schema
    .createTable('grpo_iterations')
    .addColumn('run_id', 'text', (c) => c.notNull().references('grpo_runs.id').onDelete('cascade'))
    .addColumn('iteration', 'integer', (c) => c.notNull().check(sql`iteration >= 0`))
    // the policy that sampled the iteration, and the one the update made
    .addColumn('policy_checkpoint_id', 'text', (c) => c.notNull().references('conductor_checkpoints.id'))
    .addColumn('next_checkpoint_id', 'text', (c) => c.notNull().references('conductor_checkpoints.id'))
    // mean reward, reward sd, zero-advantage groups, parse failures, mean steps, clip fraction,
    // approximate KL, worker and topology mix, per-epoch losses, ...
    .addColumn('record', 'jsonb', (c) => c.notNull())
    // mean reward of the sampling policy's argmax on the validation items (when evaluated)
    .addColumn('val_reward', 'double precision')
    .addColumn('committed_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('grpo_iterations_pk', ['run_id', 'iteration'])
    .execute();

  await db.schema
    .createTable('grpo_rollouts')
    .addColumn('run_id', 'text', (c) => c.notNull().references('grpo_runs.id').onDelete('cascade'))
    .addColumn('iteration', 'integer', (c) => c.notNull())
    // train: question q of the iteration's draw, sample g of its group; val: item q, g = 0 (argmax)
    .addColumn('split', 'text', (c) => c.notNull().check(sql`split in ('train','val')`))
    .addColumn('question', 'integer', (c) => c.notNull())
    .addColumn('sample', 'integer', (c) => c.notNull())
    .addColumn('item_id', 'integer', (c) => c.notNull().references('items.id'))
    .addColumn('workflow_id', 'bigint', (c) => c.references('workflows.id'))
    .addColumn('finish_reason', 'text')
    .addColumn('parse_ok', 'boolean')
    .addColumn('reward', 'double precision')
    .addColumn('cost', sql`numeric(24,12)`, (c) => c.notNull().defaultTo(0))
    .addColumn('n_steps', 'integer')
    .addColumn('topology', 'text')
    // the sampled decisions [{worker, kind, access}] and each unforced decision's log-probability
    // under the sampling policy [{head, step, logprob}]
    .addColumn('decisions', 'jsonb')
    .addColumn('logprobs', 'jsonb')
    .addColumn('advantage', 'double precision')
    .addPrimaryKeyConstraint('grpo_rollouts_pk', ['run_id', 'iteration', 'split', 'question', 'sample'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('grpo_rollouts').ifExists().execute();
  await db.schema.dropTable('grpo_iterations').ifExists().execute();
  await db.schema.dropTable('grpo_runs').ifExists().execute();
  await db.schema.alterTable('workflows').dropColumn('decisions').execute();
}
