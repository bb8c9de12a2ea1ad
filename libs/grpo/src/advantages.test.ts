import { describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { groupAdvantages, mean, std } from './index.ts';

const EPS = 1e-6;

function expectInputError(fn: () => unknown, field: string, message?: RegExp): void {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    expect((e as InputError).field).toBe(field);
    if (message) expect((e as InputError).message).toMatch(message);
    return;
  }
  throw new Error(`expected an InputError on ${field}`);
}

describe('mean and std', () => {
  it('unbiased divides by n - 1, population by n', () => {
    // [1, 2, 3]: mean 2, squared deviations 1 + 0 + 1 = 2; unbiased 2/2 = 1, population 2/3
    expect(mean([1, 2, 3])).toBe(2);
    expect(std([1, 2, 3])).toBe(1);
    expect(std([1, 2, 3], 'population')).toBeCloseTo(Math.sqrt(2 / 3), 15);
  });
});

describe('groupAdvantages', () => {
  it("'group' (GRPO): (r - mean_g) / (unbiased std_g + eps), worked by hand", () => {
    // group 0 = [1, 2, 3]: mean 2, unbiased std 1 -> (-1, 0, 1) / (1 + 1e-6)
    // group 1 = [0, 1, 1, 1]: mean 0.75, deviations (-0.75, 0.25, 0.25, 0.25),
    //   sum of squares 0.5625 + 3 * 0.0625 = 0.75, unbiased var 0.75 / 3 = 0.25, std 0.5
    //   -> (-0.75, 0.25, 0.25, 0.25) / (0.5 + 1e-6) = (-1.5, 0.5, 0.5, 0.5) * 0.5 / (0.5 + 1e-6)
    const { advantages, stats } = groupAdvantages([[1, 2, 3], [0, 1, 1, 1]]);
    expect(advantages[0]![0]).toBeCloseTo(-1 / (1 + EPS), 14);
    expect(advantages[0]![1]).toBe(0);
    expect(advantages[0]![2]).toBeCloseTo(1 / (1 + EPS), 14);
    expect(advantages[1]![0]).toBeCloseTo(-0.75 / (0.5 + EPS), 14);
    for (const j of [1, 2, 3]) expect(advantages[1]![j]).toBeCloseTo(0.25 / (0.5 + EPS), 14);
    // the whole batch: 1, 2, 3, 0, 1, 1, 1: sum 9, mean 9/7; sum of squares 17 - 81/7 = 38/7;
    // unbiased var (38/7) / 6 = 19/21
    expect(stats).toEqual({ groups: 2, zeroAdvantageGroups: 0, meanReward: expect.closeTo(9 / 7, 14), rewardSd: expect.closeTo(Math.sqrt(19 / 21), 14) });
  });

  it("std: 'population' divides by n", () => {
    // [1, 2, 3]: population std sqrt(2/3) = 0.8164965809...
    const { advantages, stats } = groupAdvantages([[1, 2, 3]], { std: 'population' });
    expect(advantages[0]![2]).toBeCloseTo(1 / (Math.sqrt(2 / 3) + EPS), 14);
    expect(stats.rewardSd).toBeCloseTo(Math.sqrt(2 / 3), 14);
  });

  it("'batch': (r - mean_g) / (std of the whole batch + eps)", () => {
    // same batch as above: batch std sqrt(19/21) = 0.9511897312...
    const sd = Math.sqrt(19 / 21);
    const { advantages } = groupAdvantages([[1, 2, 3], [0, 1, 1, 1]], { scale: 'batch' });
    expect(advantages[0]![0]).toBeCloseTo(-1 / (sd + EPS), 14);
    expect(advantages[0]![2]).toBeCloseTo(1 / (sd + EPS), 14);
    expect(advantages[1]![0]).toBeCloseTo(-0.75 / (sd + EPS), 14);
    expect(advantages[1]![3]).toBeCloseTo(0.25 / (sd + EPS), 14);
  });

  it("'none' (Dr. GRPO): r - mean_g, no scaling", () => {
    const { advantages } = groupAdvantages([[1, 2, 3], [0, 1, 1, 1]], { scale: 'none' });
    expect(advantages).toEqual([
      [-1, 0, 1],
      [-0.75, 0.25, 0.25, 0.25],
    ]);
  });

  it('a group whose rewards are all equal gets exactly 0, whatever eps and scale, and is counted', () => {
    // 0.1 three times: the float mean is not exactly 0.1, so r - mean would not be exactly 0
    for (const scale of ['group', 'batch', 'none'] as const) {
      for (const eps of [0, 1e-6, 1]) {
        const { advantages, stats } = groupAdvantages([[0.1, 0.1, 0.1], [1, 0], [5, 5]], { scale, eps });
        expect(advantages[0]).toEqual([0, 0, 0]);
        expect(advantages[2]).toEqual([0, 0]);
        expect(advantages.flat().every(Number.isFinite)).toBe(true);
        expect(Object.is(advantages[0]![0], 0)).toBe(true); // not -0
        expect(stats.zeroAdvantageGroups).toBe(2);
        expect(stats.groups).toBe(3);
      }
    }
    // every reward of the batch equal: batch std 0, still zeros, never NaN
    const flat = groupAdvantages([[1, 1], [1, 1, 1]], { scale: 'batch', eps: 0 });
    expect(flat.advantages.flat()).toEqual([0, 0, 0, 0, 0]);
    expect(flat.stats).toEqual({ groups: 2, zeroAdvantageGroups: 2, meanReward: 1, rewardSd: 0 });
  });

  it('eps 0 on a non-constant group divides by the std itself', () => {
    // [0, 1]: mean 0.5, unbiased std sqrt((0.25 + 0.25) / 1) = sqrt(0.5) -> -+0.5 / sqrt(0.5) = -+0.7071...
    const a = groupAdvantages([[0, 1]], { eps: 0 }).advantages[0]!;
    expect(a[0]).toBeCloseTo(-Math.SQRT1_2, 15);
    expect(a[1]).toBeCloseTo(Math.SQRT1_2, 15);
  });

  it('groups of fewer than 2 samples, and bad rewards or options, are InputErrors naming the field', () => {
    expectInputError(() => groupAdvantages([[1, 2], [3]]), 'groups[1]', /group 1/);
    expectInputError(() => groupAdvantages([[], [1, 2]]), 'groups[0]', /group 0/);
    expectInputError(() => groupAdvantages([]), 'groups');
    expectInputError(() => groupAdvantages([[1, Number.NaN]]), 'groups[0][1]');
    expectInputError(() => groupAdvantages([[1, 2]], { eps: -1 }), 'eps');
    expectInputError(() => groupAdvantages([[1, 2]], { scale: 'sample' as never }), 'scale');
    expectInputError(() => groupAdvantages([[1, 2]], { std: 'biased' as never }), 'std');
  });

  it('accepts Float64Array groups and does not modify the input', () => {
    const g = Float64Array.from([3, 1, 2]);
    const { advantages } = groupAdvantages([g], { scale: 'none' });
    expect(advantages[0]).toEqual([1, -1, 0]);
    expect(Array.from(g)).toEqual([3, 1, 2]);
  });
});
