// fugu-ultra served (migration 0011_ultra_serving): deployments, conversations per API key (an id
// names one conversation of each key, 0016_ultra_conversation_keys), the durable state of
// interactive workflows (versioned: a save from a stale version writes nothing, the fencing token
// of the holds in Redis that let one request at a time advance a workflow, @fugu/ultra holds.ts),
// and each conversation's shared tool memory.
import { sql, type RawBuilder } from 'kysely';
import { PREPARED, type Db } from './connection.ts';
import type { UltraSessionStatus } from './schema.ts';
import { finishColumns, finishWorkflowQuery, stepRecord, toWorkflowRow, type NewWorkflowRow, type WorkflowFinish, type WorkflowRow, type WorkflowStepRow } from './workflows.ts';

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
 * A new turn of a conversation of this API key and its workflow row (`<keyPrefix><turn>`); `id`: a
 * reserved id (reserveWorkflowId); `startedAt`: when the turn began (default: the statement's time)
 */
export type NewConversationTurn = {
  conversationId: string; keyId: string | null; keyPrefix: string; workflow: Omit<NewWorkflowRow, 'key' | 'runId' | 'itemId' | 'repeat'>; id?: number; startedAt?: Date;
};

/**
 * A new turn of the conversation `id` of this API key and its workflow, in one statement: the
 * conversation made when new and its turn counted (as nextConversationTurn), and the workflow row
 * `<keyPrefix><turn>` inserted already claimed (status running, attempts 1), or with `finish`
 * already its final write (a turn that ended before its agents ran). A served turn's first write
 * (issue 27: at most two commits per step); a new conversation's first turn makes its rows in its
 * end's statement instead (saveTurn's `create`).
 */
export async function startConversationTurn(db: Db, c: NewConversationTurn, finish?: WorkflowFinish): Promise<{ row: WorkflowRow; turn: number }> {
  const { rows } = await sql<Record<string, unknown> & { turn: number }>`
    with ${sql.join(conversationTurnParts(c, finish))}
    select wf.*, (select turns from conv) as turn from wf`.execute(db);
  const r = rows[0]!;
  return { row: toWorkflowRow(r), turn: Number(r.turn) };
}

/**
 * The CTEs `conv` (the conversation made or its turn counted) and `wf` (the turn's workflow row,
 * returning *): running, or with `finish` already its final write (the row of a turn that ends
 * in the statement that makes it).
 */
function conversationTurnParts(c: NewConversationTurn, finish?: WorkflowFinish): RawBuilder<unknown>[] {
  const w = c.workflow;
  const cols: Record<string, unknown> = {
    ...(c.id !== undefined && { id: c.id }),
    key: sql`(select ${c.keyPrefix} || turns from conv)`,
    pool_id: w.poolId, question: w.question, conductor: w.conductor, seed: w.seed, repeat: 0, options: JSON.stringify(w.options),
    status: 'running', attempts: 1, started_at: c.startedAt ?? sql`now()`,
    ...(finish && finishColumns(finish)),
  };
  return [
    sql`conv as (
      insert into ultra_conversations (id, api_key_id, turns) values (${c.conversationId}, ${c.keyId}, 1)
      on conflict (key_scope, id) do update set turns = ultra_conversations.turns + 1
      returning turns)`,
    // a reserved id goes in as given; values (not a select): each parameter takes its column's type
    sql`wf as (
      insert into workflows (${sql.join(Object.keys(cols).map((k) => sql.ref(k)))}) ${c.id === undefined ? sql`` : sql`overriding system value`}
      values (${sql.join(Object.values(cols))})
      returning *)`,
  ];
}

/** Workflow ids taken from the sequence ahead of their rows, per connection pool (a block at a time). */
const reserved = new WeakMap<Db, { ids: number[]; refill?: Promise<void> }>();
const RESERVE_BLOCK = 32;

/**
 * A workflow id of the `workflows` sequence, taken before its row is written (for
 * startConversationTurn's `id`): a served turn of a new conversation starts its Conductor and its
 * first calls while its row goes in. Ids come in blocks of 32, one statement a block; an id never
 * used leaves a gap, as a rolled-back insert does.
 */
export async function reserveWorkflowId(db: Db): Promise<number> {
  const r = reserved.get(db) ?? { ids: [] };
  reserved.set(db, r);
  while (r.ids.length === 0) {
    r.refill ??= sql<{ id: string }>`select nextval(pg_get_serial_sequence('workflows', 'id'))::text as id from generate_series(1, ${RESERVE_BLOCK})`
      .execute(db)
      .then(({ rows }) => void r.ids.push(...rows.map((x) => Number(x.id))))
      .finally(() => (r.refill = undefined));
    await r.refill;
  }
  return r.ids.shift()!;
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
 * A new interactive workflow's state (version 0). `replace`: a workflow run again from its start
 * (reopenWorkflow) replaces the state it had, at the next version (a workflow's versions only
 * grow: a state read at a version is that version's). Returns the version written.
 */
export async function insertUltraSession(db: Db, s: Omit<UltraSession, 'version'>, opts: { replace?: boolean } = {}): Promise<number> {
  const row = { workflow_id: s.workflowId, conversation_id: s.conversationId, api_key_id: s.apiKeyId, status: s.status, state: JSON.stringify(s.state), deadline_at: s.deadlineAt };
  const q = db.insertInto('ultra_sessions').values(row);
  const { workflow_id: _id, ...rest } = row;
  const r = await (opts.replace ? q.onConflict((oc) => oc.column('workflow_id').doUpdateSet((eb) => ({ ...rest, version: eb('ultra_sessions.version', '+', 1), updated_at: new Date() }))) : q)
    .returning('version')
    .executeTakeFirstOrThrow();
  return r.version;
}

export async function getUltraSession(db: Db, workflowId: number): Promise<UltraSession | undefined> {
  const row = await db.selectFrom('ultra_sessions').selectAll().where('workflow_id', '=', String(workflowId) as never).executeTakeFirst();
  return row && toSession(row as unknown as SessionRaw);
}

/**
 * A served turn's end in one statement (atomic, one round trip): the session saved from
 * `version` (or inserted, for a turn that began without a row), and only when that succeeded the
 * rows of the steps that ended (the first row of each step wins) and the workflow's final write.
 * With `memory`, the shared memory's new entries too (appendToolMemory's insert). With `create`,
 * the conversation's turn and the workflow's row too, made here (as startConversationTurn's, with
 * the id `workflowId` and the final write in it when the turn ended): a new conversation's first
 * turn is one statement. False, with nothing written, when the version moved on (another request
 * took the workflow over).
 */
export async function saveTurn(db: Db, o: {
  workflowId: number;
  /** `state`: as an object, or as its JSON text */
  session: { status: UltraSessionStatus; state: Record<string, unknown> | string; deadlineAt: Date | null } & ({ version: number } | { insert: { conversationId: string; apiKeyId: string | null } });
  steps: readonly WorkflowStepRow[];
  finish?: WorkflowFinish;
  /** the shared memory's new entries (the tool results this request gave) */
  memory?: { conversationId: string; keyId: string | null; entries: MemoryInput };
  /** the turn's rows, not yet made (its session is inserted) */
  create?: Omit<NewConversationTurn, 'id'>;
}): Promise<boolean> {
  const { workflowId: id, session: se } = o;
  const state = typeof se.state === 'string' ? se.state : JSON.stringify(se.state);
  if (o.create && 'version' in se) throw new Error(`saveTurn: workflow ${id} is made by this statement, so its session is inserted, not saved from a version`);
  const session = 'version' in se
    ? db.updateTable('ultra_sessions')
      .set((eb) => ({ status: se.status, state, deadline_at: se.deadlineAt, version: eb('version', '+', 1), updated_at: new Date() }))
      .where('workflow_id', '=', String(id) as never)
      .where('version', '=', se.version)
      .returning('workflow_id')
    : db.insertInto('ultra_sessions')
      .values({ workflow_id: id, conversation_id: se.insert.conversationId, api_key_id: se.insert.apiKeyId, status: se.status, state, deadline_at: se.deadlineAt })
      .returning('workflow_id');
  const saved = sql<boolean>`exists (select 1 from saved)`;
  const parts = [...(o.create ? conversationTurnParts({ ...o.create, id }, o.finish) : []), sql`saved as (${session})`];
  if (o.steps.length > 0) {
    const cols = sql.join(Object.keys(stepRecord(o.steps[0]!)).map((c) => sql.ref(c)));
    parts.push(sql`steps as (insert into workflow_steps (${cols}) select ${cols} from jsonb_populate_recordset(null::workflow_steps, ${JSON.stringify(o.steps.map(stepRecord))}::jsonb) where ${saved} on conflict (workflow_id, idx) do nothing)`);
  }
  if (o.finish && !o.create) parts.push(sql`finished as (${finishWorkflowQuery(db, id, o.finish).where(saved)})`);
  if (o.memory && o.memory.entries.length > 0) parts.push(sql`memory as (${toolMemoryInsert(o.memory.conversationId, o.memory.keyId, o.memory.entries, saved)})`);
  const r = await onSeqConflict(() => sql<{ n: number }>`${sql.raw(PREPARED)}with ${sql.join(parts)} select count(*)::int as n from saved`.execute(db));
  return r.rows[0]!.n === 1;
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

type MemoryInput = ReadonlyArray<Omit<ToolMemoryEntry, 'seq'> & { callId?: string }>;

/**
 * Appends tool calls and their results to a conversation's memory (seq continues from the last).
 * Idempotent by `callId` (the client-visible id of the call): an entry whose call is already in
 * the memory is not appended again (a request run again after its gateway died).
 */
export async function appendToolMemory(db: Db, conversationId: string, keyId: string | null, entries: MemoryInput): Promise<void> {
  if (entries.length === 0) return;
  await onSeqConflict(() => sql`${toolMemoryInsert(conversationId, keyId, entries, sql<boolean>`true`)}`.execute(db));
}

/**
 * The insert of memory entries, numbered on from the conversation's last seq, those whose call
 * is already there left out, when `guard` holds. Two writers of one conversation at once may
 * take the same numbers: the second fails on the (conversation, seq) key and is run again
 * (onSeqConflict), reading the first's entries then.
 */
function toolMemoryInsert(conversationId: string, keyId: string | null, entries: MemoryInput, guard: RawBuilder<boolean>): RawBuilder<unknown> {
  const scope = scopeOf(keyId);
  const rows = entries.map((e, i) => ({
    key_scope: scope, conversation_id: conversationId, seq: i + 1, workflow_id: e.workflowId, step: e.step, name: e.name, arguments: e.arguments, result: e.result, call_id: e.callId ?? null,
  }));
  return sql`
    insert into ultra_tool_log (key_scope, conversation_id, seq, workflow_id, step, name, arguments, result, call_id)
    select e.key_scope, e.conversation_id,
           (select coalesce(max(seq), 0) from ultra_tool_log where key_scope = ${scope} and conversation_id = ${conversationId}) + row_number() over (order by e.seq),
           e.workflow_id, e.step, e.name, e.arguments, e.result, e.call_id
    from jsonb_populate_recordset(null::ultra_tool_log, ${JSON.stringify(rows)}::jsonb) e
    where ${guard}
      and (e.call_id is null or not exists (select 1 from ultra_tool_log t where t.key_scope = e.key_scope and t.conversation_id = e.conversation_id and t.call_id = e.call_id))
    on conflict (conversation_id, call_id) where call_id is not null do nothing`;
}

/** Runs a statement that appends to a conversation's memory again while another writer took the same seq (at most 20 tries). */
async function onSeqConflict<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (e) {
      const pg = e as { code?: string; constraint?: string };
      if (pg.code !== '23505' || pg.constraint !== 'ultra_tool_log_pk' || attempt >= 20) throw e;
    }
  }
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
