// The per-question tables of recorded multi-agent runs (data/multistep/<source>.jsonl, one
// question a line): what each agent answered in each round, whether it was right, and which of
// the previous round's answers its message showed it. No message text: the tables are what the
// step model's estimator and its out-of-sample check read (issue 29).

/** One agent's answer in one round. */
export type AgentAnswer = {
  /** the agent's index in the run, from 0 (the same agent keeps its index across rounds) */
  agent: number;
  /**
   * The answer extracted from its message, normalised (MATH: the LaTeX after the benchmark's
   * `_strip_string`; multiple choice: the letter; code: null, graded by tests); null where no
   * answer could be extracted (then `correct` is false).
   */
  answer: string | null;
  correct: boolean;
  /**
   * The agents whose answers of the previous round this agent's message showed it, itself
   * included where it was shown its own (empty in the first round: a solo answer).
   */
  read: number[];
  /**
   * The agents whose answers of this same round, given before this one, its message showed it:
   * rounds where the agents answer one after another, each shown the updated answers of those
   * before it (DyLAN's CoT MATH logs: agent 2 in round 2 is shown agents 0 and 1's round-2
   * answers and agent 3's round-1 answer, beside its own round-1 answer). Absent where none
   * (every answer it was shown was of the previous round).
   */
  readThisRound?: number[];
};

/** One question of one recorded run. */
export type MultistepQuestion = {
  /** unique within its source, stable across conversions (e.g. `algebra/1001_1246/17`) */
  id: string;
  /** the table it belongs to (e.g. `dylan-math-cot`) */
  source: string;
  /** MATH: the problem type (`Algebra`); MMLU: the subject; code: the benchmark */
  task: string;
  /** MATH: the difficulty level, 1 to 5; absent elsewhere */
  level?: number;
  /** the gold answer as the source gives it (MATH: after `_strip_string`); absent for code */
  gold?: string;
  /** rounds[0] is the first round (every answer solo); later rounds may have fewer agents (early stops, selection) */
  rounds: AgentAnswer[][];
  /**
   * Where a round is incomplete: missing[r] lists the agents that answered in round r but whose
   * answers the log does not keep (left out of rounds[r], counted in the converter's report), as
   * many entries as rounds. Absent where every answer of every round given is there. (A round
   * whose answers cannot be attributed at all is dropped, with the rounds after it, not listed here.)
   */
  missing?: number[][];
};

/** What a converter read, and what it left out and why (the data README's counts come from it). */
export type ConvertReport = {
  /** the table's name (`dylan-math-cot`): data/multistep/<source>.jsonl */
  source: string;
  /** the source files read, relative to the checkout's root */
  filesRead: string[];
  /** files the converter looks for that the checkout lacks (e.g. absent from a snapshot), relative paths */
  filesMissing: string[];
  /** questions written */
  questions: number;
  /** questions or answers left out, counted by reason (the reason a short sentence) */
  dropped: Record<string, number>;
};

/** A converter's result: the table's rows in a stable order, and its report. */
export type Converted = { questions: MultistepQuestion[]; report: ConvertReport };
