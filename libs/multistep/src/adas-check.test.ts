import { describe, expect, it } from 'vitest';
import { rng } from '@fugu/core';
import { predictDebateGain } from './adas-check.ts';
import type { MultistepQuestion } from './types.ts';

describe("the debate predicted against ADAS's totals", () => {
  it('where agents never change their answers, the debate is the first round\'s majority, and ADAS\'s own gain is read from its table', () => {
    const r = rng('adas-check-test', 1);
    const qs: MultistepQuestion[] = Array.from({ length: 400 }, (_, i) => {
      const p = [0.9, 0.6, 0.3][i % 3]!;
      const first = [0, 1, 2].map((agent) => ({ agent, answer: null, correct: r.next() < p, read: [] as number[] }));
      // round 2 copies round 1: keep 1, misled 0, adopt 0, fix 0
      return { id: `q${i}`, source: 's', task: 't', rounds: [first, first.map((a) => ({ ...a, read: [0, 1, 2] }))] };
    });
    const majority = qs.filter((q) => q.rounds[0]!.filter((a) => a.correct).length >= 2).length / qs.length;
    const solo = qs.reduce((t, q) => t + q.rounds[0]!.filter((a) => a.correct).length, 0) / (3 * qs.length);
    const adas = { mmlu: { 'Chain-of-Thought': { accuracy: 0.654, interval: [0.62, 0.686] as [number, number], raw: '' }, 'LLM Debate': { accuracy: 0.656, interval: [0.623, 0.689] as [number, number], raw: '' } } };
    const p = predictDebateGain(qs, { samples: 30, seed: 0, adas: adas as never });
    expect(p.solo).toBeCloseTo(solo, 12);
    expect(p.debate.mean).toBeCloseTo(majority, 9);
    expect(p.gain.mean).toBeCloseTo(100 * (majority - solo), 6);
    expect(p.adas!.gain).toBeCloseTo(0.2, 9);
  });
});
