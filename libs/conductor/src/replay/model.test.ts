import { describe, expect, it } from 'vitest';
import { InputError, rng } from '@fugu/core';
import {
  expectedStepCorrect,
  expectedWorkflowCorrect,
  herdCurve,
  ownOutcome,
  parseReplayAnswer,
  replayAnswerText,
  replayProviderMetadata,
  replayStep,
  replayItemOf,
  replayWorkflow,
  sourcesOf,
  stepKeyOf,
  stepProbability,
  type ReplayItem,
} from './model.ts';
import { REPLAY_PRESETS, resolveWorkerParams, type ReplayParams } from './params.ts';

const P: ReplayParams = { keep: 0.9, misled: 0.3, adopt: 0.6, fix: 0.1, herd: 2 };
const item: ReplayItem = { id: 'q1', recorded: { A: 1, B: 0, C: 1, D: 0.5 } };

describe('herdCurve', () => {
  it('is 0, 1/2 and 1 at 0, 1/2 and 1; linear for h = 1; steeper around 1/2 for larger h', () => {
    for (const h of [0.5, 1, 2, 4]) {
      expect(herdCurve(0, h)).toBe(0);
      expect(herdCurve(1, h)).toBe(1);
      expect(herdCurve(0.5, h)).toBeCloseTo(0.5, 12);
    }
    expect(herdCurve(0.3, 1)).toBeCloseTo(0.3, 12);
    expect(herdCurve(1 / 3, 2)).toBeCloseTo(0.2, 12);
    expect(herdCurve(2 / 3, 4)).toBeGreaterThan(herdCurve(2 / 3, 2));
    let prev = -1;
    for (let f = 0; f <= 1.0001; f += 0.05) {
      const g = herdCurve(Math.min(1, f), 3);
      expect(g).toBeGreaterThanOrEqual(prev);
      prev = g;
    }
  });
});

describe('stepProbability', () => {
  it('is each named parameter at its corner', () => {
    expect(stepProbability(P, true, 1)).toBeCloseTo(P.keep, 12);
    expect(stepProbability(P, true, 0)).toBeCloseTo(1 - P.misled, 12);
    expect(stepProbability(P, false, 1)).toBeCloseTo(P.adopt, 12);
    expect(stepProbability(P, false, 0)).toBeCloseTo(P.fix, 12);
  });
  it('lies between the corners of the own outcome for every f', () => {
    for (const f of [0.1, 1 / 3, 0.5, 2 / 3, 0.9]) {
      const p1 = stepProbability(P, true, f), p0 = stepProbability(P, false, f);
      expect(p1).toBeGreaterThanOrEqual(1 - P.misled);
      expect(p1).toBeLessThanOrEqual(P.keep);
      expect(p0).toBeGreaterThanOrEqual(P.fix);
      expect(p0).toBeLessThanOrEqual(P.adopt);
    }
    expect(stepProbability(P, false, 0.5)).toBeCloseTo((P.fix + P.adopt) / 2, 12);
  });
});

describe('replayStep rules', () => {
  const step = (worker: string, sources: string[], seed: number | string = 1) => replayStep({ params: P, item, worker, sources, seed });

  it('an independent step gets the recorded outcome (rule recorded, p the recorded score)', () => {
    for (let seed = 0; seed < 20; seed++) {
      expect(step('A', [], seed)).toMatchObject({ correct: true, p: 1, rule: 'recorded', s: true, key: 'A' });
      expect(step('B', [], seed)).toMatchObject({ correct: false, p: 0, rule: 'recorded', s: false });
    }
  });

  it('names the cell from the sources\' own outcomes: keep, misled, adopt, fix, mixed, with p from the model', () => {
    expect(step('A', ['C'])).toMatchObject({ rule: 'keep', p: P.keep, s: true, f: 1 });
    expect(step('A', ['B'])).toMatchObject({ rule: 'misled', s: true, f: 0 });
    expect(step('A', ['B']).p).toBeCloseTo(1 - P.misled, 12);
    expect(step('B', ['A'])).toMatchObject({ rule: 'adopt', p: P.adopt, s: false, f: 1 });
    expect(step('B', ['A', 'C', 'B'])).toMatchObject({ rule: 'adopt', f: 1, sources: ['A', 'C'] }); // B is not its own source
    const it2: ReplayItem = { id: 'q2', recorded: { A: 1, B: 0, C: 1, E: 0 } };
    const mixed = replayStep({ params: P, item: it2, worker: 'B', sources: ['A', 'C', 'E'], seed: 1 });
    expect(mixed.rule).toBe('mixed');
    expect(mixed.f).toBeCloseTo(2 / 3, 12);
    expect(mixed.p).toBeCloseTo(stepProbability(P, false, 2 / 3), 12);
    expect(replayStep({ params: P, item: it2, worker: 'B', sources: ['E'], seed: 1 })).toMatchObject({ rule: 'fix', p: P.fix, s: false, f: 0 });
  });

  it('a worker that sees only its own answers has no new information: its own outcome, the solo draw', () => {
    for (let seed = 0; seed < 50; seed++) {
      const it0: ReplayItem = { id: `own${seed}`, recorded: { A: 0.5, B: 1 } };
      const solo = replayWorkflow({ params: () => P, item: it0, seed, steps: [{ worker: 'A', sees: [] }] });
      const chain = replayWorkflow({ params: () => P, item: it0, seed, steps: [{ worker: 'A', sees: [] }, { worker: 'A', sees: [0] }, { worker: 'A', sees: [0, 1] }] });
      for (const st of chain.steps) expect(st).toMatchObject({ rule: 'recorded', correct: solo.correct, key: 'A', sources: [] });
    }
  });

  it('draws are calibrated: the share correct over many items matches p in each cell', () => {
    const n = 4000;
    const cells = [
      { worker: 'A', sources: ['C'], p: P.keep },
      { worker: 'A', sources: ['B'], p: 1 - P.misled },
      { worker: 'B', sources: ['A'], p: P.adopt },
      { worker: 'B', sources: ['E'], p: P.fix },
    ];
    for (const c of cells) {
      let k = 0;
      for (let i = 0; i < n; i++) if (replayStep({ params: P, item: { id: `q${i}`, recorded: { ...item.recorded, E: 0 } }, worker: c.worker, sources: c.sources, seed: 7 }).correct) k++;
      const se = Math.sqrt((c.p * (1 - c.p)) / n);
      expect(Math.abs(k / n - c.p)).toBeLessThan(4 * se);
    }
  });

  it('a fractional recorded score is a Bernoulli draw with that probability, once per (seed, item, worker)', () => {
    let k = 0;
    const n = 4000;
    for (let i = 0; i < n; i++) {
      const it0: ReplayItem = { id: `f${i}`, recorded: { D: 0.3, A: 1 } };
      const solo = replayStep({ params: P, item: it0, worker: 'D', sources: [], seed: 11 });
      expect(solo.p).toBe(0.3);
      // the same own outcome wherever D appears on this item under this seed: as a step's s and as a source's outcome
      expect(replayStep({ params: P, item: it0, worker: 'D', sources: ['A'], seed: 11 }).s).toBe(solo.correct);
      expect(replayStep({ params: P, item: it0, worker: 'A', sources: ['D'], seed: 11 }).f).toBe(solo.correct ? 1 : 0);
      expect(ownOutcome(it0, 'D', 11)).toBe(solo.correct);
      if (solo.correct) k++;
    }
    expect(Math.abs(k / n - 0.3)).toBeLessThan(4 * Math.sqrt(0.21 / n));
  });

  it('raising a parameter never turns a correct step wrong (one uniform per step)', () => {
    const hi = { ...P, adopt: 0.9 };
    let turned = 0;
    for (let i = 0; i < 500; i++) {
      const args = { item: { ...item, id: `m${i}` }, worker: 'B', sources: ['A'], seed: 5 };
      const lo = replayStep({ ...args, params: P }).correct;
      const up = replayStep({ ...args, params: hi }).correct;
      if (lo) expect(up).toBe(true);
      if (!lo && up) turned++;
    }
    expect(turned).toBeGreaterThan(0);
  });
});

describe('expected outcomes (exact, over every draw)', () => {
  it('binary scores: the step\'s p; fractional: the weighted cases, matching the sampled mean', () => {
    expect(expectedStepCorrect(P, item, 'A', [])).toBe(1);
    expect(expectedStepCorrect(P, item, 'B', ['A'])).toBeCloseTo(P.adopt, 12);
    // B (s = 0) sees A (1) and D (0.5): f = 1 or 1/2 with probability 1/2 each
    const e = expectedStepCorrect(P, item, 'B', ['A', 'D']);
    expect(e).toBeCloseTo(0.5 * P.adopt + 0.5 * stepProbability(P, false, 0.5), 12);
    // D as the step worker: its own outcome is the Bernoulli(0.5)
    expect(expectedStepCorrect(P, item, 'D', ['A'])).toBeCloseTo(0.5 * P.keep + 0.5 * P.adopt, 12);
    let k = 0;
    const n = 20000;
    for (let seed = 0; seed < n; seed++) if (replayStep({ params: P, item, worker: 'B', sources: ['A', 'D'], seed }).correct) k++;
    expect(Math.abs(k / n - e)).toBeLessThan(4 * Math.sqrt((e * (1 - e)) / n));
  });
  it('a workflow\'s expectation is its last step\'s, from its sources', () => {
    const steps = [{ worker: 'A', sees: [] }, { worker: 'B', sees: [0] }, { worker: 'D', sees: [1] }];
    expect(expectedWorkflowCorrect({ params: () => P, item, steps })).toBeCloseTo(expectedStepCorrect(P, item, 'D', ['A', 'B']), 12);
  });
});

describe('bad input', () => {
  it('a worker without a recorded score on the item is an InputError naming it', () => {
    expect(() => replayStep({ params: P, item, worker: 'Z', sources: [], seed: 1 })).toThrow(/worker "Z" has no recorded score on item "q1"/);
    expect(() => replayStep({ params: P, item, worker: 'A', sources: ['Z'], seed: 1 })).toThrow(/worker "Z" has no recorded score on item "q1"/);
  });
  it('an out-of-range recorded score is an InputError naming the field', () => {
    expect(() => replayStep({ params: P, item: { id: 'x', recorded: { A: 1.5 } }, worker: 'A', sources: [], seed: 1 })).toThrow(InputError);
  });
  it('an out-of-range parameter is an InputError naming it', () => {
    try {
      replayStep({ params: { ...P, adopt: 1.2 }, item, worker: 'B', sources: ['A'], seed: 1 });
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(InputError);
      expect((e as InputError).field).toBe('params.adopt');
    }
  });
  it('a workflow step that sees itself or a later step is an InputError naming the step', () => {
    expect(() => replayWorkflow({ params: () => P, item, seed: 1, steps: [{ worker: 'A', sees: [] }, { worker: 'B', sees: [1] }] })).toThrow(/steps\[1\]\.sees: step 1 may see only earlier steps/);
    expect(() => replayWorkflow({ params: () => P, item, seed: 1, steps: [] })).toThrow(InputError);
  });
});

describe('determinism and common random numbers', () => {
  const moa = [{ worker: 'A', sees: [] }, { worker: 'B', sees: [] }, { worker: 'D', sees: [] }, { worker: 'B', sees: [0, 1, 2] }];

  it('the same input and seed give the same outcome; other seeds give other draws', () => {
    const a = replayWorkflow({ params: () => P, item, seed: 42, steps: moa });
    const b = replayWorkflow({ params: () => P, item, seed: 42, steps: moa });
    expect(b).toEqual(a);
    const outcomes = new Set<string>();
    for (let seed = 0; seed < 40; seed++) outcomes.add(replayWorkflow({ params: () => P, item, seed, steps: moa }).steps.map((s) => s.correct).join());
    expect(outcomes.size).toBeGreaterThan(1);
  });

  it('the key names the information, not the path: the same sources through any shape give the same outcome', () => {
    for (let i = 0; i < 300; i++) {
      const it0: ReplayItem = { id: `c${i}`, recorded: { A: 1, B: 0, C: 1, D: 0.5 } };
      const one = replayWorkflow({ params: () => P, item: it0, seed: 9, steps: moa });
      const shapes = [
        // another order, an extra unrelated step, the access list in another order
        [{ worker: 'C', sees: [] }, { worker: 'D', sees: [] }, { worker: 'B', sees: [] }, { worker: 'A', sees: [] }, { worker: 'B', sees: [3, 1, 2] }],
        // a chain A -> D -> B: B's information is still A's and D's answers
        [{ worker: 'A', sees: [] }, { worker: 'D', sees: [0] }, { worker: 'B', sees: [1] }],
        // the same answer seen twice, through two paths
        [{ worker: 'A', sees: [] }, { worker: 'D', sees: [0] }, { worker: 'B', sees: [0, 1] }],
      ];
      for (const steps of shapes) {
        const other = replayWorkflow({ params: () => P, item: it0, seed: 9, steps });
        expect(other.steps[other.steps.length - 1]).toEqual(one.steps[3]);
      }
    }
  });

  it('different information gets different keys; names with the key syntax cannot forge one', () => {
    expect(stepKeyOf('B', ['A'])).toBe('B[A]');
    expect(stepKeyOf('C', ['B', 'A'])).toBe('C[A,B]');
    expect(stepKeyOf('C', ['A', 'A', 'C'])).toBe(stepKeyOf('C', ['A']));
    expect(stepKeyOf('B[A]')).not.toBe(stepKeyOf('B', ['A']));
    expect(stepKeyOf('a,b', ['c'])).not.toBe(stepKeyOf('a', ['b,c']));
    expect(sourcesOf([{ worker: 'A', sees: [] }, { worker: 'B', sees: [0] }, { worker: 'A', sees: [1] }, { worker: 'C', sees: [] }, { worker: 'C', sees: [2, 3] }])).toEqual([[], ['A'], ['B'], [], ['A', 'B']]);
  });
});

describe('the replay answer text', () => {
  it('round-trips every rule and says the outcome', () => {
    const cases = [
      { correct: true, p: 1, rule: 'recorded' as const },
      { correct: false, p: 0.4, rule: 'recorded' as const },
      { correct: true, p: 0.6, rule: 'adopt' as const },
      { correct: false, p: 0.05, rule: 'fix' as const },
      { correct: true, p: 0.83, rule: 'mixed' as const },
    ];
    for (const c of cases) {
      const text = replayAnswerText('llama-3.1-8b-instruct', c);
      expect(parseReplayAnswer(text)).toEqual({ worker: 'llama-3.1-8b-instruct', correct: c.correct, rule: c.rule, p: c.p });
    }
    expect(replayAnswerText('A', { correct: true, p: 1, rule: 'recorded' })).toBe('[replay:A] recorded score 1 (rule recorded, outcome 1)');
    expect(replayAnswerText('A', { correct: false, p: 0.6, rule: 'adopt' })).toBe('[replay:A] simulated score 0 (rule adopt, p 0.6000)');
  });
  it('reads nothing from other text', () => {
    expect(parseReplayAnswer('The answer is 42.')).toBeUndefined();
    expect(parseReplayAnswer('[replay:A] recorded score 1')).toBeUndefined();
    expect(parseReplayAnswer('[replay:A] simulated score 0.5 (rule adopt, p 0.5)')).toBeUndefined();
  });
  it('gives provider metadata in the shape the recorded verifier reads', () => {
    expect(replayProviderMetadata('q1', { correct: true, p: 0.6, rule: 'adopt' })).toEqual({ replay: { itemId: 'q1', score: 1, rule: 'adopt', p: 0.6 } });
  });
});

describe('the presets', () => {
  it('give a strong aggregator a small gain and a weak one a loss on a two-proposer toy', () => {
    // A can solve, B cannot: the large preset keeps more than the small one when shown a wrong answer
    expect(stepProbability(REPLAY_PRESETS.large, true, 0)).toBeGreaterThan(stepProbability(REPLAY_PRESETS.small, true, 0));
    expect(stepProbability(REPLAY_PRESETS.large, true, 1)).toBeGreaterThan(stepProbability(REPLAY_PRESETS.small, true, 1));
  });
});

describe('what the presets imply for fixed topologies (synthetic correlated items)', () => {
  // 3000 items with a shared difficulty: worker skill minus difficulty decides each solo outcome
  const skills: Record<string, number> = { 'big-70b': 0.6, 'mid-49b': 0.3, 'small-8b': 0.1, 'tiny-7b': -1.2 };
  const items: ReplayItem[] = Array.from({ length: 3000 }, (_, i) => {
    const r = rng('topology-test', i);
    const d = r.normal();
    return { id: `t${i}`, recorded: Object.fromEntries(Object.entries(skills).map(([w, k]) => [w, k - d + 0.7 * r.normal() > 0 ? 1 : 0])) };
  });
  const params = (w: string): ReplayParams => resolveWorkerParams({}, w);
  const acc = (steps: Array<{ worker: string; sees: number[] }>): number => items.filter((it) => replayWorkflow({ params, item: it, seed: 1, steps }).correct).length / items.length;
  const proposers = ['big-70b', 'mid-49b', 'small-8b'].map((w) => ({ worker: w, sees: [] as number[] }));

  it('a strong aggregator is about level with the best single worker; a weak one loses; self-review changes nothing', () => {
    const best = acc([{ worker: 'big-70b', sees: [] }]);
    const strong = acc([...proposers, { worker: 'big-70b', sees: [0, 1, 2] }]);
    const weak = acc([...proposers, { worker: 'tiny-7b', sees: [0, 1, 2] }]);
    const self = acc([{ worker: 'big-70b', sees: [] }, { worker: 'big-70b', sees: [0] }]);
    expect(Math.abs(strong - best)).toBeLessThan(0.04);
    expect(weak).toBeLessThan(best - 0.05);
    expect(self).toBe(best);
  });

  it('replayItemOf reads the recorded scores of a dataset item', () => {
    expect(replayItemOf({ id: 'x', recorded: { a: { score: 0.5, tokensIn: 3 }, b: { score: 1 } } })).toEqual({ id: 'x', recorded: { a: 0.5, b: 1 } });
    expect(replayItemOf({ id: 'y' })).toEqual({ id: 'y', recorded: {} });
  });
});
