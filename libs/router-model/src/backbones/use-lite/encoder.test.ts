// UseLiteEncoder: texts in, vectors out in input order, checked against the package's TF.js
// forward; batching, errors and the cache key. The encoder and the oracle are loaded once.

import type { EmbeddingsModel } from '@energetic-ai/embeddings';
import { InputError, rng, shuffled } from '@fugu/core';
import { beforeAll, describe, expect, it } from 'vitest';
import { UseLiteEncoder, padTokenBatch, planBatches, textHash } from './encoder.ts';
import { loadUseLite } from './load.ts';
import { loadPackageModel, packageEmbed } from './package-oracle.ts';
import { USE_LITE_TEST_TEXTS } from './test-sentences.ts';

const TOLERANCE = 1e-4;

let encoder: UseLiteEncoder;
let tfjs: EmbeddingsModel;
let expected: number[][];
let embeddings: Float32Array[];

const maxAbsDiff = (a: ArrayLike<number>, b: ArrayLike<number>): number => {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
};

beforeAll(async () => {
  const [backbone, model] = await Promise.all([loadUseLite(), loadPackageModel()]);
  tfjs = model;
  // Small batches, so the 118 texts make several batches of different padded lengths.
  encoder = await UseLiteEncoder.create({ backbone, maxBatchSize: 16 });
  expected = await packageEmbed(tfjs, USE_LITE_TEST_TEXTS);
  embeddings = await encoder.encode(USE_LITE_TEST_TEXTS, { output: 'embedding' });
});

describe('UseLiteEncoder', () => {
  it(`encode(texts, { output: 'embedding' }) matches the package within ${TOLERANCE}, in input order`, () => {
    expect(embeddings).toHaveLength(USE_LITE_TEST_TEXTS.length);
    const diffs = embeddings.map((row, i) => maxAbsDiff(row, expected[i]!));
    const worst = Math.max(...diffs);
    console.log(`UseLiteEncoder embedding vs TF.js: max abs diff ${worst.toExponential(2)} over ${diffs.length} texts`);
    expect(worst).toBeLessThanOrEqual(TOLERANCE);
  });

  it('restores the input order of a shuffled batch', async () => {
    const order = shuffled(USE_LITE_TEST_TEXTS.map((_, i) => i), rng('use-lite-encoder-order'));
    const rows = await encoder.encode(order.map((i) => USE_LITE_TEST_TEXTS[i]!), { output: 'embedding' });
    order.forEach((i, k) => expect(maxAbsDiff(rows[k]!, embeddings[i]!)).toBeLessThanOrEqual(1e-6));
    // and a row does not depend on its batch: one text alone gives the same vector
    const [alone] = await encoder.encode([USE_LITE_TEST_TEXTS[order[0]!]!], { output: 'embedding' });
    expect(maxAbsDiff(alone!, embeddings[order[0]!]!)).toBeLessThanOrEqual(1e-6);
  });

  it('returns the pooled feature by default, 512 floats per text', async () => {
    const sample = USE_LITE_TEST_TEXTS.slice(0, 5);
    const pooled = await encoder.encode(sample);
    expect(pooled.map((r) => r.length)).toEqual(sample.map(() => encoder.dims.pooled));
    expect(await encoder.encode(sample, { output: 'pooled' })).toEqual(pooled);
    expect(maxAbsDiff(pooled[0]!, embeddings[0]!)).toBeGreaterThan(1e-2); // not the normalised output
  });

  it('clips texts to 128 tokens', () => {
    const long = USE_LITE_TEST_TEXTS.find((t) => encoder.tokenizer.encode(t).length > 200)!;
    expect(encoder.tokenize(long)).toHaveLength(encoder.maxTokens);
    expect(encoder.maxTokens).toBe(128);
  });

  it('rejects an empty text with an InputError naming its index', async () => {
    const err = await encoder.encode(['fine', 'also fine', ''], { output: 'embedding' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InputError);
    expect((err as InputError).field).toBe('texts[2]');
    expect((err as InputError).message).toMatch(/text 2 is empty/);
    await expect(encoder.encode([''])).rejects.toThrow(/field texts\[0\]: text 0 is empty/);
    await expect(encoder.encode(['a', 42 as unknown as string])).rejects.toThrow(/text 1 is not a string/);
    expect(await encoder.encode([])).toEqual([]);
  });

  it('exposes the backbone id and dims', () => {
    expect(encoder.backboneId).toMatch(/^[0-9a-f]{16}$/);
    expect(encoder.dims).toEqual({ pooled: 512, embedding: 512 });
  });

  it('validates its options', async () => {
    await expect(UseLiteEncoder.create({ maxBatchSize: 0 })).rejects.toThrow(/maxBatchSize must be a positive integer/);
    await expect(UseLiteEncoder.create({ intraOpNumThreads: 1.5 })).rejects.toThrow(/intraOpNumThreads must be a positive integer/);
    await expect(encoder.encode(['a'], { output: 'logits' as never })).rejects.toThrow(/output must be 'pooled' or 'embedding'/);
  });
});

describe('batching helpers', () => {
  it('planBatches sorts by length (stable) and cuts runs of at most maxBatchSize', () => {
    expect(planBatches([5, 1, 3, 1, 9, 3, 2], 3)).toEqual([[1, 3, 6], [2, 5, 0], [4]]);
    expect(planBatches([], 4)).toEqual([]);
    expect(() => planBatches([1], 0)).toThrow(/maxBatchSize/);
  });

  it('padTokenBatch pads with id 0 to the longest row and reports the lengths', () => {
    const feed = padTokenBatch([[7, 8], [9], [10, 11, 12]]);
    expect(feed.dims).toEqual([3, 3]);
    expect(Array.from(feed.ids)).toEqual([7n, 8n, 0n, 9n, 0n, 0n, 10n, 11n, 12n]);
    expect(Array.from(feed.lengths)).toEqual([2n, 1n, 3n]);
  });
});

describe('textHash', () => {
  it('is the sha256 hex of the exact UTF-8 text (no normalisation)', () => {
    expect(textHash('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(textHash('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(textHash('caf\u00e9')).not.toBe(textHash('cafe\u0301')); // NFC vs NFD differ
    expect(textHash('caf\u00e9')).toBe('850f7dc43910ff890f8879c0ed26fe697c93a067ad93a7d50f466a7028a9bf4e');
  });
});
