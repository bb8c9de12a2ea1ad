// Reading the source repositories' files, for every converter: the checkout's relative path names
// the file in each error, and a JSONL line that is not JSON is named by its line.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { InputError } from '@fugu/core';

/** A source file's text; undefined where the checkout lacks it; an InputError naming it where it cannot be read. */
export async function readSourceFile(root: string, rel: string): Promise<string | undefined> {
  try {
    return await readFile(join(root, rel), 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new InputError(`cannot read (${(e as Error).message})`, { file: rel }, { cause: e });
  }
}

/** A source file that must be there. */
export async function requireSourceFile(root: string, rel: string): Promise<string> {
  const text = await readSourceFile(root, rel);
  if (text === undefined) throw new InputError('cannot read (no such file)', { file: rel });
  return text;
}

/** The JSON values of a JSONL text with their line numbers (blank lines skipped); a line that is not JSON is an InputError naming the file and line. */
export function jsonLines(text: string, rel: string): Array<{ line: number; value: unknown }> {
  const out: Array<{ line: number; value: unknown }> = [];
  text.split('\n').forEach((l, i) => {
    if (l.trim() === '') return;
    try {
      out.push({ line: i + 1, value: JSON.parse(l) });
    } catch (e) {
      throw new InputError(`not JSON (${(e as Error).message})`, { file: rel, line: i + 1 }, { cause: e });
    }
  });
  return out;
}
