// The feature cache on real Postgres with the real USE-lite encoder: computed once per
// (backbone, text), then read back bit-exact without running the backbone.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { UseLiteEncoder } from '@fugu/router-model';
import { cachedFeatures, type FeatureEncoder } from '@fugu/training';

let t: TestDatabase;
let encoder: UseLiteEncoder;
beforeAll(async () => {
  t = await createTestDatabase();
  encoder = await UseLiteEncoder.create();
});
afterAll(async () => {
  encoder?.release();
  await t?.drop();
});

function counting(e: FeatureEncoder): FeatureEncoder & { texts: string[] } {
  const texts: string[] = [];
  return { backboneId: e.backboneId, texts, encode: (xs) => { texts.push(...xs); return e.encode(xs); } };
}

describe('feature cache', () => {
  it('encodes each distinct text once per backbone and serves it from Postgres afterwards', async () => {
    const texts = ['What is 2 + 2?', 'Translate "chat" into English.', 'What is 2 + 2?', 'def f(x): return x * 2'];
    const first = counting(encoder);
    const a = await cachedFeatures(t.db, first, texts, { chunkSize: 2 });
    expect(first.texts).toEqual(['What is 2 + 2?', 'Translate "chat" into English.', 'def f(x): return x * 2']);
    expect(a.stats).toEqual({ texts: 4, cached: 0, computed: 3 });
    expect(a.features[0]).toEqual(a.features[2]);
    // the same text encoded alone: equal up to float summation order (batch padding)
    const direct = (await encoder.encode([texts[1]!]))[0]!;
    expect(Math.max(...a.features[1]!.map((v, k) => Math.abs(v - direct[k]!)))).toBeLessThan(1e-4);

    const second = counting(encoder);
    const b = await cachedFeatures(t.db, second, [...texts, 'a new question'], {});
    expect(second.texts).toEqual(['a new question']);
    expect(b.stats).toEqual({ texts: 5, cached: 3, computed: 1 });
    for (let i = 0; i < 4; i++) expect(b.features[i]).toEqual(a.features[i]);

    // another backbone id shares nothing
    const other = counting({ backboneId: 'other-backbone', encode: (xs) => encoder.encode(xs) });
    await cachedFeatures(t.db, other, texts.slice(0, 1));
    expect(other.texts).toHaveLength(1);
  });
});
