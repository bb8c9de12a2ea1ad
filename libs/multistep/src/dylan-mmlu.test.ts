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
// line cut to the questions kept.
const FIXTURE = join(import.meta.dirname, 'testing/fixtures/dylan-mmlu');

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
  it('4 agents: the rounds as run, gold from all four runs, the misfiled transcripts read from college_physics', async () => {
    const { questions, report } = await convertDylanMmlu(FIXTURE, 4);
    const source = 'dylan-mmlu-optimal7-4';
    expect(questions).toEqual([
      // consensus of 3 in round 0 (more than floor(8/3)), agent 3 never asked
      { id: 'abstract_algebra/0', source, task: 'abstract_algebra', gold: 'C', rounds: [[a(0, 'C', true), a(1, 'C', true), a(2, 'C', true)]] },
      // abstract_algebra/1 is left out: no run pins its gold and an answer (C or D) might be right
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
      // no gold letter, but C is ruled out by a run whose final C was wrong: every answer graded
      { id: 'abstract_algebra/3', source, task: 'abstract_algebra', rounds: [[a(0, 'C', false), a(1, 'C', false), a(3, 'C', false)]] },
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
      ],
      filesMissing: [],
      questions: 6,
      dropped: { [DYLAN_MMLU_DROP.ungraded]: 1, [DYLAN_MMLU_DROP.misfiled]: 3 },
    });
  });

  it('7 agents: transcripts taken from the end of a file longer than its results; a file cut short left out', async () => {
    const { questions, report } = await convertDylanMmlu(FIXTURE, 7);
    const source = 'dylan-mmlu-optimal7-7';
    expect(questions.map((q) => q.id)).toEqual(['abstract_algebra/0', 'abstract_algebra/2', 'abstract_algebra/3']);
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
    expect(questions[1]!.rounds[2]).toEqual([a(0, 'D', true, all7), a(5, 'D', true, all7)]);
    expect(report.questions).toBe(3);
    expect(report.dropped).toEqual({ [DYLAN_MMLU_DROP.ungraded]: 1, [DYLAN_MMLU_DROP.shortTranscripts]: 3 });
  });

  it('2 agents: every question, in subject then question order', async () => {
    const { questions } = await convertDylanMmlu(FIXTURE, 2);
    expect(questions.map((q) => [q.id, q.gold ?? null, q.rounds.length])).toEqual([
      ['abstract_algebra/0', 'C', 1],
      ['abstract_algebra/1', null, 1],
      ['abstract_algebra/2', 'D', 1],
      ['abstract_algebra/3', null, 1],
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
    expect(await convertDylanMmlu(FIXTURE, 3)).toEqual(await convertDylanMmlu(FIXTURE, 3));
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

  it('leaves out a file whose finals contradict the other runs, and grades the rest by them', async () => {
    const dir = join(root, 'contradict');
    // question 0: gold A (2 and 3 right with A); question 1: gold B (2 right with B)
    await run(dir, 2, 'x_test', [solo('A', 'A'), solo('B', 'B')], [true, true]);
    await run(dir, 3, 'x_test', [solo('A', 'A', 'A'), solo('C', 'C', 'C')], [true, false]);
    // the 4-agent file is off by one: its results contradict both others on both questions
    await run(dir, 4, 'x_test', [solo('B', 'B', 'B', 'B'), solo('A', 'A', 'A', 'A')], [true, true]);
    await run(dir, 7, 'x_test', [], [true]);
    const four = await convertDylanMmlu(dir, 4);
    expect(four.questions).toEqual([]);
    expect(four.report.dropped).toEqual({ [DYLAN_MMLU_DROP.contradicts]: 2 });
    expect(four.report.filesMissing).toEqual(['exp/MMLU/mmlu_optimal7_7/x_test_73.json']);
    const three = await convertDylanMmlu(dir, 3);
    expect(three.questions.map((q) => [q.id, q.gold, q.rounds[0]!.map((x) => x.correct)])).toEqual([
      ['x/0', 'A', [true, true, true]],
      ['x/1', 'B', [false, false, false]],
    ]);
    expect(three.report.dropped).toEqual({});
  });

  it('a tie that was right narrows the gold; an answer it leaves open drops the question', async () => {
    const dir = join(root, 'tie');
    // 2 agents disagree to the end: the final is one of A, B (the first to answer, not logged) and was right
    await run(dir, 2, 'y_test', [[['A', 'A', 'A'], ['B', 'B', 'B']]], [true]);
    // the 3-agent run: consensus on C, wrong
    await run(dir, 3, 'y_test', [solo('C', 'C', 'C')], [false]);
    const three = await convertDylanMmlu(dir, 3);
    expect(three.questions).toEqual([{ id: 'y/0', source: dylanMmluSource(3), task: 'y', rounds: [[a(0, 'C', false), a(1, 'C', false), a(2, 'C', false)]] }]);
    const two = await convertDylanMmlu(dir, 2);
    expect(two.questions).toEqual([]);
    expect(two.report.dropped).toEqual({ [DYLAN_MMLU_DROP.ungraded]: 1 });
    expect(two.report.filesMissing).toEqual(['exp/MMLU/mmlu_optimal7_4', 'exp/MMLU/mmlu_optimal7_7']);
  });

  it('a transcript out of the protocol\'s shape is left out', async () => {
    const dir = join(root, 'shape');
    // round 1 after a round 0 that was not full
    await run(dir, 2, 'z_test', [[['A', 'A', null], [null, 'A', null]], solo('-', '-')], [true, false]);
    const two = await convertDylanMmlu(dir, 2);
    expect(two.report.dropped).toEqual({ [DYLAN_MMLU_DROP.protocol]: 1 });
    // no letter in either reply: both wrong, whatever the gold
    expect(two.questions).toEqual([{ id: 'z/1', source: dylanMmluSource(2), task: 'z', rounds: [[a(0, null, false), a(1, null, false)]] }]);
  });

  it('refuses a variant it does not know', async () => {
    await expect(convertDylanMmlu(FIXTURE, 5 as DylanMmluVariant)).rejects.toThrow(InputError);
  });
});
