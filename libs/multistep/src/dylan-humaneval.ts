// DyLAN's HumanEval runs (SALT-NLP/DyLAN, commit 572341b, MIT): `exp/HumanEval/{gpt_35_turbo_0301,
// gpt_4_0613}/`. What they record is less than a step table needs, so this converter writes no
// table rows: it returns, per task, the graded final answer and how many coders answered in each
// round (`tasks`), and counts every task in the report's `dropped` under the reason below.
//
// The protocol, as code/HumanEval/CoLLMLP.py and LLM_Neuron.py run it (llmlp_listwise_human_eval.py,
// 4 coders PythonAssistant, AlgorithmDeveloper, ComputerScientist, Programmer; 4 judges Passer,
// Tester, Reflector, Ranker; 3 rounds; the tasks in 4 parts of 50):
// - round 0: the 4 coders write the function alone (no early stop);
// - judges: the Passer runs each coder's code (syntax/runtime only), the Tester writes unit tests and
//   runs each code against them, the Reflector comments on each code, the Ranker picks 2 of them;
// - round 1 (and 2): each coder is shown the previous round's code of the coders the Ranker kept (2
//   of 4, which ones not logged) with the other judges' feedback on each, and rewrites; once 3 have
//   answered, the run stops if more than floor(8/3) = 2 codes that run are alike (BLEU >= 90);
// - round 2: a ranker call picks 2 of the round-1 codes; that many coders (random ones, the same slip
//   as in the MMLU code) answer after the judges' second pass, with the same stop rule;
// - the answer (all_tests_and_get_final_result) is picked among the round-0 codes (`range(self.agents)`:
//   the first round's nodes only), the one passing most of the Tester's unit tests.
//
// What the logs hold: per task the replies [agent][round] (coders 0-3; the judges' 4 entries are
// always null), the Tester's unit tests (.tests), the pick of each part (`_<part>_443.jsonl`), and the
// graded final answers (`llmlp_human_eval_0.jsonl_results.jsonl`, HumanEval's own tests: `passed`).
// The per-part picks are round-0 codes, as the code says; the graded finals are not always those
// picks (the .txt names a `_reinforced` file: some later step chose them, not in the repository).
// Not logged: any coder's code graded against HumanEval's tests (only the final pick is), and which
// codes the Ranker let each coder read. Pure apart from reading the files.

import { InputError } from '@fugu/core';
import { jsonLines, requireSourceFile } from './source-files.ts';
import type { ConvertReport } from './types.ts';

export const DYLAN_HUMANEVAL_MODELS = ['gpt_35_turbo_0301', 'gpt_4_0613'] as const;
export type DylanHumanEvalModel = (typeof DYLAN_HUMANEVAL_MODELS)[number];

/** The run's name: `dylan-humaneval-gpt-35-turbo-0301`. */
export function dylanHumanEvalSource(model: DylanHumanEvalModel): string {
  return `dylan-humaneval-${model.replaceAll('_', '-')}`;
}

const CODERS = 4;
const JUDGES = 4;
const ROUNDS = 3;
const PARTS = 4;
const PART_SIZE = 50;

export const NOT_GRADED = 'per-answer grades not logged (only the final pick is graded) and which codes each coder read not logged';

/** One HumanEval task of a DyLAN run: what the logs record of it. */
export type DylanHumanEvalTask = {
  /** `HumanEval/0` */
  id: string;
  /** whether the graded final answer passed HumanEval's tests */
  passed: boolean;
  /** the evaluator's result: `passed`, `failed: ...`, `timed out` */
  result: string;
  /** how many coders answered in each round (e.g. [4, 4, 2]; a 0 after an early stop) */
  answered: number[];
};

export type DylanHumanEvalRun = { tasks: DylanHumanEvalTask[]; report: ConvertReport };

async function readLines(root: string, rel: string): Promise<unknown[]> {
  return jsonLines(await requireSourceFile(root, rel), rel).map((l) => l.value);
}

function isTranscript(v: unknown): v is (string | null)[][] {
  return (
    Array.isArray(v) &&
    v.length === CODERS + JUDGES &&
    v.every((a) => Array.isArray(a) && a.length === ROUNDS && a.every((r) => r === null || typeof r === 'string'))
  );
}

/**
 * What one DyLAN HumanEval run records, per task in task order, under `root` (a checkout of
 * SALT-NLP/DyLAN). No table rows: see the module comment.
 */
export async function convertDylanHumanEval(root: string, model: DylanHumanEvalModel): Promise<DylanHumanEvalRun> {
  if (!DYLAN_HUMANEVAL_MODELS.includes(model)) throw new InputError(`no such DyLAN HumanEval run: ${String(model)} (one of ${DYLAN_HUMANEVAL_MODELS.join(', ')})`);
  const dir = `exp/HumanEval/${model}`;
  const filesRead: string[] = [];
  const resultsFile = `${dir}/llmlp_human_eval_0.jsonl_results.jsonl`;
  filesRead.push(resultsFile);
  const results = await readLines(root, resultsFile);
  const answered = new Map<string, number[]>();
  for (let part = 0; part < PARTS; part++) {
    const rel = `${dir}/llmlp_human_eval_0_${part}_${CODERS}${JUDGES}${ROUNDS}.json`;
    filesRead.push(rel);
    (await readLines(root, rel)).forEach((t, i) => {
      if (!isTranscript(t)) throw new InputError(`not ${CODERS + JUDGES} agents' replies by ${ROUNDS} rounds`, { file: rel, line: i + 1 });
      const counts = Array.from({ length: ROUNDS }, (_, r) => t.slice(0, CODERS).filter((a) => a[r] !== null).length);
      answered.set(`HumanEval/${part * PART_SIZE + i}`, counts);
    });
  }
  const tasks: DylanHumanEvalTask[] = [];
  const dropped: Record<string, number> = {};
  results.forEach((r, i) => {
    const row = r as { task_id?: unknown; passed?: unknown; result?: unknown };
    if (typeof row.task_id !== 'string' || typeof row.passed !== 'boolean' || typeof row.result !== 'string') {
      throw new InputError('not a graded answer {task_id, passed, result}', { file: resultsFile, line: i + 1 });
    }
    const counts = answered.get(row.task_id);
    if (counts === undefined) {
      dropped['no transcript'] = (dropped['no transcript'] ?? 0) + 1;
      return;
    }
    tasks.push({ id: row.task_id, passed: row.passed, result: row.result, answered: counts });
  });
  if (tasks.length > 0) dropped[NOT_GRADED] = tasks.length;
  const report: ConvertReport = { source: dylanHumanEvalSource(model), filesRead, filesMissing: [], questions: 0, dropped };
  return { tasks, report };
}
