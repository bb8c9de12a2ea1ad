import { describe, expect, it } from 'vitest';
import { InputError, rng } from '@fugu/core';
import { groupAdvantages, grpoLossAndGrad, grpoUpdate, type AdamState, type FlatParams, type GrpoPolicy, type GrpoSample } from './index.ts';

const bits = (a: ArrayLike<number>): string => Buffer.from(Float64Array.from(a).buffer).toString('hex');

// ---- a 3-armed bandit with a softmax policy on 3 logits -------------------------------------
// A rollout pulls 1 to 3 arms (each pull a decision from the same softmax); its reward is the mean
// of the pulls' Bernoulli(mu_arm) draws. Expected reward of the policy: sum_k p_k mu_k.

const MU = [0.2, 0.5, 0.8];
type Pulls = { arms: number[] };

/** softmax of the logits, in float64 */
function softmax(theta: ArrayLike<number>): number[] {
  const m = Math.max(...Array.from(theta));
  const e = Array.from(theta, (t) => Math.exp(t - m));
  const z = e.reduce((a, x) => a + x, 0);
  return e.map((x) => x / z);
}

const bandit: GrpoPolicy<Pulls, FlatParams> = {
  logps: (theta, s) => {
    const p = softmax(theta);
    return s.arms.map((a) => Math.log(p[a]!));
  },
  // d log p_a / d theta_k = [k = a] - p_k, so sum_d w_d (e_{a_d} - p)
  weightedGradLogp: (theta, s, w) => {
    const p = softmax(theta);
    const g = new Float64Array(theta.length);
    s.arms.forEach((a, d) => {
      g[a] = g[a]! + w[d]!;
      for (let k = 0; k < g.length; k++) g[k] = g[k]! - w[d]! * p[k]!;
    });
    return g;
  },
};

const expectedReward = (theta: ArrayLike<number>): number => softmax(theta).reduce((a, p, k) => a + p * MU[k]!, 0);

/** Q groups of G rollouts sampled from the policy at theta, with group advantages */
function sampleBatch(theta: FlatParams, seed: string | number, Q = 4, G = 8): GrpoSample<Pulls>[] {
  const r = rng('grpo-bandit', seed);
  const p = softmax(theta);
  const draw = (): number => {
    const u = r.next();
    let acc = 0;
    for (let k = 0; k < p.length; k++) if (u < (acc += p[k]!)) return k;
    return p.length - 1;
  };
  const rollouts: Pulls[][] = [];
  const rewards: number[][] = [];
  for (let q = 0; q < Q; q++) {
    rollouts.push([]);
    rewards.push([]);
    for (let g = 0; g < G; g++) {
      const arms = Array.from({ length: 1 + r.int(3) }, draw);
      rollouts[q]!.push({ arms });
      rewards[q]!.push(arms.reduce((a, k) => a + (r.next() < MU[k]! ? 1 : 0), 0) / arms.length);
    }
  }
  const { advantages } = groupAdvantages(rewards);
  return rollouts.flatMap((group, q) => group.map((sample, g) => ({ sample, advantage: advantages[q]![g]!, oldLogp: bandit.logps(theta, sample) })));
}

/** iterations of sample -> grpoUpdate, carrying the Adam state */
function train<P extends FlatParams>(theta0: P, iterations: number) {
  let theta = theta0;
  let adamState: AdamState | undefined;
  const history: number[] = [expectedReward(theta)];
  const updates = [];
  for (let it = 0; it < iterations; it++) {
    const samples = sampleBatch(theta, it);
    const u = grpoUpdate({ params: theta, samples, policy: bandit as GrpoPolicy<Pulls, P>, epochs: 4, miniBatches: 2, adam: { lr: 0.05 }, adamState, maxGradNorm: 1, shuffleSeed: it, epsHigh: 0.28 });
    theta = u.params;
    adamState = u.adamState;
    history.push(expectedReward(theta));
    updates.push(u);
  }
  return { theta, adamState: adamState!, history, updates };
}

describe('grpoUpdate on a 3-armed bandit', () => {
  it('increases the expected reward (seeded)', () => {
    const theta0 = new Float64Array(3);
    const { theta, history, updates } = train(theta0, 30);
    // the first update's first step: at the sampling params rho = 1, so dLoss/dθ is the batch's
    // advantage-weighted score, -(1/N) Σ_i (A_i / |o_i|) Σ_d (e_{a_d} - p), computed here from the
    // samples; Adam's first step moves each logit by lr against its sign (g / (|g| + eps): the bias
    // corrections cancel), and the step reports its norm
    const batch0 = sampleBatch(theta0, 0);
    const p0 = softmax(theta0);
    const g0 = [0, 0, 0];
    for (const { sample, advantage } of batch0) {
      for (const a of sample.arms) for (let k = 0; k < 3; k++) g0[k] = g0[k]! - (advantage / (batch0.length * sample.arms.length)) * ((k === a ? 1 : 0) - p0[k]!);
    }
    expect(g0.every((g) => Math.abs(g) > 1e-4), 'every logit has a gradient').toBe(true);
    const one = grpoUpdate({ params: theta0, samples: batch0, policy: bandit, adam: { lr: 0.05 } });
    expect(one.steps).toHaveLength(1);
    expect(one.steps[0]!.gradNorm).toBeCloseTo(Math.hypot(...g0), 12);
    Array.from(one.params).forEach((t, k) => expect(t, `logit ${k}`).toBeCloseTo((-0.05 * g0[k]!) / (Math.abs(g0[k]!) + 1e-8), 12));
    // an arm pulled more by the rollouts that beat their group's mean gains probability
    const gained = softmax(one.params).map((p, k) => Math.sign(p - p0[k]!));
    expect(gained).toEqual(g0.map((g) => -Math.sign(g)));
    expect(history.at(-1)!).toBeGreaterThan(0.75);
    expect(softmax(theta)[2]).toBeGreaterThan(softmax(theta)[0]!);
    // the input params are not modified
    expect(Array.from(theta0)).toEqual([0, 0, 0]);
    // the first step of an update is at the sampling params: rho = 1 everywhere
    const first = updates[0]!.steps[0]!;
    expect(first.clipFraction).toBe(0);
    expect(first.approxKl).toBe(0);
    expect(first.k3Kl).toBe(0);
    // oldLogp stays fixed across epochs: later epochs see the policy move away from it
    expect(updates[0]!.epochs.at(-1)!.approxKl).not.toBe(0);
    expect(updates[0]!.epochs).toHaveLength(4);
    expect(updates[0]!.steps).toHaveLength(8);
    // the surrogate goes down over the epochs of one batch
    for (const u of updates.slice(0, 5)) expect(u.epochs.at(-1)!.loss).toBeLessThan(u.epochs[0]!.loss);
  });

  it('is deterministic: same seeds, same bits (params and Adam state), and resumes from a JSON state', () => {
    const a = train(new Float64Array(3), 10);
    const b = train(new Float64Array(3), 10);
    expect(bits(a.theta)).toBe(bits(b.theta));
    expect(bits(a.adamState.m)).toBe(bits(b.adamState.m));
    expect(bits(a.adamState.v)).toBe(bits(b.adamState.v));
    expect(a.updates.map((u) => u.epochs)).toEqual(b.updates.map((u) => u.epochs));
    // one more update from the JSON state equals one more update from the in-memory state
    const samples = sampleBatch(a.theta, 'next');
    const opts = { samples, policy: bandit, epochs: 2, adam: { lr: 0.05 } };
    const direct = grpoUpdate({ ...opts, params: a.theta, adamState: a.adamState });
    const resumed = grpoUpdate({ ...opts, params: Float64Array.from(JSON.parse(JSON.stringify(Array.from(a.theta))) as number[]), adamState: JSON.parse(JSON.stringify(a.adamState)) as AdamState });
    expect(bits(direct.params)).toBe(bits(resumed.params));
  });

  it('works on Float32Array params and returns a Float32Array', () => {
    const { theta, history } = train(new Float32Array(3), 30);
    expect(theta).toBeInstanceOf(Float32Array);
    expect(history.at(-1)!).toBeGreaterThan(0.75);
  });
});

describe('grpoLossAndGrad', () => {
  it('dLoss/dθ matches central finite differences in θ (clipped and unclipped decisions)', () => {
    for (const seed of [1, 2, 3]) {
      const sampling = Float64Array.from([0.1, -0.2, 0.3]);
      const samples = sampleBatch(sampling, `fd-${seed}`, 3, 6);
      // the current policy has moved from the sampling one, so some ratios leave [0.8, 1.2]
      const r = rng('grpo-fd-theta', seed);
      const theta = Float64Array.from(sampling, (t) => t + 0.4 * r.normal());
      for (const lossAgg of ['seq-mean-token-mean', 'token-mean'] as const) {
        const opts = { lossAgg, beta: 0 };
        const { grad, surrogate } = grpoLossAndGrad(theta, samples, bandit, opts);
        // finite differences are only meaningful away from the kinks at the clip bounds
        const rhos = samples.flatMap((s) => bandit.logps(theta, s.sample) as number[]).map((lp, i) => Math.exp(lp - samples.flatMap((s) => Array.from(s.oldLogp))[i]!));
        const nearKink = rhos.some((rho) => Math.abs(rho - 0.8) < 1e-3 || Math.abs(rho - 1.2) < 1e-3);
        expect(nearKink).toBe(false);
        expect(surrogate.stats.clipFraction).toBeGreaterThan(0);
        const h = 1e-6;
        for (let k = 0; k < 3; k++) {
          const up = theta.slice();
          const down = theta.slice();
          up[k] = up[k]! + h;
          down[k] = down[k]! - h;
          const fd = (grpoLossAndGrad(up, samples, bandit, opts).loss - grpoLossAndGrad(down, samples, bandit, opts).loss) / (2 * h);
          expect(grad[k], `seed ${seed} ${lossAgg} θ_${k}`).toBeCloseTo(fd, 7);
        }
      }
    }
  });

  it('skips the gradient callback for samples whose weights are all 0 (zero advantage, no KL)', () => {
    const theta = new Float64Array(3);
    const s = (arms: number[], advantage: number): GrpoSample<Pulls> => ({ sample: { arms }, advantage, oldLogp: bandit.logps(theta, { arms }) });
    let calls = 0;
    const counting: GrpoPolicy<Pulls, FlatParams> = { logps: bandit.logps, weightedGradLogp: (...a) => (calls++, bandit.weightedGradLogp(...a)) };
    grpoLossAndGrad(theta, [s([0], 0), s([1, 2], 1), s([2], 0)], counting);
    expect(calls).toBe(1);
  });
});

describe('grpoUpdate: mini-batches and input errors', () => {
  it('splits into mini-batches whose sizes differ by at most one, one Adam step each', () => {
    const theta = new Float64Array(3);
    const samples = sampleBatch(theta, 'mb', 1, 5);
    const u = grpoUpdate({ params: theta, samples, policy: bandit, epochs: 2, miniBatches: 2, adam: { lr: 0.01 } });
    expect(u.steps.map((s) => [s.epoch, s.miniBatch, s.samples])).toEqual([
      [0, 0, 3],
      [0, 1, 2],
      [1, 0, 3],
      [1, 1, 2],
    ]);
    expect(u.adamState.step).toBe(4);
  });

  it('names the bad field', () => {
    const theta = new Float64Array(3);
    const samples = sampleBatch(theta, 'err', 1, 4);
    const field = (fn: () => unknown): string | undefined => {
      try {
        fn();
      } catch (e) {
        expect(e).toBeInstanceOf(InputError);
        return (e as InputError).field;
      }
      return undefined;
    };
    const base = { params: theta, samples, policy: bandit, adam: { lr: 0.01 } };
    expect(field(() => grpoUpdate({ ...base, epochs: 0 }))).toBe('epochs');
    expect(field(() => grpoUpdate({ ...base, miniBatches: 5 }))).toBe('miniBatches');
    expect(field(() => grpoUpdate({ ...base, samples: [] }))).toBe('samples');
    expect(field(() => grpoUpdate({ ...base, beta: 0.1 }))).toBe('samples[0].refLogp');
    expect(field(() => grpoUpdate({ ...base, maxGradNorm: 0 }))).toBe('maxGradNorm');
    expect(field(() => grpoUpdate({ ...base, adam: { lr: -1 } }))).toBe('lr');
    const wrongLength = samples.map((s, i) => (i === 2 ? { ...s, oldLogp: [...Array.from(s.oldLogp), -1] } : s));
    expect(field(() => grpoUpdate({ ...base, samples: wrongLength }))).toBe('samples[2].oldLogp');
    expect(field(() => grpoUpdate({ ...base, adamState: { version: 1, algorithm: 'adam', step: 0, m: [0], v: [0] } }))).toBe('state.m');
  });
});
