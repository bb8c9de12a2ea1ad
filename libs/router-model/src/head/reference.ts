// Plain float64 JavaScript forward and backward of the SVF head: the executable statement of
// the math the ONNX graphs implement (router-graph.ts), used by tests (parity, finite
// differences). Not for production use: it is O(N R D) scalar JS.

import type { SvfLayer } from './svf-layer.ts';
import { unpackTheta, type HeadDims } from './theta.ts';

export interface HeadReferenceForward {
  /** [N, K] */
  logits: Float64Array;
  /** [N, K] */
  probs: Float64Array;
  /** [N, D] the normalised embedding. */
  e: Float64Array;
}

export function headDimsOf(layer: SvfLayer, workers: number): HeadDims {
  return { rank: layer.rank, dim: layer.outDim, workers };
}

/** y = x U [N, R]. */
export function headReferenceProject(layer: SvfLayer, x: ArrayLike<number>, n: number): Float64Array {
  const { inDim: I, rank: R, U } = layer;
  const y = new Float64Array(n * R);
  for (let i = 0; i < n; i++) {
    for (let p = 0; p < I; p++) {
      const xv = x[i * I + p]!;
      if (xv === 0) continue;
      for (let k = 0; k < R; k++) y[i * R + k]! += xv * U[p * R + k]!;
    }
  }
  return y;
}

/** s = S * z * sum(S) / sum(S * z). */
export function headReferenceScales(layer: SvfLayer, z: ArrayLike<number>): { s: Float64Array; c: number; T: number } {
  let sumS = 0, T = 0;
  for (let k = 0; k < layer.rank; k++) {
    sumS += layer.S[k]!;
    T += layer.S[k]! * z[k]!;
  }
  const c = sumS / T;
  const s = new Float64Array(layer.rank);
  for (let k = 0; k < layer.rank; k++) s[k] = layer.S[k]! * z[k]! * c;
  return { s, c, T };
}

/** The normalised embedding e [N, D] from projected features y [N, R]. */
export function headReferenceEmbed(layer: SvfLayer, y: ArrayLike<number>, n: number, z: ArrayLike<number>): Float64Array {
  const { rank: R, outDim: D, Vt, b, eps } = layer;
  const { s } = headReferenceScales(layer, z);
  const e = new Float64Array(n * D);
  const a = new Float64Array(D);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < D; j++) a[j] = b[j]!;
    for (let k = 0; k < R; k++) {
      const ys = y[i * R + k]! * s[k]!;
      for (let j = 0; j < D; j++) a[j]! += ys * Vt[k * D + j]!;
    }
    let ss = 0;
    for (let j = 0; j < D; j++) {
      a[j] = Math.tanh(a[j]!);
      ss += a[j]! * a[j]!;
    }
    const inv = 1 / Math.sqrt(Math.max(ss, eps));
    for (let j = 0; j < D; j++) e[i * D + j] = a[j]! * inv;
  }
  return e;
}

/** logits = e W_h + b_h and pi = softmax(logits). */
export function headReferenceLogits(e: ArrayLike<number>, n: number, D: number, K: number, W_h: ArrayLike<number>, b_h: ArrayLike<number>): { logits: Float64Array; probs: Float64Array } {
  const logits = new Float64Array(n * K);
  const probs = new Float64Array(n * K);
  for (let i = 0; i < n; i++) {
    for (let k = 0; k < K; k++) {
      let v = b_h[k]!;
      for (let j = 0; j < D; j++) v += e[i * D + j]! * W_h[j * K + k]!;
      logits[i * K + k] = v;
    }
    let mx = -Infinity;
    for (let k = 0; k < K; k++) mx = Math.max(mx, logits[i * K + k]!);
    let sum = 0;
    for (let k = 0; k < K; k++) sum += probs[i * K + k] = Math.exp(logits[i * K + k]! - mx);
    for (let k = 0; k < K; k++) probs[i * K + k]! /= sum;
  }
  return { logits, probs };
}

/** Full forward from projected features y [N, R]. */
export function headReferenceForward(layer: SvfLayer, y: ArrayLike<number>, n: number, theta: Float32Array | Float64Array, K: number): HeadReferenceForward {
  const { z, W_h, b_h } = viewParts(theta, layer, K);
  const e = headReferenceEmbed(layer, y, n, z);
  return { e, ...headReferenceLogits(e, n, layer.outDim, K, W_h, b_h) };
}

/** mean_i KL(p_i || pi_i), with 0 log 0 = 0. */
export function headReferenceLoss(probs: ArrayLike<number>, p: ArrayLike<number>, n: number, K: number): number {
  let total = 0;
  for (let i = 0; i < n * K; i++) {
    const pv = p[i]!;
    if (pv > 0) total += pv * (Math.log(pv) - Math.log(probs[i]!));
  }
  return total / n;
}

/**
 * The README's backward in float64: the gradient of headReferenceLoss with respect to theta, in
 * theta's layout. Assumes |h|^2 > eps (the normalisation is not clamped), as the graph does
 * whenever that holds.
 */
export function headReferenceGrad(layer: SvfLayer, y: ArrayLike<number>, p: ArrayLike<number>, n: number, theta: Float32Array | Float64Array, K: number): Float64Array {
  const { rank: R, outDim: D, Vt, S, eps } = layer;
  const { z, W_h } = viewParts(theta, layer, K);
  const { s, c, T } = headReferenceScales(layer, z);
  const { e, probs } = headReferenceForward(layer, y, n, theta, K);
  const grad = new Float64Array(R + D * K + K);
  const dz = grad.subarray(0, R), dW = grad.subarray(R, R + D * K), db = grad.subarray(R + D * K);
  const ds = new Float64Array(R);
  const h = new Float64Array(D), de = new Float64Array(D), da = new Float64Array(D);
  for (let i = 0; i < n; i++) {
    // Recompute h and |h| for row i.
    const ys = new Float64Array(R);
    for (let k = 0; k < R; k++) ys[k] = y[i * R + k]! * s[k]!;
    for (let j = 0; j < D; j++) h[j] = layer.b[j]!;
    for (let k = 0; k < R; k++) for (let j = 0; j < D; j++) h[j]! += ys[k]! * Vt[k * D + j]!;
    let ss = 0;
    for (let j = 0; j < D; j++) {
      h[j] = Math.tanh(h[j]!);
      ss += h[j]! * h[j]!;
    }
    const nrm = Math.sqrt(Math.max(ss, eps));
    const clamped = ss <= eps;
    de.fill(0);
    for (let k = 0; k < K; k++) {
      const dl = (probs[i * K + k]! - p[i * K + k]!) / n;
      db[k]! += dl;
      for (let j = 0; j < D; j++) {
        dW[j * K + k]! += e[i * D + j]! * dl;
        de[j]! += dl * W_h[j * K + k]!;
      }
    }
    let dot = 0;
    for (let j = 0; j < D; j++) dot += e[i * D + j]! * de[j]!;
    for (let j = 0; j < D; j++) {
      const dh = (de[j]! - (clamped ? 0 : e[i * D + j]! * dot)) / nrm;
      da[j] = dh * (1 - h[j]! * h[j]!);
    }
    for (let k = 0; k < R; k++) {
      let g = 0;
      for (let j = 0; j < D; j++) g += da[j]! * Vt[k * D + j]!;
      ds[k]! += y[i * R + k]! * g;
    }
  }
  let q = 0;
  for (let k = 0; k < R; k++) q += ds[k]! * S[k]! * z[k]!;
  for (let j = 0; j < R; j++) dz[j] = c * S[j]! * (ds[j]! - q / T);
  return grad;
}

function viewParts(theta: Float32Array | Float64Array, layer: SvfLayer, K: number) {
  if (theta instanceof Float32Array) return unpackTheta(theta, headDimsOf(layer, K));
  const R = layer.rank, D = layer.outDim;
  return { z: theta.subarray(0, R), W_h: theta.subarray(R, R + D * K), b_h: theta.subarray(R + D * K, R + D * K + K) };
}
