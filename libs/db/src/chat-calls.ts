// Non-evaluation calls (migration 0006_chat_calls): the stored requests of chat-call jobs and
// one row per call, unique by key (the first final row wins; a re-run inserts nothing).
import { sql } from 'kysely';
import type { Db } from './connection.ts';
import type { WireError } from '@fugu/core';
import type { CallStatus } from './schema.ts';

export type ChatCallRecord = {
  key: string;
  origin: string;
  workerId: number | null;
  worker: string;
  provider: string;
  model: string;
  requestHash: string;
  status: CallStatus;
  response: Record<string, unknown> | null;
  tokensIn: number;
  tokensOut: number;
  /** USD, a 12-place decimal string (formatUsd) */
  cost: string;
  latencyMs: number;
  attempts: number;
  cached: boolean;
  /** the wire error (@fugu/core toWireError) of a failed call */
  error: WireError | null;
};

export type ChatCallRow = ChatCallRecord & { id: number; createdAt: Date };

const callValues = (r: ChatCallRecord) => ({
  key: r.key, origin: r.origin, worker_id: r.workerId, worker: r.worker, provider: r.provider, model: r.model, request_hash: r.requestHash,
  status: r.status, response: r.response === null ? null : JSON.stringify(r.response), tokens_in: r.tokensIn, tokens_out: r.tokensOut,
  cost: r.cost, latency_ms: r.latencyMs, attempts: r.attempts, cached: r.cached,
  error_code: r.error?.code ?? null, error_message: r.error ? r.error.message.slice(0, 2000) : null, error: r.error === null ? null : JSON.stringify(r.error),
});

/** The insert of call rows, a key that already has one skipped (a statement to run, or to put in a larger one). */
export function insertChatCallsQuery(db: Db, rows: readonly ChatCallRecord[]) {
  return db.insertInto('chat_calls').values(rows.map(callValues)).onConflict((oc) => oc.column('key').doNothing());
}

/** Writes one call row; returns false when the key already had one (nothing written). */
export async function recordChatCall(db: Db, r: ChatCallRecord): Promise<boolean> {
  const res = await insertChatCallsQuery(db, [r]).returning('id').executeTakeFirst();
  return res !== undefined;
}

/**
 * Writes many call rows in one statement (a key that has a row, or comes twice, keeps the first),
 * in key order, so that two writers' statements never wait on each other in opposite orders.
 */
export async function recordChatCalls(db: Db, rows: readonly ChatCallRecord[]): Promise<void> {
  if (rows.length === 0) return;
  const byKey = new Map<string, ChatCallRecord>();
  for (const r of rows) if (!byKey.has(r.key)) byKey.set(r.key, r);
  await insertChatCallsQuery(db, [...byKey.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))).execute();
}

/** The rows of these keys (absent keys have none yet). */
export async function getChatCalls(db: Db, keys: readonly string[]): Promise<ChatCallRow[]> {
  if (keys.length === 0) return [];
  const rows = await db.selectFrom('chat_calls').selectAll().where('key', '=', sql<string>`any(${keys as string[]}::text[])`).execute();
  return rows.map((r) => ({
    id: r.id, key: r.key, origin: r.origin, workerId: r.worker_id, worker: r.worker, provider: r.provider, model: r.model, requestHash: r.request_hash,
    status: r.status, response: r.response, tokensIn: r.tokens_in, tokensOut: r.tokens_out, cost: r.cost, latencyMs: r.latency_ms, attempts: r.attempts,
    cached: r.cached, error: r.error as ChatCallRecord['error'], createdAt: r.created_at,
  }));
}

/** Which of these keys have a row, with its status and cost only (no response): for counting answers. */
export async function getChatCallStates(db: Db, keys: readonly string[]): Promise<Array<{ key: string; status: CallStatus; cost: string }>> {
  if (keys.length === 0) return [];
  return db.selectFrom('chat_calls').select(['key', 'status', 'cost']).where('key', '=', sql<string>`any(${keys as string[]}::text[])`).execute();
}

export type ChatRequestRecord = { id: string; workerId: number; request: Record<string, unknown>; sample: number; origin: string };

/** Stores chat-call requests (an id already stored keeps its first request); returns the ids newly stored. */
export async function saveChatRequests(db: Db, rows: readonly ChatRequestRecord[]): Promise<Set<string>> {
  const out = new Set<string>();
  for (let i = 0; i < rows.length; i += 1000) {
    const chunk = rows.slice(i, i + 1000);
    const res = await db
      .insertInto('chat_requests')
      .values(chunk.map((r) => ({ id: r.id, worker_id: r.workerId, request: JSON.stringify(r.request), sample: r.sample, origin: r.origin })))
      .onConflict((oc) => oc.column('id').doNothing())
      .returning('id')
      .execute();
    for (const r of res) out.add(r.id);
  }
  return out;
}

export async function getChatRequest(db: Db, id: string): Promise<ChatRequestRecord | undefined> {
  const r = await db.selectFrom('chat_requests').selectAll().where('id', '=', id).executeTakeFirst();
  return r && { id: r.id, workerId: r.worker_id, request: r.request, sample: r.sample, origin: r.origin };
}

/** The worker id and provider of stored chat requests (to find or re-add their jobs). */
export async function getChatRequestWorkers(db: Db, ids: readonly string[]): Promise<Array<{ id: string; workerId: number; provider: string }>> {
  if (ids.length === 0) return [];
  const rows = await db
    .selectFrom('chat_requests as r')
    .innerJoin('workers as w', 'w.id', 'r.worker_id')
    .select(['r.id as id', 'r.worker_id as workerId', 'w.provider as provider'])
    .where('r.id', '=', sql<string>`any(${ids as string[]}::text[])`)
    .execute();
  return rows;
}

/** Stored chat requests by id (those that exist). */
export async function getChatRequests(db: Db, ids: readonly string[]): Promise<ChatRequestRecord[]> {
  if (ids.length === 0) return [];
  const rows = await db.selectFrom('chat_requests').selectAll().where('id', '=', sql<string>`any(${ids as string[]}::text[])`).execute();
  return rows.map((r) => ({ id: r.id, workerId: r.worker_id, request: r.request, sample: r.sample, origin: r.origin }));
}

export type ChatCallJobState = { status: CallStatus | null; workerId: number | null; request: Record<string, unknown> | null; sample: number | null };

/**
 * What a chat-call job reads before its call, in one query: the id's chat_calls status (null: no
 * row yet) and its stored request (null fields: none stored).
 */
export async function getChatCallJobState(db: Db, id: string): Promise<ChatCallJobState> {
  return (await getChatCallJobStates(db, [id])).get(id)!;
}

/** getChatCallJobState of many ids in one query (every id is in the map). */
export async function getChatCallJobStates(db: Db, ids: readonly string[]): Promise<Map<string, ChatCallJobState>> {
  const r = await sql<{ id: string; status: CallStatus | null; worker_id: number | null; request: Record<string, unknown> | null; sample: number | null }>`
    select k.id, c.status, r.worker_id, r.request, r.sample
      from unnest(${ids as string[]}::text[]) as k(id)
      left join chat_calls c on c.key = k.id
      left join chat_requests r on r.id = k.id`.execute(db);
  return new Map(r.rows.map((row) => [row.id, { status: row.status, workerId: row.worker_id, request: row.request, sample: row.sample }]));
}
