// The router's parameter vector theta and its documented flat layout:
//
//   theta = [ z (R) | W_h (D x K, row-major) | b_h (K) ]          size R + D*K + K
//
// z scales the R singular values of the SVF-adapted tanh layer (z = 1: the backbone unchanged),
// W_h [D, K] and b_h [K] are the linear head over the D-dim normalised embedding. With USE-lite,
// R = D = 512, so theta has 512 + 513 K entries (3,077 for K = 5). Functions take HeadDims, or
// just K for the USE-lite dims (R = D = 512).

import { InputError, rng } from '@fugu/core';

/** Sizes of the SVF head: R singular values, D-dim embedding, K workers. */
export interface HeadDims {
  /** Number of singular values adapted (the rank of the SVD kept), R. */
  rank: number;
  /** Embedding width (columns of the tanh layer), D. */
  dim: number;
  /** Number of workers (head outputs), K. */
  workers: number;
}

/** USE-lite's final tanh layer: 512x512, full rank kept. */
export const USE_LITE_HEAD_DIMS = { rank: 512, dim: 512 } as const;

export type ThetaPart = 'z' | 'W_h' | 'b_h';

export interface ThetaSegment {
  name: ThetaPart;
  offset: number;
  /** [R] for z, [D, K] for W_h, [K] for b_h. */
  shape: number[];
  size: number;
}

export type ThetaLayout = ThetaSegment[];

/** HeadDims for K workers on USE-lite (R = D = 512). */
export function useLiteHeadDims(workers: number): HeadDims {
  return { ...USE_LITE_HEAD_DIMS, workers };
}

/** HeadDims as given, or USE-lite's for a bare K. */
export function resolveHeadDims(dims: HeadDims | number): HeadDims {
  const d = typeof dims === 'number' ? useLiteHeadDims(dims) : dims;
  checkDims(d);
  return d;
}

function checkDims(d: HeadDims): void {
  for (const k of ['rank', 'dim', 'workers'] as const) {
    if (!Number.isInteger(d[k]) || d[k] < 1) throw new InputError(`theta: ${k} must be a positive integer, got ${d[k]}`, { field: k });
  }
}

/** The layout: z, then W_h row-major, then b_h, with their offsets. */
export function thetaLayout(dims: HeadDims | number): ThetaLayout {
  const { rank: R, dim: D, workers: K } = resolveHeadDims(dims);
  return [
    { name: 'z', offset: 0, shape: [R], size: R },
    { name: 'W_h', offset: R, shape: [D, K], size: D * K },
    { name: 'b_h', offset: R + D * K, shape: [K], size: K },
  ];
}

/** R + D*K + K. */
export function thetaSize(dims: HeadDims | number): number {
  const d = resolveHeadDims(dims);
  return d.rank + d.dim * d.workers + d.workers;
}

/** A one-line description (what `fugu router info` prints). */
export function describeThetaLayout(dims: HeadDims | number): string {
  const parts = thetaLayout(dims).map((s) => `${s.name} [${s.shape.join('x')}] @${s.offset}`);
  return `theta (${thetaSize(dims)} floats): ${parts.join(' | ')}`;
}

/** Views into theta (no copies): writing to them writes theta. */
export interface ThetaParts {
  z: Float32Array;
  /** [D, K] row-major. */
  W_h: Float32Array;
  b_h: Float32Array;
}

/** Views of z, W_h and b_h inside theta (subarrays sharing its memory). */
export function unpackTheta(theta: Float32Array, dimsOrK: HeadDims | number): ThetaParts {
  const dims = resolveHeadDims(dimsOrK);
  const n = thetaSize(dims);
  if (theta.length !== n) {
    throw new InputError(`theta has ${theta.length} values, the layout (R=${dims.rank}, D=${dims.dim}, K=${dims.workers}) needs ${n}`, { field: 'theta' });
  }
  const [z, W, b] = thetaLayout(dims) as [ThetaSegment, ThetaSegment, ThetaSegment];
  return {
    z: theta.subarray(z.offset, z.offset + z.size),
    W_h: theta.subarray(W.offset, W.offset + W.size),
    b_h: theta.subarray(b.offset, b.offset + b.size),
  };
}

/** A new theta from its parts (copies them in layout order). */
export function packTheta(parts: { z: ArrayLike<number>; W_h: ArrayLike<number>; b_h: ArrayLike<number> }, dims: HeadDims | number): Float32Array {
  const theta = new Float32Array(thetaSize(dims));
  const views = unpackTheta(theta, dims);
  for (const k of ['z', 'W_h', 'b_h'] as const) {
    if (parts[k].length !== views[k].length) throw new InputError(`theta part ${k} has ${parts[k].length} values, expected ${views[k].length}`, { field: k });
    views[k].set(parts[k]);
  }
  return theta;
}

export interface InitThetaOptions {
  /** Standard deviation of the seeded normal W_h init; 0 gives zeros. Default 0.01. */
  headScale?: number;
}

/**
 * The starting point: z = 1 (the backbone exactly as shipped), b_h = 0, and W_h drawn from
 * N(0, headScale^2) with the seed (default 0.01). A small random head, rather than zeros, makes
 * the z gradient non-zero from the first step (dz passes through W_h) while the logits start
 * within ~1e-2 of uniform. `headScale: 0` gives the all-zero head (pi uniform, dz = 0 at step 0).
 */
export function initTheta(dims: HeadDims | number, seed: number | string, options: InitThetaOptions = {}): Float32Array {
  const scale = options.headScale ?? 0.01;
  if (!Number.isFinite(scale) || scale < 0) throw new InputError(`initTheta: headScale must be >= 0, got ${scale}`, { field: 'headScale' });
  const theta = new Float32Array(thetaSize(dims));
  const { z, W_h } = unpackTheta(theta, dims);
  z.fill(1);
  if (scale > 0) {
    const r = rng(seed, 'router-head-init');
    for (let i = 0; i < W_h.length; i++) W_h[i] = r.normal() * scale;
  }
  return theta;
}
