// DyLAN's MATH runs (SALT-NLP/DyLAN, commit 572341b, MIT) as per-question tables: exp/MATH/CoT and
// exp/MATH/Complex, `<type>_<first>_<last>_4_3.json` (4 agents, 3 rounds), one table each
// (`dylan-math-cot`, `dylan-math-complex`). A file is a JSON object: the full prompt -> [the stored
// agent contexts, the gold answer (after `_strip_string`), the level (1 to 5, or null), the type].
// Every agent has the same system prompt and sees the same question: the agents are four samples of
// one model (in the committed scripts gpt-35-turbo 0301 at temperature 0.2), their index a label.
//
// The two directories come from two different scripts, and the data says which (verified on every
// question of both, the stop points replayed with util.py's is_equiv: all agree).
//
// Complex (the "complex CoT" prompt: 8 worked MATH examples; code/MATH/llmlp_gen_math_listwise_cot.py
// as committed, "One agent's solution:"):
// - round 1: the agents answer alone, one after another; from the 3rd on, once more than
//   floor(2/3 k) of the k answers so far agree (is_equiv, empty answers not counted) the run stops and
//   keeps those k agents' contexts;
// - round 2: every agent's context is cut back to the system prompt and one message quoting all four
//   round-1 answers in agent order (its own among them) with the question; the same stop rule from
//   the 3rd agent on, keeping all four contexts (the later agents' with round 1 only);
// - a ranker call (not kept) picks 2 agents; if their round-2 answers agree the run stops and keeps
//   only those 2 contexts as they stand then ([system, the round-2 message, the round-2 answer]: no
//   index, so their round-2 answers cannot be attributed: the round is dropped; round 1 is read from
//   the round-2 message's quotes);
// - else the 2 chosen agents, each cut back again and shown one message quoting both chosen round-2
//   answers (in the ranker's order), answer a 3rd time; the script appends these to the stored
//   contexts 0 and 1 whatever agents were chosen (a slip), so the chosen agents are recovered by
//   matching the quotes to the round-2 answers (the first quote is the agent stored in slot 0), and a
//   question whose quotes match more than one pair of agents (identical round-2 texts) loses round 3.
// read: round 2, all four agents; round 3, the 2 chosen.
//
// CoT (the GSM8K-style 8-shot prompt of code/MATH/llmlp_gen_math_listwise_deeper_markov.py, but not
// that script as committed: an earlier, sequential version, "One agent solution:", whose messages
// carry no question and whose contexts keep their history):
// - round 1 and its stop rule as above;
// - round 2: agent i is shown, after its own round-1 answer (in its context), the latest answer of
//   every other agent in agent order: agents before it have already answered round 2, so those are
//   their round-2 answers (`readThisRound`), the agents after it their round-1 answers (`read`,
//   with i itself); the same stop rule, keeping the contexts of the agents that answered;
// - the ranker picks 2 agents; if their round-2 answers agree the run stops and keeps their two
//   contexts; else both answer a 3rd time: the first shown the second's round-2 answer, the second
//   the first's round-3 answer; the two contexts are kept, in the ranker's order.
// The two kept contexts carry no index: it is recovered from the quotes (agent i's round-2 message
// quotes agent j's round-2 answer where j < i, its round-1 answer where j > i), and an answer no
// kept message quotes is missing (`missing`): with agents (1, 2) chosen, agent 0's round-1 answer
// (the others were shown its round-2 answer), and in round 2 every unchosen agent after the later
// chosen one (only the ranker saw those).
//
// An answer is `extractMathAnswer` then `stripString` (null where it is empty or the Python would
// raise); `correct` is `isEquiv(gold, extracted)`, as eval_math.py grades. Pure apart from reading
// the files.

import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { extractMathAnswer, isEquiv, PythonError, stripString } from './math/equiv.ts';
import type { AgentAnswer, Converted, ConvertReport, MultistepQuestion } from './types.ts';

export type DylanMathVariant = 'cot' | 'complex';

/** The run's directory, relative to the checkout's root. */
export function dylanMathDir(variant: DylanMathVariant): string {
  return `exp/MATH/${variant === 'cot' ? 'CoT' : 'Complex'}`;
}

/** The table's name. */
export function dylanMathSource(variant: DylanMathVariant): string {
  return `dylan-math-${variant}`;
}

const AGENTS = 4;
const FILE = /_4_3\.json$/;

/** What the report counts, by reason (questions, rounds or answers: the reason says which). */
export const DROP = {
  unreadable: 'files skipped: not a JSON object (truncated?)',
  entry: 'questions: entry not [contexts, gold, level, type]',
  shape: 'questions: stored contexts match no stopping point of the protocol',
  inconsistent: 'questions: a quoted answer differs from the stored one, or a message is not the protocol\'s',
  pair: 'questions (CoT): the 2 chosen agents cannot be identified from the quotes',
  rankStop: 'rounds (Complex): round 2 dropped, the ranking stop kept only the 2 chosen contexts, without their indices',
  tops: 'rounds (Complex): round 3 dropped, its quotes match more than one pair of agents (identical round-2 texts)',
  sameTwice: 'rounds (Complex): round 3 dropped, the ranker chose the same agent twice',
  missing1: 'answers (CoT): round-1 answer not in the log (its context was not kept; the agents after it were shown its round-2 answer)',
  missing2: 'answers (CoT): round-2 answer not in the log (only the ranker was shown it)',
  raised: 'answers: extraction raised where the Python raises (answer null)',
} as const;

type Message = { role: string; content: string };
type Context = Message[];

const SUFFIX =
  '```\n\nUsing the reasoning from other agents as additional advice with critical thinking, can you give an updated answer? Examine your solution and that other agents step by step. Notice that the former answers might be all wrong.';
const OTHERS = 'These are the solutions to the problem from other agents: ';
const COT_SEP = '\n\nOne agent solution: ```';
const COMPLEX_SEP = "\n\nOne agent's solution: ```";
const complexPrefix = (question: string): string => 'Follow the given examples and answer the mathematics problem.\n\n' + question + '\n\n' + OTHERS;

/** The answers a debate message quotes, in order; null where it is not such a message or does not quote exactly n. */
function quotesOf(text: string, prefix: string, sep: string, n: number): string[] | null {
  if (!text.startsWith(prefix + sep) || !text.endsWith(SUFFIX)) return null;
  const parts = text.slice(prefix.length + sep.length, text.length - SUFFIX.length).split('```' + sep);
  return parts.length === n ? parts : null;
}

function isMessage(m: unknown): m is Message {
  return typeof m === 'object' && m !== null && typeof (m as Message).role === 'string' && typeof (m as Message).content === 'string';
}

/** [system, user, assistant, user, assistant, ...] */
function isContext(c: unknown): c is Context {
  if (!Array.isArray(c) || c.length < 3 || c.length % 2 === 0 || !c.every(isMessage)) return false;
  return c.every((m, i) => m.role === (i === 0 ? 'system' : i % 2 === 1 ? 'user' : 'assistant'));
}

const range = (a: number, b: number): number[] => Array.from({ length: Math.max(0, b - a) }, (_, i) => a + i);

/** What is known of one question: each (agent, round)'s answer text; a contradiction makes it inconsistent. */
class Texts {
  private readonly map = new Map<string, string>();
  inconsistent = false;
  learn(agent: number, round: number, text: string): void {
    const key = `${agent}/${round}`;
    const had = this.map.get(key);
    if (had === undefined) this.map.set(key, text);
    else if (had !== text) this.inconsistent = true;
  }
  get(agent: number, round: number): string | undefined {
    return this.map.get(`${agent}/${round}`);
  }
}

/** One round's answer rows as recovered: who answered, and what each was shown. */
type RoundPlan = { agents: number[]; read: (agent: number) => number[]; readThisRound?: (agent: number) => number[] };

/** The recovered answers and rounds (`cut`: why the rounds after these were dropped), or why the question is. */
type Recovered = { texts: Texts; rounds: RoundPlan[]; cut?: string } | { drop: string };

/** CoT: agent i's round-2 message quotes every other agent's latest answer (round 2 before i, round 1 after). */
function learnCotRound2(texts: Texts, agent: number, message: string): boolean {
  const quotes = quotesOf(message, OTHERS, COT_SEP, AGENTS - 1);
  if (quotes === null) return false;
  range(0, AGENTS)
    .filter((j) => j !== agent)
    .forEach((j, p) => texts.learn(j, j < agent ? 2 : 1, quotes[p]!));
  return true;
}

function recoverCot(question: string, ctxs: Context[]): Recovered {
  const lens = ctxs.map((c) => c.length);
  if (!ctxs.every((c) => c[1]!.content === question)) return { drop: DROP.inconsistent };
  const round2: RoundPlan = {
    agents: [],
    read: (i) => range(i, AGENTS),
    readThisRound: (i) => range(0, i),
  };
  if (ctxs.length >= 3 && ctxs.length <= AGENTS && lens.every((l) => l === 3)) {
    // stopped in round 1
    const texts = new Texts();
    ctxs.forEach((c, i) => texts.learn(i, 1, c[2]!.content));
    return { texts, rounds: [{ agents: range(0, ctxs.length), read: () => [] }] };
  }
  if (ctxs.length >= 3 && ctxs.length <= AGENTS && lens.every((l) => l === 5)) {
    // stopped in round 2, after agent ctxs.length - 1
    const texts = new Texts();
    ctxs.forEach((c, i) => {
      texts.learn(i, 1, c[2]!.content);
      texts.learn(i, 2, c[4]!.content);
    });
    for (const [i, c] of ctxs.entries()) if (!learnCotRound2(texts, i, c[3]!.content)) return { drop: DROP.inconsistent };
    if (texts.inconsistent) return { drop: DROP.inconsistent };
    return { texts, rounds: [{ agents: range(0, AGENTS), read: () => [] }, { ...round2, agents: range(0, ctxs.length) }] };
  }
  if (ctxs.length === 2 && (lens.every((l) => l === 5) || lens.every((l) => l === 7))) {
    // the ranker chose 2 (stored in its order): stopped there (5), or after their round 3 (7)
    const [x, y] = ctxs as [Context, Context];
    const third = lens[0] === 7;
    const fits: { texts: Texts; i: number; j: number }[] = [];
    for (const i of range(0, AGENTS)) {
      for (const j of range(0, AGENTS)) {
        if (i === j) continue;
        const texts = new Texts();
        for (const [agent, c] of [[i, x], [j, y]] as const) {
          texts.learn(agent, 1, c[2]!.content);
          texts.learn(agent, 2, c[4]!.content);
          if (third) texts.learn(agent, 3, c[6]!.content);
        }
        if (!learnCotRound2(texts, i, x[3]!.content) || !learnCotRound2(texts, j, y[3]!.content)) return { drop: DROP.inconsistent };
        if (third) {
          // round 3: the first shown the second's round-2 answer, the second the first's round-3 answer
          const qx = quotesOf(x[5]!.content, OTHERS, COT_SEP, 1);
          const qy = quotesOf(y[5]!.content, OTHERS, COT_SEP, 1);
          if (qx === null || qy === null) return { drop: DROP.inconsistent };
          texts.learn(j, 2, qx[0]!);
          texts.learn(i, 3, qy[0]!);
        }
        if (!texts.inconsistent) fits.push({ texts, i, j });
      }
    }
    if (fits.length !== 1) return { drop: DROP.pair };
    const { texts, i, j } = fits[0]!;
    const rounds: RoundPlan[] = [
      { agents: range(0, AGENTS), read: () => [] },
      { ...round2, agents: range(0, AGENTS) },
    ];
    if (third) {
      rounds.push({
        agents: [i, j].sort((a, b) => a - b),
        read: (a) => (a === i ? [i, j].sort((p, q) => p - q) : [j]),
        readThisRound: (a) => (a === j ? [i] : []),
      });
    }
    return { texts, rounds };
  }
  return { drop: DROP.shape };
}

function recoverComplex(question: string, ctxs: Context[]): Recovered {
  const lens = ctxs.map((c) => c.length);
  const prefix = complexPrefix(question);
  const round1: RoundPlan = { agents: range(0, AGENTS), read: () => [] };
  const round2: RoundPlan = { agents: [], read: () => range(0, AGENTS) };
  if (ctxs.length === 2 && lens.every((l) => l === 3) && ctxs[0]![1]!.content !== question) {
    // the ranking stop: the 2 chosen contexts as they stood, [system, round-2 message, round-2 answer]
    const message = ctxs[0]![1]!.content;
    const quotes = quotesOf(message, prefix, COMPLEX_SEP, AGENTS);
    if (quotes === null || ctxs[1]![1]!.content !== message) return { drop: DROP.inconsistent };
    const texts = new Texts();
    quotes.forEach((q, k) => texts.learn(k, 1, q));
    return { texts, rounds: [round1], cut: DROP.rankStop };
  }
  if (!ctxs.every((c) => c[1]!.content === question)) return { drop: DROP.inconsistent };
  const texts = new Texts();
  ctxs.forEach((c, k) => {
    for (let m = 2, r = 1; m < c.length && r <= 2; m += 2, r++) texts.learn(k, r, c[m]!.content);
  });
  if (ctxs.length >= 3 && ctxs.length <= AGENTS && lens.every((l) => l === 3)) {
    return { texts, rounds: [{ agents: range(0, ctxs.length), read: () => [] }] };
  }
  if (ctxs.length !== AGENTS) return { drop: DROP.shape };
  const answered2 = lens.filter((l) => l >= 5).length;
  const shape = lens.join(',');
  const stop2 = (answered2 === 3 && shape === '5,5,5,3') || (answered2 === 4 && shape === '5,5,5,5');
  const third = shape === '7,7,5,5';
  if (!stop2 && !third) return { drop: DROP.shape };
  // every round-2 message quotes the four round-1 answers in agent order
  for (const c of ctxs.filter((c) => c.length >= 5)) {
    const quotes = quotesOf(c[3]!.content, prefix, COMPLEX_SEP, AGENTS);
    if (quotes === null) return { drop: DROP.inconsistent };
    quotes.forEach((q, k) => texts.learn(k, 1, q));
  }
  if (texts.inconsistent) return { drop: DROP.inconsistent };
  const rounds = [round1, { ...round2, agents: range(0, answered2) }];
  if (!third) return { texts, rounds };
  // round 3: one message, quoting the chosen agents' round-2 answers in the ranker's order, stored in slots 0 and 1
  const message = ctxs[0]![5]!.content;
  const quotes = quotesOf(message, prefix, COMPLEX_SEP, 2);
  if (quotes === null || ctxs[1]![5]!.content !== message) return { drop: DROP.inconsistent };
  const tops: [number, number][] = [];
  for (const a of range(0, AGENTS)) for (const b of range(0, AGENTS)) if (texts.get(a, 2) === quotes[0] && texts.get(b, 2) === quotes[1]) tops.push([a, b]);
  if (tops.length === 0) return { drop: DROP.inconsistent };
  if (tops.length > 1) return { texts, rounds, cut: DROP.tops };
  const [a, b] = tops[0]!;
  if (a === b) return { texts, rounds, cut: DROP.sameTwice };
  // slot 0 holds the continuation of the ranker's first pick, slot 1 of its second
  texts.learn(a, 3, ctxs[0]![6]!.content);
  texts.learn(b, 3, ctxs[1]![6]!.content);
  const both = [a, b].sort((p, q) => p - q);
  return { texts, rounds: [...rounds, { agents: both, read: () => both }] };
}

type Tally = Record<string, number>;
const count = (tally: Tally, reason: string, n = 1): void => {
  if (n > 0) tally[reason] = (tally[reason] ?? 0) + n;
};

/** One answer row: the extracted answer, normalised (null where empty or where the Python would raise), graded as eval_math.py grades. */
function answerRow(text: string, gold: string, agent: number, read: number[], readThisRound: number[] | undefined, tally: Tally): AgentAnswer {
  let extracted: string;
  let answer: string | null;
  try {
    extracted = extractMathAnswer(text);
    answer = stripString(extracted);
  } catch (e) {
    if (!(e instanceof PythonError)) throw e;
    count(tally, DROP.raised);
    return { agent, answer: null, correct: false, read, ...(readThisRound !== undefined && readThisRound.length > 0 && { readThisRound }) };
  }
  return {
    agent,
    answer: answer === '' ? null : answer,
    correct: extracted !== '' && isEquiv(gold, extracted),
    read,
    ...(readThisRound !== undefined && readThisRound.length > 0 && { readThisRound }),
  };
}

/**
 * The table of one of DyLAN's MATH runs: `<root>/exp/MATH/CoT` or `Complex`, every `*_4_3.json` in
 * name order, questions in file order. `report.filesMissing` is empty: the converter reads what is
 * there, the caller knows what a snapshot lacks.
 */
export async function convertDylanMath(root: string, variant: DylanMathVariant): Promise<Converted> {
  const dir = dylanMathDir(variant);
  const source = dylanMathSource(variant);
  const names = (await readdir(join(root, dir))).filter((n) => FILE.test(n)).sort();
  const questions: MultistepQuestion[] = [];
  const dropped: Tally = {};
  const filesRead: string[] = [];
  for (const name of names) {
    const rel = `${dir}/${name}`;
    let data: unknown;
    try {
      data = JSON.parse(await readFile(join(root, rel), 'utf8'));
    } catch {
      count(dropped, DROP.unreadable);
      continue;
    }
    if (typeof data !== 'object' || data === null || Array.isArray(data)) {
      count(dropped, DROP.unreadable);
      continue;
    }
    filesRead.push(rel);
    const stem = name.replace(FILE, '');
    Object.entries(data).forEach(([prompt, entry], index) => {
      const q = convertQuestion(prompt, entry, variant, dropped);
      if (q !== null) questions.push({ id: `${stem}/${index}`, source, ...q });
    });
  }
  const report: ConvertReport = { source, filesRead, filesMissing: [], questions: questions.length, dropped };
  return { questions, report };
}

function convertQuestion(prompt: string, entry: unknown, variant: DylanMathVariant, dropped: Tally): Omit<MultistepQuestion, 'id' | 'source'> | null {
  if (!Array.isArray(entry) || entry.length !== 4) return drop(dropped, DROP.entry);
  const [ctxs, gold, level, type] = entry as unknown[];
  if (!Array.isArray(ctxs) || !ctxs.every(isContext) || typeof gold !== 'string' || typeof type !== 'string' || !(level === null || typeof level === 'number')) {
    return drop(dropped, DROP.entry);
  }
  const rec = variant === 'cot' ? recoverCot(prompt, ctxs) : recoverComplex(prompt, ctxs);
  if ('drop' in rec) return drop(dropped, rec.drop);
  if (rec.cut !== undefined) count(dropped, rec.cut);
  const rounds: AgentAnswer[][] = [];
  const missing: number[][] = [];
  rec.rounds.forEach((plan, r) => {
    const rows: AgentAnswer[] = [];
    const absent: number[] = [];
    for (const agent of plan.agents) {
      const text = rec.texts.get(agent, r + 1);
      if (text === undefined) {
        absent.push(agent);
        continue;
      }
      rows.push(answerRow(text, gold, agent, plan.read(agent), plan.readThisRound?.(agent), dropped));
    }
    if (absent.length > 0) count(dropped, r === 0 ? DROP.missing1 : DROP.missing2, absent.length);
    rounds.push(rows);
    missing.push(absent);
  });
  return {
    task: type,
    ...(level !== null && { level }),
    gold,
    rounds,
    ...(missing.some((m) => m.length > 0) && { missing }),
  };
}

function drop(dropped: Tally, reason: string): null {
  count(dropped, reason);
  return null;
}
