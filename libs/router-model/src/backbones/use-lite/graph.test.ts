// The ONNX graph of USE-lite against the package's TF.js forward (embedding), the TS reference
// (pooled), and its contract. The model, the TF.js oracle and the graph are loaded/built once.

import { availableParallelism } from 'node:os';
import type { EmbeddingsModel } from '@energetic-ai/embeddings';
import { beforeAll, describe, expect, it } from 'vitest';
import { GraphBuilder } from '../../onnx/builder.ts';
import { ContractError, createSession, type OnnxSession } from '../../onnx/session.ts';
import { padTokenBatch, planBatches } from './encoder.ts';
import { USE_LITE_FEATURE_CONTRACT, USE_LITE_GRAPH_CONTRACT, buildUseLiteFeatureGraph, buildUseLiteGraph } from './graph.ts';
import { loadUseLite, type UseLiteBackbone } from './load.ts';
import { loadPackageModel, packageEmbed } from './package-oracle.ts';
import { referenceForwardOne } from './reference.ts';
import { USE_LITE_TEST_SENTENCES, USE_LITE_TEST_TEXTS } from './test-sentences.ts';

const TOLERANCE = 1e-4;
const D = 512;

let backbone: UseLiteBackbone;
let tfjs: EmbeddingsModel;
let session: OnnxSession;
let ids: Int32Array[]; // clipped to 128
let expected: number[][]; // the package's embeddings
let pooled: Float32Array[];
let embedding: Float32Array[];

/** Runs the graph on token id lists (one padded batch) and returns the rows of both outputs. */
async function run(s: OnnxSession, batch: ReadonlyArray<ArrayLike<number>>, outputs = ['pooled', 'embedding']): Promise<Record<string, Float32Array[]>> {
  const feed = padTokenBatch(batch);
  const out = await s.run({ ids: { data: feed.ids, dims: feed.dims }, lengths: { data: feed.lengths, dims: [feed.dims[0]] } }, outputs);
  return Object.fromEntries(Object.entries(out).map(([name, t]) => {
    expect(t.dims).toEqual([batch.length, D]);
    return [name, batch.map((_, b) => t.data.slice(b * D, (b + 1) * D))];
  }));
}

const maxAbsDiff = (a: ArrayLike<number>, b: ArrayLike<number>): number => {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
};

beforeAll(async () => {
  [backbone, tfjs] = await Promise.all([loadUseLite(), loadPackageModel()]);
  session = await createSession(buildUseLiteGraph(backbone.params), { intraOpNumThreads: availableParallelism(), label: 'use-lite graph' });
  ids = USE_LITE_TEST_TEXTS.map((t) => backbone.tokenizer.encode(t).subarray(0, 128));
  expected = await packageEmbed(tfjs, USE_LITE_TEST_TEXTS);
  pooled = new Array<Float32Array>(ids.length);
  embedding = new Array<Float32Array>(ids.length);
  for (const batch of planBatches(ids.map((x) => x.length), 32)) {
    const out = await run(session, batch.map((i) => ids[i]!));
    batch.forEach((i, k) => {
      pooled[i] = out.pooled![k]!;
      embedding[i] = out.embedding![k]!;
    });
  }
});

describe('USE-lite ONNX graph vs the package (TF.js)', () => {
  it('runs on >= 100 varied sentences, some clipped at 128 tokens', () => {
    expect(USE_LITE_TEST_TEXTS.length).toBeGreaterThanOrEqual(100);
    expect(new Set(USE_LITE_TEST_SENTENCES.map((s) => s.kind)).size).toBeGreaterThanOrEqual(10);
    expect(USE_LITE_TEST_TEXTS.filter((t) => backbone.tokenizer.encode(t).length > 128).length).toBeGreaterThanOrEqual(5);
    expect(expected).toHaveLength(USE_LITE_TEST_TEXTS.length);
  });

  it(`embedding matches embed() within ${TOLERANCE} on every sentence`, () => {
    const diffs = embedding.map((row, i) => ({ i, kind: USE_LITE_TEST_SENTENCES[i]!.kind, diff: maxAbsDiff(row, expected[i]!) }));
    const worst = diffs.reduce((a, b) => (b.diff > a.diff ? b : a));
    console.log(`USE-lite ONNX embedding vs TF.js: max abs diff ${worst.diff.toExponential(2)} (text ${worst.i}, ${worst.kind}) over ${diffs.length} texts`);
    expect(diffs.filter((d) => !(d.diff <= TOLERANCE))).toEqual([]);
  });

  it(`pooled matches the TS reference within ${TOLERANCE} on every sentence`, () => {
    const diffs = ids.map((x, i) => maxAbsDiff(pooled[i]!, referenceForwardOne(backbone.params, x).pooled));
    const worst = Math.max(...diffs);
    console.log(`USE-lite ONNX pooled vs TS reference: max abs diff ${worst.toExponential(2)} over ${diffs.length} texts`);
    expect(worst).toBeLessThanOrEqual(TOLERANCE);
  });
});

describe('padding', () => {
  it('a text alone and padded in a batch with a long text gives the same outputs (1e-6)', async () => {
    const short = ids[USE_LITE_TEST_TEXTS.findIndex((t) => t.length > 0 && backbone.tokenizer.encode(t).length <= 8)]!;
    const long = ids.find((x) => x.length === 128)!;
    const alone = await run(session, [short]);
    const padded = await run(session, [long, short, short.subarray(0, 1)]);
    expect(maxAbsDiff(padded.embedding![1]!, alone.embedding![0]!)).toBeLessThanOrEqual(1e-6);
    // pooled values reach |x| ~ 20: 1e-6 relative to the row's scale
    const scale = Math.max(1, ...Array.from(alone.pooled![0]!, Math.abs));
    expect(maxAbsDiff(padded.pooled![1]!, alone.pooled![0]!) / scale).toBeLessThanOrEqual(1e-6);
    // the long row is unaffected by its short neighbours
    const longAlone = await run(session, [long]);
    expect(maxAbsDiff(padded.embedding![0]!, longAlone.embedding![0]!)).toBeLessThanOrEqual(1e-6);
  });

  it('the ids at padded positions do not matter', async () => {
    const text = ids[3]!;
    const T = text.length + 5;
    const feed = padTokenBatch([text]);
    const junk = new BigInt64Array(T).fill(7999n);
    junk.set(feed.ids);
    const a = await session.run({ ids: { data: feed.ids, dims: feed.dims }, lengths: { data: feed.lengths, dims: [1] } });
    const b = await session.run({ ids: { data: junk, dims: [1, T] }, lengths: { data: feed.lengths, dims: [1] } });
    expect(maxAbsDiff(a.embedding!.data, b.embedding!.data)).toBeLessThanOrEqual(1e-6);
  });
});

describe('contract', () => {
  it('the full graph meets USE_LITE_GRAPH_CONTRACT', () => {
    expect(() => session.checkContract(USE_LITE_GRAPH_CONTRACT)).not.toThrow();
    expect(session.inputNames).toEqual(['ids', 'lengths']);
    expect(session.outputNames).toEqual(['pooled', 'embedding']);
  });

  it('the feature graph has only pooled, equal to the full graph\'s', async () => {
    const features = await createSession(buildUseLiteFeatureGraph(backbone.params), { intraOpNumThreads: 1, label: 'use-lite features' });
    try {
      expect(() => features.checkContract(USE_LITE_FEATURE_CONTRACT)).not.toThrow();
      expect(features.outputNames).toEqual(['pooled']);
      expect(() => features.checkContract(USE_LITE_GRAPH_CONTRACT)).toThrow(/missing output embedding/);
      const sample = [0, 13, 40];
      const out = await run(features, sample.map((i) => ids[i]!), ['pooled']);
      sample.forEach((i, k) => expect(maxAbsDiff(out.pooled![k]!, pooled[i]!) / 25).toBeLessThanOrEqual(1e-6));
    } finally {
      await features.release();
    }
  });

  it('a graph without `lengths` fails the contract, naming it', async () => {
    const g = new GraphBuilder('broken_backbone');
    const x = g.input('ids', 'int64', ['B', 'T']);
    const row = g.op('ReduceMean', [g.cast(x, 'float32'), g.constInt64([1])], { keepdims: 1 }); // [B, 1]
    const out = g.op('Expand', [row, g.constInt64([1, D])]);
    g.output(out, 'pooled', 'float32', ['B', D]);
    g.output(g.op('Identity', [out]), 'embedding', 'float32', ['B', D]);
    const broken = await createSession(g.toModel(), { intraOpNumThreads: 1, label: 'broken.onnx' });
    try {
      const err = (() => {
        try {
          broken.checkContract(USE_LITE_GRAPH_CONTRACT);
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(err).toBeInstanceOf(ContractError);
      expect((err as ContractError).missingInputs).toEqual(['lengths']);
      expect((err as ContractError).message).toMatch(/broken\.onnx: .*missing input lengths/);
    } finally {
      await broken.release();
    }
  });
});
