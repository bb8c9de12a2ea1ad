import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { convertDylanMmlu, DYLAN_MMLU_DROP, dylanMmluSource, parseResultsLine, parseSingleChoice, type DylanMmluVariant } from './dylan-mmlu.ts';
import type { AgentAnswer } from './types.ts';

// Cut from SALT-NLP/DyLAN at 572341b, exp/MMLU: the first 4 abstract_algebra questions of each run
// (the 7-agent file with the one stale transcript it has before them), the first 3 conceptual_physics
// questions of the 2-, 3- and 4-agent runs (the 4-agent one with both files of the misfiling), and the
// 7-agent college_biology file (1 transcript, its results cut to 3). Replies whole; each .txt's first
// line cut to the questions kept. The MMLU test set's stand-ins: testing/fixtures/mmlu/README.md (the
// gold letters of the rows DyLAN asked are MMLU's).
const FIXTURE = join(import.meta.dirname, 'testing/fixtures/dylan-mmlu');
const MMLU = join(import.meta.dirname, 'testing/fixtures/mmlu');

const a = (agent: number, answer: string | null, correct: boolean, read: number[] = []): AgentAnswer => ({ agent, answer, correct, read });
const all4 = [0, 1, 2, 3];
const all7 = [0, 1, 2, 3, 4, 5, 6];

describe('parseSingleChoice', () => {
  it('takes the last (X), upper-cased', () => {
    expect(parseSingleChoice('(A) is tempting, but the answer is (c).')).toBe('C');
  });
  it('else the last X)', () => {
    expect(parseSingleChoice('Options A) and B) ... I pick b) here')).toBe('B');
    // as in the Python, any of the letters before a parenthesis counts, inside a word too
    expect(parseSingleChoice('a lamb) and a cat)')).toBe('B');
    expect(parseSingleChoice('f(a) beats a lamb)')).toBe('A');
  });
  it('is null without either, and ignores letters past D', () => {
    expect(parseSingleChoice('As an economist I cannot answer this. My answer is (E).')).toBeNull();
    expect(parseSingleChoice('')).toBeNull();
  });
});

describe('parseResultsLine', () => {
  it('reads the per-question list of the first line', () => {
    expect(parseResultsLine('[True, False, True] 0.6666666666666666\n62 3.1\n', 'x.txt')).toEqual([true, false, true]);
  });
  it('refuses another first line', () => {
    expect(() => parseResultsLine('62 3.1\n', 'x.txt')).toThrow(InputError);
    expect(() => parseResultsLine('[True, Maybe] 0.5', 'x.txt')).toThrow(/not True or False/);
  });
});

describe('convertDylanMmlu on the fixture', () => {
  it('4 agents: the rounds as run, gold from MMLU, the misfiled transcripts read from college_physics', async () => {
    const { questions, report } = await convertDylanMmlu(FIXTURE, 4, MMLU);
    const source = 'dylan-mmlu-optimal7-4';
    expect(questions).toEqual([
      // consensus of 3 in round 0 (more than floor(8/3)), agent 3 never asked
      { id: 'abstract_algebra/0', source, task: 'abstract_algebra', gold: 'C', rounds: [[a(0, 'C', true), a(1, 'C', true), a(2, 'C', true)]] },
      // no run's final answer was right (gold A): kept, with the two agents right alone in round 0
      // who left A in round 1 (the old converter, gold from the runs' results, dropped it)
      {
        id: 'abstract_algebra/1',
        source,
        task: 'abstract_algebra',
        gold: 'A',
        rounds: [
          [a(0, 'A', true), a(1, 'A', true), a(2, null, false), a(3, 'D', false)],
          [a(0, 'B', false, all4), a(1, 'A', true, all4), a(2, 'D', false, all4), a(3, 'C', false, all4)],
          [a(1, 'B', false, all4), a(2, 'D', false, all4)],
        ],
      },
      {
        id: 'abstract_algebra/2',
        source,
        task: 'abstract_algebra',
        gold: 'D',
        rounds: [
          [a(0, 'C', false), a(1, 'C', false), a(2, null, false), a(3, null, false)],
          [a(0, 'C', false, all4), a(1, 'D', true, all4), a(2, 'C', false, all4), a(3, 'C', false, all4)],
        ],
      },
      { id: 'abstract_algebra/3', source, task: 'abstract_algebra', gold: 'A', rounds: [[a(0, 'C', false), a(1, 'C', false), a(3, 'C', false)]] },
      { id: 'conceptual_physics/0', source, task: 'conceptual_physics', gold: 'B', rounds: [[a(0, 'B', true), a(1, 'B', true), a(2, null, false), a(3, 'B', true)]] },
      { id: 'conceptual_physics/1', source, task: 'conceptual_physics', gold: 'B', rounds: [[a(0, 'B', true), a(1, 'B', true), a(3, 'B', true)]] },
      { id: 'conceptual_physics/2', source, task: 'conceptual_physics', gold: 'C', rounds: [[a(0, 'A', false), a(1, 'A', false), a(2, 'A', false)]] },
    ]);
    const dir = (v: number): string => `exp/MMLU/mmlu_optimal7_${v}`;
    expect(report).toEqual({
      source,
      filesRead: [
        `${dir(2)}/abstract_algebra_test_23.txt`,
        `${dir(2)}/abstract_algebra_test_23.json`,
        `${dir(2)}/conceptual_physics_test_23.txt`,
        `${dir(2)}/conceptual_physics_test_23.json`,
        `${dir(3)}/abstract_algebra_test_33.txt`,
        `${dir(3)}/abstract_algebra_test_33.json`,
        `${dir(3)}/conceptual_physics_test_33.txt`,
        `${dir(3)}/conceptual_physics_test_33.json`,
        `${dir(4)}/abstract_algebra_test_43.txt`,
        `${dir(4)}/abstract_algebra_test_43.json`,
        `${dir(4)}/college_physics_test_43.txt`,
        `${dir(4)}/conceptual_physics_test_43.txt`,
        `${dir(4)}/college_physics_test_43.json`,
        `${dir(7)}/abstract_algebra_test_73.txt`,
        `${dir(7)}/abstract_algebra_test_73.json`,
        `${dir(7)}/college_biology_test_73.txt`,
        `${dir(7)}/college_biology_test_73.json`,
        'mmlu:abstract_algebra_test.csv',
        'mmlu:college_biology_test.csv',
        'mmlu:college_physics_test.csv',
        'mmlu:test/conceptual_physics_test.csv',
      ],
      filesMissing: [],
      questions: 7,
      dropped: { [DYLAN_MMLU_DROP.misfiled]: 3 },
    });
  });

  it('7 agents: transcripts taken from the end of a file longer than its results; a file cut short left out', async () => {
    const { questions, report } = await convertDylanMmlu(FIXTURE, 7, MMLU);
    const source = 'dylan-mmlu-optimal7-7';
    expect(questions.map((q) => q.id)).toEqual(['abstract_algebra/0', 'abstract_algebra/1', 'abstract_algebra/2', 'abstract_algebra/3']);
    expect(questions[0]).toEqual({
      id: 'abstract_algebra/0',
      source,
      task: 'abstract_algebra',
      gold: 'C',
      rounds: [
        [a(0, null, false), a(1, null, false), a(2, 'C', true), a(3, 'C', true), a(4, null, false), a(5, 'C', true), a(6, 'C', true)],
        // 5 alike of 7 (more than floor(14/3)): stopped after the fifth
        [a(0, 'C', true, all7), a(3, 'C', true, all7), a(4, 'C', true, all7), a(5, 'C', true, all7), a(6, 'C', true, all7)],
      ],
    });
    // round 2 with more than 3 agents: the ranker's 2 answer, each shown all 7 round-1 replies
    expect(questions[2]!.rounds[2]).toEqual([a(0, 'D', true, all7), a(5, 'D', true, all7)]);
    expect(report.questions).toBe(4);
    expect(report.dropped).toEqual({ [DYLAN_MMLU_DROP.shortTranscripts]: 3 });
  });

  it('2 agents: every question, in subject then question order', async () => {
    const { questions } = await convertDylanMmlu(FIXTURE, 2, MMLU);
    expect(questions.map((q) => [q.id, q.gold, q.rounds.length])).toEqual([
      ['abstract_algebra/0', 'C', 1],
      ['abstract_algebra/1', 'A', 1],
      ['abstract_algebra/2', 'D', 1],
      ['abstract_algebra/3', 'A', 1],
      ['conceptual_physics/0', 'B', 1],
      ['conceptual_physics/1', 'B', 1],
      ['conceptual_physics/2', 'C', 3],
    ]);
    expect(questions[6]!.rounds).toEqual([
      [a(0, 'A', false), a(1, 'C', true)],
      [a(0, 'A', false, [0, 1]), a(1, 'C', true, [0, 1])],
      [a(0, 'C', true, [0, 1]), a(1, 'A', false, [0, 1])],
    ]);
  });

  it('is deterministic', async () => {
    expect(await convertDylanMmlu(FIXTURE, 3, MMLU)).toEqual(await convertDylanMmlu(FIXTURE, 3, MMLU));
  });
});

describe('convertDylanMmlu on made-up runs', () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'fugu-dylan-mmlu-'));
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  // replies: [agent][round] -> a letter (written "(X)"), '-' for a reply without one, null where the agent did not answer
  type Q = (string | null)[][];
  const line = (q: Q): string => JSON.stringify(q.map((agent) => agent.map((r) => (r === null ? null : r === '-' ? 'I cannot say.' : `So (${r}).`))));
  async function run(dir: string, v: DylanMmluVariant, key: string, qs: Q[], results: boolean[]): Promise<void> {
    const d = join(dir, 'exp/MMLU', `mmlu_optimal7_${v}`);
    await mkdir(d, { recursive: true });
    if (qs.length > 0) await writeFile(join(d, `${key}_${v}3.json`), qs.map(line).join('\n') + '\n');
    const py = results.map((b) => (b ? 'True' : 'False')).join(', ');
    await writeFile(join(d, `${key}_${v}3.txt`), `[${py}] 0.5\n1 1\n`);
  }
  const solo = (...letters: string[]): Q => letters.map((l) => [l, null, null]);
  // a subject of the MMLU test set: n rows, the letters of the ones given (the rest A); DyLAN's sample
  // of 10 rows is rows 2 then 8, of 5 rows row 2 (mmlu.test.ts pins numpy's permutations)
  async function mmlu(dir: string, subject: string, n: number, letters: Record<number, string>): Promise<void> {
    await mkdir(join(dir, 'mmlu'), { recursive: true });
    const rows = Array.from({ length: n }, (_, i) => `"${subject} question ${i}",a,b,c,d,${letters[i] ?? 'A'}`);
    await writeFile(join(dir, 'mmlu', `${subject}_test.csv`), `${rows.join('\n')}\n`);
  }

  it('leaves out a file whose finals contradict the other runs, and grades the rest by MMLU', async () => {
    const dir = join(root, 'contradict');
    // question 0: gold A; question 1: gold B
    await mmlu(dir, 'x', 10, { 2: 'A', 8: 'B' });
    await run(dir, 2, 'x_test', [solo('A', 'A'), solo('B', 'B')], [true, true]);
    await run(dir, 3, 'x_test', [solo('A', 'A', 'A'), solo('C', 'C', 'C')], [true, false]);
    // the 4-agent file is off by one: its results contradict both others on both questions
    await run(dir, 4, 'x_test', [solo('B', 'B', 'B', 'B'), solo('A', 'A', 'A', 'A')], [true, true]);
    await run(dir, 7, 'x_test', [], [true]);
    const four = await convertDylanMmlu(dir, 4, join(dir, 'mmlu'));
    expect(four.questions).toEqual([]);
    expect(four.report.dropped).toEqual({ [DYLAN_MMLU_DROP.contradicts]: 2 });
    expect(four.report.filesMissing).toEqual(['exp/MMLU/mmlu_optimal7_7/x_test_73.json']);
    const three = await convertDylanMmlu(dir, 3, join(dir, 'mmlu'));
    expect(three.questions.map((q) => [q.id, q.gold, q.rounds[0]!.map((x) => x.correct)])).toEqual([
      ['x/0', 'A', [true, true, true]],
      ['x/1', 'B', [false, false, false]],
    ]);
    expect(three.report.dropped).toEqual({});
  });

  it('keeps a question no run got right, graded by its MMLU letter', async () => {
    const dir = join(root, 'unsolved');
    await mmlu(dir, 'y', 5, { 2: 'D' });
    // 2 agents disagree to the end (the final is one of A, B) and were wrong; the 3-agent run agreed on C, wrong
    await run(dir, 2, 'y_test', [[['A', 'A', 'A'], ['D', 'B', 'B']]], [false]);
    await run(dir, 3, 'y_test', [solo('C', 'C', 'C')], [false]);
    const two = await convertDylanMmlu(dir, 2, join(dir, 'mmlu'));
    expect(two.questions).toEqual([
      {
        id: 'y/0',
        source: dylanMmluSource(2),
        task: 'y',
        gold: 'D',
        rounds: [[a(0, 'A', false), a(1, 'D', true)], [a(0, 'A', false, [0, 1]), a(1, 'B', false, [0, 1])], [a(0, 'A', false, [0, 1]), a(1, 'B', false, [0, 1])]],
      },
    ]);
    expect(two.report.dropped).toEqual({});
    expect(two.report.filesMissing).toEqual(['exp/MMLU/mmlu_optimal7_4', 'exp/MMLU/mmlu_optimal7_7']);
    expect((await convertDylanMmlu(dir, 3, join(dir, 'mmlu'))).questions.map((q) => q.gold)).toEqual(['D']);
  });

  it('a transcript out of the protocol\'s shape is left out', async () => {
    const dir = join(root, 'shape');
    await mmlu(dir, 'z', 10, { 2: 'A', 8: 'C' });
    // round 1 after a round 0 that was not full
    await run(dir, 2, 'z_test', [[['A', 'A', null], [null, 'A', null]], solo('-', '-')], [true, false]);
    const two = await convertDylanMmlu(dir, 2, join(dir, 'mmlu'));
    expect(two.report.dropped).toEqual({ [DYLAN_MMLU_DROP.protocol]: 1 });
    // no letter in either reply: both wrong
    expect(two.questions).toEqual([{ id: 'z/1', source: dylanMmluSource(2), task: 'z', gold: 'C', rounds: [[a(0, null, false), a(1, null, false)]] }]);
  });

  it('an MMLU copy that is not the one DyLAN sampled is an error naming the subject and question', async () => {
    const dir = join(root, 'not-sampled');
    await run(dir, 2, 'w_test', [solo('A', 'A'), solo('B', 'B')], [true, false]);
    const m = join(dir, 'mmlu');
    // no file for the subject
    await mkdir(m, { recursive: true });
    await expect(convertDylanMmlu(dir, 2, m)).rejects.toThrow(/no w_test\.csv in the MMLU test set given .*DyLAN asked 2 w questions/);
    // a sample shorter than the questions asked
    await mmlu(dir, 'w', 5, {});
    await expect(convertDylanMmlu(dir, 2, m)).rejects.toThrow(/MMLU's w has 5 test questions, whose 20% sample is 1, but DyLAN's runs asked 2/);
    // a letter the run's result contradicts: question 0 (row 3) was answered A, True
    await mmlu(dir, 'w', 10, { 2: 'C', 8: 'C' });
    const e = await convertDylanMmlu(dir, 2, m).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(InputError);
    expect((e as InputError).field).toBe('--mmlu');
    expect((e as Error).message).toContain('w question 0 (MMLU row 3: "w question 2"): MMLU\'s gold letter C contradicts exp/MMLU/mmlu_optimal7_2/w_test_23.txt, whose result is True for the final answer A');
    // the letters DyLAN graded against: both questions kept
    await mmlu(dir, 'w', 10, { 2: 'A', 8: 'C' });
    expect((await convertDylanMmlu(dir, 2, m)).questions.map((q) => [q.id, q.gold])).toEqual([['w/0', 'A'], ['w/1', 'C']]);
  });

  it('refuses a variant it does not know', async () => {
    await expect(convertDylanMmlu(FIXTURE, 5 as DylanMmluVariant, MMLU)).rejects.toThrow(InputError);
  });
});
