import { describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { describeThetaLayout, initTheta, packTheta, thetaLayout, thetaSize, unpackTheta, useLiteHeadDims } from './theta.ts';

describe('theta layout', () => {
  it('is [z (R) | W_h (D x K) | b_h (K)] with USE-lite dims for a bare K', () => {
    expect(thetaSize(5)).toBe(512 + 512 * 5 + 5);
    expect(thetaLayout(5)).toEqual([
      { name: 'z', offset: 0, shape: [512], size: 512 },
      { name: 'W_h', offset: 512, shape: [512, 5], size: 2560 },
      { name: 'b_h', offset: 3072, shape: [5], size: 5 },
    ]);
    expect(thetaSize({ rank: 3, dim: 4, workers: 2 })).toBe(3 + 8 + 2);
    expect(describeThetaLayout(5)).toBe('theta (3077 floats): z [512] @0 | W_h [512x5] @512 | b_h [5] @3072');
  });

  it('unpack gives views (no copies); pack is its inverse', () => {
    const dims = { rank: 2, dim: 3, workers: 2 };
    const theta = Float32Array.from({ length: thetaSize(dims) }, (_, i) => i);
    const v = unpackTheta(theta, dims);
    expect(Array.from(v.z)).toEqual([0, 1]);
    expect(Array.from(v.W_h)).toEqual([2, 3, 4, 5, 6, 7]);
    expect(Array.from(v.b_h)).toEqual([8, 9]);
    v.W_h[1] = 42; // row 0, column 1
    expect(theta[3]).toBe(42);
    expect(packTheta(v, dims)).toEqual(theta);
    expect(() => packTheta({ ...v, b_h: [1] }, dims)).toThrow(/b_h has 1 values/);
    expect(() => unpackTheta(theta.subarray(1), dims)).toThrow(InputError);
  });

  it('init: z = 1, b_h = 0, seeded small W_h (or zeros)', () => {
    const a = initTheta(useLiteHeadDims(4), 7), b = initTheta(4, 7), c = initTheta(4, 8);
    expect(a).toEqual(b);
    expect(a).not.toEqual(c);
    const v = unpackTheta(a, 4);
    expect(v.z.every((x) => x === 1)).toBe(true);
    expect(v.b_h.every((x) => x === 0)).toBe(true);
    const sd = Math.sqrt(v.W_h.reduce((s, x) => s + x * x, 0) / v.W_h.length);
    expect(sd).toBeGreaterThan(0.008);
    expect(sd).toBeLessThan(0.012);
    expect(unpackTheta(initTheta(4, 7, { headScale: 0 }), 4).W_h.every((x) => x === 0)).toBe(true);
    expect(() => initTheta({ rank: 0, dim: 1, workers: 1 }, 1)).toThrow(/rank must be a positive integer/);
  });
});
