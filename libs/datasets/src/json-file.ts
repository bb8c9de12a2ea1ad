// A JSON file read against a zod schema: a file that cannot be read or parsed, or that does not
// match, is an InputError naming the file and (for a mismatch) the field.
import { readFile } from 'node:fs/promises';
import type { z } from 'zod';
import { InputError } from '@fugu/core';

export async function readJsonFile<S extends z.ZodType>(file: string, schema: S): Promise<z.infer<S>> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(file, 'utf8'));
  } catch (e) {
    throw new InputError(`not a readable JSON file (${(e as Error).message})`, { file });
  }
  const r = schema.safeParse(raw);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    throw new InputError(issue.message, { file, field: issue.path.join('.') || 'format' });
  }
  return r.data;
}
