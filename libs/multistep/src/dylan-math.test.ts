import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { convertDylanMath, DROP } from './dylan-math.ts';
import type { AgentAnswer, MultistepQuestion } from './types.ts';

// The fixture: 7 questions cut from DyLAN's logs (exp/MATH/CoT and Complex at commit 572341b), each
// kept whole apart from two cuts made the same way in every string (so that every quote still
// matches the reply it quotes): the prompt's few-shot examples replaced by a placeholder, and the
// middle of each long reply elided (its head and enough of its tail that the answer read from it
// is the same). Their rows here are the rows of the full tables (checked against an independent
// Python conversion with DyLAN's own util.py).
const FIXTURE = join(import.meta.dirname, 'testing', 'fixtures', 'dylan-math');

const solo = (agent: number, answer: string | null, correct: boolean): AgentAnswer => ({ agent, answer, correct, read: [] });
const row = (agent: number, answer: string | null, correct: boolean, read: number[], readThisRound?: number[]): AgentAnswer => ({
  agent,
  answer,
  correct,
  read,
  ...(readThisRound && { readThisRound }),
});

describe('convertDylanMath: CoT (the sequential protocol)', () => {
  it('converts the fixture to the exact rows, in file and question order', async () => {
    const { questions, report } = await convertDylanMath(FIXTURE, 'cot');
    const expected: MultistepQuestion[] = [
      {
        // originally prealgebra_1302_1456 #98: the first three agents agree, round 1 stops after agent 2
        id: 'prealgebra_1302_1456/0',
        source: 'dylan-math-cot',
        task: 'Prealgebra',
        level: 2,
        gold: '0.73',
        rounds: [[solo(0, '0.73', true), solo(1, '0.73', true), solo(2, '0.73', true)]],
      },
      {
        // #15: round 2 stops after agent 2 (three agree); agent 3's round-1 answer is read from the
        // round-2 messages' quotes; agent i was shown agents before it in round 2, after it in round 1
        id: 'prealgebra_1302_1456/1',
        source: 'dylan-math-cot',
        task: 'Prealgebra',
        level: 3,
        gold: '4a-2',
        rounds: [
          [solo(0, '-2', false), solo(1, '2', false), solo(2, '2', false), solo(3, '-2', false)],
          [row(0, '-2', false, [0, 1, 2, 3]), row(1, '-2', false, [1, 2, 3], [0]), row(2, '-2', false, [2, 3], [0, 1])],
        ],
      },
      {
        // precalculus_0_251 #50: no stop; the ranker chose agents 1 and 2 (stored in that order, the
        // only pair their round-2 messages' quotes fit); round 3: agent 1 shown agent 2's round-2
        // answer, agent 2 shown agent 1's round-3 answer. Agent 0's round-1 answer (the others saw
        // its round-2 answer) and agent 3's round-2 answer (only the ranker saw it) are not in the log.
        id: 'precalculus_0_251/0',
        source: 'dylan-math-cot',
        task: 'Precalculus',
        level: 2,
        gold: '-12+15i',
        rounds: [
          [solo(1, '-12+15i', true), solo(2, '-3-15i', false), solo(3, '-12+15i', true)],
          [row(0, '-3', false, [0, 1, 2, 3]), row(1, '-3', false, [1, 2, 3], [0]), row(2, '-12+15i', true, [2, 3], [0, 1])],
          [row(1, '-12+15i', true, [1, 2]), row(2, '-12+15i', true, [2], [1])],
        ],
        missing: [[0], [3], []],
      },
    ];
    expect(questions).toEqual(expected);
    expect(report).toEqual({
      source: 'dylan-math-cot',
      filesRead: ['exp/MATH/CoT/prealgebra_1302_1456_4_3.json', 'exp/MATH/CoT/precalculus_0_251_4_3.json'],
      filesMissing: [],
      questions: 3,
      dropped: { [DROP.missing1]: 1, [DROP.missing2]: 1 },
    });
  });
});

describe('convertDylanMath: Complex (the script as committed)', () => {
  it('converts the fixture to the exact rows, the round-3 answers attributed to the agents the ranker chose', async () => {
    const { questions, report } = await convertDylanMath(FIXTURE, 'complex');
    const all = [0, 1, 2, 3];
    const expected: MultistepQuestion[] = [
      {
        // number_theory_1202_1292 #23: the round-3 message quotes agent 1's then agent 3's round-2
        // answer; the script stored their replies in the slots of agents 0 and 1 (496 in slot 0,
        // 126 in slot 1): they belong to agents 1 and 3
        id: 'number_theory_1202_1292/0',
        source: 'dylan-math-complex',
        task: 'Number Theory',
        level: 4,
        gold: '42',
        rounds: [
          [solo(0, '36', false), solo(1, '44_7', false), solo(2, '496', false), solo(3, '32', false)],
          [row(0, '32', false, all), row(1, '497', false, all), row(2, '496', false, all), row(3, '496', false, all)],
          [row(1, '496', false, [1, 3]), row(3, '126', false, [1, 3])],
        ],
      },
      {
        // #18: agents 0 and 3, and 1 and 2, gave identical round-2 texts: the round-3 quotes fit
        // more than one pair, so round 3 is dropped
        id: 'number_theory_1202_1292/1',
        source: 'dylan-math-complex',
        task: 'Number Theory',
        level: 3,
        gold: '97',
        rounds: [
          [solo(0, '87', false), solo(1, '100', false), solo(2, '89', false), solo(3, '91', false)],
          [row(0, '87', false, all), row(1, '91', false, all), row(2, '91', false, all), row(3, '87', false, all)],
        ],
      },
      {
        // prealgebra_1457_1616 #63: the 2 chosen agreed after round 2, and only their two contexts
        // were kept, without indices: round 1 comes from the quotes, round 2 is dropped
        id: 'prealgebra_1457_1616/0',
        source: 'dylan-math-complex',
        task: 'Prealgebra',
        level: 5,
        gold: '\\frac{1}{11}',
        rounds: [[solo(0, '\\frac{1}{11}', true), solo(1, '\\frac{1}{11}', true), solo(2, '\\frac{1}{9}', false), solo(3, '\\frac{5}{11}', false)]],
      },
      {
        // prealgebra_972_1141 #43: round 1 stops after agent 2
        id: 'prealgebra_972_1141/0',
        source: 'dylan-math-complex',
        task: 'Prealgebra',
        level: 1,
        gold: '-16',
        rounds: [[solo(0, '-16', true), solo(1, '-16', true), solo(2, '-16', true)]],
      },
    ];
    expect(questions).toEqual(expected);
    expect(report).toEqual({
      source: 'dylan-math-complex',
      filesRead: ['exp/MATH/Complex/number_theory_1202_1292_4_3.json', 'exp/MATH/Complex/prealgebra_1457_1616_4_3.json', 'exp/MATH/Complex/prealgebra_972_1141_4_3.json'],
      filesMissing: [],
      questions: 4,
      dropped: { [DROP.tops]: 1, [DROP.rankStop]: 1 },
    });
  });
});

describe('convertDylanMath: what it leaves out', () => {
  it('skips a truncated file and a question whose contexts fit no stopping point, and counts them', async () => {
    const root = await mkdtemp(join(tmpdir(), 'dylan-math-'));
    try {
      const dir = join(root, 'exp', 'MATH', 'Complex');
      await mkdir(dir, { recursive: true });
      const good = await readFile(join(FIXTURE, 'exp', 'MATH', 'Complex', 'prealgebra_972_1141_4_3.json'), 'utf8');
      await writeFile(join(dir, 'algebra_1_2_4_3.json'), good.slice(0, 500));
      const [prompt, entry] = Object.entries(JSON.parse(good) as Record<string, [unknown[][], string, number, string]>)[0]!;
      // agents 0 and 1 only: round 1 cannot stop before the 3rd agent
      await writeFile(join(dir, 'prealgebra_3_4_4_3.json'), JSON.stringify({ [prompt]: [entry[0].slice(0, 2), ...entry.slice(1)] }));
      await writeFile(join(dir, 'prealgebra_5_6_4_3.json'), good);
      await writeFile(join(dir, 'responses_total.txt'), '3\n');
      const { questions, report } = await convertDylanMath(root, 'complex');
      expect(questions.map((q) => q.id)).toEqual(['prealgebra_5_6/0']);
      expect(report.filesRead).toEqual(['exp/MATH/Complex/prealgebra_3_4_4_3.json', 'exp/MATH/Complex/prealgebra_5_6_4_3.json']);
      expect(report.dropped).toEqual({ [DROP.unreadable]: 1, [DROP.shape]: 1 });
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
