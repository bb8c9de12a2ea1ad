// ADAS's GPT-3.5 results (ShengranHu/ADAS, commit 2702bee, Apache-2.0), results/<benchmark>_gpt3.5_results.json:
// per agent design (the hand-made baselines, `generation: "initial"`: Chain-of-Thought, COT-SC,
// Self-Refine, LLM Debate, Step-back Abstraction, Quality-Diversity, Dynamic Assignment of Roles; then
// the designs Meta Agent Search found, generation 1, 2, ...) its score on the validation questions
// (`fitness`) and on the held-out test questions (`test_fitness`), each a string
// `95% Bootstrap Confidence Interval: (lo%, hi%), Median: m%`. Totals only: no per-question outcome.
// The score is accuracy (DROP: F1; ARC: the share of grids right). DROP's intervals do not contain
// their medians (e.g. (59.0%, 60.7%), Median: 64.2%): kept as the source has them.
//
// The table: benchmark -> design name -> { accuracy, interval, raw } from `test_fitness` (what the
// paper's tables report), fractions (64.2% -> 0.642), with `raw` the source's string, plus the
// validation score and the generation. A name the file has more than once (the same design's code
// tested again, with another test score: DROP's Distributed Consensus Agent has 75.4% and 79.4%, the
// paper's figure; or a design found again) is keyed `<name> [<k>]` for its k-th entry (from 1) in
// the file. Pure apart from reading the files.

import { InputError } from '@fugu/core';
import { readSourceFile } from './source-files.ts';
import type { ConvertReport } from './types.ts';

export const ADAS_BENCHMARKS = ['mmlu', 'gpqa', 'drop', 'mgsm', 'arc'] as const;
export type AdasBenchmark = (typeof ADAS_BENCHMARKS)[number];

/** One score: the bootstrap median and 95% interval, as fractions, and the source's string. */
export type AdasScore = { accuracy: number; interval: [number, number]; raw: string };

/** One design's scores: the test score's fields at the top (the paper's figure), the validation score beside. */
export type AdasDesign = AdasScore & {
  /** `initial` for the hand-made baselines, else the search iteration that found it */
  generation: string | number;
  validation: AdasScore;
};

export type AdasTable = Record<string, Record<string, AdasDesign>>;
export type AdasResults = { table: AdasTable; report: ConvertReport };

export const ADAS_SOURCE = 'adas-gpt3.5';

const SCORE_RE = /^95% Bootstrap Confidence Interval: \((-?\d+(?:\.\d+)?)%, (-?\d+(?:\.\d+)?)%\), Median: (-?\d+(?:\.\d+)?)%$/;

/** A percentage as a fraction without the float noise of a plain division (64.2 -> 0.642, not 0.6420000000000001). */
function fraction(percent: string): number {
  return Number((Number(percent) / 100).toPrecision(12));
}

/** `95% Bootstrap Confidence Interval: (62.0%, 68.6%), Median: 65.4%` -> {accuracy 0.654, interval [0.62, 0.686], raw}; null if not of that form. */
export function parseAdasScore(raw: string): AdasScore | null {
  const m = SCORE_RE.exec(raw.trim());
  if (!m) return null;
  return { accuracy: fraction(m[3]!), interval: [fraction(m[1]!), fraction(m[2]!)], raw };
}

/** ADAS's GPT-3.5 results for the five benchmarks under `root`, a checkout of ShengranHu/ADAS; designs in the file's order (no question rows: the report's `questions` is 0). */
export async function convertAdas(root: string): Promise<AdasResults> {
  const table: AdasTable = {};
  const filesRead: string[] = [];
  const filesMissing: string[] = [];
  const dropped: Record<string, number> = {};
  for (const benchmark of ADAS_BENCHMARKS) {
    const rel = `results/${benchmark}_gpt3.5_results.json`;
    const text = await readSourceFile(root, rel);
    if (text === undefined) {
      filesMissing.push(rel);
      continue;
    }
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (e) {
      throw new InputError(`not a readable JSON file (${(e as Error).message})`, { file: rel }, { cause: e });
    }
    filesRead.push(rel);
    if (!Array.isArray(raw)) throw new InputError('not a list of designs', { file: rel });
    const entries = raw.map((d: unknown, index) => {
      const row = d as { name?: unknown; generation?: unknown; fitness?: unknown; test_fitness?: unknown };
      if (typeof row.name !== 'string' || (typeof row.generation !== 'string' && typeof row.generation !== 'number')) {
        throw new InputError('a design without a name or generation', { file: rel, field: String(index) });
      }
      return { name: row.name, generation: row.generation, fitness: row.fitness, test: row.test_fitness };
    });
    const count = new Map<string, number>();
    for (const e of entries) count.set(e.name, (count.get(e.name) ?? 0) + 1);
    const designsOf: Record<string, AdasDesign> = {};
    const seen = new Map<string, number>();
    for (const e of entries) {
      const k = (seen.get(e.name) ?? 0) + 1;
      seen.set(e.name, k);
      const test = typeof e.test === 'string' ? parseAdasScore(e.test) : null;
      const validation = typeof e.fitness === 'string' ? parseAdasScore(e.fitness) : null;
      if (test === null || validation === null) {
        const reason = 'a score not of the form `95% Bootstrap Confidence Interval: (lo%, hi%), Median: m%`';
        dropped[reason] = (dropped[reason] ?? 0) + 1;
        continue;
      }
      const key = count.get(e.name)! > 1 ? `${e.name} [${k}]` : e.name;
      if (key in designsOf) throw new InputError(`design ${JSON.stringify(key)} twice`, { file: rel });
      designsOf[key] = { ...test, generation: e.generation, validation };
    }
    table[benchmark] = designsOf;
  }
  return { table, report: { source: ADAS_SOURCE, filesRead, filesMissing, questions: 0, dropped } };
}
