import { describe, expect, it } from 'vitest';
import { InputError, rng } from '@fugu/core';
import { aggregationWeights, clippedSurrogate, k3, k3GradLogp, type LossAgg, type SurrogateOptions, type SurrogateSample } from './index.ts';

/** a sample with oldLogp = 0 and logp = log(rho) per decision, so the ratios are exactly the rhos given (up to exp/log rounding) */
const withRatios = (advantage: number, rhos: number[]): SurrogateSample => ({ advantage, logp: rhos.map(Math.log), oldLogp: rhos.map(() => 0) });

/** the loss as a function of all decisions' logp (flattened), for finite differences */
function lossAt(samples: SurrogateSample[], flat: number[], opts: SurrogateOptions): number {
  let k = 0;
  const moved = samples.map((s) => ({ ...s, logp: Array.from(s.logp, () => flat[k++]!) }));
  return clippedSurrogate(moved, opts).loss;
}

/** central finite differences of the loss in each decision's logp */
function finiteDiff(samples: SurrogateSample[], opts: SurrogateOptions, h = 1e-6): number[] {
  const flat = samples.flatMap((s) => Array.from(s.logp));
  return flat.map((_, i) => {
    const up = flat.slice();
    const down = flat.slice();
    up[i] = up[i]! + h;
    down[i] = down[i]! - h;
    return (lossAt(samples, up, opts) - lossAt(samples, down, opts)) / (2 * h);
  });
}

describe('clippedSurrogate: values worked by hand', () => {
  // sample 0: A = 1, rhos (1.5, 0.9); sample 1: A = -2, rhos (0.5, 1.1, 1.5); eps 0.2 both sides.
  //   s0 d0: rho 1.5 -> clip 1.2: pg1 = -1.5, pg2 = -1.2, max = -1.2, clipped (A > 0, rho > 1.2)
  //   s0 d1: rho 0.9 in range: -0.9
  //   s1 d0: rho 0.5 -> clip 0.8: pg1 = 1.0, pg2 = 1.6, max = 1.6, clipped (A < 0, rho < 0.8)
  //   s1 d1: rho 1.1 in range: 2.2
  //   s1 d2: rho 1.5 -> clip 1.2: pg1 = 3.0, pg2 = 2.4, max = 3.0, NOT clipped (A < 0 and rho > 1.2)
  const samples = [withRatios(1, [1.5, 0.9]), withRatios(-2, [0.5, 1.1, 1.5])];

  it("'seq-mean-token-mean' (default): mean per sample, then over samples", () => {
    // s0: (-1.2 - 0.9) / 2 = -1.05; s1: (1.6 + 2.2 + 3.0) / 3 = 6.8 / 3; loss = (-1.05 + 6.8/3) / 2 = 0.608333...
    const r = clippedSurrogate(samples);
    expect(r.loss).toBeCloseTo((-1.05 + 6.8 / 3) / 2, 12);
    // weights: 1 / (2 * 2) = 1/4 for s0's decisions, 1 / (2 * 3) = 1/6 for s1's
    // gradients: clipped -> 0; unclipped -> w * (-A rho): s0 d1: -0.9/4; s1 d1: 2.2/6; s1 d2: 3.0/6
    expect(Array.from(r.grad[0]!)).toEqual([0, expect.closeTo(-0.9 / 4, 12)]);
    expect(Array.from(r.grad[1]!)).toEqual([0, expect.closeTo(2.2 / 6, 12), expect.closeTo(3.0 / 6, 12)]);
    expect(r.clipped).toEqual([
      [true, false],
      [true, false, false],
    ]);
    expect(r.stats.clipFraction).toBe(2 / 5);
    expect(r.stats.samples).toBe(2);
    expect(r.stats.decisions).toBe(5);
  });

  it("'token-mean': mean over all decisions of the batch, a different value on unequal lengths", () => {
    // (-1.2 - 0.9 + 1.6 + 2.2 + 3.0) / 5 = 4.7 / 5 = 0.94; every weight 1/5
    const r = clippedSurrogate(samples, { lossAgg: 'token-mean' });
    expect(r.loss).toBeCloseTo(0.94, 12);
    expect(Array.from(r.grad[0]!)).toEqual([0, expect.closeTo(-0.9 / 5, 12)]);
    expect(Array.from(r.grad[1]!)).toEqual([0, expect.closeTo(2.2 / 5, 12), expect.closeTo(3.0 / 5, 12)]);
    expect(r.loss).not.toBeCloseTo(clippedSurrogate(samples).loss, 3);
    // equal lengths: the two aggregations agree
    const equal = [withRatios(1, [1.1, 0.9]), withRatios(-1, [1.05, 1.3])];
    expect(clippedSurrogate(equal, { lossAgg: 'token-mean' }).loss).toBeCloseTo(clippedSurrogate(equal).loss, 14);
  });

  it('aggregationWeights', () => {
    expect(aggregationWeights([2, 3], 'token-mean')).toEqual([1 / 5, 1 / 5]);
    expect(aggregationWeights([2, 3], 'seq-mean-token-mean')).toEqual([1 / 4, 1 / 6]);
  });

  it('stats: approxKl is mean(oldLogp - logp) (verl ppo_kl), k3Kl mean(rho - 1 - log rho)', () => {
    const r = clippedSurrogate(samples);
    const rhos = [1.5, 0.9, 0.5, 1.1, 1.5];
    expect(r.stats.approxKl).toBeCloseTo(-rhos.reduce((a, x) => a + Math.log(x), 0) / 5, 12);
    // k3 of each: 1.5 - 1 - ln 1.5 = 0.0945349, 0.9: 0.0053605, 0.5: 0.1931472, 1.1: 0.0046898
    expect(r.stats.k3Kl).toBeCloseTo(rhos.reduce((a, x) => a + x - 1 - Math.log(x), 0) / 5, 12);
    expect(r.stats.k3Kl).toBeCloseTo((2 * 0.0945348918918356 + 0.005360515657826 + 0.1931471805599453 + 0.0046898202886) / 5, 9);
    expect(r.stats.refKl).toBeNull();
    expect(r.stats.pgLoss).toBe(r.loss);
    expect(r.stats.klLoss).toBe(0);
  });
});

describe('clippedSurrogate: clip branches', () => {
  /** one decision with ratio rho and advantage A: its loss, gradient and clip flag */
  const one = (A: number, logRatio: number, opts: SurrogateOptions = {}) => {
    const r = clippedSurrogate([{ advantage: A, logp: [logRatio - 1], oldLogp: [-1] }], opts);
    return { loss: r.loss, grad: r.grad[0]![0]!, clipped: r.clipped[0]![0]!, rho: Math.exp(logRatio - 1 - -1) };
  };

  it('A > 0 with rho > 1 + epsHigh: clipped, zero gradient, loss -A (1 + epsHigh)', () => {
    const c = one(2, Math.log(1.5));
    expect(c.clipped).toBe(true);
    expect(c.grad).toBe(0);
    expect(c.loss).toBeCloseTo(-2 * 1.2, 14);
  });

  it('A < 0 with rho < 1 - epsLow: clipped, zero gradient, loss -A (1 - epsLow)', () => {
    const c = one(-2, Math.log(0.5));
    expect(c.clipped).toBe(true);
    expect(c.grad).toBe(0);
    expect(c.loss).toBeCloseTo(2 * 0.8, 14);
  });

  it('the other cases are not clipped: gradient -A rho', () => {
    for (const [A, rho] of [
      [2, 0.5], // A > 0, rho below the range: the unclipped -A rho is the larger loss
      [-2, 1.5], // A < 0, rho above the range
      [2, 1.1], // inside the range
      [-2, 0.9],
      [2, 1],
    ] as const) {
      const c = one(A, Math.log(rho));
      expect(c.clipped, `A ${A} rho ${rho}`).toBe(false);
      expect(c.grad).toBeCloseTo(-A * c.rho, 14);
      expect(c.loss).toBeCloseTo(-A * c.rho, 14);
    }
  });

  it('A = 0: no gradient, never clipped', () => {
    for (const rho of [0.5, 1, 1.5]) {
      const c = one(0, Math.log(rho));
      expect(c.clipped).toBe(false);
      expect(Math.abs(c.grad)).toBe(0);
    }
  });

  it('a tie (rho exactly on 1 + epsHigh) takes the unclipped gradient, as torch.maximum + clamp do', () => {
    // torch.maximum splits the gradient half/half on a tie and clamp passes it at its bounds
    // (derivatives.yaml), so both halves are -A rho: the sum is the unclipped gradient.
    const rho = Math.exp(0.2); // 1.2214...; epsHigh = rho - 1 is exact (Sterbenz), so 1 + epsHigh === rho
    const epsHigh = rho - 1;
    expect(1 + epsHigh).toBe(rho);
    const r = clippedSurrogate([{ advantage: 3, logp: [0.2], oldLogp: [0] }], { epsHigh });
    expect(r.clipped[0]![0]).toBe(false);
    expect(r.grad[0]![0]).toBe(-3 * rho);
  });

  it("epsHigh is settable (DAPO's clip-higher 0.28): rho 1.25 with A > 0 is clipped at 0.2, not at 0.28", () => {
    expect(one(1, Math.log(1.25)).clipped).toBe(true);
    const c = one(1, Math.log(1.25), { epsHigh: 0.28 });
    expect(c.clipped).toBe(false);
    expect(c.grad).toBeCloseTo(-1.25, 14);
    // and epsLow independently: rho 0.75 with A < 0 is clipped at 0.2, not at 0.3
    expect(one(-1, Math.log(0.75)).clipped).toBe(true);
    expect(one(-1, Math.log(0.75), { epsLow: 0.3 }).clipped).toBe(false);
  });
});

describe('k3 KL term', () => {
  it('value and gradient by hand', () => {
    // logp -1, ref -1.5: d = ref - logp = -0.5; k3 = e^-0.5 + 0.5 - 1 = 0.6065306597 - 0.5 = 0.1065306597
    expect(k3(-1, -1.5)).toBeCloseTo(0.10653065971263342, 14);
    // d k3 / d logp = 1 - e^(ref - logp) = 1 - 0.6065306597 = 0.3934693403
    expect(k3GradLogp(-1, -1.5)).toBeCloseTo(0.3934693402873666, 14);
    expect(k3(-2, -2)).toBe(0);
    expect(k3GradLogp(-2, -2)).toBe(0);
  });

  it('enters the loss as beta * k3 with its gradient (A = 0 isolates it)', () => {
    // two decisions, one sample, seq-mean-token-mean: weight 1/2 each
    const s: SurrogateSample = { advantage: 0, logp: [-1, -0.5], oldLogp: [-1, -0.5], refLogp: [-1.5, -0.5] };
    const r = clippedSurrogate([s], { beta: 0.1 });
    expect(r.loss).toBeCloseTo((0.1 * (0.10653065971263342 + 0)) / 2, 14);
    expect(r.grad[0]![0]).toBeCloseTo((0.1 * 0.3934693402873666) / 2, 14);
    expect(r.grad[0]![1]).toBe(0);
    expect(r.stats.refKl).toBeCloseTo(0.10653065971263342 / 2, 14);
    expect(r.stats.klLoss).toBeCloseTo(0.10653065971263342 / 2, 14);
    expect(r.stats.pgLoss).toBe(0);
    // beta 0: reported, not in the loss
    expect(clippedSurrogate([s]).loss).toBe(0);
    expect(clippedSurrogate([s]).stats.refKl).toBeCloseTo(0.10653065971263342 / 2, 14);
  });
});

describe('clippedSurrogate: gradient against central finite differences', () => {
  /** random samples whose ratios stay at least 0.01 away from the clip bounds (the loss is smooth there) */
  function randomSamples(seed: number, withRef: boolean): SurrogateSample[] {
    const r = rng('grpo-surrogate-fd', seed);
    const out: SurrogateSample[] = [];
    for (let i = 0; i < 6; i++) {
      const n = 1 + r.int(5);
      const oldLogp: number[] = [];
      const logp: number[] = [];
      const refLogp: number[] = [];
      for (let d = 0; d < n; d++) {
        let rho = Math.exp(0.5 * r.normal());
        while (Math.abs(rho - 0.8) < 0.01 || Math.abs(rho - 1.28) < 0.01 || Math.abs(rho - 1.2) < 0.01) rho = Math.exp(0.5 * r.normal());
        const old = -0.1 - 2 * r.next();
        oldLogp.push(old);
        logp.push(old + Math.log(rho));
        refLogp.push(old + 0.3 * r.normal());
      }
      out.push({ advantage: r.normal(), logp, oldLogp, ...(withRef && { refLogp }) });
    }
    return out;
  }

  for (const lossAgg of ['seq-mean-token-mean', 'token-mean'] as LossAgg[]) {
    for (const beta of [0, 0.04]) {
      it(`${lossAgg}, beta ${beta}, epsHigh 0.28`, () => {
        for (let seed = 0; seed < 5; seed++) {
          const samples = randomSamples(seed, beta > 0);
          const opts: SurrogateOptions = { lossAgg, beta, epsHigh: 0.28 };
          const r = clippedSurrogate(samples, opts);
          const fd = finiteDiff(samples, opts);
          const analytic = r.grad.flatMap((g) => Array.from(g));
          analytic.forEach((g, i) => expect(g, `seed ${seed} decision ${i}`).toBeCloseTo(fd[i]!, 7));
          // some decisions of these batches are clipped and some are not
          expect(r.stats.clipFraction).toBeGreaterThan(0);
          expect(r.stats.clipFraction).toBeLessThan(1);
        }
      });
    }
  }
});

describe('clippedSurrogate: input errors', () => {
  it('names the field', () => {
    const expectField = (fn: () => unknown, field: string): void => {
      expect(fn).toThrow(InputError);
      try {
        fn();
      } catch (e) {
        expect((e as InputError).field).toBe(field);
      }
    };
    expectField(() => clippedSurrogate([]), 'samples');
    expectField(() => clippedSurrogate([{ advantage: 1, logp: [], oldLogp: [] }]), 'samples[0].logp');
    expectField(() => clippedSurrogate([withRatios(1, [1]), { advantage: 1, logp: [0, 0], oldLogp: [0] }]), 'samples[1].oldLogp');
    expectField(() => clippedSurrogate([withRatios(1, [1])], { beta: 0.1 }), 'samples[0].refLogp');
    expectField(() => clippedSurrogate([{ advantage: Number.NaN, logp: [0], oldLogp: [0] }]), 'samples[0].advantage');
    expectField(() => clippedSurrogate([{ advantage: 1, logp: [0, Number.POSITIVE_INFINITY], oldLogp: [0, 0] }]), 'samples[0].logp[1]');
    expectField(() => clippedSurrogate([withRatios(1, [1])], { epsLow: 1 }), 'epsLow');
    expectField(() => clippedSurrogate([withRatios(1, [1])], { epsHigh: -0.1 }), 'epsHigh');
    expectField(() => clippedSurrogate([withRatios(1, [1])], { lossAgg: 'sum' as never }), 'lossAgg');
    expectField(() => clippedSurrogate([withRatios(1, [1])], { beta: -1 }), 'beta');
  });
});
