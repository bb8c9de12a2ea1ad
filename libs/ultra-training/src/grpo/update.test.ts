// The fan-in's update when there is nothing to learn (issue 29, GRPO as a user, item 4): an
// iteration whose groups all have equal rewards leaves the policy and Adam's state exactly as
// they were, even with momentum from earlier steps; and the step tie-break, which makes an extra
// step that changed nothing cost something, without ever reordering unequal rewards.
import { describe, expect, it } from 'vitest';
import { ConductorPolicy, policyBlockHead, policyThetaLayout, type PolicyDecisions } from '@fugu/conductor';
import type { StoredItem } from '@fugu/db';
import type { WorkflowOptions } from '@fugu/ultra';
import { GRPO_DEFAULTS, type GrpoConfig } from './config.ts';
import type { PlannedRollout } from './plan.ts';
import { grpoFanIn, stepTiebreaks, type GrpoUpdate, type RolloutResult } from './update.ts';

const D = 8;
const policy0 = ConductorPolicy.init({ workers: ['a', 'b', 'c'], featureDim: D, seed: 1 });
const featuresOf = (q: string): Float32Array => {
  const i = Number(q.slice(1));
  return Float32Array.from({ length: D }, (_, j) => Math.sin(1 + i * 7 + j * 3) / Math.sqrt(D));
};
const single = (worker: number): PolicyDecisions => ({ steps: [{ worker, kind: 'solve', access: 'none' }] });
// the worker re-reading its own answer: in the replay model, exactly its own outcome again
const selfChain = (worker: number, n: number): PolicyDecisions => ({
  steps: Array.from({ length: n }, (_, i) => ({ worker, kind: 'solve' as const, access: i === 0 ? ('none' as const) : ('all' as const) })),
});

type Spec = { decisions: PolicyDecisions; reward: number };

/** One iteration's fan-in over groups of (decisions, reward). */
function fanIn(policy: ConductorPolicy, groups: Spec[][], adam: GrpoUpdate['adam'] | null, cfg: Partial<GrpoConfig> = {}): GrpoUpdate {
  const c = { ...GRPO_DEFAULTS, heads: ['stop', 'worker', 'access'], q: groups.length, g: groups[0]!.length, ...cfg } as GrpoConfig;
  const rollouts: PlannedRollout[] = [];
  const results = new Map<string, RolloutResult>();
  groups.forEach((specs, q) => specs.forEach((s, g) => {
    const key = `t.${q}.${g}`;
    rollouts.push({ key, split: 'train', question: q, sample: g, item: { dbId: q + 1, idx: q, id: `q${q}`, prompt: `q${q}` } as StoredItem, seed: 0, options: {} as WorkflowOptions });
    results.set(key, {
      workflowId: null, finishReason: 'answered', parseOk: true, reward: s.reward, outcome: s.reward === 1 ? 'correct' : 'incorrect', cost: '0',
      nSteps: s.decisions.steps.length, topology: null, workers: [], decisions: s.decisions, logprob: null,
    });
  }));
  return grpoFanIn({ cfg: c, iteration: 0, policy, rollouts, results, features: featuresOf, adam: adam ?? { step: 0, m: null, v: null } });
}

/** P(stop after step 1) for question q when its step 1 is `worker`. */
const pStop = (policy: ConductorPolicy, q: number, worker: number): number =>
  Math.exp(policy.decisionLogprobs(featuresOf(`q${q}`), single(worker), { maxSteps: 5 }).find((d) => d.head === 'stop')!.logprob);

describe('grpoFanIn: no signal, no move', () => {
  // an iteration with signal first: Adam's moments are non-zero afterwards
  const signal = fanIn(policy0, [
    [{ decisions: single(0), reward: 1 }, { decisions: single(1), reward: 0.5 }, { decisions: selfChain(0, 2), reward: 1 }, { decisions: single(2), reward: 0.5 }],
    [{ decisions: single(1), reward: 1 }, { decisions: single(0), reward: 0.5 }, { decisions: single(2), reward: 0.5 }, { decisions: selfChain(1, 3), reward: 1 }],
  ], null);
  const policy1 = policy0.withTheta(signal.theta);

  it('after a step with signal, Adam has momentum (the setting the next test needs)', () => {
    expect(signal.adam.step).toBe(2);
    expect(signal.adam.m.some((x) => Math.abs(x) > 1e-6)).toBe(true);
    expect(Array.from(signal.theta)).not.toEqual(Array.from(policy0.theta));
  });

  it('every group with equal rewards: the policy and Adam\'s state stay exactly as they were (no step, no momentum, no moments advanced)', () => {
    // mixed lengths, no tie-break: nothing at all to learn
    const allEqual = [
      [{ decisions: single(0), reward: 1 }, { decisions: selfChain(0, 2), reward: 1 }, { decisions: single(1), reward: 1 }, { decisions: selfChain(2, 4), reward: 1 }],
      [{ decisions: single(1), reward: 0.5 }, { decisions: single(0), reward: 0.5 }, { decisions: selfChain(1, 3), reward: 0.5 }, { decisions: single(2), reward: 0.5 }],
    ];
    for (const u of [fanIn(policy1, allEqual, signal.adam, { stepTiebreak: 0 }), fanIn(policy1, allEqual.map((g) => g.map((s) => ({ ...s, decisions: single(s.decisions.steps[0]!.worker) }))), signal.adam)]) {
      expect(Array.from(u.theta)).toEqual(Array.from(signal.theta));
      expect(u.adam.step).toBe(signal.adam.step);
      expect(Array.from(u.adam.m)).toEqual(Array.from(signal.adam.m));
      expect(Array.from(u.adam.v)).toEqual(Array.from(signal.adam.v));
      expect(u.record).toMatchObject({ groups: 2, zeroAdvantageGroups: 2, tiebreakGroups: 0, approxKl: 0, epochs: [] });
      expect(u.rollouts.every((r) => r.advantage === 0)).toBe(true);
    }
  });

  it('the step tie-break (default on): equal rewards, different lengths: the shorter workflows gain, P(stop after step 1) rises; only the stop head moves', () => {
    const ties = [
      [{ decisions: single(0), reward: 1 }, { decisions: selfChain(0, 2), reward: 1 }, { decisions: single(0), reward: 1 }, { decisions: selfChain(0, 3), reward: 1 }],
      [{ decisions: selfChain(1, 2), reward: 0.5 }, { decisions: single(1), reward: 0.5 }, { decisions: selfChain(1, 2), reward: 0.5 }, { decisions: single(1), reward: 0.5 }],
    ];
    // a fresh optimiser: the earlier step's momentum (towards its rewarded self-chains) would be in this step too
    const u = fanIn(policy1, ties, null);
    expect(u.record).toMatchObject({ zeroAdvantageGroups: 2, tiebreakGroups: 2 });
    const adv = (q: number) => u.rollouts.filter((r) => r.question === q).map((r) => r.advantage!);
    // -0.05 per step above the tie's mean (1.75 and 1.5 steps)
    expect(adv(0).map((a) => +a.toFixed(12))).toEqual([0.0375, -0.0125, 0.0375, -0.0625]);
    expect(adv(1).map((a) => +a.toFixed(12))).toEqual([-0.025, 0.025, -0.025, 0.025]);
    expect(u.adam.step).toBe(2);
    const after = policy0.withTheta(u.theta);
    expect(pStop(after, 0, 0)).toBeGreaterThan(pStop(policy1, 0, 0));
    expect(pStop(after, 1, 1)).toBeGreaterThan(pStop(policy1, 1, 1));
    // the stop decisions made the extra steps: the worker and access heads keep their parameters
    for (const b of policyThetaLayout({ workers: 3, featureDim: D, maxSteps: 5 })) {
      const moved = Array.from(u.theta.subarray(b.offset, b.offset + b.shape.reduce((a, x) => a * x, 1))).some((v, i) => v !== policy1.theta[b.offset + i]);
      if (policyBlockHead(b.name) !== 'stop') expect(moved, b.name).toBe(false);
      else if (b.name === 'stop.b') expect(moved).toBe(true);
    }
  });
});

describe('stepTiebreaks', () => {
  it('per tie: -x per step above the tie\'s mean steps, summing to 0; a reward alone in its group gets 0; x = 0 is off', () => {
    expect(stepTiebreaks([1, 1, 1, 1], [0, 0, 0, 0], [1, 2, 1, 4], 0.1).map((t) => +t.toFixed(12))).toEqual([0.1, 0, 0.1, -0.2]);
    expect(stepTiebreaks([1, 0.5, 0], [1, 0, -1], [1, 3, 5], 0.1)).toEqual([0, 0, 0]);
    expect(stepTiebreaks([1, 1], [0, 0], [1, 3], 0)).toEqual([0, 0]);
    expect(stepTiebreaks([1, 1], [0, 0], [2, 2], 0.1)).toEqual([0, 0]);
  });

  it('unequal rewards keep their order: the terms stay below half the smallest gap between the group\'s advantages', () => {
    const rewards = [1, 1, 0.5, 0.5];
    const adv = [1, 1, -1, -1];
    const t = stepTiebreaks(rewards, adv, [1, 5, 1, 5], 0.1);
    expect(t.map((x) => +x.toFixed(12))).toEqual([0.2, -0.2, 0.2, -0.2]);
    // a gap of 0.03 (mu > 0: two costs): scaled down so that the better reward still comes first
    const small = stepTiebreaks([1, 1, 0.99], [0.01, 0.01, -0.02], [1, 5, 1], 0.1);
    const total = [0.01, 0.01, -0.02].map((a, i) => a + small[i]!);
    expect(Math.min(total[0]!, total[1]!)).toBeGreaterThan(total[2]!);
    expect(total[0]!).toBeGreaterThan(total[1]!);
    expect(small[0]! + small[1]!).toBeCloseTo(0, 15);
  });
});
