// Reading and writing the per-question tables (data/multistep/<source>.jsonl). A line that is
// not a question is an InputError naming the file, the line and the field.

import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { InputError } from '@fugu/core';
import type { AgentAnswer, MultistepQuestion } from './types.ts';

/** The repository's tables: data/multistep beside this lib. */
export const DEFAULT_TABLES_DIR = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../../data/multistep');

function fail(where: string, field: string, message: string): never {
  throw new InputError(`${where}: ${field}: ${message}`, { field });
}

function checkAnswer(a: unknown, where: string, field: string): AgentAnswer {
  if (typeof a !== 'object' || a === null) fail(where, field, 'must be an object { agent, answer, correct, read }');
  const x = a as Record<string, unknown>;
  if (!Number.isInteger(x.agent) || (x.agent as number) < 0) fail(where, `${field}.agent`, `must be an integer >= 0, got ${JSON.stringify(x.agent)}`);
  if (x.answer !== null && typeof x.answer !== 'string') fail(where, `${field}.answer`, 'must be a string or null');
  if (typeof x.correct !== 'boolean') fail(where, `${field}.correct`, 'must be true or false');
  const agents = (v: unknown): v is number[] => Array.isArray(v) && v.every((r) => Number.isInteger(r) && r >= 0);
  if (!agents(x.read)) fail(where, `${field}.read`, 'must be a list of agent indices');
  if (x.readThisRound !== undefined && !agents(x.readThisRound)) fail(where, `${field}.readThisRound`, 'must be a list of agent indices');
  return { agent: x.agent as number, answer: x.answer as string | null, correct: x.correct, read: x.read, ...(x.readThisRound !== undefined && { readThisRound: x.readThisRound as number[] }) };
}

/** One table line, checked. */
export function parseQuestion(line: string, where: string): MultistepQuestion {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch (e) {
    fail(where, '(line)', `not JSON (${(e as Error).message})`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) fail(where, '(line)', 'must be a JSON object');
  const x = v as Record<string, unknown>;
  for (const k of ['id', 'source', 'task'] as const) if (typeof x[k] !== 'string' || x[k] === '') fail(where, k, 'must be a non-empty string');
  if (x.level !== undefined && !(Number.isInteger(x.level) && (x.level as number) >= 1 && (x.level as number) <= 5)) fail(where, 'level', `must be an integer 1 to 5, got ${JSON.stringify(x.level)}`);
  if (x.gold !== undefined && typeof x.gold !== 'string') fail(where, 'gold', 'must be a string');
  if (!Array.isArray(x.rounds) || x.rounds.length === 0) fail(where, 'rounds', 'must be a non-empty list of rounds');
  const rounds = x.rounds.map((r, i) => {
    if (!Array.isArray(r)) fail(where, `rounds[${i}]`, 'must be a list of answers');
    return r.map((a, j) => checkAnswer(a, where, `rounds[${i}][${j}]`));
  });
  if (x.missing !== undefined && !(Array.isArray(x.missing) && x.missing.length === rounds.length && x.missing.every((m) => Array.isArray(m) && m.every((a) => Number.isInteger(a) && a >= 0)))) {
    fail(where, 'missing', 'must be a list of agent-index lists, one per round');
  }
  return {
    id: x.id as string, source: x.source as string, task: x.task as string,
    ...(x.level !== undefined && { level: x.level as number }), ...(x.gold !== undefined && { gold: x.gold as string }), rounds,
    ...(x.missing !== undefined && { missing: x.missing as number[][] }),
  };
}

export async function readTable(file: string): Promise<MultistepQuestion[]> {
  const text = await readFile(file, 'utf8');
  const out: MultistepQuestion[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() !== '') out.push(parseQuestion(line, `${file}:${i + 1}`));
  });
  return out;
}

export async function writeTable(file: string, questions: readonly MultistepQuestion[]): Promise<void> {
  await writeFile(file, questions.map((q) => JSON.stringify(q)).join('\n') + (questions.length > 0 ? '\n' : ''));
}

/** The tables of a directory, by source name (the file name without .jsonl), in name order. */
export async function readTables(dir: string = DEFAULT_TABLES_DIR): Promise<Record<string, MultistepQuestion[]>> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.jsonl')).sort();
  const out: Record<string, MultistepQuestion[]> = {};
  for (const f of files) out[f.slice(0, -'.jsonl'.length)] = await readTable(path.join(dir, f));
  return out;
}
