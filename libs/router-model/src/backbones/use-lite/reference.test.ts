import type { EmbeddingsModel } from '@energetic-ai/embeddings';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadUseLite, type UseLiteBackbone } from './load.ts';
import { loadPackageModel, packageEmbed, packageNode } from './package-oracle.ts';
import { referenceForward, referenceForwardOne, timingSignalTable, type ReferenceOutput } from './reference.ts';
import { USE_LITE_TEST_SENTENCES, USE_LITE_TEST_TEXTS } from './test-sentences.ts';

const TOLERANCE = 1e-5;

let backbone: UseLiteBackbone;
let tfjs: EmbeddingsModel;
let expected: number[][];
let ids: Int32Array[];
let ours: ReferenceOutput[];

beforeAll(async () => {
  [backbone, tfjs] = await Promise.all([loadUseLite(), loadPackageModel()]);
  expected = await packageEmbed(tfjs, USE_LITE_TEST_TEXTS);
  ids = USE_LITE_TEST_TEXTS.map((t) => backbone.tokenizer.encode(t));
  ours = ids.map((x) => referenceForwardOne(backbone.params, x));
});

const maxAbsDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
};

describe('reference forward vs the package (TF.js)', () => {
  it('covers at least 100 varied sentences, some beyond the 128-token clip', () => {
    expect(USE_LITE_TEST_TEXTS.length).toBeGreaterThanOrEqual(100);
    expect(expected).toHaveLength(USE_LITE_TEST_TEXTS.length);
    expect(ids.filter((x) => x.length > 128).length).toBeGreaterThanOrEqual(5);
    expect(ids.some((x) => x.length === 128)).toBe(true);
    expect(new Set(USE_LITE_TEST_SENTENCES.map((s) => s.kind)).size).toBeGreaterThanOrEqual(10);
  });

  it(`matches embed() within ${TOLERANCE} on every sentence`, () => {
    const diffs = ours.map((o, i) => ({ text: USE_LITE_TEST_TEXTS[i], diff: maxAbsDiff(o.embedding, expected[i]!) }));
    expect(diffs.filter((d) => !(d.diff <= TOLERANCE))).toEqual([]);
  });

  it('referenceForward (weight map, batch) gives the same rows as one text at a time', () => {
    const sample = [0, 13, 33];
    const rows = referenceForward(backbone.weights, sample.map((i) => ids[i]!));
    rows.forEach((row, k) => expect(row).toEqual(ours[sample[k]!]!.embedding));
  });

  it('matches the pooled 512-d feature (graph node KonaTransformer/div) on a sample', async () => {
    const sample = [0, 3, 13, 33, 35, 43, 60, 75, 82, 88, 96, 103];
    const pooled = await packageNode(tfjs, sample.map((i) => ids[i]!));
    sample.forEach((i, k) => {
      const mine = ours[i]!.pooled;
      const scale = Math.max(1, ...Array.from(mine, Math.abs));
      expect(maxAbsDiff(mine, pooled[k]!) / scale).toBeLessThan(TOLERANCE);
    });
  });

  it('ignores tokens past position 128 (ClipToMaxLength)', () => {
    const i = ids.findIndex((x) => x.length > 200);
    const clipped = referenceForwardOne(backbone.params, ids[i]!.subarray(0, 128)).embedding;
    expect(clipped).toEqual(ours[i]!.embedding);
  });
});

describe('empty texts (spec.md §9)', () => {
  it('the package drops a trailing empty text, refuses an all-empty batch, and embeds a non-trailing one like the reference', async () => {
    expect(await packageEmbed(tfjs, ['a', ''])).toHaveLength(1);
    await expect(packageEmbed(tfjs, [''])).rejects.toThrow();
    const rows = await packageEmbed(tfjs, ['a', '', 'b']);
    expect(rows).toHaveLength(3);
    const empty = referenceForwardOne(backbone.params, []);
    expect(Array.from(empty.pooled).every((v) => v === 0)).toBe(true);
    expect(maxAbsDiff(empty.embedding, rows[1]!)).toBeLessThanOrEqual(TOLERANCE);
  });
});

describe('timingSignalTable', () => {
  it('is [128, 256] float32: sin of p * inv_timescales, then cos', () => {
    const inv = backbone.params.invTimescales;
    const t = timingSignalTable(inv);
    expect(t.length).toBe(128 * 256);
    expect(Array.from(t.subarray(0, 128)).every((v) => v === 0)).toBe(true);
    expect(Array.from(t.subarray(128, 256)).every((v) => v === 1)).toBe(true);
    expect(t[127 * 256 + 0]).toBe(Math.fround(Math.sin(127)));
    expect(t[5 * 256 + 128 + 3]).toBe(Math.fround(Math.cos(Math.fround(5 * inv[3]!))));
  });
});

describe('referenceForward input checks', () => {
  it('names a token id outside the embedding table', () => {
    expect(() => referenceForwardOne(backbone.params, [5, 8002])).toThrow(/token id 8002 at position 1 is outside \[0, 8002\)/);
  });
});
