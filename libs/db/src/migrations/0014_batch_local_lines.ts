// Batch lines the driver runs in its own process (issue 18): a line whose model is a kind of the
// gateway's model registry that runs there (`fugu-ultra`: a workflow through the model's handler,
// its agents' calls chat-call jobs keyed from the workflow) rather than as one chat-call job.
// `local` marks such a line; its answer is stored on the line once it has one, the first write
// winning, so a driver that takes the batch over never answers it twice: `answer_status` and
// `answer` (the output line's status_code and body), `answer_cost` (picodollars, charged to the
// key with the line's part).
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('batch_lines')
    .addColumn('local', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('answer_status', 'integer')
    .addColumn('answer', 'jsonb')
    .addColumn('answer_cost', 'bigint')
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('batch_lines').dropColumn('answer_cost').dropColumn('answer').dropColumn('answer_status').dropColumn('local').execute();
}
