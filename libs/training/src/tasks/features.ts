// The feature cache: what precedes the first adapted matrix depends only on the text, so it is
// computed once per (backbone id, text hash) and kept in Postgres (router_features). SFT,
// evaluation and single-step ES read it and never re-run the frozen backbone.
import { getFeatures, putFeatures, type Db } from '@fugu/db';
import { textHash } from '@fugu/router-model';

/** What the cache needs of a backbone: its id and a batch encoder of texts to features. */
export type FeatureEncoder = {
  readonly backboneId: string;
  encode(texts: string[]): Promise<Float32Array[]>;
};

export type FeatureStats = { texts: number; cached: number; computed: number };

/**
 * Features of `texts` in order: read from the cache, the missing ones encoded (in chunks, with
 * progress) and stored. Equal texts are encoded once.
 */
export async function cachedFeatures(
  db: Db,
  encoder: FeatureEncoder,
  texts: readonly string[],
  opts: { chunkSize?: number; onProgress?: (done: number, total: number) => void } = {},
): Promise<{ features: Float32Array[]; stats: FeatureStats }> {
  const hashes = texts.map(textHash);
  const unique = [...new Set(hashes)];
  const found = await getFeatures(db, encoder.backboneId, unique);
  const missing = unique.filter((h) => !found.has(h));
  const textOf = new Map<string, string>();
  hashes.forEach((h, i) => textOf.set(h, texts[i]!));
  const chunk = opts.chunkSize ?? 256;
  for (let i = 0; i < missing.length; i += chunk) {
    const part = missing.slice(i, i + chunk);
    const encoded = await encoder.encode(part.map((h) => textOf.get(h)!));
    await putFeatures(db, encoder.backboneId, part.map((h, j) => ({ textHash: h, data: encoded[j]! })));
    part.forEach((h, j) => found.set(h, encoded[j]!));
    opts.onProgress?.(Math.min(i + chunk, missing.length), missing.length);
  }
  return { features: hashes.map((h) => found.get(h)!), stats: { texts: texts.length, cached: unique.length - missing.length, computed: missing.length } };
}
