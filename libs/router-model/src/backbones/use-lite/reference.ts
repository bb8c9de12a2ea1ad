// Plain TypeScript forward pass of USE-lite, written straight from spec.md: a test oracle for
// the ONNX port, not a production path (simple loops, float64 accumulation, one text at a time).
// Section numbers (§) refer to spec.md.

import { InputError } from '@fugu/core';
import { USE_LITE_CONSTANTS, USE_LITE_DIMS, useLiteParams, type Matrix, type UseLiteLayerParams, type UseLiteParams } from './params.ts';
import type { WeightMap } from './weights.ts';

type Vec = Float64Array;

/**
 * y[L, cols] = x[L, rows] @ W + b. Four rows of x per pass over W, so each row of W (the
 * matrices are up to 3 MB and do not stay in cache) is read once per four outputs.
 */
function dense(x: Vec, length: number, w: Matrix, bias: Float32Array | undefined): Vec {
  const { rows, cols, data } = w;
  const y = new Float64Array(length * cols);
  if (bias) for (let p = 0; p < length; p++) y.set(bias, p * cols);
  for (let p = 0; p < length; p += 4) {
    // Missing rows of the last block get coefficient 0 and write to a scratch row.
    const n = Math.min(4, length - p);
    const scratch = new Float64Array(cols);
    const out = [0, 1, 2, 3].map((r) => (r < n ? y.subarray((p + r) * cols, (p + r + 1) * cols) : scratch));
    const [o0, o1, o2, o3] = out as [Vec, Vec, Vec, Vec];
    for (let k = 0; k < rows; k++) {
      const a0 = x[p * rows + k]!;
      const a1 = n > 1 ? x[(p + 1) * rows + k]! : 0;
      const a2 = n > 2 ? x[(p + 2) * rows + k]! : 0;
      const a3 = n > 3 ? x[(p + 3) * rows + k]! : 0;
      if (a0 === 0 && a1 === 0 && a2 === 0 && a3 === 0) continue;
      const wo = k * cols;
      for (let j = 0; j < cols; j++) {
        const wv = data[wo + j]!;
        o0[j]! += a0 * wv;
        o1[j]! += a1 * wv;
        o2[j]! += a2 * wv;
        o3[j]! += a3 * wv;
      }
    }
  }
  return y;
}

/** §4 layer norm over the last axis: d = x - mean(x); (scale * rsqrt(mean(d^2) + eps)) * d + bias. */
function layerNorm(x: Vec, length: number, dim: number, scale: Float32Array, bias: Float32Array): Vec {
  const y = new Float64Array(length * dim);
  for (let p = 0; p < length; p++) {
    const o = p * dim;
    let mean = 0;
    for (let i = 0; i < dim; i++) mean += x[o + i]!;
    mean /= dim;
    let variance = 0;
    for (let i = 0; i < dim; i++) variance += (x[o + i]! - mean) ** 2;
    variance /= dim;
    const r = 1 / Math.sqrt(variance + USE_LITE_CONSTANTS.layerNormEpsilon);
    for (let i = 0; i < dim; i++) y[o + i] = scale[i]! * r * (x[o + i]! - mean) + bias[i]!;
  }
  return y;
}

/**
 * §3 timing signal as a float32 table [length, 2*T] (T = inv_timescales.length = 128): row p is
 * [sin(a_0..a_T-1), cos(a_0..a_T-1)] with a_i = float32(p * inv_timescales[i]). The ONNX graph can
 * embed this table as a constant; the reference uses it too.
 */
export function timingSignalTable(invTimescales: Float32Array, length: number = USE_LITE_DIMS.maxSeqLen): Float32Array {
  const half = invTimescales.length;
  const table = new Float32Array(length * 2 * half);
  for (let p = 0; p < length; p++) {
    for (let i = 0; i < half; i++) {
      const angle = Math.fround(p * invTimescales[i]!); // a float32 product in the graph
      table[p * 2 * half + i] = Math.sin(angle);
      table[p * 2 * half + half + i] = Math.cos(angle);
    }
  }
  return table;
}

const signalCache = new WeakMap<Float32Array, Float32Array>();

/** §3 embedding + timing signal: x0[p] = E[id] + (E[id] + signal[p]) (the embedding counts twice). */
function embed(params: UseLiteParams, ids: ArrayLike<number>, length: number): Vec {
  const { embeddings, invTimescales } = params;
  let signal = signalCache.get(invTimescales);
  if (!signal) signalCache.set(invTimescales, (signal = timingSignalTable(invTimescales)));
  const d = embeddings.cols;
  const x = new Float64Array(length * d);
  for (let p = 0; p < length; p++) {
    const id = ids[p]!;
    if (!Number.isInteger(id) || id < 0 || id >= embeddings.rows) {
      throw new InputError(`token id ${id} at position ${p} is outside [0, ${embeddings.rows})`, { field: `ids[${p}]` });
    }
    for (let i = 0; i < d; i++) {
      const e = embeddings.data[id * d + i]!;
      x[p * d + i] = e + (e + signal[p * d + i]!);
    }
  }
  return x;
}

/** §5 multi-head self-attention over the valid positions of one text (no padding needed). */
function attention(h: Vec, length: number, layer: UseLiteLayerParams): Vec {
  const d = layer.inDim;
  const hd = layer.headDim;
  const heads = d / hd;
  const qkv = dense(h, length, layer.qkvKernel, layer.qkvBias); // [L, 3d]
  const out = new Float64Array(length * d);
  const scores = new Float64Array(length);
  for (let head = 0; head < heads; head++) {
    const qo = head * hd;
    const ko = d + head * hd;
    const vo = 2 * d + head * hd;
    for (let i = 0; i < length; i++) {
      let max = -Infinity;
      for (let j = 0; j < length; j++) {
        let s = 0;
        for (let c = 0; c < hd; c++) s += qkv[i * 3 * d + qo + c]! * layer.attentionScale * qkv[j * 3 * d + ko + c]!;
        scores[j] = s;
        if (s > max) max = s;
      }
      let sum = 0;
      for (let j = 0; j < length; j++) {
        scores[j] = Math.exp(scores[j]! - max);
        sum += scores[j]!;
      }
      for (let j = 0; j < length; j++) {
        const w = scores[j]! / sum;
        for (let c = 0; c < hd; c++) out[i * d + qo + c]! += w * qkv[j * 3 * d + vo + c]!;
      }
    }
  }
  return dense(out, length, layer.outKernel, layer.outBias); // [L, 512]
}

/** §5-§6 one transformer layer (pre-norm attention + pre-norm FFN, residuals). */
function transformerLayer(x: Vec, length: number, layer: UseLiteLayerParams): Vec {
  const m = USE_LITE_DIMS.modelDim;
  const h = layerNorm(x, length, layer.inDim, layer.ln1Scale, layer.ln1Bias);
  const a = attention(h, length, layer);
  const residual = layer.residualKernel ? dense(x, length, layer.residualKernel, layer.residualBias) : x;
  for (let i = 0; i < length * m; i++) a[i]! += residual[i]!;
  const z = layerNorm(a, length, m, layer.ln2Scale, layer.ln2Bias);
  const f1 = dense(z, length, layer.ffn1Kernel, layer.ffn1Bias);
  for (let i = 0; i < f1.length; i++) if (f1[i]! < 0) f1[i] = 0;
  const f2 = dense(f1, length, layer.ffn2Kernel, layer.ffn2Bias);
  for (let i = 0; i < length * m; i++) f2[i]! += a[i]!;
  return f2;
}

export interface ReferenceOutput {
  /** §7 mean of the final transformer states over the valid positions [512]: the router's feature. */
  pooled: Float64Array;
  /** §8 L2-normalised tanh(pooled @ W + b) [512]: what the package's `embed` returns. */
  embedding: Float32Array;
}

/** Forward of one text's token ids (clipped to the first 128); an empty sequence is allowed (§9). */
export function referenceForwardOne(params: UseLiteParams, ids: ArrayLike<number>): ReferenceOutput {
  const m = USE_LITE_DIMS.modelDim;
  const length = Math.min(ids.length, USE_LITE_DIMS.maxSeqLen);
  let x = embed(params, ids, length);
  for (const layer of params.layers) x = transformerLayer(x, length, layer);

  const pooled = new Float64Array(m);
  for (let p = 0; p < length; p++) for (let i = 0; i < m; i++) pooled[i]! += x[p * m + i]!;
  const divisor = Math.max(length, 1);
  for (let i = 0; i < m; i++) pooled[i]! /= divisor;

  const t = dense(pooled, 1, params.tanhKernel, params.tanhBias);
  let sumSq = 0;
  for (let i = 0; i < m; i++) {
    t[i] = Math.tanh(t[i]!);
    sumSq += t[i]! ** 2;
  }
  const r = 1 / Math.sqrt(Math.max(sumSq, USE_LITE_CONSTANTS.l2Epsilon));
  const embedding = new Float32Array(m);
  for (let i = 0; i < m; i++) embedding[i] = t[i]! * r;
  return { pooled, embedding };
}

/**
 * The 512-d USE-lite embedding of each text of a batch of token ids (texts are independent:
 * padding never influences valid positions, §9). Accepts the raw weight map or checked params.
 */
export function referenceForward(weights: WeightMap | UseLiteParams, batchOfTokenIds: ReadonlyArray<ArrayLike<number>>): Float32Array[] {
  const params = weights instanceof Map ? useLiteParams(weights) : weights;
  return batchOfTokenIds.map((ids) => referenceForwardOne(params, ids).embedding);
}
