// ONNX graphs of the SVF + linear head, and RouterHead, which holds the SVD and the sessions.
//
// Candidate graph (the ES trainer and serving): P parameter vectors over N inputs in one run.
//   inputs  x [N, I] (cached features) or y [N, R] (= x U, see below),
//           z [P, R], W_h [P, D, K], b_h [P, K]
//   outputs logits [P, N, K], probs [P, N, K]
//   s = S z c(z) per candidate, a = (y * s)[P,N,R] V^T + b, h = tanh(a), e = h / |h|,
//   logits = e W_h + b_h. U, S, V^T, b are constants; c(z) = sum(S) / sum(S z) is computed in
//   the graph.
// Training graph (SFT): one parameter vector (P = 1), B inputs, soft labels p [B, K].
//   outputs loss [] = mean_i KL(p_i || pi_i), logits [B, K], and the analytic gradients
//   dz [R], dW_h [D, K], db_h [K] (the README's backward, written with ONNX ops):
//     dlogits = (pi - p) / B;  dW_h = e^T dlogits;  db_h = sum_i dlogits_i;  de = dlogits W_h^T
//     dh = (de - e (e . de)) / |h|   (the e(e.de) term drops where |h|^2 <= eps: there the
//                                     normalisation is a constant scale 1/sqrt(eps))
//     da = dh (1 - h^2);  g = da V;  ds = sum_i y_i * g_i
//     dz_j = c S_j (ds_j - q / T),   T = sum(S z),  q = sum_k ds_k S_k z_k
//   (the README's dz_j = c S_j ds_j - (c S_j / T) sum_k ds_k S_k z_k, factored).
//
// Projected features: y = x U depends on the text only. Graphs built with features 'y' skip
// that [N, I] x [I, R] product, a third of the training graph's matrix work (forward x U,
// (y s) V^T, backward da V), and 1/(P+1) of a candidate run's. SFT projects its feature
// matrix once (RouterHead.project) and trains on y; serving feeds x.

import { InputError } from '@fugu/core';
import { GraphBuilder, int, type Value } from '../onnx/builder.ts';
import { createSession, type FloatOutput, type OnnxSession, type SessionOptions } from '../onnx/session.ts';
import { checkSvfLayer, svfLayerFromDense, type SvfLayer } from './svf-layer.ts';
import { thetaSize, unpackTheta, type HeadDims } from './theta.ts';

export type FeatureKind = 'x' | 'y';

export interface HeadGraphOptions {
  /** Feed cached features x [N, I] (default) or projected y = x U [N, R]. */
  features?: FeatureKind;
}

const OPSET = 21;

/** Constants shared by the graphs: U (only for x features), S, sum(S), V^T, b, eps. */
function constants(g: GraphBuilder, layer: SvfLayer) {
  let sumS = 0;
  for (const v of layer.S) sumS += v;
  return {
    S: g.constant('svf_S', layer.S, [layer.rank]),
    sumS: g.constFloat(sumS, [], 'svf_sum_S'),
    Vt: g.constant('svf_Vt', layer.Vt, [layer.rank, layer.outDim]),
    b: g.constant('svf_b', layer.b, [layer.outDim]),
    eps: g.constFloat(layer.eps, [], 'l2_eps'),
  };
}

/** The feature input, projected to y [.., R]. */
function featureInput(g: GraphBuilder, layer: SvfLayer, kind: FeatureKind, batch: string): Value {
  if (kind === 'y') return g.input('y', 'float32', [batch, layer.rank]);
  const x = g.input('x', 'float32', [batch, layer.inDim]);
  return g.matmul(x, g.constant('svf_U', layer.U, [layer.inDim, layer.rank]));
}

const reduceSum = (g: GraphBuilder, v: Value, axes: number[] | null, keepdims: 0 | 1): Value =>
  g.op('ReduceSum', axes ? [v, g.constInt64(axes)] : [v], { keepdims: int(keepdims) });

/** h = tanh(a), the clamped squared norm and e = h / sqrt(max(|h|^2, eps)) along the last axis. */
function normalise(g: GraphBuilder, a: Value, eps: Value) {
  const h = g.op('Tanh', [a]);
  const ss = reduceSum(g, g.mul(h, h), [-1], 1);
  const nrm = g.op('Sqrt', [g.op('Max', [ss, eps])]);
  return { h, ss, nrm, e: g.div(h, nrm) };
}

/** y = x U: the projection of cached features, once per feature matrix. */
export function buildProjectionGraph(layer: SvfLayer): Uint8Array {
  checkSvfLayer(layer);
  const g = new GraphBuilder('svf_projection');
  const y = featureInput(g, layer, 'x', 'N');
  g.output(y, 'y', 'float32', ['N', layer.rank]);
  return g.toModel({ producer: 'fugu', opset: OPSET });
}

/** The candidate-batched head graph (see the file header). */
export function buildCandidateGraph(layer: SvfLayer, workers: number, options: HeadGraphOptions = {}): Uint8Array {
  checkSvfLayer(layer);
  const K = workers, R = layer.rank, D = layer.outDim;
  const g = new GraphBuilder('svf_head_candidates');
  const y = featureInput(g, layer, options.features ?? 'x', 'N');
  const z = g.input('z', 'float32', ['P', R]);
  const Wh = g.input('W_h', 'float32', ['P', D, K]);
  const bh = g.input('b_h', 'float32', ['P', K]);
  const C = constants(g, layer);
  const Sz = g.mul(z, C.S); // [P, R]
  const T = reduceSum(g, Sz, [1], 1); // [P, 1]
  const s = g.mul(Sz, g.div(C.sumS, T)); // [P, R]
  const ys = g.mul(g.op('Unsqueeze', [y, g.constInt64([0])]), g.op('Unsqueeze', [s, g.constInt64([1])])); // [P, N, R]
  const a = g.add(g.matmul(ys, C.Vt), C.b); // [P, N, D]
  const { e } = normalise(g, a, C.eps);
  const logits = g.add(g.matmul(e, Wh), g.op('Unsqueeze', [bh, g.constInt64([1])])); // [P, N, K]
  g.output(logits, 'logits', 'float32', ['P', 'N', K]);
  g.output(g.softmax(logits, -1), 'probs', 'float32', ['P', 'N', K]);
  return g.toModel({ producer: 'fugu', opset: OPSET });
}

/** The SFT graph: loss and analytic gradients for one parameter vector (see the file header). */
export function buildTrainingGraph(layer: SvfLayer, workers: number, options: HeadGraphOptions = {}): Uint8Array {
  checkSvfLayer(layer);
  const K = workers, R = layer.rank, D = layer.outDim;
  const g = new GraphBuilder('svf_head_training');
  const y = featureInput(g, layer, options.features ?? 'x', 'B');
  const p = g.input('p', 'float32', ['B', K]);
  const z = g.input('z', 'float32', [R]);
  const Wh = g.input('W_h', 'float32', [D, K]);
  const bh = g.input('b_h', 'float32', [K]);
  const C = constants(g, layer);

  // Forward.
  const Sz = g.mul(z, C.S); // [R]
  const T = reduceSum(g, Sz, null, 0); // []
  const c = g.div(C.sumS, T); // []
  const s = g.mul(Sz, c); // [R]
  const a = g.add(g.matmul(g.mul(y, s), C.Vt), C.b); // [B, D]
  const { h, ss, nrm, e } = normalise(g, a, C.eps);
  const logits = g.add(g.matmul(e, Wh), bh); // [B, K]
  const logpi = g.op('LogSoftmax', [logits], { axis: int(-1) });
  const pi = g.op('Exp', [logpi]);
  // KL with 0 log 0 = 0: log(max(p, 1e-30)) is finite and multiplied by p = 0.
  const logp = g.op('Log', [g.op('Max', [p, g.constFloat(1e-30, [])])]);
  const kl = reduceSum(g, g.mul(p, g.sub(logp, logpi)), [-1], 0); // [B]
  g.output(g.op('ReduceMean', [kl], { keepdims: int(0) }), 'loss', 'float32', []);
  g.output(logits, 'logits', 'float32', ['B', K]);

  // Backward.
  const batch = g.cast(g.op('Gather', [g.op('Shape', [p]), g.constInt64(0)], { axis: int(0) }), 'float32'); // []
  const dlogits = g.div(g.sub(pi, p), batch); // [B, K]
  g.output(g.op('Gemm', [e, dlogits], { transA: int(1) }), 'dW_h', 'float32', [D, K]);
  g.output(reduceSum(g, dlogits, [0], 0), 'db_h', 'float32', [K]);
  const de = g.op('Gemm', [dlogits, Wh], { transB: int(1) }); // [B, D]
  const dot = reduceSum(g, g.mul(e, de), [-1], 1); // [B, 1]
  const unclamped = g.cast(g.op('Greater', [ss, C.eps]), 'float32'); // [B, 1]
  const dh = g.div(g.sub(de, g.mul(e, g.mul(dot, unclamped))), nrm); // [B, D]
  const da = g.mul(dh, g.sub(g.constFloat(1, []), g.mul(h, h))); // [B, D]
  const gy = g.op('Gemm', [da, C.Vt], { transB: int(1) }); // [B, R] = da V
  const ds = reduceSum(g, g.mul(y, gy), [0], 0); // [R]
  const q = reduceSum(g, g.mul(ds, Sz), null, 0); // []
  const dz = g.mul(g.mul(C.S, c), g.sub(ds, g.div(q, T))); // [R]
  g.output(dz, 'dz', 'float32', [R]);
  return g.toModel({ producer: 'fugu', opset: OPSET });
}

// --- RouterHead ------------------------------------------------------------------------------

/** Features already projected by RouterHead.project: y = x U, [n, R]. */
export class ProjectedFeatures {
  readonly y: Float32Array;
  readonly n: number;
  readonly rank: number;
  constructor(y: Float32Array, n: number, rank: number) {
    if (y.length !== n * rank) throw new InputError(`projected features: [${n}, ${rank}] needs ${n * rank} values, got ${y.length}`, { field: 'y' });
    this.y = y;
    this.n = n;
    this.rank = rank;
  }
  /** Rows [start, end) as a view (no copy). */
  rows(start: number, end: number): ProjectedFeatures {
    return new ProjectedFeatures(this.y.subarray(start * this.rank, end * this.rank), end - start, this.rank);
  }
}

/** Cached features x (row-major [n, I]) or their projection. */
export type HeadFeatures = Float32Array | ProjectedFeatures;

export interface LossAndGrad {
  loss: number;
  /** Gradient of the loss in theta's layout ([dz | dW_h | db_h]). */
  grad: Float32Array;
  /** [B, K] */
  logits: Float32Array;
}

export interface RouterHeadOptions {
  /** Passed to every session (threads, providers). */
  session?: Omit<SessionOptions, 'label'>;
}

type GraphKey = 'project' | `cand-${FeatureKind}` | `train-${FeatureKind}`;

/**
 * The SVF + linear head for K workers: holds the SVD (`layer`, storable with the model) and its
 * ONNX sessions, each created once on first use and reused for every parameter vector.
 */
export class RouterHead {
  readonly layer: SvfLayer;
  readonly dims: HeadDims;
  private readonly options: RouterHeadOptions;
  private readonly sessions = new Map<GraphKey, Promise<OnnxSession>>();

  constructor(layer: SvfLayer, workers: number, options: RouterHeadOptions = {}) {
    checkSvfLayer(layer);
    if (!Number.isInteger(workers) || workers < 1) throw new InputError(`RouterHead: workers must be a positive integer, got ${workers}`, { field: 'workers' });
    this.layer = layer;
    this.dims = { rank: layer.rank, dim: layer.outDim, workers };
    this.options = options;
  }

  /** SVD of a dense tanh layer W [I, D] with bias b (e.g. USE-lite's params.tanhKernel/tanhBias). */
  static fromDense(W: { data: ArrayLike<number>; rows: number; cols: number }, b: ArrayLike<number>, workers: number, options: RouterHeadOptions & { eps?: number } = {}): RouterHead {
    return new RouterHead(svfLayerFromDense(W, b, options.eps), workers, options);
  }

  get workers(): number {
    return this.dims.workers;
  }
  get thetaSize(): number {
    return thetaSize(this.dims);
  }

  /** y = x U for a feature matrix x [n, I]. */
  async project(x: Float32Array): Promise<ProjectedFeatures> {
    const n = this.rowsOf(x, this.layer.inDim, 'x');
    const out = await (await this.session('project')).run({ x: { data: x, dims: [n, this.layer.inDim] } }, ['y']);
    return new ProjectedFeatures(out.y!.data, n, this.layer.rank);
  }

  /** logits [N, K] for one parameter vector. */
  async logits(features: HeadFeatures, theta: Float32Array): Promise<FloatOutput> {
    const out = await this.candidateLogits(features, [theta]);
    return { data: out.data, dims: out.dims.slice(1) };
  }

  /** logits [P, N, K] for P parameter vectors in one run. */
  async candidateLogits(features: HeadFeatures, thetas: readonly Float32Array[]): Promise<FloatOutput> {
    return (await this.runCandidates(features, thetas, 'logits')).logits!;
  }

  /** softmax of candidateLogits, [P, N, K]. */
  async candidateProbs(features: HeadFeatures, thetas: readonly Float32Array[]): Promise<FloatOutput> {
    return (await this.runCandidates(features, thetas, 'probs')).probs!;
  }

  /** mean KL(p || pi) over the batch and its gradient with respect to theta. p is [B, K]. */
  async lossAndGrad(features: HeadFeatures, p: Float32Array, theta: Float32Array): Promise<LossAndGrad> {
    const { kind, data, n, width } = this.feed(features);
    const K = this.workers;
    if (p.length !== n * K) throw new InputError(`lossAndGrad: p needs [${n}, ${K}] = ${n * K} values, got ${p.length}`, { field: 'p' });
    const parts = unpackTheta(theta, this.dims);
    const out = await (await this.session(`train-${kind}`)).run(
      {
        [kind]: { data, dims: [n, width] },
        p: { data: p, dims: [n, K] },
        z: { data: parts.z, dims: [this.dims.rank] },
        W_h: { data: parts.W_h, dims: [this.dims.dim, K] },
        b_h: { data: parts.b_h, dims: [K] },
      },
      ['loss', 'logits', 'dz', 'dW_h', 'db_h'],
    );
    const grad = new Float32Array(this.thetaSize);
    const g = unpackTheta(grad, this.dims);
    g.z.set(out.dz!.data);
    g.W_h.set(out.dW_h!.data);
    g.b_h.set(out.db_h!.data);
    return { loss: out.loss!.data[0]!, grad, logits: out.logits!.data };
  }

  /** Releases the sessions (the head can still be used: they are re-created on demand). */
  async release(): Promise<void> {
    const all = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.all(all.map(async (s) => (await s).release()));
  }

  private async runCandidates(features: HeadFeatures, thetas: readonly Float32Array[], output: 'logits' | 'probs'): Promise<Record<string, FloatOutput>> {
    const { kind, data, n, width } = this.feed(features);
    const P = thetas.length;
    if (P === 0) throw new InputError('candidateLogits: no parameter vectors given', { field: 'thetas' });
    const { rank: R, dim: D, workers: K } = this.dims;
    // Gather the parts into [P, ...] tensors (a copy of P * |theta| floats: small next to the run).
    const z = new Float32Array(P * R), Wh = new Float32Array(P * D * K), bh = new Float32Array(P * K);
    thetas.forEach((theta, i) => {
      let parts;
      try {
        parts = unpackTheta(theta, this.dims);
      } catch (err) {
        throw new InputError(`candidate ${i}: ${(err as Error).message}`, { field: 'thetas' }, { cause: err });
      }
      z.set(parts.z, i * R);
      Wh.set(parts.W_h, i * D * K);
      bh.set(parts.b_h, i * K);
    });
    return (await this.session(`cand-${kind}`)).run(
      {
        [kind]: { data, dims: [n, width] },
        z: { data: z, dims: [P, R] },
        W_h: { data: Wh, dims: [P, D, K] },
        b_h: { data: bh, dims: [P, K] },
      },
      [output],
    );
  }

  private feed(features: HeadFeatures): { kind: FeatureKind; data: Float32Array; n: number; width: number } {
    if (features instanceof ProjectedFeatures) {
      if (features.rank !== this.layer.rank) throw new InputError(`projected features have rank ${features.rank}, the head ${this.layer.rank}`, { field: 'y' });
      if (features.n < 1) throw new InputError('no feature rows given', { field: 'y' });
      return { kind: 'y', data: features.y, n: features.n, width: features.rank };
    }
    return { kind: 'x', data: features, n: this.rowsOf(features, this.layer.inDim, 'x'), width: this.layer.inDim };
  }

  private rowsOf(x: Float32Array, width: number, field: string): number {
    if (!(x instanceof Float32Array)) throw new InputError(`${field} must be a Float32Array`, { field });
    if (x.length === 0 || x.length % width !== 0) throw new InputError(`${field} has ${x.length} values: not a non-empty [N, ${width}] matrix`, { field });
    return x.length / width;
  }

  private session(key: GraphKey): Promise<OnnxSession> {
    let s = this.sessions.get(key);
    if (!s) {
      const K = this.workers;
      const model =
        key === 'project' ? buildProjectionGraph(this.layer)
        : key.startsWith('cand-') ? buildCandidateGraph(this.layer, K, { features: key.slice(5) as FeatureKind })
        : buildTrainingGraph(this.layer, K, { features: key.slice(6) as FeatureKind });
      s = createSession(model, { ...this.options.session, label: `router head (${key}, K=${K})` });
      // A failed creation is not cached: the next call retries.
      s.catch(() => this.sessions.delete(key));
      this.sessions.set(key, s);
    }
    return s;
  }
}
