// The USE-lite forward pass as an ONNX graph over a dense, padded batch: a transcription of
// spec.md §12 (section numbers below refer to spec.md). Weights are initializers; the only
// inputs are the token ids and the number of valid tokens per row.
//
// INPUT/OUTPUT CONTRACT (spec.md §15, `USE_LITE_GRAPH_CONTRACT`):
//   ids       int64   [B, T]   padded token ids, T <= 128 (the caller clips), padding: any id
//                              in [0, 8002), e.g. 0
//   lengths   int64   [B]      valid tokens per row, 1 <= lengths[b] <= T (row b is valid on
//                              positions 0 .. lengths[b]-1)
//   pooled    float32 [B, 512] mean of the transformer output over the valid positions (§7):
//                              the cached router feature, input of the tanh layer
//   embedding float32 [B, 512] tanh layer + L2 normalisation (§8): what the package returns
// The feature graph (`buildUseLiteFeatureGraph`) has the same inputs and only `pooled`.

import { GraphBuilder, float, type Value } from '../../onnx/builder.ts';
import type { Contract } from '../../onnx/session.ts';
import { USE_LITE_CONSTANTS, USE_LITE_DIMS, type Matrix, type UseLiteLayerParams, type UseLiteParams } from './params.ts';
import { timingSignalTable } from './reference.ts';

const D = USE_LITE_DIMS;
const C = USE_LITE_CONSTANTS;

/** Inputs and the router's feature output: every USE-lite backbone graph meets this. */
export const USE_LITE_FEATURE_CONTRACT = {
  inputs: [
    { name: 'ids', dtype: 'int64', shape: ['B', 'T'] },
    { name: 'lengths', dtype: 'int64', shape: ['B'] },
  ],
  outputs: [{ name: 'pooled', dtype: 'float32', shape: ['B', D.modelDim] }],
} as const satisfies Contract;

/** The full graph's contract: the feature contract plus the package's final `embedding`. */
export const USE_LITE_GRAPH_CONTRACT = {
  inputs: USE_LITE_FEATURE_CONTRACT.inputs,
  outputs: [...USE_LITE_FEATURE_CONTRACT.outputs, { name: 'embedding', dtype: 'float32', shape: ['B', D.outputDim] }],
} as const satisfies Contract;

export interface UseLiteGraphOptions {
  /** Also compute the `embedding` output (tanh layer + L2 normalisation). Default true. */
  embedding?: boolean;
  /** Graph name and model metadata (e.g. `backbone_id`), stored in the ModelProto. */
  name?: string;
  metadata?: Record<string, string>;
}

/** The USE-lite ONNX model (bytes) for the contract above; see spec.md §12 and §15. */
export function buildUseLiteGraph(params: UseLiteParams, opts: UseLiteGraphOptions = {}): Uint8Array {
  const withEmbedding = opts.embedding ?? true;
  const g = new GraphBuilder(opts.name ?? (withEmbedding ? 'use_lite' : 'use_lite_features'));
  const ids = g.input('ids', 'int64', ['B', 'T']);
  const lengths = g.input('lengths', 'int64', ['B']);

  // §2 masks, from the lengths: mask[b, p] = p < lengths[b]; shape [B, T].
  const T = g.op('Gather', [g.op('Shape', [ids]), g.constInt64(1)], { axis: 0 }); // scalar
  const positions = g.op('Range', [g.constInt64(0), T, g.constInt64(1)]); // [T]
  const isValid = g.op('Less', [unsqueeze(g, positions, [0]), unsqueeze(g, lengths, [1])]); // [B, T]
  const mask = g.cast(isValid, 'float32');
  // §2.5 attention bias (1 - mask) * -1e9, [B, 1, 1, T]: finite, so an all-padding row stays NaN-free.
  const keyBias = unsqueeze(g, g.mul(g.sub(g.constFloat(1), mask), g.constFloat(C.paddingBias)), [1, 2]);

  // §3 embedding + timing signal, the embedding added twice.
  const table = g.constant('embeddings', params.embeddings.data, [params.embeddings.rows, params.embeddings.cols]);
  const e = g.op('Gather', [table, ids], { axis: 0 }); // [B, T, 256]
  const signalTable = g.constant('timing_signal', timingSignalTable(params.invTimescales, D.maxSeqLen), [D.maxSeqLen, D.embedDim]);
  const signal = g.op('Slice', [signalTable, g.constInt64([0]), unsqueeze(g, T, [0]), g.constInt64([0])]); // [T, 256]
  let x = g.add(e, g.add(e, signal));

  // §5-§6 the two transformer layers.
  params.layers.forEach((layer, i) => {
    x = transformerLayer(g, x, keyBias, layer, `layer${i}`);
  });

  // §7 mean over the valid positions: sum(out * mask) / max(sum(mask), 1).
  const masked = g.mul(x, unsqueeze(g, mask, [2]));
  const sum = g.op('ReduceSum', [masked, g.constInt64([1])], { keepdims: 0 }); // [B, 512]
  const count = g.op('ReduceSum', [mask, g.constInt64([1])], { keepdims: 1 }); // [B, 1]
  const pooled = g.div(sum, g.op('Max', [count, g.constFloat(1)]));
  g.output(pooled, 'pooled', 'float32', ['B', D.modelDim]);

  // §8 tanh dense, then t / sqrt(max(sum(t^2), 1e-12)).
  if (withEmbedding) {
    const t = g.op('Tanh', [dense(g, pooled, params.tanhKernel, params.tanhBias, 'tanh_layer')]);
    const sumSq = g.op('ReduceSumSquare', [t, g.constInt64([1])], { keepdims: 1 }); // [B, 1]
    const norm = g.op('Sqrt', [g.op('Max', [sumSq, g.constFloat(C.l2Epsilon)])]);
    g.output(g.div(t, norm), 'embedding', 'float32', ['B', D.outputDim]);
  }

  return g.toModel({ producer: 'fugu', docString: 'USE-lite (Universal Sentence Encoder lite) backbone; see spec.md', ...(opts.metadata ? { metadata: opts.metadata } : {}) });
}

/** The graph with the `pooled` output only (what the router computes and caches). */
export function buildUseLiteFeatureGraph(params: UseLiteParams, opts: Omit<UseLiteGraphOptions, 'embedding'> = {}): Uint8Array {
  return buildUseLiteGraph(params, { ...opts, embedding: false });
}

/** §5 attention + residual and §6 FFN + residual of one pre-norm transformer layer. */
function transformerLayer(g: GraphBuilder, x: Value, keyBias: Value, layer: UseLiteLayerParams, name: string): Value {
  const d = layer.inDim;
  const hd = layer.headDim;
  const heads = d / hd;
  const p = (s: string) => `${name}/${s}`;

  // §5 self-attention on LN1(x).
  const h = layerNorm(g, x, layer.ln1Scale, layer.ln1Bias, p('ln1'));
  const qkv = dense(g, h, layer.qkvKernel, layer.qkvBias, p('qkv'));
  const [q, k, v] = g.ops('Split', [qkv, g.constInt64([d, d, d])], { axis: -1 }, 3) as [Value, Value, Value];
  const toHeads = (t: Value) => g.transpose(g.reshape(t, [0, 0, heads, hd]), [0, 2, 1, 3]); // [B, 4, T, hd]
  const qh = g.mul(toHeads(q), g.constFloat(layer.attentionScale)); // q is scaled before the product
  const kT = g.transpose(g.reshape(k, [0, 0, heads, hd]), [0, 2, 3, 1]); // [B, 4, hd, T]
  const scores = g.add(g.matmul(qh, kT), keyBias); // [B, 4, T, T]
  const probs = g.softmax(scores, -1);
  const o = g.reshape(g.transpose(g.matmul(probs, toHeads(v)), [0, 2, 1, 3]), [0, 0, d]); // [B, T, d]
  const a = dense(g, o, layer.outKernel, layer.outBias, p('out')); // [B, T, 512]

  // Residual: layer 0 widens the un-normalised input 256 -> 512; layer 1 is the identity.
  const residual = layer.residualKernel && layer.residualBias ? dense(g, x, layer.residualKernel, layer.residualBias, p('residual')) : x;
  const y = g.add(a, residual);

  // §6 FFN on LN2(y), run densely on every position (padding never reaches a valid row).
  const z = layerNorm(g, y, layer.ln2Scale, layer.ln2Bias, p('ln2'));
  const f = dense(g, g.op('Relu', [dense(g, z, layer.ffn1Kernel, layer.ffn1Bias, p('ffn1'))]), layer.ffn2Kernel, layer.ffn2Bias, p('ffn2'));
  return g.add(f, y);
}

/** x @ W + b with W [rows, cols] (a conv kernel [1,1,in,out] is the same memory as [in,out]). */
function dense(g: GraphBuilder, x: Value, w: Matrix, bias: Float32Array, name: string): Value {
  const kernel = g.constant(`${name}/kernel`, w.data, [w.rows, w.cols]);
  return g.add(g.matmul(x, kernel), g.constant(`${name}/bias`, bias, [bias.length]));
}

/** §4: exactly ONNX LayerNormalization over the last axis with epsilon float32(1e-6). */
function layerNorm(g: GraphBuilder, x: Value, scale: Float32Array, bias: Float32Array, name: string): Value {
  const s = g.constant(`${name}/scale`, scale, [scale.length]);
  const b = g.constant(`${name}/bias`, bias, [bias.length]);
  return g.op('LayerNormalization', [x, s, b], { axis: -1, epsilon: float(C.layerNormEpsilon) });
}

function unsqueeze(g: GraphBuilder, x: Value, axes: readonly number[]): Value {
  return g.op('Unsqueeze', [x, g.constInt64(axes)]);
}
