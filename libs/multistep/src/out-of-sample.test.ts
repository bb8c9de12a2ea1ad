import { describe, expect, it } from 'vitest';
import { normalQuantile, rng } from '@fugu/core';
import { stepProbability, type ReplayParams } from '@fugu/conductor';
import { observationsOf } from './observations.ts';
import { outOfSample, splitHalves } from './out-of-sample.ts';
import type { MultistepQuestion } from './types.ts';

/**
 * Debates of 4 agents over 2 rounds: each question has a difficulty (the agents' solo accuracy
 * on it), round 2's every agent reads all 4 answers of round 1 (its own included), and answers
 * by `next` (the step model with `params`, unless replaced).
 */
function debates(n: number, seed: number, next?: (s: boolean, f: number, u: number, level: number) => boolean, params?: (level: number) => ReplayParams): MultistepQuestion[] {
  const r = rng('multistep-test', seed);
  return Array.from({ length: n }, (_, i) => {
    const level = 1 + (i % 5);
    const solo = 0.95 - 0.17 * level;
    const first = [0, 1, 2, 3].map((agent) => ({ agent, answer: null, correct: r.next() < solo, read: [] as number[] }));
    const second = first.map((a) => {
      const others = first.filter((o) => o.agent !== a.agent);
      const f = others.filter((o) => o.correct).length / others.length;
      const u = r.next();
      const correct = next ? next(a.correct, f, u, level) : u < stepProbability(params!(level), a.correct, f);
      return { agent: a.agent, answer: null, correct, read: [0, 1, 2, 3] };
    });
    return { id: `q${i}`, source: 'sim', task: 'sim', level, rounds: [first, second] };
  });
}

const TRUTH: ReplayParams = { keep: 0.95, misled: 0.35, adopt: 0.6, fix: 0.08, herd: 2 };

describe('observationsOf', () => {
  it('one observation per answer after the first round: s its own earlier outcome, f the share of the others it read that were right', () => {
    const q: MultistepQuestion = {
      id: 'x', source: 'src', task: 't', rounds: [
        [{ agent: 0, answer: '1', correct: true, read: [] }, { agent: 1, answer: '2', correct: false, read: [] }, { agent: 2, answer: '2', correct: false, read: [] }],
        // agent 0 read all (itself included); agent 1 read only itself; agent 3 did not answer round 1
        [{ agent: 0, answer: '2', correct: false, read: [0, 1, 2] }, { agent: 1, answer: '2', correct: false, read: [1] }, { agent: 3, answer: '1', correct: true, read: [0, 1] }],
      ],
    };
    const { observations, counts } = observationsOf([q]);
    expect(observations).toEqual([{ s: true, f: 0, correct: false, worker: 'src', cluster: 'src/x', round: 1, sources: 2 }]);
    expect(counts).toEqual({ steps: 1, noOwnEarlier: 1, noOtherSource: 1 });
  });
});

describe('observationsOf: sequential rounds', () => {
  it("an answer that read answers of its own round given before it counts their outcomes now (DyLAN's CoT MATH logs)", () => {
    const q: MultistepQuestion = {
      id: 'y', source: 'seq', task: 't', rounds: [
        [0, 1, 2].map((agent) => ({ agent, answer: null, correct: agent === 0, read: [] })),
        // agent 0 goes first (reads 1 and 2 of round 1); agent 1 reads agent 0's round-2 answer and agent 2's round-1 answer
        [{ agent: 0, answer: null, correct: false, read: [0, 1, 2] }, { agent: 1, answer: null, correct: true, read: [1, 2], readThisRound: [0] }],
      ],
    };
    const { observations } = observationsOf([q]);
    expect(observations.map((o) => [o.s, o.f, o.correct, o.sources])).toEqual([[true, 0, false, 2], [false, 0, true, 2]]);
  });
});

describe('the out-of-sample check', () => {
  it('splits by a seeded draw per question: the same seed the same halves', () => {
    const qs = debates(200, 1, undefined, () => TRUTH);
    const a = splitHalves(qs, 7), b = splitHalves(qs, 7), c = splitHalves(qs, 8);
    expect(a.fit.map((q) => q.id)).toEqual(b.fit.map((q) => q.id));
    expect(a.fit.map((q) => q.id)).not.toEqual(c.fit.map((q) => q.id));
    expect(a.fit.length + a.test.length).toBe(200);
  });

  it('data made by the model: the predictions hold (p-values as chance gives them), near the observed figures', () => {
    const ps: number[] = [];
    for (let seed = 0; seed < 8; seed++) {
      const out = outOfSample(debates(800, 10 + seed, undefined, () => TRUTH), { seed, samples: 200 });
      const p = out.predictions['all']!;
      expect(p.modelled).toBe(p.answers);
      for (const s of p.stats) {
        ps.push(s.p);
        expect(Math.abs(s.predicted - s.observed), `${s.statistic}: observed ${s.observed}, predicted ${s.predicted}`).toBeLessThan(0.06);
      }
    }
    // 24 figures: about 1 in 20 outside its 95% interval by chance, 1 in 100 below p 0.01
    expect(ps.filter((p) => p < 0.05).length).toBeLessThanOrEqual(4);
    expect(ps.filter((p) => p < 0.001).length).toBe(0);
  });

  it('the fit recovers the parameters the data were made with, within its bootstrap intervals', () => {
    const fit = outOfSample(debates(1200, 2, undefined, () => TRUTH), { seed: 1, samples: 200 }).fits['all']!;
    for (const c of ['keep', 'misled', 'adopt', 'fix', 'herd'] as const) {
      const [lo, hi] = fit.bootstrap!.intervals[c];
      expect(lo, c).toBeLessThanOrEqual(TRUTH[c]);
      expect(hi, c).toBeGreaterThanOrEqual(TRUTH[c] - 0.01);
    }
  });

  it('data the model cannot describe (round 2\'s agents move together, after agent 0\'s first answer): the check misses', () => {
    const r = rng('copy-agent-0', 1);
    const copied = debates(1200, 4, undefined, () => TRUTH).map((q) => {
      const right = q.rounds[0]![0]!.correct ? r.next() < 0.9 : r.next() < 0.1;
      return { ...q, rounds: [q.rounds[0]!, q.rounds[1]!.map((a) => ({ ...a, correct: right }))] };
    });
    const p = outOfSample(copied, { seed: 1, samples: 200 }).predictions['all']!;
    // the answers of a question move together; the model draws them apart: how often any agent is right is off
    expect(p.stats.find((s) => s.statistic === 'any')!.p, JSON.stringify(p.stats)).toBeLessThan(0.001);
  });

  it("answers of one question that share a part of their draw: the independent model misses how often any is right; the model with rho fitted on the fit half does not", () => {
    const r = rng('correlated-debates', 1);
    const correlated = debates(2000, 7, undefined, () => TRUTH).map((q) => {
      // round 2 drawn again, with rho 0.6 within the question
      const shared = r.normal();
      const first = q.rounds[0]!;
      const second = q.rounds[1]!.map((a) => {
        const others = first.filter((o) => o.agent !== a.agent);
        const f = others.filter((o) => o.correct).length / others.length;
        const z = Math.sqrt(0.6) * shared + Math.sqrt(0.4) * r.normal();
        return { ...a, correct: z < normalQuantile(stepProbability(TRUTH, first[a.agent]!.correct, f)) };
      });
      return { ...q, rounds: [first, second] };
    });
    const independent = outOfSample(correlated, { seed: 1, samples: 200 }).predictions['all']!;
    expect(independent.stats.find((s) => s.statistic === 'any')!.p, JSON.stringify(independent.stats)).toBeLessThan(0.001);
    const c = outOfSample(correlated, { seed: 1, samples: 200, correlated: true });
    expect(Math.abs(c.rho!['all']! - 0.6)).toBeLessThanOrEqual(0.15);
    for (const s of c.predictions['all']!.stats) expect(s.p, JSON.stringify(s)).toBeGreaterThan(0.005);
    // on data made with independent draws, rho comes out near 0
    expect(outOfSample(debates(1200, 6, undefined, () => TRUTH), { seed: 1, samples: 50, correlated: true }).rho!['all']).toBeLessThanOrEqual(0.1);
  });

  it('parameters that depend on the level: one set for all misses some level, a set per level does not', () => {
    const byLevel = (level: number): ReplayParams => ({ ...TRUTH, keep: 0.99 - 0.04 * level, adopt: 0.95 - 0.17 * level });
    const qs = debates(4000, 5, undefined, byLevel);
    const level = (q: MultistepQuestion) => `level ${q.level}`;
    const pooled = outOfSample(qs, { seed: 2, samples: 200, reportBy: level });
    expect(Object.keys(pooled.fits)).toEqual(['all']);
    expect(Object.keys(pooled.predictions)).toHaveLength(5);
    expect(Object.values(pooled.predictions).some((p) => p.stats.some((s) => s.p < 0.001))).toBe(true);
    const perLevel = outOfSample(qs, { seed: 2, samples: 200, fitBy: level });
    expect(Object.keys(perLevel.fits)).toHaveLength(5);
    for (const [g, p] of Object.entries(perLevel.predictions)) {
      for (const s of p.stats) expect(s.p, `${g} ${s.statistic}: observed ${s.observed}, interval ${s.interval}`).toBeGreaterThan(0.005);
    }
  });
});
