// Reflexion's programming runs (noahshinn/reflexion, commit 218cf0e, MIT), programming_runs/root/:
// GPT-4 writing Python functions for HumanEval (164), MBPP (397) and LeetCodeHard (40), once
// (`simple`) or with self-reflection (`reflexion`). One agent (agent 0).
//
// The protocol, as programming_runs/simple.py and reflexion.py run it (pass@1, temperature 0):
// - simple: one attempt, graded against the benchmark's hidden tests (`is_solved`);
// - reflexion: attempt 1 is the same prompt as simple's; it is run against internal tests (written
//   by the model itself; for LeetCodeHard the problem's visible examples). While an attempt fails
//   them and attempts are left (max_iters: 5 for MBPP and LeetCodeHard; the HumanEval run's is not in
//   its name, its longest task has 10 attempts, main.py's default), the
//   model writes a self-reflection on its code and the failed tests' output, then a new attempt shown
//   its previous code, that feedback and the reflection. The first attempt to pass the internal
//   tests, or the last one, is graded against the hidden tests once: that is `is_solved`.
//
// What the logs hold: per task `is_solved`, the graded (last) `solution` and the list of
// `reflections` (one before each attempt after the first: attempts = 1 + reflections). The code at
// the commit also logs `implementations` and `test_feedback`; these runs predate that and have
// neither. So an attempt before the last was never graded against the hidden tests (it failed the
// internal ones, which says little: they can be wrong), and nothing of it is logged.
//
// Tables: a simple run is a table of one round, one answer ({agent 0, answer null, correct:
// is_solved, read []}). A reflexion run has no table rows (its earlier attempts have no grade, and
// its one-attempt tasks alone would be a selected subset): every task is in `tasks` with its number
// of attempts and final result, and counted in the report's `dropped`. Task ids are the logs' own
// (`HumanEval/0`, `mbpp_234_volume_cube`, `minimum-reverse-operations`), the same in a benchmark's
// simple and reflexion runs. Pure apart from reading the files.
//
// Which runs: where root/ has several of a kind, the one the paper's Table 1 reports (GPT-4, Python):
// - HumanEval: reflexion_humaneval_py_pass_at_1 (150/164 = 91.5%, the paper's 91.0; the other two
//   164-task runs are the reflexion-UCS strategy); simple_test_run's GPT-4 file (134/164 = 81.7%,
//   the paper's baseline 80.1 is no count of 164; simple_human_eval_py_logging, 86.0%, used another
//   prompt: none of its solutions equals a first reflexion attempt, while simple_test_run's equal 93
//   of the 134 one-attempt reflexion solutions);
// - MBPP: simple_mbpp_py (318/397 = 80.1%, the paper's 80.1; simple_mbpp_py2 has 320) and
//   reflexion_mbpp_py (306/397 = 77.1%, the paper's 77.1; reflexion_mbpp_py3 stops at 257 tasks);
// - LeetCodeHard: the two runs that run_simple_py_leet.sh and run_reflexion_py_leet.sh name,
//   simple_leetcode_python3_gpt4_visible (4/40 = 10.0%; the paper's 7.5) and
//   reflexion_leetcode_python3_gpt4_react_constraints_visible (6/40 = 15.0%, the paper's 15.0).

import { InputError } from '@fugu/core';
import { jsonLines, readSourceFile } from './source-files.ts';
import type { ConvertReport, MultistepQuestion } from './types.ts';

export type ReflexionStrategy = 'simple' | 'reflexion';

type RunSpec = { benchmark: string; strategy: ReflexionStrategy; file: string };

const ROOT = 'programming_runs/root';

/** The six runs converted, by table name. */
export const REFLEXION_RUNS = {
  'reflexion-humaneval-py-simple': {
    benchmark: 'HumanEval-py',
    strategy: 'simple',
    file: `${ROOT}/simple_test_run/simple_1_gpt-4_pass_at_k_1.jsonl`,
  },
  'reflexion-humaneval-py-reflexion': {
    benchmark: 'HumanEval-py',
    strategy: 'reflexion',
    file: `${ROOT}/reflexion_humaneval_py_pass_at_1/reflexion_humaneval_py_pass_at_1.jsonl`,
  },
  'reflexion-mbpp-py-simple': {
    benchmark: 'MBPP-py',
    strategy: 'simple',
    file: `${ROOT}/simple_mbpp_py/mbpp-py._simple_1_gpt-4_pass_at_k_1_py.jsonl`,
  },
  'reflexion-mbpp-py-reflexion': {
    benchmark: 'MBPP-py',
    strategy: 'reflexion',
    file: `${ROOT}/reflexion_mbpp_py/mbpp-py._reflexion_5_gpt-4_pass_at_k_1_py.jsonl`,
  },
  'reflexion-leetcodehard-py-simple': {
    benchmark: 'LeetCodeHard-py',
    strategy: 'simple',
    file: `${ROOT}/simple_leetcode_python3_gpt4_visible/leetcode-hard-py-40-uncontaminated_tests._simple_1_gpt-4_pass_at_k_1_py.jsonl`,
  },
  'reflexion-leetcodehard-py-reflexion': {
    benchmark: 'LeetCodeHard-py',
    strategy: 'reflexion',
    file: `${ROOT}/reflexion_leetcode_python3_gpt4_react_constraints_visible/leetcode-hard-py-40-uncontaminated_tests._reflexion_5_gpt-4_pass_at_k_1_py.jsonl`,
  },
} as const satisfies Record<string, RunSpec>;

export type ReflexionSource = keyof typeof REFLEXION_RUNS;

export const REFLEXION_DROP = {
  ungraded: 'several attempts, only the last graded against the hidden tests (earlier attempts not logged)',
  single: 'one attempt (graded), left out with the rest of its run: alone they are the tasks whose first attempt passed its own tests',
} as const;

/** One task of a run: what the log records of it. */
export type ReflexionTask = {
  id: string;
  /** attempts made: 1 + the reflections logged (simple: 1) */
  attempts: number;
  /** whether the last attempt passed the hidden tests (`is_solved`) */
  solved: boolean;
};

export type ReflexionRun = { questions: MultistepQuestion[]; tasks: ReflexionTask[]; report: ConvertReport };

/** One Reflexion run (`source`, one of REFLEXION_RUNS) under `root`, a checkout of noahshinn/reflexion; rows in the log's order. */
export async function convertReflexion(root: string, source: ReflexionSource): Promise<ReflexionRun> {
  const spec: RunSpec | undefined = (REFLEXION_RUNS as Record<string, RunSpec>)[source];
  if (spec === undefined) throw new InputError(`no such Reflexion run: ${String(source)} (one of ${Object.keys(REFLEXION_RUNS).join(', ')})`);
  const text = await readSourceFile(root, spec.file);
  if (text === undefined) return { questions: [], tasks: [], report: { source, filesRead: [], filesMissing: [spec.file], questions: 0, dropped: {} } };
  const tasks: ReflexionTask[] = [];
  const seen = new Set<string>();
  for (const { line, value } of jsonLines(text, spec.file)) {
    const where = { file: spec.file, line };
    const row = value as { task_id?: unknown; name?: unknown; is_solved?: unknown; reflections?: unknown };
    const id = typeof row.task_id === 'string' ? row.task_id : typeof row.name === 'string' ? row.name : undefined;
    if (id === undefined) throw new InputError('no task_id or name', where);
    if (seen.has(id)) throw new InputError(`task ${id} logged twice`, where);
    seen.add(id);
    if (typeof row.is_solved !== 'boolean') throw new InputError('is_solved is not a boolean', where);
    let attempts = 1;
    if (spec.strategy === 'reflexion') {
      if (!Array.isArray(row.reflections)) throw new InputError('reflections is not a list', where);
      attempts += row.reflections.length;
    }
    tasks.push({ id, attempts, solved: row.is_solved });
  }
  const dropped: Record<string, number> = {};
  let questions: MultistepQuestion[] = [];
  if (spec.strategy === 'simple') {
    questions = tasks.map((t) => ({ id: t.id, source, task: spec.benchmark, rounds: [[{ agent: 0, answer: null, correct: t.solved, read: [] }]] }));
  } else {
    const several = tasks.filter((t) => t.attempts > 1).length;
    if (several > 0) dropped[REFLEXION_DROP.ungraded] = several;
    if (tasks.length - several > 0) dropped[REFLEXION_DROP.single] = tasks.length - several;
  }
  return { questions, tasks, report: { source, filesRead: [spec.file], filesMissing: [], questions: questions.length, dropped } };
}
