// The gateway's request records (migration 0007_requests): one row per chat request after
// authentication, errors included. Cost is exact: bigint picodollars in, numeric(24,12) stored,
// read back as text and parsed (never through a float).
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { formatUsd, parseUsd } from '@fugu/core';
import type { Db } from './connection.ts';
import { insertChatCallsQuery, type ChatCallRecord } from './chat-calls.ts';

export type RequestProb = { worker: string; prob: number };

export type RequestRow = {
  id: string;
  /** the x-request-id echoed to the client */
  requestId: string;
  apiKeyId: string | null;
  route: string;
  /** the model the client asked for (fugu, a worker, ...) */
  model: string | null;
  /** the worker that answered (or the last one tried) */
  worker: string | null;
  stream: boolean;
  /** the router's top probabilities, best first */
  topProbs: RequestProb[] | null;
  fallbacks: string[];
  tokensIn: number;
  tokensOut: number;
  /** picodollars */
  cost: bigint;
  routingMs: number | null;
  providerMs: number | null;
  totalMs: number;
  status: number;
  errorCode: string | null;
  /** the fugu-ultra workflow this request ran or continued */
  workflowId: number | null;
  /** the end user the request named (chat `user` / `safety_identifier`, Anthropic `metadata.user_id`; migration 0019) */
  endUser: string | null;
  /** the hints and metadata the request sent, as sent (Responses `client_metadata`, `metadata`, `prompt_cache_key`, `service_tier`, ...; migration 0020), null: none */
  hints: Record<string, unknown> | null;
  /** the client session the request belongs to (Claude Code's, Codex's, OpenCode's session id, x-fugu-session; migration 0021), null: none */
  session: string | null;
  /** the names of the tool calls the answer gave the client, in order (migration 0021), null: none */
  toolCalls: string[] | null;
  createdAt: Date;
};

export type NewRequestRow = Omit<RequestRow, 'id' | 'createdAt' | 'workflowId' | 'endUser' | 'hints' | 'session' | 'toolCalls'> & {
  id?: string;
  createdAt?: Date;
  workflowId?: number | null;
  endUser?: string | null;
  hints?: Record<string, unknown> | null;
  session?: string | null;
  toolCalls?: string[] | null;
};

/** A new row id: `r_` + a uuid without dashes. */
export const newRequestRowId = (): string => `r_${randomUUID().replaceAll('-', '')}`;

export async function insertRequest(db: Db, r: NewRequestRow): Promise<string> {
  return (await insertRequests(db, [r]))[0]!;
}

/** Many rows in one statement (the gateway batches the rows of requests that end together); returns their ids. */
export async function insertRequests(db: Db, rows: readonly NewRequestRow[]): Promise<string[]> {
  if (rows.length === 0) return [];
  const ids = rows.map((r) => r.id ?? newRequestRowId());
  await insertStatement(rows, ids).execute(db);
  return ids;
}

function insertStatement(rows: readonly NewRequestRow[], ids: readonly string[]) {
  const values = rows.map(
    (r, i) => sql`(${ids[i]}, ${r.requestId}, ${r.apiKeyId}, ${r.route}, ${r.model}, ${r.worker}, ${r.stream},
      ${r.topProbs === null ? null : JSON.stringify(r.topProbs)}::jsonb, ${JSON.stringify(r.fallbacks)}::jsonb,
      ${r.tokensIn}::int, ${r.tokensOut}::int, ${formatUsd(r.cost)}::numeric, ${r.routingMs}::float8, ${r.providerMs}::float8, ${r.totalMs}::float8,
      ${r.status}::int, ${r.errorCode}, ${r.workflowId ?? null}::bigint, ${r.endUser ?? null},
      ${r.hints == null ? null : JSON.stringify(r.hints)}::jsonb, ${r.session ?? null}, ${r.toolCalls == null ? null : JSON.stringify(r.toolCalls)}::jsonb,
      ${r.createdAt ?? new Date()}::timestamptz)`,
  );
  return sql`
    insert into requests (id, request_id, api_key_id, route, model, worker, stream, top_probs, fallbacks, tokens_in, tokens_out, cost,
                          routing_ms, provider_ms, total_ms, status, error_code, workflow_id, end_user, hints, session, tool_calls, created_at)
    values ${sql.join(values)}
  `;
}

/** What the gateway writes behind its answers, in one batch. */
export type GatewayRecords = {
  /** `requests` rows (an id that has its row already is skipped, with its cost) */
  requests?: readonly NewRequestRow[];
  /** `chat_calls` rows of its provider calls (a key that has one already is skipped) */
  calls?: readonly ChatCallRecord[];
};

/**
 * The gateway's batch in one statement: its request rows, its provider calls' rows, and each
 * key's spend grown by the costs of the request rows this statement inserted, all or none. A key's
 * spend is the sum of its rows' costs, so writing a batch again (a journal replayed after a crash,
 * record-writer.ts) skips the rows and calls already there and charges nothing twice. Returns
 * the request rows' ids.
 */
export async function insertGatewayRecords(db: Db, r: GatewayRecords): Promise<string[]> {
  const rows = r.requests ?? [];
  const ids = rows.map((x) => x.id ?? newRequestRowId());
  const parts = [
    ...(rows.length > 0
      ? [
          sql`${insertStatement(rows, ids)} on conflict (id) do nothing returning api_key_id, cost`,
          sql`update api_keys k set spent = k.spent + d.cost
              from (select api_key_id, (sum(cost) * 1000000000000)::bigint as cost from w0 where api_key_id is not null and cost <> 0 group by api_key_id) as d
              where k.id = d.api_key_id`,
        ]
      : []),
    ...(r.calls && r.calls.length > 0 ? [sql`${insertChatCallsQuery(db, r.calls)}`] : []),
  ];
  if (parts.length === 1) await parts[0]!.execute(db);
  else if (parts.length > 1) await sql`with ${sql.join(parts.map((p, i) => sql`${sql.raw(`w${i}`)} as (${p})`))} select 1`.execute(db);
  return ids;
}

type Raw = {
  id: string;
  request_id: string;
  api_key_id: string | null;
  route: string;
  model: string | null;
  worker: string | null;
  stream: boolean;
  top_probs: RequestProb[] | null;
  fallbacks: string[];
  tokens_in: number;
  tokens_out: number;
  cost: string;
  routing_ms: number | null;
  provider_ms: number | null;
  total_ms: number;
  status: number;
  error_code: string | null;
  workflow_id: string | number | null;
  end_user: string | null;
  hints: Record<string, unknown> | null;
  session: string | null;
  tool_calls: string[] | null;
  created_at: Date;
};

function toRow(r: Raw): RequestRow {
  return {
    id: r.id,
    requestId: r.request_id,
    apiKeyId: r.api_key_id,
    route: r.route,
    model: r.model,
    worker: r.worker,
    stream: r.stream,
    topProbs: r.top_probs,
    fallbacks: r.fallbacks,
    tokensIn: r.tokens_in,
    tokensOut: r.tokens_out,
    cost: parseUsd(r.cost),
    routingMs: r.routing_ms,
    providerMs: r.provider_ms,
    totalMs: r.total_ms,
    status: r.status,
    errorCode: r.error_code,
    workflowId: r.workflow_id === null ? null : Number(r.workflow_id),
    endUser: r.end_user,
    hints: r.hints,
    session: r.session,
    toolCalls: r.tool_calls,
    createdAt: r.created_at,
  };
}

const COLUMNS = sql`r.id, r.request_id, r.api_key_id, r.route, r.model, r.worker, r.stream, r.top_probs, r.fallbacks, r.tokens_in, r.tokens_out,
  r.cost::text as cost, r.routing_ms, r.provider_ms, r.total_ms, r.status, r.error_code, r.workflow_id, r.end_user, r.hints, r.session, r.tool_calls, r.created_at`;

export type ListRequestsOptions = {
  /** an API key's id or name */
  key?: string;
  /** only rows created at or after this time */
  since?: Date;
  /** only this client session's rows (requests.session) */
  session?: string;
  /** newest first (default), or oldest first: a session's turns in order */
  order?: 'desc' | 'asc';
  /** at most this many (default 50): the newest ones, or with order asc the oldest */
  limit?: number;
};

/** Request rows, newest first (or oldest first: `order: 'asc'`). */
export async function listRequests(db: Db, opts: ListRequestsOptions = {}): Promise<RequestRow[]> {
  const limit = opts.limit ?? 50;
  const keyFilter = opts.key === undefined ? sql`true` : sql`(r.api_key_id = ${opts.key} or r.api_key_id in (select id from api_keys where name = ${opts.key}))`;
  const sinceFilter = opts.since === undefined ? sql`true` : sql`r.created_at >= ${opts.since}`;
  const sessionFilter = opts.session === undefined ? sql`true` : sql`r.session = ${opts.session}`;
  const order = opts.order === 'asc' ? sql`r.created_at asc, r.id asc` : sql`r.created_at desc, r.id desc`;
  const { rows } = await sql<Raw>`
    select ${COLUMNS} from requests r where ${keyFilter} and ${sinceFilter} and ${sessionFilter} order by ${order} limit ${limit}
  `.execute(db);
  return rows.map(toRow);
}

/** One row by its id, or by the x-request-id the client saw (the newest such). */
export async function getRequest(db: Db, id: string): Promise<RequestRow | undefined> {
  const { rows } = await sql<Raw>`
    select ${COLUMNS} from requests r where r.id = ${id} or r.request_id = ${id} order by (r.id = ${id}) desc, r.created_at desc limit 1
  `.execute(db);
  return rows[0] && toRow(rows[0]);
}
