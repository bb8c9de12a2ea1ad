// The decoder-backbone ONNX contract (the full text is infra/export/README.md, "The contract"):
// what an exported Hugging Face decoder LM, or the tiny test decoder, must look like for
// `loadDecoderBackbone` to use it.
//
//   input_ids       int64   [B, T]  token ids, RIGHT-padded (valid tokens first, then padding)
//   attention_mask  int64   [B, T]  1 on the valid positions 0 .. n_b-1, 0 after; n_b >= 1
//   z_<name>        float32 [R]     one per SVF-adapted matrix of layer L (z = 1: unadapted)
//   hidden          float32 [B, H]  residual stream after decoder layer L (1-based, no final
//                                   norm) at the decision position p_b = max(min(n_b, max_len) - 2, 0):
//                                   the PENULTIMATE token of the prefix truncated to max_len
//
// Right padding: with causal attention a valid position never attends to a later (padding)
// one, so padding cannot change a valid row, and positions stay 0 .. n-1 without position ids.
// Metadata (ModelProto.metadata_props, all strings) is parsed by `parseDecoderMetadata`.

import { InputError } from '@fugu/core';
import { asBytes, asString, readFields } from '../../onnx/protobuf.ts';
import type { Contract, ContractEntry } from '../../onnx/session.ts';

/** Value of the `contract` metadata key for this version of the contract. */
export const DECODER_CONTRACT_VERSION = 'fugu-decoder-backbone/1';

/** Inputs and output every decoder backbone has (the `z_<name>` inputs depend on its metadata). */
export const DECODER_BACKBONE_CONTRACT = {
  inputs: [
    { name: 'input_ids', dtype: 'int64', shape: ['B', 'T'] },
    { name: 'attention_mask', dtype: 'int64', shape: ['B', 'T'] },
  ],
  outputs: [{ name: 'hidden', dtype: 'float32', shape: ['B', null] }],
} as const satisfies Contract;

/** The padding side the contract fixes. */
export const DECODER_PADDING_SIDE = 'right';

/** Metadata keys that must be present (values are strings in the ONNX file). */
export const DECODER_REQUIRED_METADATA = [
  'contract', // DECODER_CONTRACT_VERSION
  'backbone_kind', // e.g. 'qwen3' (HF config.model_type) or 'fugu-tiny-decoder'
  'hidden_size', // H
  'layer', // L, 1-based decoder layer whose output is `hidden`
  'max_len', // prefix length: tokens past it are dropped before the decision position is taken
  'vocab_size', // token ids must be in [0, vocab_size)
  'adapted', // JSON [{"name": "q_proj", "rank": 1024, ...}], [] when nothing is adapted
  'tokenizer', // tokenizer id: the HF model id whose tokenizer.json sits next to the .onnx
] as const;

/** One SVF-adapted matrix of layer L: its z input is `z_<name>`, float32 [rank]. */
export interface AdaptedMatrix {
  name: string;
  rank: number;
  /** The graph input that carries its z. */
  input: string;
}

export interface DecoderMetadata {
  contract: string;
  backboneKind: string;
  hiddenSize: number;
  layer: number;
  maxLen: number;
  vocabSize: number;
  adapted: AdaptedMatrix[];
  tokenizer: string;
  /** Id written at padding positions (`pad_token_id`, default 0; any valid id works, see above). */
  padTokenId: number;
  /** Every key/value as stored, including optional ones (source_model, num_layers, ...). */
  raw: Record<string, string>;
}

/** The graph input name that carries the z of adapted matrix `name`. */
export function svfInputName(name: string): string {
  return `z_${name}`;
}

/**
 * ModelProto.metadata_props of an ONNX file, read from the top-level fields only (the graph's
 * bytes are skipped, not parsed, so this is cheap even for a large model).
 */
export function readModelMetadata(bytes: Uint8Array): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of readFields(bytes)) {
    if (f.field !== 14) continue;
    let key = '';
    let value = '';
    for (const e of readFields(asBytes(f))) {
      if (e.field === 1) key = asString(e);
      else if (e.field === 2) value = asString(e);
    }
    out[key] = value;
  }
  return out;
}

/** Checks and types the metadata; an InputError names the file and the missing or bad key. */
export function parseDecoderMetadata(raw: Record<string, string>, label = 'decoder backbone'): DecoderMetadata {
  const bad = (key: string, message: string): InputError => new InputError(`ONNX metadata ${key}: ${message}`, { file: label, field: `metadata.${key}` });
  const missing = DECODER_REQUIRED_METADATA.filter((k) => raw[k] === undefined || raw[k] === '');
  if (missing.length > 0) {
    throw new InputError(`ONNX metadata is missing key${missing.length > 1 ? 's' : ''} ${missing.join(', ')} (a decoder backbone needs ${DECODER_REQUIRED_METADATA.join(', ')}; see infra/export/README.md)`, {
      file: label,
      field: `metadata.${missing[0]}`,
    });
  }
  const get = (k: (typeof DECODER_REQUIRED_METADATA)[number]): string => raw[k]!;
  const positiveInt = (key: string, text: string, min = 1): number => {
    const v = Number(text);
    if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(v) || v < min) throw bad(key, `expected an integer >= ${min}, got ${JSON.stringify(text)}`);
    return v;
  };

  if (get('contract') !== DECODER_CONTRACT_VERSION) throw bad('contract', `expected ${DECODER_CONTRACT_VERSION}, got ${JSON.stringify(get('contract'))}`);
  const padding = raw.padding_side;
  if (padding !== undefined && padding !== DECODER_PADDING_SIDE) throw bad('padding_side', `the contract pads on the ${DECODER_PADDING_SIDE}, got ${JSON.stringify(padding)}`);
  const vocabSize = positiveInt('vocab_size', get('vocab_size'));
  const padTokenId = raw.pad_token_id === undefined ? 0 : positiveInt('pad_token_id', raw.pad_token_id, 0);
  if (padTokenId >= vocabSize) throw bad('pad_token_id', `${padTokenId} is not below vocab_size ${vocabSize}`);

  return {
    contract: get('contract'),
    backboneKind: get('backbone_kind'),
    hiddenSize: positiveInt('hidden_size', get('hidden_size')),
    layer: positiveInt('layer', get('layer')),
    maxLen: positiveInt('max_len', get('max_len'), 2),
    vocabSize,
    adapted: parseAdapted(get('adapted'), bad),
    tokenizer: get('tokenizer'),
    padTokenId,
    raw: { ...raw },
  };
}

function parseAdapted(text: string, bad: (key: string, message: string) => InputError): AdaptedMatrix[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw bad('adapted', `not JSON: ${JSON.stringify(text.slice(0, 80))}`);
  }
  if (!Array.isArray(parsed)) throw bad('adapted', 'expected a JSON array of {"name", "rank"}');
  const seen = new Set<string>();
  return parsed.map((entry: unknown, i): AdaptedMatrix => {
    const e = entry as { name?: unknown; rank?: unknown } | null;
    if (typeof e !== 'object' || e === null) throw bad('adapted', `entry ${i} is not an object`);
    if (typeof e.name !== 'string' || !/^[A-Za-z0-9_.]+$/.test(e.name)) throw bad('adapted', `entry ${i}: name must be a non-empty string of [A-Za-z0-9_.], got ${JSON.stringify(e.name)}`);
    if (typeof e.rank !== 'number' || !Number.isSafeInteger(e.rank) || e.rank < 1) throw bad('adapted', `entry ${i} (${e.name}): rank must be a positive integer, got ${JSON.stringify(e.rank)}`);
    if (seen.has(e.name)) throw bad('adapted', `entry ${i}: ${e.name} is listed twice`);
    seen.add(e.name);
    return { name: e.name, rank: e.rank, input: svfInputName(e.name) };
  });
}

/** The full contract of one model: the fixed part plus a `z_<name>` float32 [rank] input per adapted matrix. */
export function decoderContractFor(meta: Pick<DecoderMetadata, 'hiddenSize' | 'adapted'>): Contract {
  const zInputs: ContractEntry[] = meta.adapted.map((a) => ({ name: a.input, dtype: 'float32', shape: [a.rank] }));
  return {
    inputs: [...DECODER_BACKBONE_CONTRACT.inputs, ...zInputs],
    outputs: [{ name: 'hidden', dtype: 'float32', shape: ['B', meta.hiddenSize] }],
  };
}
