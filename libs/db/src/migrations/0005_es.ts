// The ES stage (sep-CMA-ES over the router's theta): runs, one record per committed generation,
// one row per evaluation. Optimiser states are JSON (SepCmaEsState of @fugu/es, numbers exact).
//
// Where the states live:
// - es_runs.initial_state: the state that asks generation 0 (written once, at creation);
// - es_runs.state: the CURRENT state, the one that asks generation state.generation; it moves
//   only in the commit transaction of a generation;
// - es_generations.state: the state AFTER tell of that generation (= the one that asks g + 1),
//   committed in the same transaction as es_runs.state. So the state that asked generation g is
//   initial_state (g = 0) or es_generations[g - 1].state: the history is complete without storing
//   any state twice.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('es_runs')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('running','completed','failed','paused')`))
    .addColumn('status_reason', 'text')
    // task spec, lambda, sigma0, replicas, generations, seed, evaluation run, split seed, deadline
    .addColumn('config', 'jsonb', (c) => c.notNull())
    .addColumn('code_version', 'text', (c) => c.notNull())
    // the SFT parent the search starts from
    .addColumn('checkpoint_id', 'text', (c) => c.notNull().references('router_checkpoints.id'))
    .addColumn('best_checkpoint_id', 'text', (c) => c.references('router_checkpoints.id'))
    .addColumn('initial_state', 'jsonb', (c) => c.notNull())
    .addColumn('state', 'jsonb', (c) => c.notNull())
    // the generation es_runs.state asks (= the number of committed generations)
    .addColumn('generation', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('es_generations')
    .addColumn('run_id', 'text', (c) => c.notNull().references('es_runs.id').onDelete('cascade'))
    .addColumn('generation', 'integer', (c) => c.notNull().check(sql`generation >= 0`))
    // the optimiser state after tell (asks generation + 1)
    .addColumn('state', 'jsonb', (c) => c.notNull())
    // over the candidates' fitness (each the mean over its replicas)
    .addColumn('mean_fitness', 'double precision', (c) => c.notNull())
    .addColumn('best_fitness', 'double precision', (c) => c.notNull())
    .addColumn('median_fitness', 'double precision', (c) => c.notNull())
    // best fitness seen so far (after this generation)
    .addColumn('best_so_far', 'double precision', (c) => c.notNull())
    // the step size the generation was sampled with, and the one after tell
    .addColumn('sigma', 'double precision', (c) => c.notNull())
    .addColumn('sigma_after', 'double precision', (c) => c.notNull())
    .addColumn('evaluations', 'integer', (c) => c.notNull())
    .addColumn('dispatches', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('wall_ms', 'integer')
    .addColumn('committed_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('es_generations_pk', ['run_id', 'generation'])
    .execute();

  await db.schema
    .createTable('es_evaluations')
    .addColumn('run_id', 'text', (c) => c.notNull().references('es_runs.id').onDelete('cascade'))
    .addColumn('generation', 'integer', (c) => c.notNull())
    .addColumn('candidate', 'integer', (c) => c.notNull())
    .addColumn('replica', 'integer', (c) => c.notNull())
    .addColumn('fitness', 'double precision', (c) => c.notNull())
    // what chose the minibatch / episodes: run seed, generation, replica, split
    .addColumn('seed', 'text', (c) => c.notNull())
    .addColumn('summary', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('evaluator', 'text')
    .addColumn('eval_ms', 'double precision')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    // unique: a re-dispatched or re-run evaluation inserts nothing (first result wins)
    .addPrimaryKeyConstraint('es_evaluations_pk', ['run_id', 'generation', 'candidate', 'replica'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('es_evaluations').ifExists().execute();
  await db.schema.dropTable('es_generations').ifExists().execute();
  await db.schema.dropTable('es_runs').ifExists().execute();
}
