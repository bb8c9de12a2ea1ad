import { describe, expect, it } from 'vitest';
import { measureReview, reviewsOf } from './review.ts';

const t = (id: string, solved: boolean, attempts = 1) => ({ id, solved, attempts });

describe("Reflexion's review measured against the one pass", () => {
  it('counts the moves per task, and splits the tasks graded at their first attempt (noise) from the reviewed ones', () => {
    const simple = [t('a', false), t('b', false), t('c', true), t('d', true), t('e', false), t('f', true)];
    const reflexion = [t('a', true, 3), t('b', false, 5), t('c', false, 2), t('d', true, 1), t('e', true, 1), t('f', true, 1), t('x', true, 1)];
    const m = measureReview('toy', simple, reflexion);
    expect(m.tasks).toBe(6);
    expect([m.simple.k, m.reflexion.k]).toEqual([3, 4]);
    expect([m.wrongToRight.k, m.wrongToRight.n, m.rightToWrong.k, m.rightToWrong.n]).toEqual([2, 3, 1, 3]);
    // graded at the first attempt: d, e, f (e moved: noise); reviewed: a, b, c
    expect(m.noise).toMatchObject({ tasks: 3, wrongToRight: { k: 1, n: 1 }, rightToWrong: { k: 0, n: 2 } });
    expect(m.reviewed).toMatchObject({ tasks: 3, wrongToRight: { k: 1, n: 2 }, rightToWrong: { k: 1, n: 1 } });
    expect(m.wrongToRight.interval[0]).toBeLessThan(2 / 3);
    expect(m.wrongToRight.interval[1]).toBeGreaterThan(2 / 3);
  });

  it('pairs each benchmark\'s simple run with its reflexion run by name', () => {
    const runs = { 'reflexion-x-simple': { tasks: [t('1', true)] }, 'reflexion-x-reflexion': { tasks: [t('1', true)] }, 'reflexion-y-simple': { tasks: [] } };
    expect(reviewsOf(runs).map((m) => m.benchmark)).toEqual(['x']);
  });
});
