// DyLAN's MMLU runs (SALT-NLP/DyLAN, commit 572341b, MIT) as per-question tables: the four runs of
// the paper's Figure 3, `exp/MMLU/mmlu_optimal7_{2,3,4,7}/`, one table each (`dylan-mmlu-optimal7-<n>`).
//
// The protocol, as code/MMLU/LLMLP.py and LLM_Neuron.py run it (llmlp_listwise_mmlu.py, gpt-3.5-turbo,
// temperature 1, 3 rounds; `_<n>3` in a file name is <n> agents and 3 rounds; the README has the
// directories as the paper's Figure 3 with n agents, by the scripts (exp_mmlu.sh, anal_imp.sh) teams
// of n of the 7 roles picked by their Agent Importance Scores; which roles is not logged):
// - round 0: every agent, in a shuffled order, answers the question alone;
// - round 1: every agent is shown the round-0 replies of all agents (its own among them, shuffled and
//   presented as "solutions from other agents") and answers again;
// - round 2: with n <= 3 every agent again, shown all round-1 replies; with n > 3 a ranker call picks
//   2 of the round-1 replies, and that many agents answer (which agents: the positions of the picks
//   in a fresh shuffle, a slip in the code, so in effect 1 or 2 random agents), each still shown
//   all n round-1 replies (the pick does not filter what is shown);
// - early stop: within every round, once more than floor(2n/3) agents have answered (in round 2: more
//   than floor(2/3 * picks)), the run stops as soon as more than that many agree; the agreed answer
//   is the final one, else the most frequent answer of round 2 (ties: the first to answer, unknown).
// The answer of a reply is `parse_single_choice`: the last `(X)`, else the last `X)`, X in ABCDabcd,
// upper-cased; null where neither occurs (an agent declining to answer).
//
// What the logs hold: per question one JSON line, [agent][round] -> the reply or null where the
// agent did not answer (<subject>_test[_<offset>]_<n>3.json); beside it a .txt whose first line is
// the per-question `gold == final` list and the accuracy. Neither holds the question or its gold
// letter: the gold letter comes from the MMLU test set itself (a directory of its
// `<subject>_test.csv`), through the questions DyLAN sampled from it (mmlu.ts: pandas'
// `sample(frac=0.2, random_state=0)` of each subject, in that order; question k of a subject is the
// sample's k-th). Every question of a file that lines up with its results is kept and graded
// against it: an answer is right iff its letter is the gold one (null: wrong). The gold letter must
// agree with every such run's result (a True final answer is gold, a False one is not); one that
// does not is an error naming the subject and the question, as is a subject whose sample is
// shorter than the questions DyLAN asked: either says the MMLU copy is not the one DyLAN sampled.
//
// Files that do not line up: a results list longer than its transcripts (the run cut short) is
// left out; transcripts longer than their results (most of the 7-agent run's files hold more
// transcripts than results) are taken from the end; a file whose final answers then contradict the
// other runs' results (pairwise, the file with most contradictions first, until none is left; the
// logs alone decide this, not the MMLU letters) is left out: all but 3 of the 7-agent files with
// extra transcripts, none of the other runs'. One
// misfiling is known: in the 4-agent run the transcripts of conceptual_physics are the ones in
// college_physics_test_43.json (they line up with conceptual_physics_test_43.txt exactly; the file
// under the conceptual_physics name holds another run of it whose results are not in the checkout,
// and college physics's own transcripts are absent). The `*_merged_file.txt` files repeat the
// results of the split subjects (`_test_0`, `_test_100`, ...) and are not read. Pure apart from
// reading the files.

import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { InputError } from '@fugu/core';
import { dylanMmluSample, readMmluSubject, type MmluQuestion } from './mmlu.ts';
import { readSourceFile, requireSourceFile } from './source-files.ts';
import type { AgentAnswer, Converted, ConvertReport, MultistepQuestion } from './types.ts';

export const DYLAN_MMLU_VARIANTS = [2, 3, 4, 7] as const;
/** The number of agents of a run (the `mmlu_optimal7_<n>` directory). */
export type DylanMmluVariant = (typeof DYLAN_MMLU_VARIANTS)[number];

/** The run's directory, relative to the checkout's root. */
export function dylanMmluDir(variant: DylanMmluVariant): string {
  return `exp/MMLU/mmlu_optimal7_${variant}`;
}

/** The table's name. */
export function dylanMmluSource(variant: DylanMmluVariant): string {
  return `dylan-mmlu-optimal7-${variant}`;
}

const ROUNDS = 3;
const LETTERS = ['A', 'B', 'C', 'D'] as const;
const ALL = 0b1111;

/** Results whose transcripts were filed under another subject's name: variant -> results key -> transcripts key. */
const MISFILED: Partial<Record<DylanMmluVariant, Record<string, string>>> = {
  4: { conceptual_physics_test: 'college_physics_test' },
};

export const DYLAN_MMLU_DROP = {
  shortTranscripts: 'fewer transcripts than results (the run was cut short)',
  misfiled: 'transcripts absent (the file under this name holds another subject\'s run)',
  contradicts: 'transcripts do not line up with the results (their final answers contradict the other runs\' results)',
  protocol: 'transcript does not follow the protocol\'s rounds',
} as const;

/** code/MMLU/utils.py `parse_single_choice`: the last `(X)`, else the last `X)`, upper-cased; null if neither. */
export function parseSingleChoice(reply: string): string | null {
  const paren = [...reply.matchAll(/\(([ABCDabcd])\)/g)];
  const last = paren.at(-1);
  if (last) return last[1]!.toUpperCase();
  const alter = [...reply.matchAll(/([ABCDabcd])\)/g)];
  const alt = alter.at(-1);
  return alt ? alt[1]!.toUpperCase() : null;
}

/** One question's transcript: [agent][round] -> the reply, null where the agent did not answer. */
type Transcript = (string | null)[][];

/** One results file paired with its transcripts. */
type Unit = {
  variant: DylanMmluVariant;
  /** `abstract_algebra_test`, `professional_law_test_100` */
  key: string;
  subject: string;
  offset: number;
  results: boolean[];
  /** aligned with `results`; null: none to align */
  transcripts: Transcript[] | null;
  /** why the whole file is left out */
  drop?: string;
};

function bit(letter: string | null): number {
  const i = letter === null ? -1 : LETTERS.indexOf(letter as (typeof LETTERS)[number]);
  return i < 0 ? 0 : 1 << i;
}

/** The answers of each round: the agents that answered in it, in agent order. */
function roundsOf(t: Transcript): { agent: number; answer: string | null }[][] {
  const rounds: { agent: number; answer: string | null }[][] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const round: { agent: number; answer: string | null }[] = [];
    t.forEach((replies, agent) => {
      const reply = replies[r];
      if (reply !== null && reply !== undefined) round.push({ agent, answer: parseSingleChoice(reply) });
    });
    rounds.push(round);
  }
  return rounds;
}

/** Whether the rounds have the protocol's shape: a later round only after a full one, no gaps. */
function followsProtocol(t: Transcript, agents: number): boolean {
  if (t.length !== agents || t.some((a) => !Array.isArray(a) || a.length !== ROUNDS)) return false;
  const counts = roundsOf(t).map((r) => r.length);
  if (counts[0] === 0) return false;
  for (let r = 1; r < ROUNDS; r++) if (counts[r]! > 0 && counts[r - 1] !== agents) return false;
  return true;
}

/** The final answer's candidates: the most frequent answers of the last round anyone answered in. */
function finalCandidates(t: Transcript): (string | null)[] {
  const rounds = roundsOf(t).filter((r) => r.length > 0);
  const last = rounds.at(-1) ?? [];
  const counts = new Map<string | null, number>();
  for (const { answer } of last) counts.set(answer, (counts.get(answer) ?? 0) + 1);
  const top = Math.max(0, ...counts.values());
  return [...counts].filter(([, c]) => c === top).map(([a]) => a);
}

/** What one run's result says of the gold letter: the letters it leaves possible (0: it contradicts itself). */
function constraint(t: Transcript, correct: boolean): number {
  const cands = finalCandidates(t);
  if (correct) return cands.reduce((m, a) => m | bit(a), 0);
  if (cands.length === 1 && cands[0] !== null) return ALL & ~bit(cands[0]!);
  return ALL;
}

/** The first line of a DyLAN .txt: `[True, False, ...] 0.4`. */
export function parseResultsLine(text: string, file: string): boolean[] {
  const line = text.split('\n')[0] ?? '';
  const m = /^\[(.*)\] [0-9.e-]+\s*$/.exec(line);
  if (!m) throw new InputError('first line is not a results list `[True, False, ...] <accuracy>`', { file, line: 1 });
  const body = m[1]!.trim();
  if (body === '') return [];
  return body.split(',').map((s) => {
    const v = s.trim();
    if (v !== 'True' && v !== 'False') throw new InputError(`not True or False: ${JSON.stringify(v)}`, { file, line: 1 });
    return v === 'True';
  });
}

/** One JSON value a line (json.dumps + '\n'). */
function parseTranscripts(text: string, file: string): Transcript[] {
  const out: Transcript[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch (e) {
      throw new InputError(`not JSON (${(e as Error).message})`, { file, line: i + 1 }, { cause: e });
    }
    const ok = Array.isArray(v) && v.every((a) => Array.isArray(a) && a.every((r) => r === null || typeof r === 'string'));
    if (!ok) throw new InputError('not a list of agents\' replies by round', { file, line: i + 1 });
    out.push(v as Transcript);
  });
  return out;
}

const FILE_RE = /^(.+_test(?:_(\d+))?)_(\d)3\.(json|txt)$/;

type RunFiles = { units: Unit[]; read: string[]; missing: string[] };

async function readRun(root: string, variant: DylanMmluVariant): Promise<RunFiles> {
  const dir = dylanMmluDir(variant);
  let names: string[];
  try {
    names = (await readdir(join(root, dir))).sort();
  } catch {
    return { units: [], read: [], missing: [dir] };
  }
  const results = new Map<string, string>();
  const transcripts = new Map<string, string>();
  for (const name of names) {
    const m = FILE_RE.exec(name);
    if (!m || Number(m[3]) !== variant) continue;
    (m[4] === 'txt' ? results : transcripts).set(m[1]!, name);
  }
  const read: string[] = [];
  const missing: string[] = [];
  const parsed = new Map<string, Transcript[]>();
  const transcriptsOf = async (key: string): Promise<Transcript[] | null> => {
    const name = transcripts.get(key);
    if (name === undefined) return null;
    if (!parsed.has(key)) {
      const rel = `${dir}/${name}`;
      read.push(rel);
      parsed.set(key, parseTranscripts(await requireSourceFile(root, rel), rel));
    }
    return parsed.get(key)!;
  };
  const misfiled = MISFILED[variant] ?? {};
  const taken = new Set(Object.values(misfiled));
  const units: Unit[] = [];
  for (const [key, name] of results) {
    const rel = `${dir}/${name}`;
    read.push(rel);
    const res = parseResultsLine(await requireSourceFile(root, rel), rel);
    const m = /^(.+)_test(?:_(\d+))?$/.exec(key)!;
    const unit: Unit = { variant, key, subject: m[1]!, offset: Number(m[2] ?? 0), results: res, transcripts: null };
    units.push(unit);
    if (taken.has(key)) {
      unit.drop = DYLAN_MMLU_DROP.misfiled;
      continue;
    }
    const tkey = misfiled[key] ?? key;
    if (!transcripts.has(tkey)) missing.push(`${dir}/${key}_${variant}3.json`);
    const ts = await transcriptsOf(tkey);
    if (ts === null || ts.length < res.length) {
      unit.drop = DYLAN_MMLU_DROP.shortTranscripts;
      continue;
    }
    unit.transcripts = ts.slice(ts.length - res.length);
  }
  for (const [key, name] of transcripts) {
    if (!results.has(key) && !taken.has(key)) missing.push(`${dir}/${name.replace(/\.json$/, '.txt')}`);
  }
  return { units, read, missing };
}

/** The paths under exp/MMLU that the snapshot's MISSING.txt lists (absent from the checkout). */
async function snapshotMissing(root: string): Promise<string[]> {
  const text = await readSourceFile(root, 'MISSING.txt');
  if (text === undefined) return [];
  return text
    .split('\n')
    .map((l) => l.split('\t')[0]!.trim())
    .filter((p) => p.startsWith('exp/MMLU/'));
}

/** A subject's gold letters in DyLAN's order, and where each came from. */
type SubjectGold = { file: string; rows: number[]; questions: MmluQuestion[] };

/**
 * The gold letters of the questions DyLAN asked, per subject, from a copy of the MMLU test set
 * (mmlu.ts); an InputError (field `--mmlu`) where a subject's file is absent or its sample is
 * shorter than the questions DyLAN's runs asked of it (on DyLAN's logs the two are equal for every
 * subject; a test fixture's runs are cut short).
 */
async function goldOf(mmlu: string, units: Unit[]): Promise<Map<string, SubjectGold>> {
  const asked = new Map<string, number>();
  for (const u of units) asked.set(u.subject, Math.max(asked.get(u.subject) ?? 0, u.offset + u.results.length));
  const gold = new Map<string, SubjectGold>();
  for (const [subject, n] of [...asked].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const read = await readMmluSubject(mmlu, subject);
    if (read === undefined) throw new InputError(`no ${subject}_test.csv in the MMLU test set given (looked in it, test/ and data/test/): DyLAN asked ${n} ${subject} questions`, { file: mmlu, field: '--mmlu' });
    const rows = dylanMmluSample(read.questions.length);
    if (rows.length < n) {
      throw new InputError(
        `MMLU's ${subject} has ${read.questions.length} test questions, whose 20% sample is ${rows.length}, but DyLAN's runs asked ${n}: not the test set DyLAN sampled from (hendrycks/test, 14,042 questions)`,
        { file: join(mmlu, read.file), field: '--mmlu' },
      );
    }
    gold.set(subject, { file: read.file, rows, questions: rows.map((r) => read.questions[r]!) });
  }
  return gold;
}

/**
 * The table of one DyLAN MMLU run. Reads all four runs' directories under `root` (a checkout of
 * SALT-NLP/DyLAN): which files line up with their results is decided by the four runs together.
 * The gold letters come from `mmlu`, a copy of the MMLU test set (`<subject>_test.csv`, in it or
 * under test/ or data/test/). Rows in subject order, then question order; ids `<subject>/<index in
 * the subject's downsampled test set>` (the index into `dylanMmluSample`).
 */
export async function convertDylanMmlu(root: string, variant: DylanMmluVariant, mmlu: string): Promise<Converted> {
  if (!DYLAN_MMLU_VARIANTS.includes(variant)) throw new InputError(`no such DyLAN MMLU run: ${String(variant)} agents (one of ${DYLAN_MMLU_VARIANTS.join(', ')})`);
  const runs = new Map<DylanMmluVariant, RunFiles>();
  for (const v of DYLAN_MMLU_VARIANTS) runs.set(v, await readRun(root, v));
  const units = [...runs.values()].flatMap((r) => r.units);
  const gold = await goldOf(mmlu, units);

  // each aligned file's say on each question's gold letter
  type Say = { unit: Unit; index: number; mask: number };
  const says = new Map<string, Say[]>();
  const qid = (u: Unit, i: number): string => `${u.subject}/${u.offset + i}`;
  for (const u of units) {
    if (u.drop !== undefined || u.transcripts === null) continue;
    u.transcripts.forEach((t, i) => {
      if (!followsProtocol(t, u.variant)) return;
      const id = qid(u, i);
      if (!says.has(id)) says.set(id, []);
      says.get(id)!.push({ unit: u, index: i, mask: constraint(t, u.results[i]!) });
    });
  }
  // leave out the files that contradict the others, worst first, until none does
  for (;;) {
    const conflicts = new Map<Unit, number>();
    for (const list of says.values()) {
      const live = list.filter((s) => s.unit.drop === undefined);
      for (const s of live) {
        let n = s.mask === 0 ? 1 : 0;
        for (const o of live) if (o !== s && (s.mask & o.mask) === 0) n++;
        if (n > 0) conflicts.set(s.unit, (conflicts.get(s.unit) ?? 0) + n);
      }
    }
    if (conflicts.size === 0) break;
    const worst = Math.max(...conflicts.values());
    for (const [u, n] of conflicts) if (n === worst) u.drop = DYLAN_MMLU_DROP.contradicts;
  }
  // the MMLU letter must agree with every file that lines up
  const goldLetter = (u: Unit, i: number): string => gold.get(u.subject)!.questions[u.offset + i]!.answer;
  for (const list of says.values()) {
    for (const s of list) {
      if (s.unit.drop !== undefined) continue;
      const k = s.unit.offset + s.index;
      const g = gold.get(s.unit.subject)!;
      const letter = g.questions[k]!.answer;
      if ((s.mask & bit(letter)) !== 0) continue;
      const q = g.questions[k]!.question.replace(/\s+/g, ' ');
      const finals = finalCandidates(s.unit.transcripts![s.index]!).map((a) => a ?? 'none').join(' or ');
      throw new InputError(
        `${s.unit.subject} question ${k} (MMLU row ${g.rows[k]! + 1}: "${q.length > 80 ? `${q.slice(0, 80)}...` : q}"): MMLU's gold letter ${letter} contradicts ${dylanMmluDir(s.unit.variant)}/${s.unit.key}_${s.unit.variant}3.txt, whose result is ${s.unit.results[s.index] ? 'True' : 'False'} for the final answer ${finals}: not the test set DyLAN sampled from`,
        { file: join(mmlu, g.file), field: '--mmlu' },
      );
    }
  }

  const run = runs.get(variant)!;
  const source = dylanMmluSource(variant);
  const dropped: Record<string, number> = {};
  const drop = (reason: string, n = 1): void => {
    if (n > 0) dropped[reason] = (dropped[reason] ?? 0) + n;
  };
  const questions: MultistepQuestion[] = [];
  const own = [...run.units].sort((a, b) => (a.subject < b.subject ? -1 : a.subject > b.subject ? 1 : a.offset - b.offset));
  for (const u of own) {
    if (u.drop !== undefined || u.transcripts === null) {
      drop(u.drop ?? DYLAN_MMLU_DROP.shortTranscripts, u.results.length);
      continue;
    }
    u.transcripts.forEach((t, i) => {
      const id = qid(u, i);
      if (!followsProtocol(t, variant)) return drop(DYLAN_MMLU_DROP.protocol);
      const g = goldLetter(u, i);
      const rounds: AgentAnswer[][] = [];
      let previous: number[] = [];
      for (const round of roundsOf(t)) {
        if (round.length === 0) break;
        rounds.push(round.map(({ agent, answer }) => ({ agent, answer, correct: answer === g, read: [...previous] })));
        previous = round.map((a) => a.agent);
      }
      questions.push({ id, source, task: u.subject, gold: g, rounds });
    });
  }
  const report: ConvertReport = {
    source,
    filesRead: [...[...runs.values()].flatMap((r) => r.read), ...[...gold.values()].map((g) => `mmlu:${g.file}`)],
    filesMissing: [...new Set([...(await snapshotMissing(root)), ...[...runs.values()].flatMap((r) => r.missing)])].sort(),
    questions: questions.length,
    dropped,
  };
  return { questions, report };
}
