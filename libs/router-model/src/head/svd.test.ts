import { beforeAll, describe, expect, it } from 'vitest';
import { InputError, rng } from '@fugu/core';
import { loadUseLite, type UseLiteBackbone } from '../backbones/use-lite/load.ts';
import { orthogonalityError, svd, svdReconstructionError } from './svd.ts';
import { svfLayerFromDense } from './svf-layer.ts';

const r = rng('svd-test');
const randn = (n: number) => Float64Array.from({ length: n }, () => r.normal());

function expectGoodSvd(a: ArrayLike<number>, m: number, n: number, tol: number) {
  const d = svd(a, m, n);
  expect(d.rank).toBe(Math.min(m, n));
  expect(d.U.length).toBe(m * d.rank);
  expect(d.V.length).toBe(n * d.rank);
  expect(svdReconstructionError(a, d)).toBeLessThan(tol);
  expect(orthogonalityError(d.U, m, d.rank)).toBeLessThan(tol);
  expect(orthogonalityError(d.V, n, d.rank)).toBeLessThan(tol);
  for (let k = 0; k < d.rank; k++) {
    expect(d.S[k]).toBeGreaterThanOrEqual(0);
    if (k > 0) expect(d.S[k]).toBeLessThanOrEqual(d.S[k - 1]!);
  }
  return d;
}

describe('svd', () => {
  it('random square, tall and wide matrices', () => {
    for (const [m, n] of [[1, 1], [3, 1], [1, 4], [6, 6], [40, 17], [17, 40], [96, 96]] as const) expectGoodSvd(randn(m * n), m, n, 1e-12);
  });

  it('known singular values, rank deficiency, zeros and repeated values', () => {
    // diag(3, -5, 0) permuted: singular values 5, 3, 0.
    const d = expectGoodSvd([0, 3, 0, 0, 0, 0, -5, 0, 0], 3, 3, 1e-14);
    expect(Array.from(d.S)).toEqual([5, 3, 0]);
    // Rank 1: u v^T.
    const u = randn(8), v = randn(5);
    const a = new Float64Array(40);
    for (let i = 0; i < 8; i++) for (let j = 0; j < 5; j++) a[i * 5 + j] = u[i]! * v[j]!;
    const r1 = expectGoodSvd(a, 8, 5, 1e-12);
    expect(r1.S[1]).toBeLessThan(1e-12);
    expectGoodSvd(new Float64Array(12), 4, 3, 1e-15);
    const id = new Float64Array(25);
    for (let i = 0; i < 5; i++) id[i * 6] = 2;
    expect(Array.from(expectGoodSvd(id, 5, 5, 1e-15).S)).toEqual([2, 2, 2, 2, 2]);
  });

  it('refuses bad input', () => {
    expect(() => svd([1, 2, 3], 2, 2)).toThrow(InputError);
    expect(() => svd([1, NaN, 3, 4], 2, 2)).toThrow(/element 1 is NaN/);
    expect(() => svd([], 0, 2)).toThrow(/positive integers/);
  });

  describe('the USE-lite tanh layer (512 x 512)', () => {
    let backbone: UseLiteBackbone;
    beforeAll(async () => {
      backbone = await loadUseLite();
    });

    it('reconstructs W to 1e-4 (float64: ~1e-13) with orthonormal U and V; the float32 layer too', () => {
      const W = backbone.params.tanhKernel;
      const d = expectGoodSvd(W.data, W.rows, W.cols, 1e-10);
      expect(svdReconstructionError(W.data, d)).toBeLessThan(1e-4);
      // The stored (float32) layer reproduces W to float32 precision.
      const layer = svfLayerFromDense(W, backbone.params.tanhBias);
      let worst = 0;
      for (let i = 0; i < 512; i++) {
        for (let j = 0; j < 512; j++) {
          let w = 0;
          for (let k = 0; k < 512; k++) w += layer.U[i * 512 + k]! * layer.S[k]! * layer.Vt[k * 512 + j]!;
          worst = Math.max(worst, Math.abs(w - W.data[i * 512 + j]!));
        }
      }
      expect(worst).toBeLessThan(1e-4);
    });
  });
});
