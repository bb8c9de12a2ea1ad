// Scripted workers (issue 28): a worker of provider `scripted` keeps its script (latency, length,
// style, failure rates, tool behaviour; the pool file's `script`) with its row.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table workers add column script jsonb`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table workers drop column script`.execute(db);
}
