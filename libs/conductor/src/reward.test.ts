import { InputError, parseUsd } from '@fugu/core';
import { describe, expect, it } from 'vitest';
import { DEFAULT_REWARD_CONFIG, picoToUsd, rewardConfig, rewardOf, scoreWorkflow } from './reward.ts';
import { parseWorkflow } from './text.ts';

describe('rewardOf', () => {
  it('0 unparsed, 1 correct, 0.5 otherwise, 0 without a final answer', () => {
    expect(DEFAULT_REWARD_CONFIG).toMatchObject({ parseFailure: 0, correct: 1, incorrect: 0.5 });
    expect(rewardOf({ parsed: false })).toMatchObject({ reward: 0, outcome: 'unparsed' });
    expect(rewardOf({ parsed: true, score: 1 })).toMatchObject({ reward: 1, outcome: 'correct', score: 1 });
    expect(rewardOf({ parsed: true, score: 0 })).toMatchObject({ reward: 0.5, outcome: 'incorrect' });
    expect(rewardOf({ parsed: true, score: 0.8 })).toMatchObject({ reward: 0.5, outcome: 'incorrect' });
    expect(rewardOf({ parsed: true })).toMatchObject({ reward: 0, outcome: 'unanswered' });
  });

  it('takes configured values and threshold', () => {
    const c = { correct: 2, incorrect: -1, parseFailure: -2, correctAt: 0.5 };
    expect(rewardOf({ parsed: true, score: 0.6 }, c).reward).toBe(2);
    expect(rewardOf({ parsed: true, score: 0.4 }, c).reward).toBe(-1);
    expect(rewardOf({ parsed: false }, c).reward).toBe(-2);
  });

  it('subtracts mu x dollars, dollars exact from picodollars', () => {
    const pico = parseUsd('0.012345678901');
    expect(picoToUsd(pico)).toBe(0.012345678901);
    expect(picoToUsd(123_456_789_012_345_678n)).toBe(Number('123456.789012345678'));
    const r = rewardOf({ parsed: true, score: 1, costPico: parseUsd('0.02') }, { costPerUsd: 10 });
    expect(r).toMatchObject({ base: 1, usd: 0.02, costTerm: 0.2, outcome: 'correct' });
    expect(r.reward).toBeCloseTo(0.8, 12);
    expect(rewardOf({ parsed: false, costPico: parseUsd('0.5') }, { costPerUsd: 1 }).reward).toBe(-0.5);
  });

  it('rejects a bad config or score with an InputError naming the field', () => {
    expect(() => rewardConfig({ costPerUsd: -1 })).toThrow(/costPerUsd/);
    expect(() => rewardConfig({ correct: Number.NaN })).toThrow(/correct must be a finite number/);
    expect(() => rewardConfig({ correctAt: 2 })).toThrow(InputError);
    expect(() => rewardOf({ parsed: true, score: 1.5 })).toThrow(/score/);
  });
});

describe('scoreWorkflow', () => {
  const parsed = parseWorkflow('model id = [0]\nsubtasks = ["a"]\naccess list = [[]]', { poolSize: 1 });
  const unparsed = parseWorkflow('no lists', { poolSize: 1 });

  it('runs the verifier handed in on the final answer', async () => {
    const seen: string[] = [];
    const verify = (answer: string) => {
      seen.push(answer);
      return { score: answer === '42' ? 1 : 0, verifier: 'numeric' };
    };
    expect(await scoreWorkflow({ parsed, finalAnswer: '42', verify })).toMatchObject({ reward: 1, outcome: 'correct' });
    expect(await scoreWorkflow({ parsed, finalAnswer: '41', verify: async (a) => verify(a) })).toMatchObject({ reward: 0.5 });
    expect(await scoreWorkflow({ parsed, finalAnswer: '1', verify: () => 1 })).toMatchObject({ reward: 1 });
    expect(seen).toEqual(['42', '41']);
  });

  it('does not run the verifier when the workflow did not parse or did not answer', async () => {
    const verify = () => {
      throw new Error('must not run');
    };
    expect(await scoreWorkflow({ parsed: unparsed, finalAnswer: 'x', verify })).toMatchObject({ reward: 0, outcome: 'unparsed' });
    expect(await scoreWorkflow({ parsed: true, verify })).toMatchObject({ reward: 0, outcome: 'unanswered' });
  });
});
