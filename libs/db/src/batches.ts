// The Batch API's rows (migration 0013_batches): files and their parts, batches, their lines and
// parts. Reads are scoped to an API key where a client asks (another key's file or batch is not
// found); the driver's writes are guarded by its lease.
import { sql } from 'kysely';
import type { Db } from './connection.ts';

export type FileRow = { id: string; apiKeyId: string | null; purpose: string; filename: string; bytes: number; lines: number; status: string; createdAt: Date };
export type FilePart = { part: number; firstLine: number; lines: number; data: Buffer };

export const OPEN_BATCH_STATUSES = ['validating', 'in_progress', 'finalizing', 'cancelling'] as const;
export type BatchStatus = (typeof OPEN_BATCH_STATUSES)[number] | 'completed' | 'failed' | 'expired' | 'cancelled';
const isOpen = sql`status = any(${[...OPEN_BATCH_STATUSES]}::text[])`;

/**
 * What a batch's driver says about the provider workers its lines need (migration 0018):
 * `waiting`, lines are on provider queues (`queues`) no worker consumes, since `since` (ISO);
 * `local`, the driving gateway runs them with provider-worker processes of its own; `message`,
 * the same in words, addressed to the batch's user (what to do).
 */
export type BatchWorkerNote = {
  waiting: boolean;
  queues: string[];
  since: string | null;
  local: { workers: number; providers: string[]; startedAt: string } | null;
  message: string;
};

export type BatchRow = {
  id: string;
  apiKeyId: string | null;
  endpoint: string;
  inputFileId: string;
  completionWindow: string;
  status: BatchStatus;
  metadata: Record<string, string> | null;
  allowed: string[] | null;
  errors: Array<{ code: string; message: string; param: string | null; line: number | null }> | null;
  outputFileId: string | null;
  errorFileId: string | null;
  total: number;
  completed: number;
  failed: number;
  nextPart: number;
  submitted: boolean;
  charged: bigint;
  leaseOwner: string | null;
  workerNote: BatchWorkerNote | null;
  createdAt: Date;
  inProgressAt: Date | null;
  finalizingAt: Date | null;
  completedAt: Date | null;
  failedAt: Date | null;
  expiresAt: Date;
  expiredAt: Date | null;
  cancellingAt: Date | null;
  cancelledAt: Date | null;
};

/** A stored answer of a line the driver ran itself (`local`): the output line's status and body, its cost (picodollars). */
export type BatchLineAnswer = { statusCode: number; body: Record<string, unknown>; cost: bigint };
export type BatchLineRow = {
  line: number;
  customId: string | null;
  model: string | null;
  worker: string | null;
  callId: string | null;
  error: { code: string; message: string; param?: string | null } | null;
  /** run by the driver itself (migration 0014), not as a chat-call job */
  local: boolean;
  /** a local line's answer, once it has one */
  answer: BatchLineAnswer | null;
};
export type BatchPartRow = { part: number; firstLine: number; lines: number; done: boolean; completed: number; failed: number };

/** Key scope: the rows of this key (null: made without a key, gateway.auth none). */
const ownedBy = (keyId: string | null) => (keyId === null ? sql`api_key_id is null` : sql`api_key_id = ${keyId}`);

// ---- files ------------------------------------------------------------------------------------

type RawFile = { id: string; api_key_id: string | null; purpose: string; filename: string; bytes: string; lines: number; status: string; created_at: Date };
const toFile = (r: RawFile): FileRow => ({ id: r.id, apiKeyId: r.api_key_id, purpose: r.purpose, filename: r.filename, bytes: Number(r.bytes), lines: r.lines, status: r.status, createdAt: r.created_at });

export async function createFileRow(db: Db, f: { id: string; apiKeyId: string | null; purpose: string; filename: string }): Promise<void> {
  await sql`insert into files (id, api_key_id, purpose, filename, status) values (${f.id}, ${f.apiKeyId}, ${f.purpose}, ${f.filename}, 'uploading')`.execute(db);
}

export async function addFilePart(db: Db, fileId: string, p: FilePart): Promise<void> {
  await sql`insert into file_parts (file_id, part, first_line, lines, data) values (${fileId}, ${p.part}, ${p.firstLine}, ${p.lines}, ${p.data})`.execute(db);
}

export async function finishFileRow(db: Db, id: string, bytes: number, lines: number): Promise<void> {
  await sql`update files set status = 'processed', bytes = ${bytes}, lines = ${lines} where id = ${id}`.execute(db);
}

/** A complete file of this key (undefined: none, another key's, or still uploading). */
export async function getFileRow(db: Db, id: string, keyId: string | null | undefined): Promise<FileRow | undefined> {
  const scope = keyId === undefined ? sql`true` : ownedBy(keyId);
  const r = await sql<RawFile>`select id, api_key_id, purpose, filename, bytes::text as bytes, lines, status, created_at from files where id = ${id} and status = 'processed' and ${scope}`.execute(db);
  return r.rows[0] && toFile(r.rows[0]);
}

export async function listFileRows(db: Db, keyId: string | null, opts: { purpose?: string; limit: number; after?: string }): Promise<FileRow[]> {
  const purpose = opts.purpose === undefined ? sql`true` : sql`purpose = ${opts.purpose}`;
  const after = opts.after === undefined ? sql`true` : sql`(created_at, id) < (select created_at, id from files where id = ${opts.after})`;
  const r = await sql<RawFile>`select id, api_key_id, purpose, filename, bytes::text as bytes, lines, status, created_at from files
    where status = 'processed' and ${ownedBy(keyId)} and ${purpose} and ${after} order by created_at desc, id desc limit ${opts.limit}`.execute(db);
  return r.rows.map(toFile);
}

/** Parts from `from` on, at most `limit`, in order. */
export async function getFileParts(db: Db, fileId: string, from: number, limit: number): Promise<FilePart[]> {
  const r = await sql<{ part: number; first_line: number; lines: number; data: Buffer }>`
    select part, first_line, lines, data from file_parts where file_id = ${fileId} and part >= ${from} order by part limit ${limit}`.execute(db);
  return r.rows.map((x) => ({ part: x.part, firstLine: x.first_line, lines: x.lines, data: x.data }));
}

export async function deleteFileRow(db: Db, id: string): Promise<boolean> {
  const r = await sql`delete from files where id = ${id}`.execute(db);
  return Number(r.numAffectedRows ?? 0) > 0;
}

/** The open batch that reads this file, if any. */
export async function batchUsingFile(db: Db, fileId: string): Promise<string | undefined> {
  const r = await sql<{ id: string }>`select id from batches where input_file_id = ${fileId} and ${isOpen} limit 1`.execute(db);
  return r.rows[0]?.id;
}

// ---- batches ----------------------------------------------------------------------------------

type RawBatch = {
  id: string; api_key_id: string | null; endpoint: string; input_file_id: string; completion_window: string; status: BatchStatus; metadata: Record<string, string> | null;
  allowed: string[] | null; errors: BatchRow['errors']; output_file_id: string | null; error_file_id: string | null; total: number; completed: number; failed: number;
  next_part: number; submitted: boolean; charged: string; lease_owner: string | null; worker_note: BatchWorkerNote | null; created_at: Date; in_progress_at: Date | null; finalizing_at: Date | null;
  completed_at: Date | null; failed_at: Date | null; expires_at: Date; expired_at: Date | null; cancelling_at: Date | null; cancelled_at: Date | null;
};
const toBatch = (r: RawBatch): BatchRow => ({
  id: r.id, apiKeyId: r.api_key_id, endpoint: r.endpoint, inputFileId: r.input_file_id, completionWindow: r.completion_window, status: r.status, metadata: r.metadata,
  allowed: r.allowed, errors: r.errors, outputFileId: r.output_file_id, errorFileId: r.error_file_id, total: r.total, completed: r.completed, failed: r.failed,
  nextPart: r.next_part, submitted: r.submitted, charged: BigInt(r.charged), leaseOwner: r.lease_owner, workerNote: r.worker_note, createdAt: r.created_at, inProgressAt: r.in_progress_at,
  finalizingAt: r.finalizing_at, completedAt: r.completed_at, failedAt: r.failed_at, expiresAt: r.expires_at, expiredAt: r.expired_at, cancellingAt: r.cancelling_at,
  cancelledAt: r.cancelled_at,
});
const BATCH_COLUMNS = sql`id, api_key_id, endpoint, input_file_id, completion_window, status, metadata, allowed, errors, output_file_id, error_file_id, total, completed, failed,
  next_part, submitted, charged::text as charged, lease_owner, worker_note, created_at, in_progress_at, finalizing_at, completed_at, failed_at, expires_at, expired_at, cancelling_at, cancelled_at`;

export type NewBatch = {
  id: string; apiKeyId: string | null; endpoint: string; inputFileId: string; completionWindow: string; metadata: Record<string, string> | null;
  allowed: string[] | null; total: number; expiresAt: Date;
};

export async function insertBatch(db: Db, b: NewBatch): Promise<BatchRow> {
  const r = await sql<RawBatch>`insert into batches (id, api_key_id, endpoint, input_file_id, completion_window, status, metadata, allowed, total, expires_at)
    values (${b.id}, ${b.apiKeyId}, ${b.endpoint}, ${b.inputFileId}, ${b.completionWindow}, 'validating', ${b.metadata === null ? null : JSON.stringify(b.metadata)}::jsonb,
            ${b.allowed === null ? null : JSON.stringify(b.allowed)}::jsonb, ${b.total}, ${b.expiresAt})
    returning ${BATCH_COLUMNS}`.execute(db);
  return toBatch(r.rows[0]!);
}

/** A batch of this key (keyId undefined: any key). */
export async function getBatchRow(db: Db, id: string, keyId?: string | null): Promise<BatchRow | undefined> {
  const scope = keyId === undefined ? sql`true` : ownedBy(keyId);
  const r = await sql<RawBatch>`select ${BATCH_COLUMNS} from batches where id = ${id} and ${scope}`.execute(db);
  return r.rows[0] && toBatch(r.rows[0]);
}

/** Batches of this key (undefined: every key's), newest first, after the batch `after`. */
export async function listBatchRows(db: Db, keyId: string | null | undefined, opts: { limit: number; after?: string }): Promise<BatchRow[]> {
  const scope = keyId === undefined ? sql`true` : ownedBy(keyId);
  const after = opts.after === undefined ? sql`true` : sql`(created_at, id) < (select created_at, id from batches where id = ${opts.after})`;
  const r = await sql<RawBatch>`select ${BATCH_COLUMNS} from batches where ${scope} and ${after} order by created_at desc, id desc limit ${opts.limit}`.execute(db);
  return r.rows.map(toBatch);
}

/** validating / in_progress -> cancelling; returns the batch as it is after (undefined: not this key's). */
export async function requestBatchCancel(db: Db, id: string, keyId: string | null | undefined): Promise<BatchRow | undefined> {
  await sql`update batches set status = 'cancelling', cancelling_at = now() where id = ${id} and status in ('validating', 'in_progress')`.execute(db);
  return getBatchRow(db, id, keyId);
}

/** Takes the lease of the oldest open batch whose lease is free or lapsed, for `leaseMs`; undefined when there is none. */
export async function claimBatch(db: Db, owner: string, leaseMs: number, except: readonly string[] = []): Promise<BatchRow | undefined> {
  const r = await sql<RawBatch>`
    update batches set lease_owner = ${owner}, lease_until = now() + make_interval(secs => ${leaseMs / 1000})
    where id = (select id from batches
                where ${isOpen}
                  and (lease_until is null or lease_until < now())
                  and not (id = any(${[...except]}::text[]))
                order by created_at limit 1 for update skip locked)
    returning ${BATCH_COLUMNS}`.execute(db);
  return r.rows[0] && toBatch(r.rows[0]);
}

/** Extends this owner's lease; false when it is no longer this owner's (another driver took over). */
export async function renewBatchLease(db: Db, id: string, owner: string, leaseMs: number): Promise<boolean> {
  const r = await sql`update batches set lease_until = now() + make_interval(secs => ${leaseMs / 1000}) where id = ${id} and lease_owner = ${owner}`.execute(db);
  return Number(r.numAffectedRows ?? 0) > 0;
}

export async function releaseBatchLease(db: Db, id: string, owner: string): Promise<void> {
  await sql`update batches set lease_owner = null, lease_until = null where id = ${id} and lease_owner = ${owner}`.execute(db);
}

export type BatchUpdate = Partial<{
  status: BatchStatus; errors: BatchRow['errors']; workerNote: BatchWorkerNote | null; outputFileId: string; errorFileId: string; total: number; completed: number; failed: number; nextPart: number; submitted: boolean;
  inProgressAt: 'now'; finalizingAt: 'now'; completedAt: 'now'; failedAt: 'now'; expiredAt: 'now'; cancelledAt: 'now';
}>;

/** Updates the batch if this owner holds its lease (and, with `from`, its status is one of them); false otherwise. */
export async function updateBatchRow(db: Db, id: string, owner: string, u: BatchUpdate, from?: readonly BatchStatus[]): Promise<boolean> {
  const sets = [
    ...(u.status !== undefined ? [sql`status = ${u.status}`] : []),
    ...(u.errors !== undefined ? [sql`errors = ${u.errors === null ? null : JSON.stringify(u.errors)}::jsonb`] : []),
    ...(u.workerNote !== undefined ? [sql`worker_note = ${u.workerNote === null ? null : JSON.stringify(u.workerNote)}::jsonb`] : []),
    ...(u.outputFileId !== undefined ? [sql`output_file_id = ${u.outputFileId}`] : []),
    ...(u.errorFileId !== undefined ? [sql`error_file_id = ${u.errorFileId}`] : []),
    ...(u.total !== undefined ? [sql`total = ${u.total}`] : []),
    ...(u.completed !== undefined ? [sql`completed = ${u.completed}`] : []),
    ...(u.failed !== undefined ? [sql`failed = ${u.failed}`] : []),
    ...(u.nextPart !== undefined ? [sql`next_part = ${u.nextPart}`] : []),
    ...(u.submitted !== undefined ? [sql`submitted = ${u.submitted}`] : []),
    ...(['inProgressAt', 'finalizingAt', 'completedAt', 'failedAt', 'expiredAt', 'cancelledAt'] as const)
      .filter((k) => u[k] === 'now')
      .map((k) => sql`${sql.ref(k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`))} = coalesce(${sql.ref(k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`))}, now())`),
  ];
  if (sets.length === 0) return true;
  const status = from === undefined ? sql`true` : sql`status = any(${[...from]}::text[])`;
  const r = await sql`update batches set ${sql.join(sets)} where id = ${id} and lease_owner = ${owner} and ${status}`.execute(db);
  return Number(r.numAffectedRows ?? 0) > 0;
}

// ---- lines and parts --------------------------------------------------------------------------

export type NewBatchLine = { line: number; customId: string | null; model: string | null; worker: string | null; callId: string | null; error: BatchLineRow['error']; local?: boolean };

/**
 * Inserts lines; a line already there (a part read again after a driver died) is left, and a
 * runnable line whose custom_id another runnable line of the batch has is not inserted. Returns
 * the lines inserted.
 */
export async function insertBatchLines(db: Db, batchId: string, lines: readonly NewBatchLine[]): Promise<Set<number>> {
  const out = new Set<number>();
  for (let i = 0; i < lines.length; i += 2000) {
    const chunk = lines.slice(i, i + 2000);
    const r = await sql<{ line: number }>`
      insert into batch_lines (batch_id, line, custom_id, model, worker, call_id, error, local)
      values ${sql.join(chunk.map((l) => sql`(${batchId}, ${l.line}, ${l.customId}, ${l.model}, ${l.worker}, ${l.callId}, ${l.error === null ? null : JSON.stringify(l.error)}::jsonb, ${l.local ?? false})`))}
      on conflict do nothing returning line`.execute(db);
    for (const x of r.rows) out.add(x.line);
  }
  return out;
}

/** The batch's lines from `first` to `last` (inclusive), in order. */
export async function getBatchLines(db: Db, batchId: string, first: number, last: number): Promise<BatchLineRow[]> {
  const r = await sql<{
    line: number; custom_id: string | null; model: string | null; worker: string | null; call_id: string | null; error: BatchLineRow['error'];
    local: boolean; answer_status: number | null; answer: Record<string, unknown> | null; answer_cost: string | null;
  }>`
    select line, custom_id, model, worker, call_id, error, local, answer_status, answer, answer_cost::text as answer_cost
    from batch_lines where batch_id = ${batchId} and line between ${first} and ${last} order by line`.execute(db);
  return r.rows.map((x) => ({
    line: x.line, customId: x.custom_id, model: x.model, worker: x.worker, callId: x.call_id, error: x.error, local: x.local,
    answer: x.answer_status === null ? null : { statusCode: x.answer_status, body: x.answer ?? {}, cost: BigInt(x.answer_cost ?? '0') },
  }));
}

/** Stores a local line's answer; the first one stored stays (false: the line had one already). */
export async function setBatchLineAnswer(db: Db, batchId: string, line: number, a: BatchLineAnswer): Promise<boolean> {
  const r = await sql`
    update batch_lines set answer_status = ${a.statusCode}, answer = ${JSON.stringify(a.body)}::jsonb, answer_cost = ${a.cost.toString()}::bigint
    where batch_id = ${batchId} and line = ${line} and local and answer_status is null`.execute(db);
  return Number(r.numAffectedRows ?? 0) > 0;
}

/** The status and cost of those of these local lines that have an answer (not the bodies). */
export async function getBatchLineAnswers(db: Db, batchId: string, lines: readonly number[]): Promise<Array<{ line: number; statusCode: number; cost: bigint }>> {
  if (lines.length === 0) return [];
  const r = await sql<{ line: number; answer_status: number; answer_cost: string }>`
    select line, answer_status, answer_cost::text as answer_cost from batch_lines
    where batch_id = ${batchId} and line = any(${[...lines]}::int[]) and answer_status is not null`.execute(db);
  return r.rows.map((x) => ({ line: x.line, statusCode: x.answer_status, cost: BigInt(x.answer_cost) }));
}

/** The line of this batch that runs under a custom_id (the first one given). */
export async function lineOfCustomIds(db: Db, batchId: string, customIds: readonly string[]): Promise<Map<string, number>> {
  if (customIds.length === 0) return new Map();
  const r = await sql<{ custom_id: string; line: number }>`select custom_id, line from batch_lines where batch_id = ${batchId} and error is null and custom_id = any(${[...customIds]}::text[])`.execute(db);
  return new Map(r.rows.map((x) => [x.custom_id, x.line]));
}

export async function addBatchPart(db: Db, batchId: string, p: { part: number; firstLine: number; lines: number }): Promise<void> {
  await sql`insert into batch_parts (batch_id, part, first_line, lines) values (${batchId}, ${p.part}, ${p.firstLine}, ${p.lines}) on conflict do nothing`.execute(db);
}

/**
 * Marks a part done with its counts and charges what its lines cost to the batch's key, once:
 * a part already done changes nothing (a driver that took over and saw it again).
 */
export async function finishBatchPart(db: Db, batchId: string, part: number, counts: { completed: number; failed: number; cost: bigint }): Promise<void> {
  const cost = counts.cost.toString();
  await sql`
    with p as (update batch_parts set done = true, completed = ${counts.completed}, failed = ${counts.failed}
               where batch_id = ${batchId} and part = ${part} and not done returning batch_id),
         b as (update batches set charged = charged + ${cost}::bigint where id = ${batchId} and exists (select 1 from p) returning api_key_id)
    update api_keys k set spent = k.spent + ${cost}::bigint from b where k.id = b.api_key_id and ${cost}::bigint <> 0`.execute(db);
}

export async function getBatchParts(db: Db, batchId: string, opts: { open?: boolean } = {}): Promise<BatchPartRow[]> {
  const open = opts.open ? sql`not done` : sql`true`;
  const r = await sql<{ part: number; first_line: number; lines: number; done: boolean; completed: number; failed: number }>`
    select part, first_line, lines, done, completed, failed from batch_parts where batch_id = ${batchId} and ${open} order by part`.execute(db);
  return r.rows.map((x) => ({ part: x.part, firstLine: x.first_line, lines: x.lines, done: x.done, completed: x.completed, failed: x.failed }));
}

/** Done parts' counts, summed. */
export async function batchPartTotals(db: Db, batchId: string): Promise<{ completed: number; failed: number }> {
  const r = await sql<{ completed: string | null; failed: string | null }>`select sum(completed) as completed, sum(failed) as failed from batch_parts where batch_id = ${batchId} and done`.execute(db);
  return { completed: Number(r.rows[0]?.completed ?? 0), failed: Number(r.rows[0]?.failed ?? 0) };
}

export type BatchWorkerStats = { worker: string | null; provider: string | null; lines: number; completed: number; failed: number; cost: bigint };

/**
 * Per worker (null: lines that did not run; a model the driver ran itself, e.g. fugu-ultra, under
 * its name): lines, answered, failed and their cost (picodollars).
 */
export async function batchWorkerStats(db: Db, batchId: string): Promise<BatchWorkerStats[]> {
  const r = await sql<{ worker: string | null; provider: string | null; lines: string; completed: string; failed: string; cost: string }>`
    select l.worker, min(c.provider) as provider, count(*) as lines, count(*) filter (where c.status = 'ok' or l.answer_status = 200) as completed,
           count(*) filter (where c.status = 'error' or l.error is not null or l.answer_status <> 200) as failed,
           ((coalesce(sum(c.cost), 0) * 1000000000000)::bigint + coalesce(sum(l.answer_cost), 0))::bigint::text as cost
    from batch_lines l left join chat_calls c on c.key = l.call_id
    where l.batch_id = ${batchId} group by l.worker order by l.worker nulls last`.execute(db);
  return r.rows.map((x) => ({ worker: x.worker, provider: x.provider, lines: Number(x.lines), completed: Number(x.completed), failed: Number(x.failed), cost: BigInt(x.cost) }));
}
