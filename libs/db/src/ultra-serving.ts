// fugu-ultra served (migration 0011_ultra_serving): deployments, conversations per API key (an id
// names one conversation of each key, 0016_ultra_conversation_keys), the durable state of interactive workflows (versioned: a save or claim from a stale
// version writes nothing, so two gateway replicas never both advance one workflow), and each
// conversation's shared tool memory.
import { sql } from 'kysely';
import type { Db } from './connection.ts';
import type { UltraSessionStatus } from './schema.ts';
import { toWorkflowRow, type NewWorkflowRow, type WorkflowRow } from './workflows.ts';

export type UltraDeployment = { name: string; conductor: string; pool: string; options: Record<string, unknown>; publishedAt: Date };

/** Points a deployment name at a Conductor (created or replaced). */
export async function publishUltraDeployment(db: Db, d: Omit<UltraDeployment, 'publishedAt'>): Promise<UltraDeployment> {
  const row = await db
    .insertInto('ultra_deployments')
    .values({ name: d.name, conductor: d.conductor, pool: d.pool, options: JSON.stringify(d.options), published_at: new Date() })
    .onConflict((oc) =>
      oc.column('name').doUpdateSet((eb) => ({
        conductor: eb.ref('excluded.conductor'), pool: eb.ref('excluded.pool'), options: eb.ref('excluded.options'), published_at: eb.ref('excluded.published_at'),
      })),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
  return { name: row.name, conductor: row.conductor, pool: row.pool, options: row.options, publishedAt: row.published_at };
}

export async function getUltraDeployment(db: Db, name: string): Promise<UltraDeployment | undefined> {
  const row = await db.selectFrom('ultra_deployments').selectAll().where('name', '=', name).executeTakeFirst();
  return row && { name: row.name, conductor: row.conductor, pool: row.pool, options: row.options, publishedAt: row.published_at };
}

/** A conversation's key in its tables: the API key's id, '' without auth (the same id under two keys is two conversations). */
const scopeOf = (keyId: string | null): string => keyId ?? '';

/**
 * The conversation `id` of this API key (`keyId` null: no auth), made when new; the next turn's
 * number (1, 2, ...) is taken atomically. Another key's conversation of the same id is another
 * conversation: nothing of it is read or told.
 */
export async function nextConversationTurn(db: Db, id: string, keyId: string | null): Promise<number> {
  const row = await db
    .insertInto('ultra_conversations')
    .values({ id, api_key_id: keyId, turns: 1 })
    .onConflict((oc) => oc.columns(['key_scope', 'id']).doUpdateSet((eb) => ({ turns: eb('ultra_conversations.turns', '+', 1) })))
    .returning('turns')
    .executeTakeFirstOrThrow();
  return row.turns;
}

/**
 * A new turn of the conversation `id` of this API key and its workflow, in one statement: the
 * conversation made when new and its turn counted (as nextConversationTurn), and the workflow row
 * `<keyPrefix><turn>` inserted already claimed (status running, attempts 1). A served turn's
 * first write (issue 27: at most two commits per step).
 */
export async function startConversationTurn(
  db: Db, c: { conversationId: string; keyId: string | null; keyPrefix: string; workflow: Omit<NewWorkflowRow, 'key' | 'runId' | 'itemId' | 'repeat'> },
): Promise<{ row: WorkflowRow; turn: number }> {
  const w = c.workflow;
  const { rows } = await sql<Record<string, unknown> & { turn: number }>`
    with conv as (
      insert into ultra_conversations (id, api_key_id, turns) values (${c.conversationId}, ${c.keyId}, 1)
      on conflict (key_scope, id) do update set turns = ultra_conversations.turns + 1
      returning turns
    )
    insert into workflows (key, pool_id, question, conductor, seed, repeat, options, status, attempts, started_at)
    select ${c.keyPrefix} || conv.turns, ${w.poolId}, ${w.question}, ${w.conductor}, ${w.seed}, 0, ${JSON.stringify(w.options)}::jsonb, 'running', 1, now() from conv
    returning *, (select turns from conv) as turn`.execute(db);
  const r = rows[0]!;
  return { row: toWorkflowRow(r), turn: Number(r.turn) };
}

export type UltraSession = {
  workflowId: number;
  conversationId: string;
  apiKeyId: string | null;
  status: UltraSessionStatus;
  version: number;
  state: Record<string, unknown>;
  deadlineAt: Date | null;
};

type SessionRaw = { workflow_id: string; conversation_id: string; api_key_id: string | null; status: UltraSessionStatus; version: number; state: Record<string, unknown>; deadline_at: Date | null };
const toSession = (r: SessionRaw): UltraSession => ({
  workflowId: Number(r.workflow_id), conversationId: r.conversation_id, apiKeyId: r.api_key_id, status: r.status, version: r.version, state: r.state, deadlineAt: r.deadline_at,
});

/**
 * A new interactive workflow's state, status running (version 0). `replace`: a workflow run again
 * from its start (reopenWorkflow) replaces the state it had, back to version 0.
 */
export async function insertUltraSession(db: Db, s: Omit<UltraSession, 'version'>, opts: { replace?: boolean } = {}): Promise<void> {
  const row = { workflow_id: s.workflowId, conversation_id: s.conversationId, api_key_id: s.apiKeyId, status: s.status, state: JSON.stringify(s.state), deadline_at: s.deadlineAt };
  const q = db.insertInto('ultra_sessions').values(row);
  if (!opts.replace) return void (await q.execute());
  const { workflow_id: _id, ...rest } = row;
  await q.onConflict((oc) => oc.column('workflow_id').doUpdateSet({ ...rest, version: 0, updated_at: new Date() })).execute();
}

export async function getUltraSession(db: Db, workflowId: number): Promise<UltraSession | undefined> {
  const row = await db.selectFrom('ultra_sessions').selectAll().where('workflow_id', '=', String(workflowId) as never).executeTakeFirst();
  return row && toSession(row as unknown as SessionRaw);
}

/**
 * Takes a session for one request: from `tools` (waiting for results), or from `running` whose
 * lease (`deadline_at`) has passed (its gateway died mid-step); status running, version + 1, the
 * new lease. Returns the version the request now holds (the state is the one read at `version`:
 * it is not sent back); undefined when another request holds it or the version moved on.
 */
export async function claimUltraSession(db: Db, workflowId: number, version: number, leaseUntil: Date): Promise<number | undefined> {
  const row = await db
    .updateTable('ultra_sessions')
    .set((eb) => ({ status: 'running' as const, version: eb('version', '+', 1), deadline_at: leaseUntil, updated_at: new Date() }))
    .where('workflow_id', '=', String(workflowId) as never)
    .where('version', '=', version)
    .where(sql<boolean>`(status = 'tools' or (status = 'running' and deadline_at < now()))`)
    .returning('version')
    .executeTakeFirst();
  return row?.version;
}

/**
 * The live holder's heartbeat: moves the lease of a running session it holds (at `version`) to
 * `leaseUntil`; false when the version moved on (another request took the workflow over).
 */
export async function renewUltraSession(db: Db, workflowId: number, version: number, leaseUntil: Date): Promise<boolean> {
  const r = await db
    .updateTable('ultra_sessions')
    .set({ deadline_at: leaseUntil })
    .where('workflow_id', '=', String(workflowId) as never)
    .where('version', '=', version)
    .where('status', '=', 'running')
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

/** Saves a session's state from `version` (version + 1); false when the version moved on (nothing written). */
export async function saveUltraSession(db: Db, workflowId: number, version: number, s: { status: UltraSessionStatus; state: Record<string, unknown>; deadlineAt: Date | null }): Promise<boolean> {
  const r = await db
    .updateTable('ultra_sessions')
    .set((eb) => ({ status: s.status, state: JSON.stringify(s.state), deadline_at: s.deadlineAt, version: eb('version', '+', 1), updated_at: new Date() }))
    .where('workflow_id', '=', String(workflowId) as never)
    .where('version', '=', version)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

/** Sessions waiting for tool results past their deadline (at most `limit`), oldest first. */
export async function expiredUltraSessions(db: Db, limit = 20): Promise<UltraSession[]> {
  const rows = await db
    .selectFrom('ultra_sessions')
    .selectAll()
    .where('status', '=', 'tools')
    .where(sql<boolean>`deadline_at < now()`)
    .orderBy('deadline_at')
    .limit(limit)
    .execute();
  return rows.map((r) => toSession(r as unknown as SessionRaw));
}

export type ToolMemoryEntry = { seq: number; workflowId: number; step: number; name: string; arguments: string; result: string };

/**
 * Appends tool calls and their results to a conversation's memory (seq continues from the last).
 * Idempotent by `callId` (the client-visible id of the call): an entry whose call is already in
 * the memory is not appended again (a request run again after its gateway died).
 */
export async function appendToolMemory(db: Db, conversationId: string, keyId: string | null, entries: ReadonlyArray<Omit<ToolMemoryEntry, 'seq'> & { callId?: string }>): Promise<void> {
  if (entries.length === 0) return;
  const scope = scopeOf(keyId);
  // in the caller's transaction when given one (a served turn's end), else in one of its own
  const inTx = (run: (tx: Db) => Promise<void>): Promise<void> => (db.isTransaction ? run(db) : db.transaction().execute(run));
  await inTx(async (tx) => {
    // one writer per conversation at a time (a row lock on the conversation)
    await sql`select 1 from ultra_conversations where key_scope = ${scope} and id = ${conversationId} for update`.execute(tx);
    const ids = entries.flatMap((e) => (e.callId !== undefined ? [e.callId] : []));
    const have = ids.length === 0
      ? new Set<string>()
      : new Set((await tx.selectFrom('ultra_tool_log').select('call_id').where('key_scope', '=', scope).where('conversation_id', '=', conversationId).where('call_id', 'in', ids).execute()).map((r) => r.call_id));
    const fresh = entries.filter((e) => e.callId === undefined || !have.has(e.callId));
    if (fresh.length === 0) return;
    const { rows } = await sql<{ last: number | null }>`select max(seq) as last from ultra_tool_log where key_scope = ${scope} and conversation_id = ${conversationId}`.execute(tx);
    const last = rows[0]?.last ?? 0;
    await tx
      .insertInto('ultra_tool_log')
      .values(fresh.map((e, i) => ({
        key_scope: scope, conversation_id: conversationId, seq: last + i + 1, workflow_id: e.workflowId, step: e.step, name: e.name, arguments: e.arguments, result: e.result, call_id: e.callId ?? null,
      })))
      .execute();
  });
}

/** The newest `limit` entries of a conversation's memory, oldest first, and how many there are in all. */
export async function readToolMemory(db: Db, conversationId: string, keyId: string | null, limit: number): Promise<{ entries: ToolMemoryEntry[]; total: number }> {
  const rows = await db
    .selectFrom('ultra_tool_log')
    .select(['seq', 'workflow_id', 'step', 'name', 'arguments', 'result'])
    .where('key_scope', '=', scopeOf(keyId))
    .where('conversation_id', '=', conversationId)
    .orderBy('seq', 'desc')
    .limit(limit)
    .execute();
  const total = rows.length === 0 ? 0 : rows[0]!.seq;
  return {
    entries: rows.reverse().map((r) => ({ seq: r.seq, workflowId: Number(r.workflow_id), step: r.step, name: r.name, arguments: r.arguments, result: r.result })),
    total,
  };
}
