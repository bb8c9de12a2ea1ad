// The Batch API's objects and requests as OpenAI defines them (the file object, the batch object
// with its status, request_counts and timestamps in Unix seconds), and the checks of a new batch.
import { getBatchRow, getFileRow, insertBatch, listBatchRows, OPEN_BATCH_STATUSES, requestBatchCancel, type BatchRow, type Db, type FileRow } from '@fugu/db';
import { hasNonBlankLine, newId } from './files.ts';

/** Endpoints a batch may run (each line's `url` is the batch's). */
export const BATCH_ENDPOINTS = ['/v1/chat/completions', '/v1/responses'] as const;
export const COMPLETION_WINDOWS = { '24h': 24 * 3600 * 1000 } as const;

/** A refusal of the Batch API: its HTTP status, OpenAI error code and the parameter it names. */
export class BatchApiError extends Error {
  readonly status: 400 | 404 | 409 | 429;
  readonly code: string;
  readonly param: string | null;
  constructor(status: 400 | 404 | 409 | 429, message: string, code: string, param: string | null = null) {
    super(message);
    this.name = 'BatchApiError';
    this.status = status;
    this.code = code;
    this.param = param;
  }
}

const secs = (d: Date | null): number | null => (d === null ? null : Math.floor(d.getTime() / 1000));

export function fileObject(f: FileRow): Record<string, unknown> {
  return { id: f.id, object: 'file', bytes: f.bytes, created_at: secs(f.createdAt), expires_at: null, filename: f.filename, purpose: f.purpose, status: 'processed', status_details: null };
}

export function batchObject(b: BatchRow): Record<string, unknown> {
  return {
    id: b.id,
    object: 'batch',
    endpoint: b.endpoint,
    errors: b.errors === null ? null : { object: 'list', data: b.errors },
    input_file_id: b.inputFileId,
    completion_window: b.completionWindow,
    status: b.status,
    output_file_id: b.outputFileId,
    error_file_id: b.errorFileId,
    created_at: secs(b.createdAt),
    in_progress_at: secs(b.inProgressAt),
    expires_at: secs(b.expiresAt),
    finalizing_at: secs(b.finalizingAt),
    completed_at: secs(b.completedAt),
    failed_at: secs(b.failedAt),
    expired_at: secs(b.expiredAt),
    cancelling_at: secs(b.cancellingAt),
    cancelled_at: secs(b.cancelledAt),
    request_counts: { total: b.total, completed: b.completed, failed: b.failed },
    metadata: b.metadata,
    ...(b.workerNote && { fugu: batchWorkerStatus(b) }),
  };
}

/**
 * The batch object's `fugu` extension (OpenAI clients read past it): whether its lines wait for a
 * provider worker (on which queues, since when, what to do: `message`), and the gateway's own
 * provider workers that run them when none was connected. Absent until the driver has had
 * something to say; an ended batch waits for nothing.
 */
export function batchWorkerStatus(b: BatchRow): Record<string, unknown> {
  const n = b.workerNote!;
  const waiting = n.waiting && (OPEN_BATCH_STATUSES as readonly string[]).includes(b.status);
  return {
    waiting_for_worker: waiting,
    waiting_queues: waiting ? n.queues : [],
    waiting_since: waiting && n.since !== null ? Math.floor(Date.parse(n.since) / 1000) : null,
    local_workers: n.local && { count: n.local.workers, providers: n.local.providers, started_at: Math.floor(Date.parse(n.local.startedAt) / 1000) },
    message: n.message,
  };
}

/** `POST /v1/batches`'s body, checked field by field. */
export function parseBatchRequest(body: unknown): { inputFileId: string; endpoint: string; completionWindow: keyof typeof COMPLETION_WINDOWS; metadata: Record<string, string> | null } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new BatchApiError(400, 'the body must be a JSON object', 'invalid_request_body');
  const o = body as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!['input_file_id', 'endpoint', 'completion_window', 'metadata', 'output_expires_after'].includes(k)) throw new BatchApiError(400, `${k}: unknown parameter`, 'unknown_parameter', k);
  }
  if (typeof o.input_file_id !== 'string' || o.input_file_id === '') throw new BatchApiError(400, 'input_file_id: required, the id of a file uploaded with purpose "batch"', 'missing_required_parameter', 'input_file_id');
  if (typeof o.endpoint !== 'string') throw new BatchApiError(400, `endpoint: required, one of ${BATCH_ENDPOINTS.join(', ')}`, 'missing_required_parameter', 'endpoint');
  if (!(BATCH_ENDPOINTS as readonly string[]).includes(o.endpoint)) {
    throw new BatchApiError(400, `endpoint: ${JSON.stringify(o.endpoint)} is not supported for batches; supported: ${BATCH_ENDPOINTS.join(', ')}`, 'invalid_value', 'endpoint');
  }
  if (typeof o.completion_window !== 'string' || !(o.completion_window in COMPLETION_WINDOWS)) {
    throw new BatchApiError(400, `completion_window: ${JSON.stringify(o.completion_window)} is not supported; supported: ${Object.keys(COMPLETION_WINDOWS).join(', ')}`, 'invalid_value', 'completion_window');
  }
  let metadata: Record<string, string> | null = null;
  if (o.metadata !== undefined && o.metadata !== null) {
    if (typeof o.metadata !== 'object' || Array.isArray(o.metadata)) throw new BatchApiError(400, 'metadata: must be an object of string values', 'invalid_value', 'metadata');
    const entries = Object.entries(o.metadata as Record<string, unknown>);
    if (entries.length > 16) throw new BatchApiError(400, `metadata: at most 16 pairs, got ${entries.length}`, 'invalid_value', 'metadata');
    for (const [k, v] of entries) {
      if (k.length > 64) throw new BatchApiError(400, `metadata: key ${JSON.stringify(k.slice(0, 20))}... is longer than 64 characters`, 'invalid_value', 'metadata');
      if (typeof v !== 'string' || v.length > 512) throw new BatchApiError(400, `metadata.${k}: must be a string of at most 512 characters`, 'invalid_value', `metadata.${k}`);
    }
    metadata = o.metadata as Record<string, string>;
  }
  return { inputFileId: o.input_file_id, endpoint: o.endpoint, completionWindow: o.completion_window as keyof typeof COMPLETION_WINDOWS, metadata };
}

const notFound = (what: 'file' | 'batch', id: string) => new BatchApiError(404, `No such ${what}: ${id}`, `${what}_not_found`, what === 'file' ? 'input_file_id' : 'batch_id');

/** A new batch of this key over its file (a missing or another key's file: 404, never its content). */
export async function createBatch(db: Db, keyId: string | null, allowed: string[] | null, body: unknown): Promise<BatchRow> {
  const r = parseBatchRequest(body);
  const f = await getFileRow(db, r.inputFileId, keyId);
  if (!f) throw notFound('file', r.inputFileId);
  if (f.purpose !== 'batch') throw new BatchApiError(400, `input_file_id: file ${f.id} has purpose "${f.purpose}"; a batch reads a file uploaded with purpose "batch"`, 'invalid_value', 'input_file_id');
  if (f.lines === 0 || !(await hasNonBlankLine(db, f.id))) {
    throw new BatchApiError(400, `input_file_id: file ${f.id} has no requests (it is empty${f.lines === 0 ? '' : ', or has only blank lines'})`, 'invalid_value', 'input_file_id');
  }
  return insertBatch(db, {
    id: newId('batch_'), apiKeyId: keyId, endpoint: r.endpoint, inputFileId: f.id, completionWindow: r.completionWindow, metadata: r.metadata, allowed,
    total: f.lines, expiresAt: new Date(Date.now() + COMPLETION_WINDOWS[r.completionWindow]),
  });
}

export async function getBatch(db: Db, id: string, keyId: string | null): Promise<BatchRow> {
  const b = await getBatchRow(db, id, keyId);
  if (!b) throw notFound('batch', id);
  return b;
}

/** Cancels an open batch (it goes to cancelling, then cancelled; asked again meanwhile, the same); a batch that has ended, cancelled included: 409. */
export async function cancelBatch(db: Db, id: string, keyId: string | null): Promise<BatchRow> {
  const b = await requestBatchCancel(db, id, keyId);
  if (!b) throw notFound('batch', id);
  if (b.status !== 'cancelling') {
    throw new BatchApiError(409, `batch ${id} is ${b.status}: only a validating or in-progress batch can be cancelled`, 'batch_not_cancellable');
  }
  return b;
}

/** A page of this key's batches, newest first (`after`: the last id of the page before). */
export async function listBatches(db: Db, keyId: string | null, q: { limit?: unknown; after?: unknown }): Promise<Record<string, unknown>> {
  const limit = q.limit === undefined ? 20 : Number(q.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new BatchApiError(400, `limit: a whole number from 1 to 100, got ${JSON.stringify(q.limit)}`, 'invalid_value', 'limit');
  if (q.after !== undefined && typeof q.after !== 'string') throw new BatchApiError(400, 'after: a batch id', 'invalid_value', 'after');
  if (typeof q.after === 'string' && !(await getBatchRow(db, q.after, keyId))) throw notFound('batch', q.after);
  const rows = await listBatchRows(db, keyId, { limit: limit + 1, ...(typeof q.after === 'string' && { after: q.after }) });
  return listPage(rows, limit, batchObject);
}

/** OpenAI's list object from up to limit + 1 rows (one more than the page: there are more). */
export function listPage<T extends { id: string }>(rows: readonly T[], limit: number, toObject: (r: T) => Record<string, unknown>): Record<string, unknown> {
  const page = rows.slice(0, limit);
  return { object: 'list', data: page.map(toObject), first_id: page[0]?.id ?? null, last_id: page.at(-1)?.id ?? null, has_more: rows.length > limit };
}
