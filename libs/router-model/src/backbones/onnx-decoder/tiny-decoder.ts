// A tiny causal decoder that meets the decoder-backbone contract (contract.ts), built with our
// GraphBuilder from seeded random weights, and the same forward pass in plain JavaScript (float64)
// to check the graph against. Test helper, exported for reuse (loader tests, benches, demos).
//
//   x_t   = tok[id_t] + pos[t]                                        t < n = min(len, maxLen)
//   per layer l = 1 .. L (layers after L are not in the graph):
//     a   = LN1(x);  q, k, v = a Wq, a Wk, a Wv                       (row vector times matrix)
//     x  += softmax_causal(q k^T / sqrt(H)) v Wo
//     m   = LN2(x);  u = m W1 + b1;  x += (u * sigmoid(u)) W2 + b2
//   hidden = x[max(n - 2, 0)]                                         the penultimate token
//
// Every 16x16 projection is stored as its SVD factors W = U diag(S) V^T (random orthogonal U, V,
// S in [0.3, 1.5]); an adapted matrix of layer L runs as ((a U) * (S z c)) V^T with
// c = sum(S) / sum(S z) and z the graph input `z_<name>` [H]; the others as one dense float32
// matrix. So the same seed gives the same model whatever is adapted, and z = 1 is that model.

import { rng, type Rng } from '@fugu/core';
import { GraphBuilder, float, type Value } from '../../onnx/builder.ts';
import { DECODER_CONTRACT_VERSION, DECODER_PADDING_SIDE, svfInputName } from './contract.ts';
import { CharTokenizer } from './tokenizer.ts';

export const TINY_PROJECTIONS = ['q_proj', 'k_proj', 'v_proj', 'o_proj'] as const;
export type TinyProjection = (typeof TINY_PROJECTIONS)[number];

export interface TinyDecoderOptions {
  seed?: number | string;
  vocabSize?: number;
  hiddenSize?: number;
  ffnSize?: number;
  numLayers?: number;
  /** L: the 1-based layer whose output is `hidden`; default numLayers. */
  layer?: number;
  maxLen?: number;
  /** Projections of layer L to SVF-adapt; default ['o_proj']. */
  adapt?: readonly TinyProjection[];
  /** Breaks the contract on purpose: no `attention_mask` input (for contract tests). */
  omitAttentionMask?: boolean;
  /** Metadata overrides; null deletes a key (for metadata tests). */
  metadata?: Record<string, string | null>;
}

export interface TinySvd {
  /** [H, R] row-major. */
  U: Float32Array;
  /** [R], descending. */
  S: Float32Array;
  /** [R, H] row-major. */
  Vt: Float32Array;
  /** float32(U diag(S) Vt), [H, H] row-major: the unadapted matrix. */
  dense: Float32Array;
}

export interface TinyLayerWeights {
  ln1: { gamma: Float32Array; beta: Float32Array };
  proj: Record<TinyProjection, TinySvd>;
  ln2: { gamma: Float32Array; beta: Float32Array };
  /** [H, F], [F], [F, H], [H]. */
  w1: Float32Array;
  b1: Float32Array;
  w2: Float32Array;
  b2: Float32Array;
}

export interface TinyDecoderWeights {
  vocabSize: number;
  hiddenSize: number;
  ffnSize: number;
  maxLen: number;
  /** [V, H], [maxLen, H]. */
  tok: Float32Array;
  pos: Float32Array;
  layers: TinyLayerWeights[];
}

export interface TinyDecoder {
  bytes: Uint8Array;
  weights: TinyDecoderWeights;
  layer: number;
  adapt: TinyProjection[];
  metadata: Record<string, string>;
  /** The tokenizer its metadata names (`fugu/char-<vocab>`). */
  tokenizer: CharTokenizer;
}

export const TINY_LN_EPSILON = 1e-5;

const DEFAULTS = { seed: 1, vocabSize: 64, hiddenSize: 16, ffnSize: 32, numLayers: 2, maxLen: 32 } as const;

// --- weights ---------------------------------------------------------------------------------

function gaussian(r: Rng, n: number, scale: number, offset = 0): Float32Array {
  return Float32Array.from({ length: n }, () => offset + scale * r.normal());
}

/** A random orthogonal n x n matrix (row-major, float64): Gram-Schmidt on a Gaussian matrix's columns. */
function orthogonal(r: Rng, n: number): Float64Array {
  const q = Float64Array.from({ length: n * n }, () => r.normal());
  for (let j = 0; j < n; j++) {
    for (let k = 0; k < j; k++) {
      let dot = 0;
      for (let i = 0; i < n; i++) dot += q[i * n + j]! * q[i * n + k]!;
      for (let i = 0; i < n; i++) q[i * n + j]! -= dot * q[i * n + k]!;
    }
    let norm = 0;
    for (let i = 0; i < n; i++) norm += q[i * n + j]! ** 2;
    norm = Math.sqrt(norm);
    for (let i = 0; i < n; i++) q[i * n + j]! /= norm;
  }
  return q;
}

function randomSvd(r: Rng, H: number): TinySvd {
  const U = Float32Array.from(orthogonal(r, H));
  const Vt = Float32Array.from(orthogonal(r, H));
  const S = Float32Array.from({ length: H }, () => 0.3 + 1.2 * r.next()).sort().reverse();
  const dense = new Float32Array(H * H);
  for (let i = 0; i < H; i++) {
    for (let j = 0; j < H; j++) {
      let s = 0;
      for (let k = 0; k < H; k++) s += U[i * H + k]! * S[k]! * Vt[k * H + j]!;
      dense[i * H + j] = s;
    }
  }
  return { U, S, Vt, dense };
}

/** Seeded weights (the same seed and sizes give the same weights, whatever is adapted). */
export function tinyDecoderWeights(opts: TinyDecoderOptions = {}): TinyDecoderWeights {
  const V = opts.vocabSize ?? DEFAULTS.vocabSize;
  const H = opts.hiddenSize ?? DEFAULTS.hiddenSize;
  const F = opts.ffnSize ?? DEFAULTS.ffnSize;
  const maxLen = opts.maxLen ?? DEFAULTS.maxLen;
  const numLayers = opts.numLayers ?? DEFAULTS.numLayers;
  const r = rng('tiny-decoder', opts.seed ?? DEFAULTS.seed);
  const tok = gaussian(r, V * H, 1);
  const pos = gaussian(r, maxLen * H, 0.5);
  const layers = Array.from({ length: numLayers }, (): TinyLayerWeights => ({
    ln1: { gamma: gaussian(r, H, 0.1, 1), beta: gaussian(r, H, 0.1) },
    proj: { q_proj: randomSvd(r, H), k_proj: randomSvd(r, H), v_proj: randomSvd(r, H), o_proj: randomSvd(r, H) },
    ln2: { gamma: gaussian(r, H, 0.1, 1), beta: gaussian(r, H, 0.1) },
    w1: gaussian(r, H * F, 1 / Math.sqrt(H)),
    b1: gaussian(r, F, 0.1),
    w2: gaussian(r, F * H, 1 / Math.sqrt(F)),
    b2: gaussian(r, H, 0.1),
  }));
  return { vocabSize: V, hiddenSize: H, ffnSize: F, maxLen, tok, pos, layers };
}

// --- options ---------------------------------------------------------------------------------

function resolve(opts: TinyDecoderOptions): { layer: number; adapt: TinyProjection[] } {
  const numLayers = opts.numLayers ?? DEFAULTS.numLayers;
  const layer = opts.layer ?? numLayers;
  if (!Number.isSafeInteger(layer) || layer < 1 || layer > numLayers) throw new Error(`tiny decoder: layer must be in 1..${numLayers}, got ${layer}`);
  const adapt = [...(opts.adapt ?? ['o_proj'])];
  for (const a of adapt) if (!TINY_PROJECTIONS.includes(a)) throw new Error(`tiny decoder: cannot adapt ${String(a)} (one of ${TINY_PROJECTIONS.join(', ')})`);
  if (new Set(adapt).size !== adapt.length) throw new Error('tiny decoder: a projection is listed twice in adapt');
  return { layer, adapt };
}

// --- the ONNX graph --------------------------------------------------------------------------

/** Builds the tiny decoder's ONNX model (bytes) with its weights and metadata. */
export function buildTinyDecoder(opts: TinyDecoderOptions = {}): TinyDecoder {
  const w = tinyDecoderWeights(opts);
  const { layer: L, adapt } = resolve(opts);
  const H = w.hiddenSize;
  const g = new GraphBuilder('tiny_decoder');
  const unsqueeze = (x: Value, axes: number[]): Value => g.op('Unsqueeze', [x, g.constInt64(axes)]);
  const sliceToMaxLen = (x: Value): Value => g.op('Slice', [x, g.constInt64([0]), g.constInt64([w.maxLen]), g.constInt64([1])]);

  const ids = sliceToMaxLen(g.input('input_ids', 'int64', ['B', 'T']));
  const mask = opts.omitAttentionMask ? null : sliceToMaxLen(g.input('attention_mask', 'int64', ['B', 'T']));
  const zInputs = new Map(adapt.map((name) => [name, g.input(svfInputName(name), 'float32', [H])]));

  const T = g.op('Gather', [g.op('Shape', [ids]), g.constInt64(1)], { axis: 0 }); // scalar
  const pos = g.op('Slice', [g.constant('pos_embedding', w.pos, [w.maxLen, H]), g.constInt64([0]), unsqueeze(T, [0]), g.constInt64([0])]);
  let x = g.add(g.op('Gather', [g.constant('tok_embedding', w.tok, [w.vocabSize, H]), ids], { axis: 0 }), pos); // [B, T, H]

  // Causal bias [T, T]: -1e9 above the diagonal (key after query), 0 elsewhere.
  const r = g.op('Range', [g.constInt64(0), T, g.constInt64(1)]);
  const bias = g.op('Where', [g.op('Greater', [unsqueeze(r, [0]), unsqueeze(r, [1])]), g.constFloat(-1e9), g.constFloat(0)]);

  for (let l = 0; l < L; l++) {
    const lw = w.layers[l]!;
    const p = `layer${l + 1}`;
    const project = (a: Value, name: TinyProjection): Value => {
      const m = lw.proj[name];
      const z = l === L - 1 ? zInputs.get(name) : undefined;
      if (!z) return g.matmul(a, g.constant(`${p}.${name}`, m.dense, [H, H]));
      // SVF: s = S z c, c = sum(S) / sum(S z); y = ((a U) * s) Vt.
      const S = g.constant(`${p}.${name}.S`, m.S, [H]);
      const Sz = g.mul(S, z);
      const c = g.div(g.constFloat(m.S.reduce((s, v) => s + v, 0)), g.op('ReduceSum', [Sz], { keepdims: 0 }));
      const aU = g.matmul(a, g.constant(`${p}.${name}.U`, m.U, [H, H]));
      return g.matmul(g.mul(aU, g.mul(Sz, c)), g.constant(`${p}.${name}.Vt`, m.Vt, [H, H]));
    };
    const layerNorm = (v: Value, ln: { gamma: Float32Array; beta: Float32Array }, name: string): Value =>
      g.op('LayerNormalization', [v, g.constant(`${p}.${name}.gamma`, ln.gamma, [H]), g.constant(`${p}.${name}.beta`, ln.beta, [H])], { axis: -1, epsilon: float(TINY_LN_EPSILON) });

    const a = layerNorm(x, lw.ln1, 'ln1');
    const q = project(a, 'q_proj');
    const k = project(a, 'k_proj');
    const v = project(a, 'v_proj');
    const scores = g.add(g.mul(g.matmul(q, g.transpose(k, [0, 2, 1])), g.constFloat(1 / Math.sqrt(H))), bias);
    x = g.add(x, project(g.matmul(g.softmax(scores, -1), v), 'o_proj'));

    const m = layerNorm(x, lw.ln2, 'ln2');
    const u = g.add(g.matmul(m, g.constant(`${p}.w1`, w.layers[l]!.w1, [H, w.ffnSize])), g.constant(`${p}.b1`, lw.b1, [w.ffnSize]));
    const act = g.mul(u, g.op('Sigmoid', [u]));
    x = g.add(x, g.add(g.matmul(act, g.constant(`${p}.w2`, lw.w2, [w.ffnSize, H])), g.constant(`${p}.b2`, lw.b2, [H])));
  }

  // Decision position max(n - 2, 0), n = valid tokens after truncation.
  let hidden: Value;
  if (mask) {
    const n = g.op('ReduceSum', [mask, g.constInt64([1])], { keepdims: 0 }); // [B]
    const at = g.op('Max', [g.sub(n, g.constInt64(2)), g.constInt64(0)]); // [B]
    const index = g.op('Expand', [unsqueeze(at, [1, 2]), g.constInt64([1, 1, H])]); // [B, 1, H]
    hidden = g.op('Squeeze', [g.op('GatherElements', [x, index], { axis: 1 }), g.constInt64([1])]);
  } else {
    hidden = g.op('Gather', [x, g.op('Max', [g.sub(T, g.constInt64(2)), g.constInt64(0)])], { axis: 1 });
  }
  g.output(hidden, 'hidden', 'float32', ['B', H]);

  const tokenizer = new CharTokenizer(w.vocabSize);
  const metadata: Record<string, string> = {
    contract: DECODER_CONTRACT_VERSION,
    backbone_kind: 'fugu-tiny-decoder',
    hidden_size: String(H),
    layer: String(L),
    num_layers: String(w.layers.length),
    max_len: String(w.maxLen),
    vocab_size: String(w.vocabSize),
    adapted: JSON.stringify(adapt.map((name) => ({ name, rank: H, rows: H, cols: H }))),
    tokenizer: tokenizer.id,
    pad_token_id: '0',
    padding_side: DECODER_PADDING_SIDE,
    decision_position: 'penultimate',
    seed: String(opts.seed ?? DEFAULTS.seed),
  };
  for (const [k, v] of Object.entries(opts.metadata ?? {})) {
    if (v === null) delete metadata[k];
    else metadata[k] = v;
  }
  return { bytes: g.toModel({ producer: 'fugu tiny-decoder', metadata }), weights: w, layer: L, adapt, metadata, tokenizer };
}

// --- the plain JavaScript forward ------------------------------------------------------------

/**
 * The hidden state of one token sequence (float64), exactly the graph's math: truncate to
 * maxLen, run layers 1..layer, take the penultimate valid position. `z` adapts projections of
 * `layer` (missing: unadapted, which equals z = 1).
 */
export function tinyDecoderForward(
  w: TinyDecoderWeights,
  ids: ArrayLike<number>,
  opts: { layer?: number; z?: Partial<Record<TinyProjection, ArrayLike<number>>> } = {},
): Float64Array {
  const H = w.hiddenSize;
  const F = w.ffnSize;
  const L = opts.layer ?? w.layers.length;
  const n = Math.min(ids.length, w.maxLen);
  if (n < 1) throw new Error('tinyDecoderForward: no tokens');
  let x = Array.from({ length: n }, (_, t) => Float64Array.from({ length: H }, (_, j) => w.tok[ids[t]! * H + j]! + w.pos[t * H + j]!));

  const matvec = (v: ArrayLike<number>, m: ArrayLike<number>, rows: number, cols: number): Float64Array => {
    const out = new Float64Array(cols);
    for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) out[j]! += v[i]! * m[i * cols + j]!;
    return out;
  };
  const layerNorm = (v: Float64Array, ln: { gamma: Float32Array; beta: Float32Array }): Float64Array => {
    const mean = v.reduce((s, a) => s + a, 0) / H;
    const variance = v.reduce((s, a) => s + (a - mean) ** 2, 0) / H;
    const inv = 1 / Math.sqrt(variance + Math.fround(TINY_LN_EPSILON));
    return v.map((a, j) => (a - mean) * inv * ln.gamma[j]! + ln.beta[j]!);
  };

  for (let l = 0; l < L; l++) {
    const lw = w.layers[l]!;
    const project = (v: Float64Array, name: TinyProjection): Float64Array => {
      const m = lw.proj[name];
      const z = l === L - 1 ? opts.z?.[name] : undefined;
      if (!z) return matvec(v, m.dense, H, H);
      let sumS = 0;
      let sumSz = 0;
      for (let k = 0; k < H; k++) {
        sumS += m.S[k]!;
        sumSz += m.S[k]! * z[k]!;
      }
      const y = matvec(v, m.U, H, H).map((a, k) => a * m.S[k]! * z[k]! * (sumS / sumSz));
      return matvec(y, m.Vt, H, H);
    };
    const a = x.map((v) => layerNorm(v, lw.ln1));
    const q = a.map((v) => project(v, 'q_proj'));
    const k = a.map((v) => project(v, 'k_proj'));
    const v = a.map((u) => project(u, 'v_proj'));
    x = x.map((xt, t) => {
      const scores = Array.from({ length: t + 1 }, (_, s) => q[t]!.reduce((acc, qi, i) => acc + qi * k[s]![i]!, 0) / Math.sqrt(H));
      const max = Math.max(...scores);
      const e = scores.map((sc) => Math.exp(sc - max));
      const total = e.reduce((acc, b) => acc + b, 0);
      const att = new Float64Array(H);
      e.forEach((p, s) => {
        for (let i = 0; i < H; i++) att[i]! += (p / total) * v[s]![i]!;
      });
      const o = project(att, 'o_proj');
      return xt.map((xi, i) => xi + o[i]!);
    });
    x = x.map((xt) => {
      const u = matvec(layerNorm(xt, lw.ln2), lw.w1, H, F).map((ui, i) => ui + lw.b1[i]!);
      const act = u.map((ui) => ui / (1 + Math.exp(-ui)));
      const d = matvec(act, lw.w2, F, H);
      return xt.map((xi, i) => xi + d[i]! + lw.b2[i]!);
    });
  }
  return x[Math.max(n - 2, 0)]!;
}
