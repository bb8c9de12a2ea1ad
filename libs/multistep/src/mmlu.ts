// The MMLU test set (Hendrycks et al., hendrycks/test, MIT) and the questions DyLAN sampled from it,
// for the gold letters of DyLAN's MMLU runs (dylan-mmlu.ts).
//
// DyLAN ran each subject on a "downsampled" CSV (exp_mmlu.sh: `exp_name=mmlu_downsampled`) that is
// not in its repository, nor the script that made it. The sample is pandas'
// `pd.read_csv(<subject>_test.csv, header=None).sample(frac=0.2, random_state=0)`: its size,
// round(n / 5), is the number of questions each of DyLAN's runs asked of every subject, and its
// order is the order of the runs' transcripts (their replies restate the questions; the gold
// letters it gives contradict none of the 2-, 3- and 4-agent runs' per-question results:
// data/multistep/README.md). Subjects of more than 100 sampled questions were run in files of 100
// (`<subject>_test_<offset>`), in the sample's order.
//
// pandas' `sample` without weights is numpy's legacy `RandomState(seed).choice(n, size,
// replace=False)`, that is `permutation(n)[:size]`: MT19937 seeded by `init_genrand(seed)`, then a
// Fisher-Yates shuffle of 0..n-1 from the end, each index drawn by `random_interval` (32-bit draws
// masked to the smallest covering power of two, rejected above the bound). Ported here; the test
// pins numpy's outputs.

import { join } from 'node:path';
import { InputError } from '@fugu/core';
import { readSourceFile } from './source-files.ts';

const LETTERS = ['A', 'B', 'C', 'D'] as const;

/** numpy's legacy `RandomState` (MT19937) as far as `permutation` needs it. */
export class LegacyRandomState {
  private readonly mt = new Uint32Array(624);
  private index = 624;

  /** `np.random.RandomState(seed)` for an integer seed 0 <= seed < 2^32 (`init_genrand`). */
  constructor(seed: number) {
    if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) throw new InputError(`seed must be an integer from 0 to 2^32 - 1, got ${seed}`);
    this.mt[0] = seed >>> 0;
    for (let i = 1; i < 624; i++) {
      const prev = this.mt[i - 1]! ^ (this.mt[i - 1]! >>> 30);
      this.mt[i] = (Math.imul(1812433253, prev) + i) >>> 0;
    }
  }

  /** The next 32-bit output (genrand_int32). */
  nextUint32(): number {
    if (this.index >= 624) this.twist();
    let y = this.mt[this.index++]!;
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  private twist(): void {
    const mt = this.mt;
    for (let i = 0; i < 624; i++) {
      const y = (mt[i]! & 0x80000000) | (mt[(i + 1) % 624]! & 0x7fffffff);
      mt[i] = mt[(i + 397) % 624]! ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
    }
    this.index = 0;
  }

  /** numpy's `random_interval(max)`: uniform on 0..max, by masked 32-bit draws (max < 2^32). */
  interval(max: number): number {
    if (max === 0) return 0;
    let mask = max;
    mask |= mask >>> 1;
    mask |= mask >>> 2;
    mask |= mask >>> 4;
    mask |= mask >>> 8;
    mask |= mask >>> 16;
    mask >>>= 0;
    for (;;) {
      const v = (this.nextUint32() & mask) >>> 0;
      if (v <= max) return v;
    }
  }

  /** `RandomState.permutation(n)`: 0..n-1 shuffled (legacy shuffle: i from n-1 down to 1, j = interval(i)). */
  permutation(n: number): number[] {
    const x = Array.from({ length: n }, (_, i) => i);
    for (let i = n - 1; i >= 1; i--) {
      const j = this.interval(i);
      [x[i], x[j]] = [x[j]!, x[i]!];
    }
    return x;
  }
}

/** Python's round() of a non-negative float to an integer (halves to even), as pandas sizes a sample. */
function pyRound(x: number): number {
  const f = Math.floor(x);
  const d = x - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** The row indices (0-based, in the test CSV) of `df.sample(frac, random_state=seed)` on n rows, in the sample's order. */
export function pandasSample(n: number, frac: number, seed: number): number[] {
  return new LegacyRandomState(seed).permutation(n).slice(0, pyRound(frac * n));
}

/** DyLAN's downsampled set of a subject of n test questions: their rows in the test CSV, in the order DyLAN asked them. */
export function dylanMmluSample(n: number): number[] {
  return pandasSample(n, 0.2, 0);
}

/** One MMLU test question: the question, its four choices and the gold letter. */
export type MmluQuestion = { question: string; choices: [string, string, string, string]; answer: string };

/** RFC 4180 CSV as Python's csv module and pandas read it (quoted fields may hold commas, doubled quotes and newlines): each row's fields and the line it starts on; blank lines skipped. */
export function parseCsv(text: string): Array<{ fields: string[]; line: number }> {
  const rows: Array<{ fields: string[]; line: number }> = [];
  const n = text.length;
  let i = 0;
  let line = 1;
  const newlines = (from: number, to: number): number => {
    let c = 0;
    for (let k = text.indexOf('\n', from); k !== -1 && k < to; k = text.indexOf('\n', k + 1)) c++;
    return c;
  };
  while (i < n) {
    // a blank line
    if (text[i] === '\n' || text[i] === '\r') {
      if (text[i] === '\r' && text[i + 1] === '\n') i++;
      i++;
      line++;
      continue;
    }
    const start = line;
    const fields: string[] = [];
    for (;;) {
      let field = '';
      if (text[i] === '"') {
        // quoted: up to the closing quote, "" for a quote; what follows it up to the separator is kept as is
        let k = i + 1;
        for (;;) {
          const q = text.indexOf('"', k);
          if (q === -1) {
            field += text.slice(k);
            k = n;
            break;
          }
          field += text.slice(k, q);
          if (text[q + 1] === '"') {
            field += '"';
            k = q + 2;
          } else {
            k = q + 1;
            break;
          }
        }
        line += newlines(i, k);
        i = k;
      }
      let e = i;
      while (e < n && text[e] !== ',' && text[e] !== '\n' && text[e] !== '\r') e++;
      field += text.slice(i, e);
      fields.push(field);
      i = e;
      if (i < n && text[i] === ',') {
        i++;
        continue;
      }
      if (text[i] === '\r' && text[i + 1] === '\n') i++;
      if (i < n) {
        i++;
        line++;
      }
      break;
    }
    rows.push({ fields, line: start });
  }
  return rows;
}

/**
 * A subject's test questions from a copy of the MMLU test set: `<dir>/<subject>_test.csv`, or under
 * `<dir>/test/` or `<dir>/data/test/`. The original layout (hendrycks/test's data.tar: no header,
 * question, four choices, the letter) and the common re-export (a header row `question,...,answer`,
 * the answer an index 0 to 3) are read alike. Undefined where no such file is found; an InputError
 * naming the file and row for a row that is not a question.
 */
export async function readMmluSubject(dir: string, subject: string): Promise<{ file: string; questions: MmluQuestion[] } | undefined> {
  for (const sub of ['', 'test', join('data', 'test')]) {
    const rel = join(sub, `${subject}_test.csv`);
    const text = await readSourceFile(dir, rel);
    if (text === undefined) continue;
    const rows = parseCsv(text);
    const header = rows.length > 0 && rows[0]!.fields.at(-1)?.trim().toLowerCase() === 'answer';
    const questions = rows.slice(header ? 1 : 0).map(({ fields: r, line }) => {
      const where = { file: rel, line };
      if (r.length !== 6) throw new InputError(`a question row has 6 fields (question, 4 choices, answer), this one ${r.length}`, where);
      const a = r[5]!.trim();
      const answer = /^[0-3]$/.test(a) ? LETTERS[Number(a)]! : a;
      if (!(LETTERS as readonly string[]).includes(answer)) throw new InputError(`answer is not a letter A to D nor an index 0 to 3: ${JSON.stringify(r[5])}`, where);
      return { question: r[0]!, choices: [r[1]!, r[2]!, r[3]!, r[4]!] as [string, string, string, string], answer };
    });
    return { file: rel, questions };
  }
  return undefined;
}
