// `fugu multistep convert`: every table of data/multistep from checkouts of the three public
// repositories (data/multistep/README.md names their commits) and, for the gold letters of DyLAN's
// MMLU runs, the MMLU test set. Each converter reads its files
// and returns rows and a report; this writes them: <source>.jsonl per table of rows, the
// summaries of the runs that grade no single answer (DyLAN's HumanEval, Reflexion's reflexion
// runs) and ADAS's totals as JSON, and reports.json (what each read, wrote and left out).

import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { InputError } from '@fugu/core';
import { convertAdas } from './adas.ts';
import { convertDylanHumanEval, DYLAN_HUMANEVAL_MODELS } from './dylan-humaneval.ts';
import { convertDylanMath } from './dylan-math.ts';
import { convertDylanMmlu, DYLAN_MMLU_VARIANTS } from './dylan-mmlu.ts';
import { convertReflexion, REFLEXION_RUNS, type ReflexionSource } from './reflexion.ts';
import { writeTable } from './tables.ts';
import type { ConvertReport } from './types.ts';

export type ConvertSources = {
  /** a checkout of SALT-NLP/DyLAN */
  dylan?: string;
  /** the MMLU test set (`<subject>_test.csv`, in it or under test/ or data/test/): the gold letters of DyLAN's MMLU runs; needed with `dylan` */
  mmlu?: string;
  /** a checkout of noahshinn/reflexion */
  reflexion?: string;
  /** a checkout of ShengranHu/ADAS */
  adas?: string;
};

/** Converts what the checkouts given hold into `out`; returns the reports (also written to out/reports.json). */
export async function convertAll(src: ConvertSources, out: string, log: (line: string) => void = () => {}): Promise<ConvertReport[]> {
  if (!src.dylan && !src.reflexion && !src.adas) throw new InputError('give at least one checkout: --dylan, --reflexion or --adas', { field: '--dylan' });
  if (src.dylan && !src.mmlu) throw new InputError("DyLAN's MMLU logs do not hold the gold letters: give the MMLU test set (hendrycks/test's data/test/*.csv, data/multistep/README.md) with --mmlu", { field: '--mmlu' });
  await mkdir(out, { recursive: true });
  const reports: ConvertReport[] = [];
  const done = (r: ConvertReport) => {
    reports.push(r);
    log(`${r.source}: ${r.questions} questions from ${r.filesRead.length} files${Object.keys(r.dropped).length > 0 ? `; left out: ${Object.entries(r.dropped).map(([why, n]) => `${n} ${why}`).join('; ')}` : ''}`);
  };
  if (src.dylan) {
    for (const v of ['cot', 'complex'] as const) {
      const { questions, report } = await convertDylanMath(src.dylan, v);
      await writeTable(path.join(out, `${report.source}.jsonl`), questions);
      done(report);
    }
    for (const v of DYLAN_MMLU_VARIANTS) {
      const { questions, report } = await convertDylanMmlu(src.dylan, v, src.mmlu!);
      await writeTable(path.join(out, `${report.source}.jsonl`), questions);
      done(report);
    }
    const runs: Record<string, { passAt1: number; tasks: unknown[] }> = {};
    for (const m of DYLAN_HUMANEVAL_MODELS) {
      const { tasks, report } = await convertDylanHumanEval(src.dylan, m);
      runs[report.source] = { passAt1: tasks.filter((t) => t.passed).length / tasks.length, tasks: tasks.map((t) => ({ id: t.id, passed: t.passed, answered: t.answered })) };
      done(report);
    }
    await writeFile(path.join(out, 'dylan-humaneval.json'), oneTaskALine(runs));
  }
  if (src.reflexion) {
    const runs: Record<string, { file: string; tasks: unknown[] }> = {};
    for (const s of Object.keys(REFLEXION_RUNS) as ReflexionSource[]) {
      const { questions, tasks, report } = await convertReflexion(src.reflexion, s);
      if (questions.length > 0) await writeTable(path.join(out, `${s}.jsonl`), questions);
      runs[s] = { file: REFLEXION_RUNS[s].file, tasks };
      done(report);
    }
    await writeFile(path.join(out, 'reflexion-tasks.json'), oneTaskALine(runs));
  }
  if (src.adas) {
    const { table, report } = await convertAdas(src.adas);
    const text = `{\n${Object.entries(table).map(([b, ds]) => `  ${JSON.stringify(b)}: {\n${Object.entries(ds).map(([n, d]) => `    ${JSON.stringify(n)}: ${JSON.stringify(d)}`).join(',\n')}\n  }`).join(',\n')}\n}\n`;
    await writeFile(path.join(out, 'adas-gpt3.5.json'), text);
    done(report);
  }
  await writeFile(path.join(out, 'reports.json'), `${JSON.stringify(reports, null, 2)}\n`);
  return reports;
}

/** JSON of runs with a `tasks` list: one task a line (the files stay readable and diff well). */
function oneTaskALine(runs: Record<string, { tasks: unknown[] } & Record<string, unknown>>): string {
  const parts = Object.entries(runs).map(([src, run]) => {
    const { tasks, ...rest } = run;
    const head = Object.entries(rest).map(([k, v]) => `    ${JSON.stringify(k)}: ${JSON.stringify(v)},`).join('\n');
    return `  ${JSON.stringify(src)}: {\n${head}\n    "tasks": [\n${tasks.map((t) => `      ${JSON.stringify(t)}`).join(',\n')}\n    ]\n  }`;
  });
  return `{\n${parts.join(',\n')}\n}\n`;
}
