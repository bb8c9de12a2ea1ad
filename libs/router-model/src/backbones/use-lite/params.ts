// Named, shape-checked view of the USE-lite weights: which TF.js weight is which matrix of the
// forward pass described in spec.md. The reference forward (reference.ts) and the ONNX graph
// builder read the model through this, never through raw TF names.

import { InputError } from '@fugu/core';
import type { WeightMap, WeightTensor } from './weights.ts';

const K = 'module_apply_default/Encoder_en/KonaTransformer/';
const KM = 'module/Encoder_en/KonaTransformer/';

/** Model dimensions (checked against the weights by `useLiteParams`). */
export const USE_LITE_DIMS = {
  /** Rows of the embedding table: 8000 vocabulary pieces + 2 unused rows (ids 8000, 8001). */
  vocabRows: 8002,
  embedDim: 256,
  modelDim: 512,
  ffnDim: 1536,
  heads: 4,
  /** Per-head size of layer 0 (256 / 4) and layer 1 (512 / 4). */
  headDims: [64, 128] as const,
  /** Positions >= this are dropped (ClipToMaxLength). */
  maxSeqLen: 128,
  outputDim: 512,
} as const;

/** Scalars of the graph with their exact float32 values (as stored in the weights). */
export const USE_LITE_CONSTANTS = {
  /** Layer-norm epsilon, added to the variance: float32(1e-6). */
  layerNormEpsilon: Math.fround(1e-6), // 9.999999974752427e-7
  /** Attention bias at padded keys: -1e9 * (1 - mask). */
  paddingBias: -1e9,
  /** Query scaling, 1/sqrt(head size): 0.125 (layer 0), float32(1/sqrt(128)) (layer 1). */
  attentionScales: [0.125, Math.fround(1 / Math.sqrt(128))] as const, // 0.0883883461356163
  /** L2 normalisation: x * rsqrt(max(sum(x^2), eps)), eps = float32(1e-12). */
  l2Epsilon: Math.fround(1e-12), // 9.999999960041972e-13
} as const;

export interface UseLiteLayerNames {
  ln1Scale: string;
  ln1Bias: string;
  qkvKernel: string;
  qkvBias: string;
  attentionScale: string;
  outKernel: string;
  outBias: string;
  /** Layer 0 only: the residual projection 256 -> 512 ("AdjustResidualInput/dense"). */
  residualKernel: string | undefined;
  residualBias: string | undefined;
  ln2Scale: string;
  ln2Bias: string;
  ffn1Kernel: string;
  ffn1Bias: string;
  ffn2Kernel: string;
  ffn2Bias: string;
}

function layerNames(i: 0 | 1): UseLiteLayerNames {
  const enc = `${K}Encode/Layer_${i}/TransformerLayer/`;
  const stack = `${K}Encode/TransformerStack/Layer_${i}/TransformerLayer/`;
  const mha = `${KM}Encode/Layer_${i}/TransformerLayer/MultiheadAttention/`;
  return {
    ln1Scale: `${enc}layer_prepostprocess/layer_norm/layer_norm_scale/ConcatPartitions/concat`,
    ln1Bias: `${enc}layer_prepostprocess/layer_norm/layer_norm_bias/ConcatPartitions/concat`,
    qkvKernel: `${mha}qkv_transform_single/kernel/part_0`,
    qkvBias: `${enc}MultiheadAttention/qkv_transform_single/bias/ConcatPartitions/concat`,
    attentionScale: `${stack}MultiheadAttention/mul/y`,
    outKernel: `${mha}output_transform_single/kernel/part_0`,
    outBias: `${enc}MultiheadAttention/output_transform_single/bias/ConcatPartitions/concat`,
    residualKernel: i === 0 ? `${enc}dense/kernel/ConcatPartitions/concat` : undefined,
    residualBias: i === 0 ? `${enc}dense/bias/ConcatPartitions/concat` : undefined,
    ln2Scale: `${enc}FFN/layer_prepostprocess/layer_norm/layer_norm_scale/ConcatPartitions/concat`,
    ln2Bias: `${enc}FFN/layer_prepostprocess/layer_norm/layer_norm_bias/ConcatPartitions/concat`,
    ffn1Kernel: `${stack}FFN/conv1/Tensordot/Reshape_1`,
    ffn1Bias: `${enc}FFN/conv1/bias/ConcatPartitions/concat`,
    ffn2Kernel: `${stack}FFN/conv2/Tensordot/Reshape_1`,
    ffn2Bias: `${enc}FFN/conv2/bias/ConcatPartitions/concat`,
  };
}

/** TF.js weight names of every tensor the forward pass uses. */
export const USE_LITE_WEIGHT_NAMES = {
  embeddings: 'module/Embeddings_en',
  /** inv_timescales [1,128]: exp(-i * ln(1e4) / 127), i = 0..127, as float32. */
  invTimescales: `${K}Encode/TransformerStack/Layer_0/AddTimingSignal/TimingSignal/ExpandDims_1`,
  layers: [layerNames(0), layerNames(1)] as const,
  tanhKernel: 'module/Encoder_en/hidden_layers/tanh_layer_0/weights',
  tanhBias: 'module/Encoder_en/hidden_layers/tanh_layer_0/bias',
  // Scalars (int32 / float32) that define the constants above.
  maxSeqLen: `${K}ClipToMaxLength/Less/y`,
  layerNormEpsilon: `${K}Encode/TransformerStack/Layer_1/TransformerLayer/FFN/layer_prepostprocess/layer_norm/Cast/x`,
  paddingBias: `${K}Encode/TransformerStack/Layer_1/TransformerLayer/MultiheadAttention/DotProductAttention/attention_bias_ignore_padding/mul/y`,
  heads: `${K}Encode/TransformerStack/Layer_1/TransformerLayer/MultiheadAttention/split_heads/split_last_dimension/Reshape/shape/2`,
  headDims: [
    `${K}Encode/TransformerStack/Layer_0/TransformerLayer/MultiheadAttention/split_heads/split_last_dimension/Reshape/shape/3`,
    `${K}Encode/TransformerStack/Layer_1/TransformerLayer/MultiheadAttention/split_heads/split_last_dimension/Reshape/shape/3`,
  ] as const,
  l2Epsilon: 'module_apply_default/Encoder_en/hidden_layers/l2_normalize/Maximum/y',
} as const;

/** A row-major matrix [rows, cols] (conv kernels [1,1,in,out] are viewed as [in,out]). */
export interface Matrix {
  data: Float32Array;
  rows: number;
  cols: number;
}

export interface UseLiteLayerParams {
  inDim: number;
  headDim: number;
  attentionScale: number;
  ln1Scale: Float32Array;
  ln1Bias: Float32Array;
  /** [inDim, 3*inDim]: columns [0,in) = q, [in,2in) = k, [2in,3in) = v. */
  qkvKernel: Matrix;
  qkvBias: Float32Array;
  /** [inDim, 512]. */
  outKernel: Matrix;
  outBias: Float32Array;
  /** Layer 0: [256, 512]; layer 1: undefined (identity residual). */
  residualKernel: Matrix | undefined;
  residualBias: Float32Array | undefined;
  ln2Scale: Float32Array;
  ln2Bias: Float32Array;
  /** [512, 1536]. */
  ffn1Kernel: Matrix;
  ffn1Bias: Float32Array;
  /** [1536, 512]. */
  ffn2Kernel: Matrix;
  ffn2Bias: Float32Array;
}

export interface UseLiteParams {
  /** [8002, 256]. */
  embeddings: Matrix;
  /** [128]. */
  invTimescales: Float32Array;
  layers: [UseLiteLayerParams, UseLiteLayerParams];
  /** [512, 512]: pooled @ tanhKernel + tanhBias, then tanh. */
  tanhKernel: Matrix;
  tanhBias: Float32Array;
}

const sameShape = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((d, i) => d === b[i]);

function tensor(weights: WeightMap, name: string, shape: readonly number[]): WeightTensor {
  const t = weights.get(name);
  if (!t) throw new InputError(`USE-lite weight missing: ${name}`, { field: name });
  if (!sameShape(t.shape, shape)) {
    throw new InputError(`USE-lite weight ${name} has shape [${t.shape.join(',')}], expected [${shape.join(',')}]`, {
      field: name,
    });
  }
  return t;
}

function floats(weights: WeightMap, name: string, shape: readonly number[]): Float32Array {
  const t = tensor(weights, name, shape);
  if (!(t.data instanceof Float32Array)) throw new InputError(`USE-lite weight ${name} is not float32`, { field: name });
  return t.data;
}

function matrix(weights: WeightMap, name: string, shape: readonly number[]): Matrix {
  const data = floats(weights, name, shape);
  return { data, rows: shape[shape.length - 2]!, cols: shape[shape.length - 1]! };
}

function scalar(weights: WeightMap, name: string, expected: number): number {
  const v = tensor(weights, name, []).data[0]!;
  if (v !== expected) throw new InputError(`USE-lite constant ${name} is ${v}, expected ${expected}`, { field: name });
  return v;
}

/** Check every weight's presence, shape and the graph constants, and return the named view. */
export function useLiteParams(weights: WeightMap): UseLiteParams {
  const N = USE_LITE_WEIGHT_NAMES;
  const D = USE_LITE_DIMS;
  const C = USE_LITE_CONSTANTS;
  scalar(weights, N.maxSeqLen, D.maxSeqLen);
  scalar(weights, N.layerNormEpsilon, C.layerNormEpsilon);
  scalar(weights, N.paddingBias, C.paddingBias);
  scalar(weights, N.heads, D.heads);
  scalar(weights, N.l2Epsilon, C.l2Epsilon);

  const layer = (i: 0 | 1): UseLiteLayerParams => {
    const n = N.layers[i];
    const inDim = i === 0 ? D.embedDim : D.modelDim;
    const m = D.modelDim;
    const headDim = scalar(weights, N.headDims[i], D.headDims[i]);
    return {
      inDim,
      headDim,
      attentionScale: scalar(weights, n.attentionScale, C.attentionScales[i]),
      ln1Scale: floats(weights, n.ln1Scale, [inDim]),
      ln1Bias: floats(weights, n.ln1Bias, [inDim]),
      qkvKernel: matrix(weights, n.qkvKernel, [1, 1, inDim, 3 * inDim]),
      qkvBias: floats(weights, n.qkvBias, [3 * inDim]),
      outKernel: matrix(weights, n.outKernel, [1, 1, inDim, m]),
      outBias: floats(weights, n.outBias, [m]),
      residualKernel: n.residualKernel ? matrix(weights, n.residualKernel, [inDim, m]) : undefined,
      residualBias: n.residualBias ? floats(weights, n.residualBias, [m]) : undefined,
      ln2Scale: floats(weights, n.ln2Scale, [m]),
      ln2Bias: floats(weights, n.ln2Bias, [m]),
      ffn1Kernel: matrix(weights, n.ffn1Kernel, [m, D.ffnDim]),
      ffn1Bias: floats(weights, n.ffn1Bias, [D.ffnDim]),
      ffn2Kernel: matrix(weights, n.ffn2Kernel, [D.ffnDim, m]),
      ffn2Bias: floats(weights, n.ffn2Bias, [m]),
    };
  };

  return {
    embeddings: matrix(weights, N.embeddings, [D.vocabRows, D.embedDim]),
    invTimescales: floats(weights, N.invTimescales, [1, D.embedDim / 2]),
    layers: [layer(0), layer(1)],
    tanhKernel: matrix(weights, N.tanhKernel, [D.modelDim, D.outputDim]),
    tanhBias: floats(weights, N.tanhBias, [D.outputDim]),
  };
}
