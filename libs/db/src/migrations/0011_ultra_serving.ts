// fugu-ultra served behind the OpenAI API (apps/gateway ultra.ts, libs/ultra interactive/):
//   ultra_deployments   the Conductor a deployment name (default `fugu-ultra`) serves, with its options
//   ultra_conversations one row per conversation, scoped to the API key that started it
//   ultra_sessions      an interactive workflow's durable state (pending tool calls, each agent's
//                       private transcript, finished steps), versioned for optimistic updates
//   ultra_tool_log      the conversation's shared tool memory: every tool call and its result, in order
// and `requests.workflow_id`: the workflow a gateway request ran or continued.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('ultra_deployments')
    .addColumn('name', 'text', (c) => c.primaryKey())
    // a conductor spec: policy:<ckpt>, llm:<worker or endpoint>, fixed:...
    .addColumn('conductor', 'text', (c) => c.notNull())
    // the pool the deployment was published for (its name; the gateway must serve it)
    .addColumn('pool', 'text', (c) => c.notNull())
    // maxSteps, tool-loop bounds, shared memory, ... (libs/ultra interactive/options.ts)
    .addColumn('options', 'jsonb', (c) => c.notNull())
    .addColumn('published_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('ultra_conversations')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('api_key_id', 'text')
    // workflows started in it so far (each user turn is one)
    .addColumn('turns', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('ultra_sessions')
    .addColumn('workflow_id', 'bigint', (c) => c.primaryKey().references('workflows.id').onDelete('cascade'))
    .addColumn('conversation_id', 'text', (c) => c.notNull().references('ultra_conversations.id').onDelete('cascade'))
    .addColumn('api_key_id', 'text')
    // running: a request is advancing it; tools: waiting for the client's tool results; done | failed
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('running','tools','done','failed')`))
    // bumped by every save: a save from a stale version writes nothing (two replicas never both advance it)
    .addColumn('version', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('state', 'jsonb', (c) => c.notNull())
    // when the pending tool results are due (status tools)
    .addColumn('deadline_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('ultra_sessions_conversation').on('ultra_sessions').column('conversation_id').execute();
  await db.schema.createIndex('ultra_sessions_waiting').on('ultra_sessions').column('deadline_at').where(sql.ref('status'), '=', 'tools').execute();

  await db.schema
    .createTable('ultra_tool_log')
    .addColumn('conversation_id', 'text', (c) => c.notNull().references('ultra_conversations.id').onDelete('cascade'))
    // the memory's version: 1, 2, ... per conversation
    .addColumn('seq', 'integer', (c) => c.notNull().check(sql`seq > 0`))
    .addColumn('workflow_id', 'bigint', (c) => c.notNull().references('workflows.id').onDelete('cascade'))
    .addColumn('step', 'integer', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('arguments', 'text', (c) => c.notNull())
    .addColumn('result', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('ultra_tool_log_pk', ['conversation_id', 'seq'])
    .execute();

  await db.schema.alterTable('requests').addColumn('workflow_id', 'bigint').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('requests').dropColumn('workflow_id').execute();
  await db.schema.dropTable('ultra_tool_log').ifExists().execute();
  await db.schema.dropTable('ultra_sessions').ifExists().execute();
  await db.schema.dropTable('ultra_conversations').ifExists().execute();
  await db.schema.dropTable('ultra_deployments').ifExists().execute();
}
