// The SVF-adapted dense layer: W = U diag(S) V^T, computed once from the backbone's final tanh
// layer and stored with the model (as float32 arrays, like every other weight).
//
//   a = x W'(z) + b,   W'(z) = U diag(S * z * c(z)) V^T,   c(z) = sum(S) / sum(S * z)
//   h = tanh(a),       e = h / sqrt(max(|h|^2, eps))
//
// With y = x U (depends on the text only, so it can be computed once per feature matrix):
//   a = (y * s) V^T + b,   s = S * z * c(z).
// eps is USE-lite's: float32(1e-12) on the squared norm, exactly as the backbone's l2_normalize.

import { InputError } from '@fugu/core';
import { USE_LITE_CONSTANTS } from '../backbones/use-lite/params.ts';
import { svd } from './svd.ts';

export interface SvfLayer {
  /** Rows of W: the width of the cached feature x. */
  inDim: number;
  /** Columns of W: the width of the embedding e the head reads (D). */
  outDim: number;
  /** Singular triplets kept (R = min(inDim, outDim)). */
  rank: number;
  /** [inDim, rank] row-major. */
  U: Float32Array;
  /** [rank], descending. */
  S: Float32Array;
  /** [rank, outDim] row-major (V transposed). */
  Vt: Float32Array;
  /** [outDim]: the layer's bias. */
  b: Float32Array;
  /** L2-normalisation epsilon, on the squared norm. */
  eps: number;
}

/** SVD of the dense layer `W` [inDim, outDim] (row-major, a = x W + b). */
export function svfLayerFromDense(
  W: { data: ArrayLike<number>; rows: number; cols: number },
  b: ArrayLike<number>,
  eps: number = USE_LITE_CONSTANTS.l2Epsilon,
): SvfLayer {
  if (b.length !== W.cols) throw new InputError(`SVF layer: bias has ${b.length} values, W has ${W.cols} columns`, { field: 'b' });
  const d = svd(W.data, W.rows, W.cols);
  const R = d.rank;
  const Vt = new Float32Array(R * W.cols);
  for (let j = 0; j < W.cols; j++) for (let k = 0; k < R; k++) Vt[k * W.cols + j] = d.V[j * R + k]!;
  return {
    inDim: W.rows,
    outDim: W.cols,
    rank: R,
    U: Float32Array.from(d.U),
    S: Float32Array.from(d.S),
    Vt,
    b: Float32Array.from(b),
    eps: Math.fround(eps),
  };
}

/** Checks array sizes (a layer read back from storage, say); throws InputError naming the field. */
export function checkSvfLayer(layer: SvfLayer): void {
  const { inDim, outDim, rank } = layer;
  for (const [k, v] of [['inDim', inDim], ['outDim', outDim], ['rank', rank]] as const) {
    if (!Number.isInteger(v) || v < 1) throw new InputError(`SVF layer: ${k} must be a positive integer, got ${v}`, { field: k });
  }
  const want: [keyof SvfLayer, number][] = [['U', inDim * rank], ['S', rank], ['Vt', rank * outDim], ['b', outDim]];
  for (const [k, n] of want) {
    const a = layer[k] as Float32Array;
    if (!(a instanceof Float32Array) || a.length !== n) throw new InputError(`SVF layer: ${k} must be a Float32Array of ${n} values`, { field: k });
  }
  if (!(layer.eps >= 0)) throw new InputError(`SVF layer: eps must be >= 0, got ${layer.eps}`, { field: 'eps' });
}
