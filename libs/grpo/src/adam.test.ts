import { describe, expect, it } from 'vitest';
import { InputError, rng } from '@fugu/core';
import { adamInit, adamStep, checkAdamState, clipGradNorm, l2Norm, type AdamState } from './index.ts';

const bits = (a: ArrayLike<number>): string => Buffer.from(Float64Array.from(a).buffer).toString('hex');

describe('adamStep', () => {
  it('matches a 2-step trajectory worked by hand (lr 0.1, betas 0.9/0.999, eps 1e-8)', () => {
    const params = Float64Array.from([1, -2]);
    let state = adamInit(2);
    // step 1, g = (0.5, -1): m = 0.1 g = (0.05, -0.1); v = 0.001 g^2 = (0.00025, 0.001)
    //   bias corrections 1 - 0.9 = 0.1 and 1 - 0.999 = 0.001: m^ = g, v^ = g^2
    //   p -= 0.1 * g / (|g| + 1e-8): p = (1 - 0.05/0.50000001, -2 + 0.1/1.00000001) = (0.900000002, -1.900000001)
    state = adamStep(params, [0.5, -1], state, { lr: 0.1 });
    expect(state.step).toBe(1);
    expect(state.m[0]).toBeCloseTo(0.05, 15);
    expect(state.m[1]).toBeCloseTo(-0.1, 15);
    expect(state.v[0]).toBeCloseTo(0.00025, 15);
    expect(state.v[1]).toBeCloseTo(0.001, 15);
    expect(params[0]).toBeCloseTo(1 - 0.05 / 0.50000001, 14);
    expect(params[1]).toBeCloseTo(-2 + 0.1 / 1.00000001, 14);
    // step 2, g = (0.1, 0.3): m = 0.9 m + 0.1 g = (0.045 + 0.01, -0.09 + 0.03) = (0.055, -0.06)
    //   v = 0.999 v + 0.001 g^2 = (0.00024975 + 0.00001, 0.000999 + 0.00009) = (0.00025975, 0.001089)
    //   bias corrections 1 - 0.81 = 0.19 and 1 - 0.998001 = 0.001999
    //   m^ = (0.2894736842, -0.3157894737); v^ = (0.1299399700, 0.5447723862); sqrt v^ = (0.3604718713, 0.7380869774)
    //   p -= 0.1 m^ / (sqrt v^ + 1e-8): (0.900000002 - 0.0803040956, -1.900000001 + 0.0427848586) = (0.8196959064, -1.8572151424)
    state = adamStep(params, [0.1, 0.3], state, { lr: 0.1 });
    expect(state.step).toBe(2);
    expect(state.m[0]).toBeCloseTo(0.055, 15);
    expect(state.v[1]).toBeCloseTo(0.001089, 15);
    expect(params[0]).toBeCloseTo(0.900000002 - (0.1 * (0.055 / 0.19)) / (Math.sqrt(0.00025975 / 0.001999) + 1e-8), 12);
    expect(params[1]).toBeCloseTo(-1.900000001 - (0.1 * (-0.06 / 0.19)) / (Math.sqrt(0.001089 / 0.001999) + 1e-8), 12);
    expect(params[0]).toBeCloseTo(0.8196959064, 9);
    expect(params[1]).toBeCloseTo(-1.8572151424, 9);
  });

  it('weight decay is decoupled (AdamW): p (1 - lr wd) before the Adam step', () => {
    // p = 2, g = 0.5, lr 0.1, wd 0.01: p = 2 (1 - 0.001) - 0.1 * 0.5 / (0.5 + 1e-8) = 1.998 - 0.09999999800
    const p = Float64Array.from([2]);
    adamStep(p, [0.5], adamInit(1), { lr: 0.1, weightDecay: 0.01 });
    expect(p[0]).toBeCloseTo(1.998 - 0.05 / 0.50000001, 14);
    // decay alone on a zero gradient: p (1 - lr wd), the Adam term is 0 / (0 + eps) = 0
    const q = Float64Array.from([2]);
    adamStep(q, [0], adamInit(1), { lr: 0.1, weightDecay: 0.01 });
    expect(q[0]).toBe(2 * (1 - 0.1 * 0.01));
  });

  it('updates in place and returns a new state without touching the given one', () => {
    const p = [1, 2, 3];
    const s0 = adamInit(3);
    const s1 = adamStep(p, [1, 1, 1], s0, { lr: 0.01 });
    expect(s0).toEqual(adamInit(3));
    expect(s1).not.toBe(s0);
    expect(p[0]).toBeCloseTo(0.99, 6);
    // Float32Array params: the float64 update is stored rounded to float32
    const f = Float32Array.from([1, 2, 3]);
    adamStep(f, [1, 1, 1], adamInit(3), { lr: 0.01 });
    expect(f[0]).toBe(Math.fround(1 - 0.01 / (1 + 1e-8)));
  });

  it('resumes exactly from JSON: 5 steps straight vs a round trip before every step', () => {
    const r = rng('grpo-adam-resume');
    const grads = Array.from({ length: 5 }, () => Array.from({ length: 7 }, () => r.normal()));
    const run = (roundTrip: boolean) => {
      const p = Float64Array.from({ length: 7 }, (_, i) => i / 7 - 0.5);
      let s: AdamState = adamInit(7);
      for (const g of grads) {
        if (roundTrip) s = checkAdamState(JSON.parse(JSON.stringify(s)), 7);
        s = adamStep(p, g, s, { lr: 0.003, weightDecay: 0.1 });
      }
      return { p, s };
    };
    const a = run(false);
    const b = run(true);
    expect(bits(a.p)).toBe(bits(b.p));
    expect(bits(a.s.m)).toBe(bits(b.s.m));
    expect(bits(a.s.v)).toBe(bits(b.s.v));
    expect(b.s.step).toBe(5);
  });

  it('bad input is an InputError naming the field', () => {
    const field = (fn: () => unknown): string | undefined => {
      try {
        fn();
      } catch (e) {
        expect(e).toBeInstanceOf(InputError);
        return (e as InputError).field;
      }
      return undefined;
    };
    expect(field(() => adamStep([1], [1], adamInit(1), { lr: 0 }))).toBe('lr');
    expect(field(() => adamStep([1], [1], adamInit(1), { lr: 0.1, beta1: 1 }))).toBe('beta1');
    expect(field(() => adamStep([1], [1, 2], adamInit(1), { lr: 0.1 }))).toBe('grad');
    expect(field(() => adamStep([1], [Number.NaN], adamInit(1), { lr: 0.1 }))).toBe('grad[0]');
    expect(field(() => adamStep([1, 2], [1, 2], adamInit(1), { lr: 0.1 }))).toBe('state.m');
    expect(field(() => checkAdamState({ version: 2, algorithm: 'adam', step: 0, m: [], v: [] }))).toBe('state.version');
    expect(field(() => checkAdamState({ version: 1, algorithm: 'adam', step: 0, m: [0], v: [null] }))).toBe('state.v[0]');
  });
});

describe('clipGradNorm', () => {
  it('scales to maxNorm when above, returns the norm before clipping', () => {
    // (3, 4): norm 5; maxNorm 1 -> (0.6, 0.8)
    const g = Float64Array.from([3, 4]);
    expect(clipGradNorm(g, 1)).toBe(5);
    expect(g[0]).toBeCloseTo(0.6, 15);
    expect(g[1]).toBeCloseTo(0.8, 15);
    expect(l2Norm(g)).toBeCloseTo(1, 15);
  });

  it('leaves a gradient within maxNorm unchanged', () => {
    const g = [3, 4];
    expect(clipGradNorm(g, 10)).toBe(5);
    expect(g).toEqual([3, 4]);
    expect(clipGradNorm(g, 5)).toBe(5);
    expect(g).toEqual([3, 4]);
  });

  it('rejects a non-finite gradient or maxNorm <= 0', () => {
    expect(() => clipGradNorm([Number.NaN], 1)).toThrow(InputError);
    expect(() => clipGradNorm([1], 0)).toThrow(InputError);
  });
});
