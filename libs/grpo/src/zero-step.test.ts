// A step with no gradient is no step (issue 29, GRPO as a user, item 4): Adam's momentum alone must
// not move the parameters, nor advance the moments and the step count.
import { describe, expect, it } from 'vitest';
import { adamInit, adamStep } from './adam.ts';
import { grpoUpdate, type GrpoPolicy } from './update.ts';

// two arms, softmax over params[0..1]; a sample is the arm it pulled
type Arm = { arm: number };
const probs = (p: Float64Array): number[] => {
  const e = [Math.exp(p[0]!), Math.exp(p[1]!)];
  return e.map((x) => x / (e[0]! + e[1]!));
};
const policy: GrpoPolicy<Arm, Float64Array> = {
  logps: (p, s) => [Math.log(probs(p)[s.arm]!)],
  weightedGradLogp: (p, s, w) => probs(p).map((q, j) => w[0]! * ((j === s.arm ? 1 : 0) - q)),
};
const half = [Math.log(0.5)];

describe('grpoUpdate: no gradient, no step', () => {
  it('a mini-batch of zero advantages after one with signal: the parameters, moments and step count are those of the first step alone', () => {
    const samples = [
      { sample: { arm: 0 }, advantage: 1, oldLogp: half },
      { sample: { arm: 1 }, advantage: -1, oldLogp: half },
      { sample: { arm: 0 }, advantage: 0, oldLogp: half },
      { sample: { arm: 1 }, advantage: 0, oldLogp: half },
    ];
    const u = grpoUpdate({ params: new Float64Array([0, 0]), samples, policy, epochs: 1, miniBatches: 2, adam: { lr: 0.1 } });
    expect(u.steps.map((s) => [s.miniBatch, s.gradNorm === 0, s.stepped])).toEqual([[0, false, true], [1, true, false]]);
    // the first mini-batch's step alone (before: the second moved them on by 0.067 on momentum)
    const alone = new Float64Array([0, 0]);
    const state = adamStep(alone, [-0.5, 0.5], adamInit(2), { lr: 0.1 });
    expect(Array.from(u.params)).toEqual(Array.from(alone));
    expect(u.adamState).toEqual(state);
  });

  it('an epoch whose every decision with an advantage is clipped takes no step either', () => {
    // the sampling policy gave arm 0 probability 0.25; the current one 0.5: rho = 2 > 1.2, A > 0: clipped
    const samples = [{ sample: { arm: 0 }, advantage: 1, oldLogp: [Math.log(0.25)] }, { sample: { arm: 1 }, advantage: 0, oldLogp: [Math.log(0.75)] }];
    const momentum = { ...adamInit(2), step: 3, m: [0.05, -0.05], v: [0.01, 0.01] };
    const u = grpoUpdate({ params: new Float64Array([0, 0]), samples, policy, epochs: 2, adam: { lr: 0.1 }, adamState: momentum });
    expect(u.steps.map((s) => [s.clipFraction, s.stepped])).toEqual([[0.5, false], [0.5, false]]);
    expect(Array.from(u.params)).toEqual([0, 0]);
    expect(u.adamState).toEqual(momentum);
  });
});
