// Graphs built with GraphBuilder, run in ONNX Runtime (CPU), compared with plain JS computations.

import { describe, expect, it } from 'vitest';
import { rng } from '@fugu/core';
import { GraphBuilder, float, int } from './builder.ts';
import { ContractError, createSession, type FloatOutput } from './session.ts';

const r = rng('onnx-session-test');
const randn = (n: number, scale = 1): Float32Array => Float32Array.from({ length: n }, () => r.normal() * scale);

/** C[m,n] = A[m,k] B[k,n], row-major, in float64. */
function matmul(a: ArrayLike<number>, b: ArrayLike<number>, m: number, k: number, n: number): Float64Array {
  const c = new Float64Array(m * n);
  for (let i = 0; i < m; i++) for (let p = 0; p < k; p++) for (let j = 0; j < n; j++) c[i * n + j]! += a[i * k + p]! * b[p * n + j]!;
  return c;
}

function expectClose(out: FloatOutput | undefined, dims: number[], expected: ArrayLike<number>, tol = 1e-5): void {
  expect(out).toBeDefined();
  expect(out!.dims).toEqual(dims);
  expect(out!.data.length).toBe(expected.length);
  let worst = 0;
  for (let i = 0; i < expected.length; i++) worst = Math.max(worst, Math.abs(out!.data[i]! - expected[i]!));
  expect(worst).toBeLessThanOrEqual(tol);
}

async function build(g: GraphBuilder) {
  return createSession(g.toModel({ producer: 'fugu-test' }), { intraOpNumThreads: 1, label: g.name });
}

describe('graphs run in onnxruntime-node', () => {
  it('MatMul + Add + Tanh with a symbolic batch dim (N = 1 and N = 7, one session)', async () => {
    const D = 5, H = 3;
    const W = randn(D * H), b = randn(H);
    const g = new GraphBuilder('dense');
    const x = g.input('x', 'float32', ['N', D]);
    const y = g.op('Tanh', [g.add(g.matmul(x, g.constant('W', W, [D, H])), g.constant('b', b, [H]))]);
    g.output(y, 'y', 'float32', ['N', H]);
    const s = await build(g);
    expect(s.inputNames).toEqual(['x']);
    expect(s.outputNames).toEqual(['y']);
    for (const N of [1, 7]) {
      const xs = randn(N * D);
      const xw = matmul(xs, W, N, D, H);
      const expected = Array.from(xw, (v, i) => Math.tanh(v + b[i % H]!));
      expectClose((await s.run({ x: { data: xs, dims: [N, D] } })).y, [N, H], expected);
    }
    await s.release();
  });

  it('Gemm with transB, alpha and beta', async () => {
    const N = 4, D = 3, K = 2;
    const Wt = randn(K * D), c = randn(K);
    const g = new GraphBuilder('gemm');
    const x = g.input('x', 'float32', ['N', D]);
    const y = g.op('Gemm', [x, g.constant('Wt', Wt, [K, D]), g.constant('c', c, [K])], { transB: 1, alpha: float(0.5), beta: float(2) });
    g.output(y, 'y', 'float32', ['N', K]);
    const s = await build(g);
    const xs = randn(N * D);
    const expected: number[] = [];
    for (let i = 0; i < N; i++) for (let j = 0; j < K; j++) {
      let acc = 0;
      for (let p = 0; p < D; p++) acc += xs[i * D + p]! * Wt[j * D + p]!;
      expected.push(0.5 * acc + 2 * c[j]!);
    }
    expectClose((await s.run({ x: { data: xs, dims: [N, D] } })).y, [N, K], expected);
  });

  it('Softmax over a middle axis', async () => {
    const A = 2, B = 3, C = 4;
    const g = new GraphBuilder('softmax');
    g.output(g.softmax(g.input('x', 'float32', [A, B, C]), 1), 'y', 'float32', [A, B, C]);
    const s = await build(g);
    const xs = randn(A * B * C, 3);
    const expected = new Float64Array(A * B * C);
    for (let a = 0; a < A; a++) for (let c = 0; c < C; c++) {
      const idx = (b: number): number => (a * B + b) * C + c;
      let max = -Infinity;
      for (let b = 0; b < B; b++) max = Math.max(max, xs[idx(b)]!);
      let sum = 0;
      for (let b = 0; b < B; b++) sum += Math.exp(xs[idx(b)]! - max);
      for (let b = 0; b < B; b++) expected[idx(b)] = Math.exp(xs[idx(b)]! - max) / sum;
    }
    expectClose((await s.run({ x: { data: xs, dims: [A, B, C] } })).y, [A, B, C], expected);
  });

  it('LayerNormalization and its ReduceMean/Sub/Pow/Sqrt decomposition agree with JS', async () => {
    const N = 3, D = 8, eps = 1e-5;
    const gamma = randn(D), beta = randn(D);
    const g = new GraphBuilder('layernorm');
    const x = g.input('x', 'float32', ['N', D]);
    const scale = g.constant('gamma', gamma, [D]);
    const bias = g.constant('beta', beta, [D]);
    g.output(g.op('LayerNormalization', [x, scale, bias], { axis: -1, epsilon: float(eps) }), 'ln', 'float32', ['N', D]);
    // decomposition: (x - mean) / sqrt(mean((x - mean)^2) + eps) * gamma + beta
    const axes = g.constInt64([-1]);
    const centred = g.sub(x, g.op('ReduceMean', [x, axes], { keepdims: 1 }));
    const variance = g.op('ReduceMean', [g.op('Pow', [centred, g.constFloat(2)]), axes], { keepdims: 1 });
    const normed = g.div(centred, g.op('Sqrt', [g.add(variance, g.constFloat(eps))]));
    g.output(g.add(g.mul(normed, scale), bias), 'manual', 'float32', ['N', D]);
    const s = await build(g);
    const xs = randn(N * D, 2);
    const expected = new Float64Array(N * D);
    for (let i = 0; i < N; i++) {
      const row = Array.from(xs.subarray(i * D, (i + 1) * D));
      const mean = row.reduce((a, b) => a + b, 0) / D;
      const v = row.reduce((a, b) => a + (b - mean) ** 2, 0) / D;
      row.forEach((t, j) => (expected[i * D + j] = ((t - mean) / Math.sqrt(v + eps)) * gamma[j]! + beta[j]!));
    }
    const out = await s.run({ x: { data: xs, dims: [N, D] } });
    expectClose(out.ln, [N, D], expected, 1e-4);
    expectClose(out.manual, [N, D], expected, 1e-4);
  });

  it('Reshape (with 0 and -1) and Transpose', async () => {
    const g = new GraphBuilder('shapes');
    const x = g.input('x', 'float32', ['B', 3, 4]);
    const flat = g.reshape(x, [-1, 4]); // [B*3, 4]
    g.output(g.transpose(flat, [1, 0]), 't', 'float32', [4, null]);
    g.output(g.reshape(x, [0, 12]), 'r', 'float32', ['B', 12]);
    const s = await build(g);
    const B = 2;
    const xs = Float32Array.from({ length: B * 12 }, (_, i) => i);
    const out = await s.run({ x: { data: xs, dims: [B, 3, 4] } });
    const t: number[] = [];
    for (let c = 0; c < 4; c++) for (let row = 0; row < B * 3; row++) t.push(row * 4 + c);
    expectClose(out.t, [4, B * 3], t, 0);
    expectClose(out.r, [B, 12], xs, 0);
  });

  it('Gather of embeddings by int64 and int32 ids', async () => {
    const V = 10, D = 4;
    const table = randn(V * D);
    const g = new GraphBuilder('embed');
    const emb = g.constant('table', table, [V, D]);
    g.output(g.op('Gather', [emb, g.input('ids64', 'int64', ['N', 'T'])], { axis: 0 }), 'e64', 'float32', ['N', 'T', D]);
    g.output(g.op('Gather', [emb, g.input('ids32', 'int32', ['M'])], { axis: 0 }), 'e32', 'float32', ['M', D]);
    const s = await build(g);
    const ids = [3, 0, 9, 3, 7, 1];
    const out = await s.run({
      ids64: { data: BigInt64Array.from(ids, BigInt), dims: [2, 3] },
      ids32: { data: Int32Array.from([9, -1]), dims: [2] }, // -1 counts from the end, as in ONNX
    });
    expectClose(out.e64, [2, 3, D], ids.flatMap((id) => Array.from(table.subarray(id * D, (id + 1) * D))), 0);
    expectClose(out.e32, [2, D], [...table.subarray(9 * D, 10 * D), ...table.subarray(9 * D, 10 * D)], 0);
  });

  it('mean pooling under a bool mask (ReduceSum / ReduceSum) and a plain ReduceMean', async () => {
    const N = 2, T = 4, D = 3;
    const g = new GraphBuilder('pool');
    const h = g.input('h', 'float32', ['N', 'T', D]);
    const mask = g.input('mask', 'bool', ['N', 'T']);
    const m = g.op('Unsqueeze', [g.cast(mask, 'float32'), g.constInt64([-1])]); // [N, T, 1]
    const axis1 = g.constInt64([1]);
    const summed = g.op('ReduceSum', [g.mul(h, m), axis1], { keepdims: 0 });
    const count = g.op('ReduceSum', [m, axis1], { keepdims: 0 });
    g.output(g.div(summed, g.op('Max', [count, g.constFloat(1)])), 'pooled', 'float32', ['N', D]);
    g.output(g.op('ReduceMean', [h, axis1], { keepdims: 0 }), 'mean', 'float32', ['N', D]);
    const s = await build(g);
    const hs = randn(N * T * D);
    const maskBits = new Uint8Array([1, 1, 0, 0, 1, 1, 1, 1]);
    const out = await s.run({ h: { data: hs, dims: [N, T, D] }, mask: { data: maskBits, dims: [N, T], dtype: 'bool' } });
    const pooled: number[] = [];
    const mean: number[] = [];
    for (let n = 0; n < N; n++) for (let d = 0; d < D; d++) {
      let s1 = 0, c = 0, s2 = 0;
      for (let t = 0; t < T; t++) {
        const v = hs[(n * T + t) * D + d]!;
        s2 += v;
        if (maskBits[n * T + t]) {
          s1 += v;
          c++;
        }
      }
      pooled.push(s1 / c);
      mean.push(s2 / T);
    }
    expectClose(out.pooled, [N, D], pooled);
    expectClose(out.mean, [N, D], mean);
  });

  it('candidate-batched head: P parameter vectors x N inputs -> [P, N, K], by MatMul broadcasting and by Einsum', async () => {
    const D = 6, K = 3;
    const g = new GraphBuilder('head');
    const x = g.input('features', 'float32', ['N', D]);
    const W = g.input('head_w', 'float32', ['P', D, K]); // head weights are graph INPUTS
    const b = g.input('head_b', 'float32', ['P', K]);
    const bias = g.op('Unsqueeze', [b, g.constInt64([1])]); // [P, 1, K]
    // [1, N, D] x [P, D, K] broadcasts to [P, N, K]
    const x3 = g.op('Unsqueeze', [x, g.constInt64([0])]);
    g.output(g.add(g.matmul(x3, W), bias), 'logits', 'float32', ['P', 'N', K]);
    g.output(g.add(g.op('Einsum', [x, W], { equation: 'nd,pdk->pnk' }), bias), 'logits_einsum', 'float32', ['P', 'N', K]);
    // [P, 1, D, K] x [1, N, D, 1]-style: one matrix-vector product per (candidate, input)
    const W4 = g.op('Unsqueeze', [W, g.constInt64([1])]); // [P, 1, D, K]
    const x4 = g.op('Unsqueeze', [x, g.constInt64([0, 2])]); // [1, N, 1, D]
    g.output(g.add(g.reshape(g.matmul(x4, W4), [0, 0, K]), bias), 'logits_4d', 'float32', ['P', 'N', K]);
    const s = await build(g);
    for (const [P, N] of [[1, 1], [4, 7]] as const) {
      const xs = randn(N * D), ws = randn(P * D * K), bs = randn(P * K);
      const expected: number[] = [];
      for (let p = 0; p < P; p++) {
        const xw = matmul(xs, ws.subarray(p * D * K, (p + 1) * D * K), N, D, K);
        xw.forEach((v, i) => expected.push(v + bs[p * K + (i % K)]!));
      }
      const out = await s.run({
        features: { data: xs, dims: [N, D] },
        head_w: { data: ws, dims: [P, D, K] },
        head_b: { data: bs, dims: [P, K] },
      });
      expectClose(out.logits, [P, N, K], expected);
      expectClose(out.logits_einsum, [P, N, K], expected);
      expectClose(out.logits_4d, [P, N, K], expected);
    }
  });

  it('SVF: W\' = U diag(S * z) V^T with z a graph input, batched over candidates', async () => {
    const D = 4, R = 4;
    const U = randn(D * R), S = Float32Array.from([3, 2, 1, 0.5]), Vt = randn(R * D);
    const g = new GraphBuilder('svf');
    const z = g.input('z', 'float32', ['P', R]);
    const x = g.input('x', 'float32', ['N', D]);
    const sz = g.op('Unsqueeze', [g.mul(g.constant('S', S, [R]), z), g.constInt64([1])]); // [P, 1, R]
    const Wp = g.matmul(g.mul(g.constant('U', U, [D, R]), sz), g.constant('Vt', Vt, [R, D])); // [P, D, D]
    g.output(g.matmul(x, Wp), 'y', 'float32', ['P', 'N', D]);
    const s = await build(g);
    const P = 2, N = 3;
    const zs = Float32Array.from([1, 1, 1, 1, 0.5, 2, 0, 1]);
    const xs = randn(N * D);
    const expected: number[] = [];
    for (let p = 0; p < P; p++) {
      const usz = Array.from(U, (u, i) => u * S[i % R]! * zs[p * R + (i % R)]!);
      const w = matmul(usz, Vt, D, R, D);
      expected.push(...matmul(xs, w, N, D, D));
    }
    expectClose((await s.run({ z: { data: zs, dims: [P, R] }, x: { data: xs, dims: [N, D] } })).y, [P, N, D], expected, 1e-4);
  });

  it('int64 and bool initializers (Where on a bool mask, Gather by int64 indices)', async () => {
    const g = new GraphBuilder('consts');
    const x = g.input('x', 'float32', [4]);
    const keep = g.constBool([true, false, true, false], [4], 'keep');
    const masked = g.op('Where', [keep, x, g.constFloat(-1)]);
    g.output(g.op('Gather', [masked, g.constInt64([3, 0, 2], [3], 'order')], { axis: 0 }), 'y', 'float32', [3]);
    const s = await build(g);
    const out = await s.run({ x: { data: Float32Array.from([10, 20, 30, 40]), dims: [4] } });
    expectClose(out.y, [3], [-1, 10, 30], 0);
  });

  it('Split into several outputs and runTensors for non-float outputs', async () => {
    const g = new GraphBuilder('split');
    const x = g.input('x', 'float32', ['N', 4]);
    const [a, b] = g.ops('Split', [x], { axis: int(1), num_outputs: 2 }, 2);
    g.output(a!, 'a', 'float32', ['N', 2]);
    g.output(b!, 'b', 'float32', ['N', 2]);
    g.output(g.op('ArgMax', [x], { axis: 1, keepdims: 0 }), 'best', 'int64', ['N']);
    const s = await build(g);
    const xs = Float32Array.from([1, 2, 3, 4, 8, 7, 6, 5]);
    const out = await s.run({ x: { data: xs, dims: [2, 4] } }, ['a', 'b']);
    expectClose(out.a, [2, 2], [1, 2, 8, 7], 0);
    expectClose(out.b, [2, 2], [3, 4, 6, 5], 0);
    const t = await s.runTensors({ x: { data: xs, dims: [2, 4] } }, ['best']);
    expect(t.best!.dtype).toBe('int64');
    expect(Array.from(t.best!.data as BigInt64Array)).toEqual([3n, 0n]);
    await expect(s.run({ x: { data: xs, dims: [2, 4] } })).rejects.toThrow(/split: output best is int64, not float32/);
  });
});

describe('OnnxSession errors', () => {
  async function dense() {
    const g = new GraphBuilder('backbone');
    const x = g.input('input_ids', 'int64', ['N', 'T']);
    const e = g.op('Gather', [g.constant('emb', randn(20 * 4), [20, 4]), x], { axis: 0 });
    g.output(g.op('ReduceMean', [e, g.constInt64([1])], { keepdims: 0 }), 'hidden', 'float32', ['N', 4]);
    return build(g);
  }

  it('the contract checker names missing inputs and outputs and mismatched types and shapes', async () => {
    const s = await dense();
    expect(() => s.checkContract({ inputs: ['input_ids'], outputs: [{ name: 'hidden', dtype: 'float32', shape: ['N', 4] }] })).not.toThrow();
    let err: unknown;
    try {
      s.checkContract({
        inputs: ['input_ids', 'attention_mask', { name: 'z_0', dtype: 'float32' }],
        outputs: ['hidden', 'logits'],
      });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ContractError);
    const ce = err as ContractError;
    expect(ce.message).toBe('backbone: ONNX model breaks the contract: missing inputs attention_mask, z_0; missing output logits');
    expect(ce.missingInputs).toEqual(['attention_mask', 'z_0']);
    expect(ce.missingOutputs).toEqual(['logits']);
    expect(() => s.checkContract({ inputs: [{ name: 'input_ids', dtype: 'int32' }], outputs: [{ name: 'hidden', shape: ['N', 8] }] })).toThrow(
      'backbone: ONNX model breaks the contract: input input_ids is int64, expected int32; output hidden has shape [N, 4], expected [N, 8]',
    );
    expect(() => s.checkContract({ outputs: [{ name: 'hidden', shape: ['N', 'H'] }] })).toThrow(/output hidden has shape \[N, 4\], expected \[N, H\]/);
    expect(() => s.checkContract({ outputs: [{ name: 'hidden', shape: ['N'] }] })).toThrow(/has shape \[N, 4\], expected \[N\]/);
  });

  it('names bad feeds before ONNX Runtime sees them', async () => {
    const s = await dense();
    const ids = { data: BigInt64Array.from([1n, 2n, 3n]), dims: [1, 3] };
    await expect(s.run({})).rejects.toThrow(/backbone: input input_ids is not fed/);
    await expect(s.run({ input_ids: ids, extra: ids })).rejects.toThrow(/backbone: input extra: the model has no such input \(inputs: input_ids\)/);
    await expect(s.run({ input_ids: { data: Int32Array.from([1, 2, 3]), dims: [1, 3] } })).rejects.toThrow(/input input_ids: fed int32, the model expects int64/);
    await expect(s.run({ input_ids: { data: ids.data, dims: [2, 3] } })).rejects.toThrow(/dims \[2, 3\] need 6 elements, data has 3/);
    await expect(s.run({ input_ids: { data: ids.data, dims: [3] } })).rejects.toThrow(/fed rank 1 \[3\], the model expects \[N, T\]/);
    await expect(s.run({ input_ids: ids }, ['nope'])).rejects.toThrow(/no output nope \(outputs: hidden\)/);
  });

  it('runs with spinning off (serving) as with it on', async () => {
    const g = new GraphBuilder('tanh');
    g.output(g.op('Tanh', [g.input('x', 'float32', ['N', 2])]), 'y', 'float32', ['N', 2]);
    const model = g.toModel({ producer: 'fugu-test' });
    const xs = Float32Array.from([0.5, -1, 2, 0]);
    for (const allowSpinning of [false, true]) {
      const s = await createSession(model, { intraOpNumThreads: 2, allowSpinning });
      expectClose((await s.run({ x: { data: xs, dims: [2, 2] } })).y, [2, 2], Array.from(xs, Math.tanh));
      await s.release();
    }
  });

  it('wraps a load failure with the model label', async () => {
    await expect(createSession(new Uint8Array([1, 2, 3]), { label: 'broken.onnx' })).rejects.toThrow(/^broken.onnx: ONNX Runtime could not load the model/);
  });
});
