// The Batch API (OpenAI's files and batches; libs/batch): POST/GET/DELETE /v1/files,
// GET /v1/files/{id}/content, POST/GET /v1/batches, GET /v1/batches/{id},
// POST /v1/batches/{id}/cancel. Behind the same API keys as the rest: a key sees only its own
// files and batches (another key's: 404, never their content), a batch runs on the key's workers
// and is charged to it, and a key at its spend limit cannot start one. An upload streams into
// Postgres a part at a time (never whole in memory); its limits are gateway.filesMaxBytes and
// gateway.batchMaxLines.
import { Readable } from 'node:stream';
import multipart from '@fastify/multipart';
import type { FastifyInstance } from 'fastify';
import {
  BatchApiError, batchObject, cancelBatch, createBatch, fileContent, FileLimitError, fileObject, getBatch, listBatches, listPage, storeUpload, type BatchDriver, type FileLimits,
} from '@fugu/batch';
import { batchUsingFile, deleteFileRow, getFileRow, listFileRows, type Db, type FileRow } from '@fugu/db';
import type { GatewayContext } from '../context.ts';
import { GatewayError } from '../errors.ts';

export type BatchesPluginOptions = { ctx: GatewayContext; db: Db; driver: BatchDriver | undefined; limits: FileLimits };

const FILE_PURPOSES = ['batch'] as const;

export async function batchesPlugin(app: FastifyInstance, { ctx, db, driver, limits }: BatchesPluginOptions): Promise<void> {
  await app.register(multipart, { limits: { fileSize: limits.maxBytes + 1, files: 1, fields: 8, fieldSize: 4096, parts: 10 }, throwFileSizeLimit: false });
  const keyOf = (req: Parameters<typeof ctx.callerOf>[0]) => ctx.callerOf(req).key?.id ?? null;
  const fileNotFound = (id: string) => new GatewayError(404, `No such File object: ${id}`, { param: 'file_id', code: 'file_not_found' });
  const ownFile = async (id: string, keyId: string | null): Promise<FileRow> => {
    const f = await getFileRow(db, id, keyId);
    if (!f) throw fileNotFound(id);
    return f;
  };

  app.post('/v1/files', async (request, reply) => {
    const keyId = keyOf(request);
    if (!request.isMultipart()) throw new GatewayError(400, 'POST /v1/files takes multipart/form-data with the fields "file" and "purpose"', { code: 'invalid_request_body' });
    let purpose: string | undefined;
    let stored: FileRow | undefined;
    const parts = request.parts();
    try {
      for await (const part of parts) {
        if (part.type === 'field') {
          if (part.fieldname === 'purpose') purpose = String(part.value);
          continue;
        }
        if (part.fieldname !== 'file') throw new GatewayError(400, `unknown file field "${part.fieldname}" (send the file as "file")`, { param: part.fieldname, code: 'invalid_value' });
        if (stored) throw new GatewayError(400, 'one file per upload', { param: 'file', code: 'invalid_value' });
        if (purpose !== undefined && !(FILE_PURPOSES as readonly string[]).includes(purpose)) throw badPurpose(purpose);
        stored = await storeUpload(db, part.file, { apiKeyId: keyId, purpose: purpose ?? 'batch', filename: part.filename || 'upload.jsonl' }, limits);
      }
    } catch (e) {
      if (stored) await deleteFileRow(db, stored.id);
      if (e instanceof FileLimitError) {
        // the rest of the request read and dropped: the client gets the answer, not a reset
        for await (const part of parts) if (part.type === 'file') part.file.resume();
        throw new GatewayError(e.status, e.message, { param: 'file', code: e.code });
      }
      throw e;
    }
    if (!stored) throw new GatewayError(400, 'file: missing (send the JSONL file as the multipart field "file")', { param: 'file', code: 'missing_required_parameter' });
    if (purpose === undefined || !(FILE_PURPOSES as readonly string[]).includes(purpose)) {
      await deleteFileRow(db, stored.id);
      throw purpose === undefined ? new GatewayError(400, 'purpose: missing (the gateway takes files with purpose "batch")', { param: 'purpose', code: 'missing_required_parameter' }) : badPurpose(purpose);
    }
    return reply.send(fileObject(stored));
  });

  app.get<{ Querystring: { purpose?: string; limit?: string; after?: string } }>('/v1/files', async (request) => {
    const q = request.query;
    const limit = q.limit === undefined ? 100 : Number(q.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new GatewayError(400, `limit: a whole number from 1 to 10000, got ${JSON.stringify(q.limit)}`, { param: 'limit', code: 'invalid_value' });
    const keyId = keyOf(request);
    if (q.after !== undefined) await ownFile(q.after, keyId);
    const rows = await listFileRows(db, keyId, { limit: limit + 1, ...(q.purpose !== undefined && { purpose: q.purpose }), ...(q.after !== undefined && { after: q.after }) });
    return listPage(rows, limit, fileObject);
  });

  app.get<{ Params: { id: string } }>('/v1/files/:id', async (request) => fileObject(await ownFile(request.params.id, keyOf(request))));

  app.get<{ Params: { id: string } }>('/v1/files/:id/content', async (request, reply) => {
    const f = await ownFile(request.params.id, keyOf(request));
    return reply.header('content-type', 'application/octet-stream').header('content-length', String(f.bytes)).send(Readable.from(fileContent(db, f.id)));
  });

  app.delete<{ Params: { id: string } }>('/v1/files/:id', async (request) => {
    const f = await ownFile(request.params.id, keyOf(request));
    const batch = await batchUsingFile(db, f.id);
    if (batch) throw new GatewayError(409, `file ${f.id} is the input of batch ${batch}, which is still running (cancel it first)`, { param: 'file_id', code: 'file_in_use' });
    await deleteFileRow(db, f.id);
    return { id: f.id, object: 'file', deleted: true };
  });

  app.post('/v1/batches', async (request) => {
    const caller = ctx.callerOf(request);
    ctx.checkQuota(caller);
    const allowed = caller.allowed.length === ctx.poolNames.length ? null : caller.allowed;
    const b = await inApiTerms(() => createBatch(db, caller.key?.id ?? null, allowed, request.body));
    driver?.poke();
    return batchObject(b);
  });

  app.get<{ Querystring: { limit?: string; after?: string } }>('/v1/batches', async (request) => inApiTerms(() => listBatches(db, keyOf(request), request.query)));

  app.get<{ Params: { id: string } }>('/v1/batches/:id', async (request) => batchObject(await inApiTerms(() => getBatch(db, request.params.id, keyOf(request)))));

  app.post<{ Params: { id: string } }>('/v1/batches/:id/cancel', async (request) => {
    const b = await inApiTerms(() => cancelBatch(db, request.params.id, keyOf(request)));
    driver?.poke();
    return batchObject(b);
  });
}

function badPurpose(purpose: string): GatewayError {
  return new GatewayError(400, `purpose: ${JSON.stringify(purpose)} is not supported; the gateway takes files with purpose "batch"`, { param: 'purpose', code: 'invalid_value' });
}

async function inApiTerms<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    if (e instanceof BatchApiError) throw new GatewayError(e.status, e.message, { param: e.param, code: e.code });
    throw e;
  }
}
