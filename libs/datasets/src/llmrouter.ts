// Loader for the LLMRouter routing data (ulab-uiuc/LLMRouter): 9 real LLMs' recorded scores
// on 6,108 questions. Layout of a directory (any path; nothing here is hard-coded):
//   queries_{train,test}.jsonl  {task_name, query, ground_truth, metric, choices, task_id}
//   scores_{train,test}.json    [{question, scores: {model: number}, cluster_id?}]
//   llm_candidates.json         {model: {model, input_price, output_price, ...}}
// Items are the SCORED questions, joined to their query row on the question text.

import { readFile, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { InputError, parseUsd, type DatasetItem, type RecordedOutcome, type WorkerPool, type WorkerSpec } from '@fugu/core';
import { datasetContentHash, writeDatasetJsonl, type Dataset } from './format.ts';
import { clip, formatPath } from './normalize.ts';
import { parseChoices } from './pylit.ts';

export const LLMROUTER_SPLITS = ['train', 'test'] as const;
export const LLMROUTER_FILES = [
  'queries_train.jsonl',
  'queries_test.jsonl',
  'scores_train.json',
  'scores_test.json',
  'llm_candidates.json',
] as const;

// libs/datasets/src -> the repository root
/** The repository root (where data/ is). */
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Where the LLMRouter data lives by default: $FUGU_LLMROUTER_DIR, else `data/llmrouter` in the repository (shipped with it, MIT). */
export function defaultLlmRouterDir(env: NodeJS.ProcessEnv = process.env): string {
  const v = env['FUGU_LLMROUTER_DIR']?.trim();
  if (v) return resolve(v);
  return resolve(REPO_ROOT, 'data', 'llmrouter');
}

const queryRowSchema = z.looseObject({
  task_name: z.string({ error: 'task_name must be a string' }).min(1, 'task_name must not be empty'),
  query: z.string({ error: 'query must be a string' }).min(1, 'query must not be empty'),
  ground_truth: z.union([z.string(), z.number()]).nullish(),
  metric: z.string().nullish(),
  choices: z.unknown().optional(),
});
type QueryRow = z.output<typeof queryRowSchema>;

const scoreRowSchema = z.looseObject({
  question: z.string({ error: 'question must be a string' }),
  scores: z.record(z.string(), z.number({ error: 'score must be a number' }).min(0, 'score must be in [0, 1]').max(1, 'score must be in [0, 1]')),
  cluster_id: z.number().nullish(),
});
type ScoreRow = z.output<typeof scoreRowSchema>;

const cardSchema = z.looseObject({
  model: z.string({ error: 'model must be a string' }).min(1),
  input_price: z.union([z.number(), z.string()], { error: 'input_price must be a number' }),
  output_price: z.union([z.number(), z.string()], { error: 'output_price must be a number' }),
});

async function requireFiles(dir: string, files: readonly string[]): Promise<void> {
  try {
    const s = await stat(dir);
    if (!s.isDirectory()) throw new InputError('not a directory (expected an LLMRouter data directory)', { file: dir });
  } catch (e) {
    if (e instanceof InputError) throw e;
    throw new InputError('no such directory (expected an LLMRouter data directory; set FUGU_LLMROUTER_DIR or pass a path)', { file: dir }, { cause: e });
  }
  for (const f of files) {
    const p = join(dir, f);
    try {
      await stat(p);
    } catch (e) {
      throw new InputError(`missing file (an LLMRouter directory holds ${LLMROUTER_FILES.join(', ')})`, { file: p }, { cause: e });
    }
  }
}

async function readJson(file: string): Promise<unknown> {
  const text = await readFile(file, 'utf8');
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new InputError(`malformed JSON: ${(e as Error).message}`, { file }, { cause: e });
  }
}

async function readQueries(file: string): Promise<Map<string, QueryRow>> {
  const text = await readFile(file, 'utf8');
  const byQuery = new Map<string, QueryRow>();
  const lines = text.split('\n');
  for (let k = 0; k < lines.length; k++) {
    const line = lines[k]!.trim();
    if (line === '') continue;
    const where = { file, line: k + 1 };
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch (e) {
      throw new InputError(`malformed JSON: ${(e as Error).message}`, where, { cause: e });
    }
    const r = queryRowSchema.safeParse(v);
    if (!r.success) {
      const iss = r.error.issues[0]!;
      throw new InputError(iss.message, { ...where, field: formatPath(iss.path) || undefined });
    }
    // 8 query texts appear twice in the train file (e.g. under mmlu and openbook_qa) while
    // the scores file has each question once: the first row in file order wins.
    if (!byQuery.has(r.data.query)) byQuery.set(r.data.query, r.data);
  }
  return byQuery;
}

async function readScores(file: string): Promise<ScoreRow[]> {
  const v = await readJson(file);
  if (!Array.isArray(v)) throw new InputError('expected a JSON array of {question, scores}', { file });
  return v.map((row, i) => {
    const r = scoreRowSchema.safeParse(row);
    if (!r.success) {
      const iss = r.error.issues[0]!;
      throw new InputError(iss.message, { file, field: formatPath([i, ...iss.path]) });
    }
    return r.data;
  });
}

/** Worker names in the order of the first score row's keys, then any others in order of appearance. */
function workerOrder(rows: Iterable<ScoreRow>): string[] {
  const seen = new Set<string>();
  for (const r of rows) for (const w of Object.keys(r.scores)) seen.add(w);
  return [...seen];
}

function toItem(split: string, index: number, q: QueryRow, s: ScoreRow): DatasetItem {
  const item: DatasetItem = {
    id: `${split}-${String(index).padStart(6, '0')}`,
    task: q.task_name,
    prompt: s.question,
    sourceSplit: split,
  };
  if (q.ground_truth != null) item.groundTruth = String(q.ground_truth);
  if (q.metric) item.metric = q.metric;
  // Only multiple-choice rows may use a bare list of option texts: MBPP stores its test
  // asserts in `choices` as a list too, and those are not options.
  const choices = parseChoices(q.choices, { allowBareList: q.metric === 'em_mc' });
  if (choices) item.choices = choices;
  const recorded: Record<string, RecordedOutcome> = {};
  for (const [w, score] of Object.entries(s.scores)) recorded[w] = { score };
  item.recorded = recorded;
  return item;
}

/**
 * Load an LLMRouter directory: one item per scored question (train then test, each in the
 * order of its scores file), id `train-000123` / `test-000042` (0-based index in that file).
 */
export async function loadLlmRouter(dir: string): Promise<Dataset> {
  const root = resolve(dir);
  await requireFiles(root, LLMROUTER_FILES.filter((f) => f !== 'llm_candidates.json'));
  const items: DatasetItem[] = [];
  const allRows: ScoreRow[] = [];
  for (const split of LLMROUTER_SPLITS) {
    const qFile = join(root, `queries_${split}.jsonl`);
    const sFile = join(root, `scores_${split}.json`);
    const [queries, scores] = await Promise.all([readQueries(qFile), readScores(sFile)]);
    scores.forEach((s, i) => {
      const q = queries.get(s.question);
      if (!q) {
        throw new InputError(`no row of queries_${split}.jsonl has this question: ${JSON.stringify(clip(s.question))}`, {
          file: sFile,
          field: `[${i}].question`,
        });
      }
      items.push(toItem(split, i, q, s));
    });
    allRows.push(...scores);
  }
  if (items.length === 0) throw new InputError('the LLMRouter directory has no scored questions', { file: root });
  return { name: 'llmrouter', source: root, items, workers: workerOrder(allRows), contentHash: datasetContentHash(items) };
}

/** A price as an exact decimal string ("0.2"); numbers go through fixed notation (no "1e-7"). */
function priceString(v: number | string, file: string, field: string): string {
  const s = typeof v === 'number' ? (Number.isFinite(v) && v >= 0 ? v.toFixed(12).replace(/\.?0+$/, '') || '0' : String(v)) : v.trim();
  try {
    parseUsd(s);
  } catch {
    throw new InputError(`not a non-negative USD amount per 1M tokens: ${JSON.stringify(v)}`, { file, field });
  }
  return s;
}

/**
 * The replay worker pool of an LLMRouter directory: one `replay` worker per scored model, in the
 * order of the scores' keys, with the model id and USD-per-1M-token prices of llm_candidates.json,
 * the card's `feature` text as the worker's description and its `size` ("7B") as its size.
 */
export async function loadLlmRouterPool(dir: string): Promise<WorkerPool> {
  const root = resolve(dir);
  await requireFiles(root, ['scores_train.json', 'scores_test.json', 'llm_candidates.json']);
  const cardsFile = join(root, 'llm_candidates.json');
  const [train, test, cards] = await Promise.all([
    readScores(join(root, 'scores_train.json')),
    readScores(join(root, 'scores_test.json')),
    readJson(cardsFile),
  ]);
  if (typeof cards !== 'object' || cards === null || Array.isArray(cards)) {
    throw new InputError('expected a JSON object of model cards', { file: cardsFile });
  }
  const workers: WorkerSpec[] = workerOrder([...train, ...test]).map((name) => {
    const raw = (cards as Record<string, unknown>)[name];
    if (raw === undefined) throw new InputError(`no model card for worker "${name}" that the scores name`, { file: cardsFile, field: name });
    const r = cardSchema.safeParse(raw);
    if (!r.success) {
      const iss = r.error.issues[0]!;
      throw new InputError(iss.message, { file: cardsFile, field: formatPath([name, ...iss.path]) });
    }
    return {
      name,
      provider: 'replay',
      model: r.data.model,
      settings: {},
      prices: {
        inputPerMTok: priceString(r.data.input_price, cardsFile, `${name}.input_price`),
        outputPerMTok: priceString(r.data.output_price, cardsFile, `${name}.output_price`),
      },
      ...(typeof r.data.feature === 'string' && r.data.feature.trim() !== '' && { description: r.data.feature.trim() }),
      ...(typeof r.data.size === 'string' && r.data.size.trim() !== '' && { size: r.data.size.trim() }),
    } satisfies WorkerSpec;
  });
  if (workers.length === 0) throw new InputError('the scores name no models', { file: join(root, 'scores_train.json') });
  return { name: 'llmrouter', workers };
}

/** Export an LLMRouter directory to a fugu JSONL file; returns the dataset that was written. */
export async function llmRouterToJsonl(dir: string, outPath: string): Promise<Dataset> {
  const ds = await loadLlmRouter(dir);
  await writeDatasetJsonl(outPath, ds.items);
  return ds;
}
