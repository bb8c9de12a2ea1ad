// Files of the Batch API in Postgres, a part at a time (migration 0013_batches): an upload is cut
// at line ends into parts of about `partBytes` as it streams in, so neither writing nor reading a
// file ever holds it whole; a batch's driver reads its input part by part, each part's lines
// numbered from the file's first line (1).
import { randomBytes } from 'node:crypto';
import { isUtf8 } from 'node:buffer';
import { addFilePart, createFileRow, deleteFileRow, finishFileRow, getFileParts, getFileRow, type Db, type FileRow } from '@fugu/db';

export const FILE_LIMITS = {
  /** bytes of one uploaded file (OpenAI's Batch API takes 200 MB) */
  maxBytes: 512 * 1024 * 1024,
  /** lines of one batch input file */
  maxLines: 1_000_000,
  /** one line (one request) */
  maxLineBytes: 8 * 1024 * 1024,
  /** a part is cut at the first line end past this many bytes */
  partBytes: 1024 * 1024,
} as const;

const NEWLINE = Buffer.from('\n');
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);

export type FileLimits = { maxBytes: number; maxLines: number; maxLineBytes: number; partBytes: number };

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** `<prefix>` + 24 random base62 characters (OpenAI's id shapes: `file-...`, `batch_...`). */
export function newId(prefix: string): string {
  const b = randomBytes(24);
  let s = prefix;
  for (const x of b) s += BASE62[x % 62];
  return s;
}

/** An upload past a limit: the 413/400 the API answers, the file removed. */
export class FileLimitError extends Error {
  readonly status: 400 | 413;
  readonly code: string;
  constructor(message: string, status: 400 | 413, code: string) {
    super(message);
    this.name = 'FileLimitError';
    this.status = status;
    this.code = code;
  }
}

/** Writes lines into a new file part by part (output and error files). */
export class FileWriter {
  readonly id: string;
  readonly #db: Db;
  readonly #partBytes: number;
  #chunks: Buffer[] = [];
  #size = 0;
  #part = 0;
  #lines = 0;
  #partFirst = 1;
  #partLines = 0;
  #bytes = 0;
  #created: Promise<void>;

  constructor(db: Db, meta: { id?: string; apiKeyId: string | null; purpose: string; filename: string }, partBytes: number = FILE_LIMITS.partBytes) {
    this.#db = db;
    this.#partBytes = partBytes;
    this.id = meta.id ?? newId('file-');
    this.#created = createFileRow(db, { id: this.id, apiKeyId: meta.apiKeyId, purpose: meta.purpose, filename: meta.filename });
    // its failure surfaces where it is awaited (a part, finish)
    this.#created.catch(() => {});
  }

  get lines(): number {
    return this.#lines;
  }

  /** One line (without its newline): text, or bytes kept as they are (an upload's). */
  async line(text: string | Buffer): Promise<void> {
    const b = typeof text === 'string' ? Buffer.from(`${text}\n`, 'utf8') : Buffer.concat([text, NEWLINE]);
    this.#chunks.push(b);
    this.#size += b.length;
    this.#lines++;
    this.#partLines++;
    if (this.#size >= this.#partBytes) await this.#flush();
  }

  async #flush(): Promise<void> {
    if (this.#partLines === 0) return;
    await this.#created;
    const data = Buffer.concat(this.#chunks);
    await addFilePart(this.#db, this.id, { part: this.#part++, firstLine: this.#partFirst, lines: this.#partLines, data });
    this.#bytes += data.length;
    this.#partFirst += this.#partLines;
    this.#partLines = 0;
    this.#chunks = [];
    this.#size = 0;
  }

  /** Writes what is left and marks the file complete. */
  async finish(): Promise<string> {
    await this.#flush();
    await this.#created;
    await finishFileRow(this.#db, this.id, this.#bytes, this.#lines);
    return this.id;
  }

  /** Removes what was written (an upload refused or broken off). */
  async discard(): Promise<void> {
    await this.#created.catch(() => {});
    await deleteFileRow(this.#db, this.id);
  }
}

/**
 * Stores an uploaded file from its byte stream: cut into parts at line ends (a last line without
 * a newline counts), never whole in memory. Past a limit the file is removed and a FileLimitError
 * thrown (the stream is not read further). Empty lines are kept as lines (a batch reports them).
 */
export async function storeUpload(
  db: Db,
  input: AsyncIterable<Buffer | string>,
  meta: { apiKeyId: string | null; purpose: string; filename: string },
  limits: FileLimits = FILE_LIMITS,
): Promise<FileRow> {
  const w = new FileWriter(db, meta, limits.partBytes);
  const it = input[Symbol.asyncIterator]();
  try {
    let pending: Buffer = Buffer.alloc(0);
    let bytes = 0;
    for (let n = await it.next(); !n.done; n = await it.next()) {
      const chunk = n.value;
      const b = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
      bytes += b.length;
      if (bytes > limits.maxBytes) throw new FileLimitError(`file: larger than ${limits.maxBytes} bytes (the limit of one upload, FUGU_FILES_MAX_BYTES)`, 413, 'file_too_large');
      pending = pending.length === 0 ? b : Buffer.concat([pending, b]);
      let start = 0;
      for (let nl = pending.indexOf(10, start); nl >= 0; nl = pending.indexOf(10, start)) {
        await addLine(w, pending.subarray(start, nl), limits);
        start = nl + 1;
      }
      pending = start === 0 ? pending : Buffer.from(pending.subarray(start));
      if (pending.length > limits.maxLineBytes) throw new FileLimitError(`file: line ${w.lines + 1} is longer than ${limits.maxLineBytes} bytes`, 400, 'line_too_long');
    }
    if (pending.length > 0) await addLine(w, pending, limits);
    await w.finish();
  } catch (e) {
    await w.discard().catch(() => {});
    // a refused upload is read to its end (and dropped), so the client gets the answer, not a reset
    if (e instanceof FileLimitError) for (let n = await it.next().catch(() => ({ done: true as const, value: undefined })); !n.done; n = await it.next());
    throw e;
  }
  const f = await getFileRow(db, w.id, undefined);
  if (!f) throw new Error(`file ${w.id} is gone after its upload`);
  return f;
}

async function addLine(w: FileWriter, raw: Buffer, limits: FileLimits): Promise<void> {
  if (w.lines + 1 > limits.maxLines) throw new FileLimitError(`file: more than ${limits.maxLines} lines (the limit of one batch file, FUGU_BATCH_MAX_LINES)`, 400, 'too_many_lines');
  if (raw.length > limits.maxLineBytes) throw new FileLimitError(`file: line ${w.lines + 1} is longer than ${limits.maxLineBytes} bytes`, 400, 'line_too_long');
  // a CRLF file's lines without their CR; the bytes as sent (invalid UTF-8 is its line's error when a batch reads it)
  const end = raw.length > 0 && raw[raw.length - 1] === 13 ? raw.length - 1 : raw.length;
  await w.line(raw.subarray(0, end));
}

/** A part of a file: its lines (numbered from firstLine), and why those that are not UTF-8 cannot be read (by index in `lines`). */
export type FilePartLines = { part: number; firstLine: number; lines: string[]; invalid?: Map<number, string> };

/**
 * A file's parts from `from` on, each with its lines (numbered), a few parts per query. A UTF-8
 * byte order mark before the first line is not part of it; a line that is not valid UTF-8 is in
 * `invalid` (its text has U+FFFD in place of the bad bytes).
 */
export async function* readParts(db: Db, fileId: string, from = 0): AsyncGenerator<FilePartLines> {
  for (let next = from; ; ) {
    const parts = await getFileParts(db, fileId, next, 4);
    if (parts.length === 0) return;
    for (const p of parts) {
      const data = p.part === 0 && p.data.subarray(0, 3).equals(BOM) ? p.data.subarray(3) : p.data;
      const text = data.toString('utf8');
      const lines = text.endsWith('\n') ? text.slice(0, -1).split('\n') : text.split('\n');
      yield { part: p.part, firstLine: p.firstLine, lines, ...(!isUtf8(data) && { invalid: invalidLines(data) }) };
      next = p.part + 1;
    }
  }
}

/** The lines of a part that are not valid UTF-8 (index -> what is wrong, naming the byte offset in the line). */
function invalidLines(data: Buffer): Map<number, string> {
  const out = new Map<number, string>();
  for (let i = 0, start = 0; start < data.length; i++) {
    const nl = data.indexOf(10, start);
    const line = data.subarray(start, nl < 0 ? data.length : nl);
    const at = invalidUtf8At(line);
    if (at >= 0) out.set(i, `not valid UTF-8 at byte offset ${at} of the line (byte 0x${line[at]!.toString(16).padStart(2, '0')}); a batch file is UTF-8 text`);
    if (nl < 0) break;
    start = nl + 1;
  }
  return out;
}

/** The offset of the first byte that does not begin a valid UTF-8 character (RFC 3629: no overlongs, surrogates or code points past U+10FFFF); -1: valid. */
function invalidUtf8At(b: Uint8Array): number {
  for (let i = 0; i < b.length; ) {
    const c = b[i]!;
    if (c < 0x80) {
      i++;
      continue;
    }
    const n = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : 0;
    // (a lead byte without its n continuation bytes before the end: invalid)
    if (n === 0 || i + n >= b.length) return i;
    // the second byte's range excludes overlongs (e0, f0), surrogates (ed) and past U+10FFFF (f4)
    const lo = c === 0xe0 ? 0xa0 : c === 0xf0 ? 0x90 : 0x80;
    const hi = c === 0xed ? 0x9f : c === 0xf4 ? 0x8f : 0xbf;
    if (b[i + 1]! < lo || b[i + 1]! > hi) return i;
    for (let k = 2; k <= n; k++) if ((b[i + k]! & 0xc0) !== 0x80) return i;
    i += n + 1;
  }
  return -1;
}

/** Whether a file has a line that is not blank (a file of only blank lines has no request). */
export async function hasNonBlankLine(db: Db, fileId: string): Promise<boolean> {
  for (let next = 0; ; next++) {
    const [p] = await getFileParts(db, fileId, next, 1);
    if (!p) return false;
    const data = p.part === 0 && p.data.subarray(0, 3).equals(BOM) ? p.data.subarray(3) : p.data;
    for (const x of data) if (x !== 0x20 && x !== 0x09 && x !== 0x0a && x !== 0x0d) return true;
  }
}

/** A file's bytes, part by part (GET /v1/files/{id}/content). */
export async function* fileContent(db: Db, fileId: string): AsyncGenerator<Buffer> {
  for (let next = 0; ; ) {
    const parts = await getFileParts(db, fileId, next, 4);
    if (parts.length === 0) return;
    for (const p of parts) {
      yield p.data;
      next = p.part + 1;
    }
  }
}
