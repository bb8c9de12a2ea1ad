// The fugu routing-dataset format: JSONL, one item a line (see ../README.md).
// Reading streams line by line (memory stays flat however large the file); every bad line
// is reported with its file, line number and field.

import { createHash } from 'node:crypto';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { createWriteStream } from 'node:fs';
import { basename, dirname, extname, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { z } from 'zod';
import { InputError, type DatasetItem, type RecordedOutcome } from '@fugu/core';
import { formatPath } from './normalize.ts';

/** A loaded dataset: items in file order, the workers that have recorded scores, and a content hash. */
export type Dataset = {
  name: string;
  /** where it came from: an absolute file or directory path */
  source: string;
  items: DatasetItem[];
  /** worker names seen in `scores`, in order of first appearance */
  workers: string[];
  /** sha256 (hex) of the items in the canonical fugu JSONL form: equal data, equal hash */
  contentHash: string;
};

const nonEmpty = (what: string) =>
  z
    .string({ error: (iss) => (iss.input === undefined ? `missing ${what}` : `${what} must be a string`) })
    .min(1, `${what} must not be empty`);

const score = z
  .number({ error: 'score must be a number' })
  .min(0, 'score must be in [0, 1]')
  .max(1, 'score must be in [0, 1]');

const tokenCount = z.number({ error: 'token count must be a number' }).int('token count must be an integer').min(0, 'token count must be >= 0');

const workerName = z.string().min(1, 'worker name must not be empty');

/** Schema of one line of the fugu routing-dataset format. Unknown keys are rejected (typos would lose data). */
export const datasetLineSchema = z
  .strictObject({
    id: nonEmpty('id'),
    task: nonEmpty('task'),
    prompt: nonEmpty('prompt'),
    // numbers are accepted for convenience (`"ground_truth": 42`) and kept as their decimal text
    ground_truth: z.union([z.string(), z.number()], { error: 'ground_truth must be a string' }).nullish(),
    metric: z.string({ error: 'metric must be a string' }).min(1, 'metric must not be empty').nullish(),
    choices: z
      .strictObject({
        labels: z.array(z.string(), { error: 'choices.labels must be an array of strings' }).min(1, 'choices need at least one label'),
        texts: z.array(z.string(), { error: 'choices.texts must be an array of strings' }),
      })
      .refine((c) => c.labels.length === c.texts.length, { error: 'choices.labels and choices.texts must have the same length', path: ['texts'] })
      .nullish(),
    split: z.string({ error: 'split must be a string' }).min(1, 'split must not be empty').nullish(),
    scores: z.record(workerName, score).nullish(),
    tokens: z
      .record(
        workerName,
        z
          .strictObject({ in: tokenCount.optional(), out: tokenCount.optional() })
          .refine((t) => t.in !== undefined || t.out !== undefined, 'tokens need "in" or "out"'),
      )
      .nullish(),
    answers: z.record(workerName, z.string({ error: 'answer must be a string' })).nullish(),
  })
  .superRefine((line, ctx) => {
    // a recorded outcome needs a score: tokens/answers of a worker without one would be lost
    for (const key of ['tokens', 'answers'] as const) {
      for (const w of Object.keys(line[key] ?? {})) {
        if (line.scores?.[w] === undefined) ctx.addIssue({ code: 'custom', path: [key, w], message: `worker "${w}" has ${key} but no score in scores` });
      }
    }
  });

export type DatasetLine = z.input<typeof datasetLineSchema>;
type ParsedLine = z.output<typeof datasetLineSchema>;

/** Where a line came from, for error messages. */
export type LineSource = { file?: string; line?: number };

function issueError(issue: z.core.$ZodIssue, where: LineSource, prefix: ReadonlyArray<PropertyKey> = []): InputError {
  if (issue.code === 'unrecognized_keys') {
    const keys = issue.keys;
    return new InputError(`unknown field${keys.length > 1 ? 's' : ''} ${keys.map((k) => JSON.stringify(k)).join(', ')}`, {
      ...where,
      field: formatPath([...prefix, ...issue.path, keys[0]!]),
    });
  }
  return new InputError(issue.message, { ...where, field: formatPath([...prefix, ...issue.path]) || undefined });
}

/** Validate one parsed JSON value as a dataset line and convert it to a DatasetItem. */
export function parseDatasetLine(value: unknown, where: LineSource = {}): DatasetItem {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InputError('each line must be a JSON object', where);
  }
  const r = datasetLineSchema.safeParse(value);
  if (!r.success) throw issueError(r.error.issues[0]!, where);
  return lineToItem(r.data);
}

function lineToItem(l: ParsedLine): DatasetItem {
  const item: DatasetItem = { id: l.id, task: l.task, prompt: l.prompt };
  if (l.ground_truth != null) item.groundTruth = String(l.ground_truth);
  if (l.metric != null) item.metric = l.metric;
  if (l.choices != null) item.choices = { labels: l.choices.labels, texts: l.choices.texts };
  if (l.split != null) item.sourceSplit = l.split;
  if (l.scores != null && Object.keys(l.scores).length > 0) {
    const recorded: Record<string, RecordedOutcome> = {};
    for (const [w, s] of Object.entries(l.scores)) {
      const o: RecordedOutcome = { score: s };
      const t = l.tokens?.[w];
      if (t?.in !== undefined) o.tokensIn = t.in;
      if (t?.out !== undefined) o.tokensOut = t.out;
      const a = l.answers?.[w];
      if (a !== undefined) o.answer = a;
      recorded[w] = o;
    }
    item.recorded = recorded;
  }
  return item;
}

/** A DatasetItem in the file format, keys in canonical order (what write and the content hash use). */
export function itemToLine(item: DatasetItem): DatasetLine {
  const line: DatasetLine = { id: item.id, task: item.task, prompt: item.prompt };
  if (item.groundTruth !== undefined) line.ground_truth = item.groundTruth;
  if (item.metric !== undefined) line.metric = item.metric;
  if (item.choices !== undefined) line.choices = { labels: item.choices.labels, texts: item.choices.texts };
  if (item.sourceSplit !== undefined) line.split = item.sourceSplit;
  const rec = item.recorded;
  if (rec !== undefined && Object.keys(rec).length > 0) {
    const scores: Record<string, number> = {};
    const tokens: Record<string, { in?: number; out?: number }> = {};
    const answers: Record<string, string> = {};
    for (const [w, o] of Object.entries(rec)) {
      scores[w] = o.score;
      if (o.tokensIn !== undefined || o.tokensOut !== undefined) {
        const t: { in?: number; out?: number } = {};
        if (o.tokensIn !== undefined) t.in = o.tokensIn;
        if (o.tokensOut !== undefined) t.out = o.tokensOut;
        tokens[w] = t;
      }
      if (o.answer !== undefined) answers[w] = o.answer;
    }
    line.scores = scores;
    if (Object.keys(tokens).length > 0) line.tokens = tokens;
    if (Object.keys(answers).length > 0) line.answers = answers;
  }
  return line;
}

function notFound(file: string, e: unknown): never {
  const code = (e as { code?: string }).code;
  if (code === 'ENOENT') throw new InputError('no such file', { file }, { cause: e });
  if (code === 'EISDIR') throw new InputError('is a directory, expected a .jsonl file', { file }, { cause: e });
  throw new InputError(`cannot read: ${(e as Error).message}`, { file }, { cause: e });
}

/**
 * Stream the items of a fugu JSONL file in order. Blank lines are skipped; the first bad line
 * (malformed JSON, a missing or invalid field, a duplicate id) throws an InputError naming file,
 * line and field. Only the ids seen so far are kept in memory.
 */
export async function* readDatasetJsonl(path: string): AsyncGenerator<DatasetItem> {
  const seen = new Map<string, number>();
  let lineNo = 0;
  for await (const raw of readLines(path)) {
    lineNo++;
    const text = lineNo === 1 ? raw.replace(/^\uFEFF/, '') : raw;
    if (text.trim() === '') continue;
    const where = { file: path, line: lineNo };
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (e) {
      throw new InputError(`malformed JSON: ${(e as Error).message}`, where, { cause: e });
    }
    const item = parseDatasetLine(value, where);
    const first = seen.get(item.id);
    if (first !== undefined) throw new InputError(`duplicate id ${JSON.stringify(item.id)} (first on line ${first})`, { ...where, field: 'id' });
    seen.set(item.id, lineNo);
    yield item;
  }
}

/**
 * Lines of a UTF-8 file split on "\n" only (a trailing "\r" dropped). node:readline also breaks
 * lines at U+2028/U+2029, which JSON strings may hold raw (LLMRouter's questions do).
 */
export async function* readLines(path: string): AsyncGenerator<string> {
  let fh;
  try {
    fh = await open(path, 'r');
  } catch (e) {
    notFound(path, e);
  }
  const stream = fh.createReadStream({ encoding: 'utf8', highWaterMark: 1 << 16, autoClose: false });
  const strip = (l: string): string => (l.endsWith('\r') ? l.slice(0, -1) : l);
  try {
    // pieces of the current line so far: a long line is joined once, not re-copied per chunk
    let pending: string[] = [];
    for await (const chunk of stream as AsyncIterable<string>) {
      let start = 0;
      for (let nl = chunk.indexOf('\n'); nl >= 0; nl = chunk.indexOf('\n', start)) {
        pending.push(chunk.slice(start, nl));
        yield strip(pending.join(''));
        pending = [];
        start = nl + 1;
      }
      if (start < chunk.length) pending.push(chunk.slice(start));
    }
    if (pending.length > 0) yield strip(pending.join(''));
  } catch (e) {
    notFound(path, e);
  } finally {
    stream.destroy();
    await fh.close();
  }
}

/**
 * One item as its JSONL line (no newline). U+2028/U+2029 are escaped so that line-splitting
 * tools that treat them as line breaks still see one item a line.
 */
export function serializeItem(item: DatasetItem): string {
  return JSON.stringify(itemToLine(item)).replace(/[\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
}

/** Hash of items in canonical form; loaders use it so the same data hashes the same from any source. */
export function datasetContentHash(items: Iterable<DatasetItem>): string {
  const h = createHash('sha256');
  for (const item of items) h.update(`${serializeItem(item)}\n`);
  return h.digest('hex');
}

/** Worker names with recorded scores, in order of first appearance. */
export function workersOf(items: Iterable<DatasetItem>): string[] {
  const seen = new Set<string>();
  for (const item of items) for (const w of Object.keys(item.recorded ?? {})) seen.add(w);
  return [...seen];
}

/** File names too generic to tell two datasets apart: their folder's name goes in front. */
const GENERIC_NAMES = new Set(['dataset', 'data', 'items', 'questions', 'train', 'test', 'val', 'validation', 'dev', 'scores', 'all']);

/**
 * A dataset's name from its file: the file's name without the extension (`mmlu.jsonl`: mmlu), with
 * its folder's in front where the file's name is a generic one (`gsm8k/dataset.jsonl`:
 * gsm8k-dataset), so two datasets read from files named alike are told apart.
 */
export function datasetNameOf(path: string): string {
  const base = basename(path, extname(path));
  const dir = basename(dirname(resolve(path)));
  return GENERIC_NAMES.has(base.toLowerCase()) && dir !== '' && dir !== '/' ? `${dir}-${base}` : base;
}

/** Load a whole fugu JSONL file. Throws an InputError for a bad line or a file with no items. */
export async function loadDataset(path: string): Promise<Dataset> {
  const items: DatasetItem[] = [];
  for await (const item of readDatasetJsonl(path)) items.push(item);
  if (items.length === 0) throw new InputError('the dataset has no items', { file: path });
  return {
    name: datasetNameOf(path),
    source: resolve(path),
    items,
    workers: workersOf(items),
    contentHash: datasetContentHash(items),
  };
}

export type DatasetFileSummary = { items: number; tasks: string[]; workers: string[] };

/**
 * Check a whole dataset file before anything is enqueued: throws an InputError naming the file,
 * line and field of the first bad line (or an empty file); returns counts otherwise.
 */
export async function validateDatasetFile(path: string): Promise<DatasetFileSummary> {
  let n = 0;
  const tasks = new Set<string>();
  const workers = new Set<string>();
  for await (const item of readDatasetJsonl(path)) {
    n++;
    tasks.add(item.task);
    for (const w of Object.keys(item.recorded ?? {})) workers.add(w);
  }
  if (n === 0) throw new InputError('the dataset has no items', { file: path });
  return { items: n, tasks: [...tasks], workers: [...workers] };
}

/**
 * Write items as fugu JSONL (streamed; the file appears whole or not at all: written beside and
 * renamed). Every item is validated first; a bad one throws an InputError naming its id and field.
 * Returns the number of items written.
 */
export async function writeDatasetJsonl(path: string, items: Iterable<DatasetItem> | AsyncIterable<DatasetItem>): Promise<number> {
  await mkdir(dirname(resolve(path)), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}-${Date.now()}`;
  let n = 0;
  async function* lines(): AsyncGenerator<string> {
    const seen = new Set<string>();
    for await (const item of items) {
      const line = itemToLine(item);
      const r = datasetLineSchema.safeParse(line);
      if (!r.success) throw issueError(r.error.issues[0]!, { file: path }, [`item ${JSON.stringify(item.id)}`]);
      if (seen.has(item.id)) throw new InputError(`duplicate id ${JSON.stringify(item.id)}`, { file: path, field: 'id' });
      seen.add(item.id);
      n++;
      yield `${serializeItem(item)}\n`;
    }
  }
  try {
    await pipeline(Readable.from(lines()), createWriteStream(tmp, { encoding: 'utf8' }));
    await rename(tmp, path);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  }
  return n;
}
