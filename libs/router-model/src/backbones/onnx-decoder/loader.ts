// Loads any ONNX decoder backbone that meets the contract (contract.ts, infra/export/README.md):
// checks inputs/outputs (ContractError naming what is missing), reads and validates the metadata
// (InputError naming the key), then encodes texts: tokenize, truncate to max_len, right-pad
// batches of similar length, run with the z of each adapted matrix, return rows in input order.

import { readFile } from 'node:fs/promises';
import { InputError } from '@fugu/core';
import { createSession, type OnnxSession, type SessionOptions, type Feed } from '../../onnx/session.ts';
import { planBatches } from '../use-lite/encoder.ts';
import { DECODER_BACKBONE_CONTRACT, decoderContractFor, parseDecoderMetadata, readModelMetadata, type AdaptedMatrix, type DecoderMetadata } from './contract.ts';
import type { Tokenizer } from './tokenizer.ts';

export interface LoadDecoderOptions {
  tokenizer: Tokenizer;
  /** Default ['cpu']; ['cuda', 'cpu'] with a CUDA build of ONNX Runtime (see infra/export/README.md). */
  executionProviders?: SessionOptions['executionProviders'];
  intraOpNumThreads?: number;
  /** Most texts per run; default 16. */
  maxBatchSize?: number;
  /** Names the model in errors; default the path, or 'decoder backbone'. */
  label?: string;
}

/** z per adapted matrix name (each of its rank); names left out run at z = 1 (unadapted). */
export type DecoderZ = Readonly<Record<string, ArrayLike<number>>>;

export const DEFAULT_DECODER_BATCH_SIZE = 16;

export class DecoderBackbone {
  readonly hiddenSize: number;
  readonly adapted: readonly AdaptedMatrix[];
  readonly metadata: DecoderMetadata;
  readonly tokenizer: Tokenizer;
  readonly maxBatchSize: number;
  readonly label: string;
  private readonly session: OnnxSession;
  private readonly ones: Map<string, Float32Array>;

  constructor(session: OnnxSession, metadata: DecoderMetadata, tokenizer: Tokenizer, maxBatchSize: number) {
    this.session = session;
    this.label = session.label;
    this.metadata = metadata;
    this.hiddenSize = metadata.hiddenSize;
    this.adapted = metadata.adapted;
    this.tokenizer = tokenizer;
    this.maxBatchSize = maxBatchSize;
    this.ones = new Map(metadata.adapted.map((a) => [a.name, new Float32Array(a.rank).fill(1)]));
  }

  /** Token ids of one text, truncated to the model's prefix length (the first max_len tokens). */
  tokenize(text: string, index = 0): Int32Array {
    const ids = Int32Array.from(this.tokenizer.encode(text));
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (!(id >= 0 && id < this.metadata.vocabSize)) {
        throw new InputError(`text ${index}: the tokenizer gave id ${id} at token ${i}, outside the model's vocabulary [0, ${this.metadata.vocabSize})`, { field: `texts[${index}]` });
      }
    }
    return ids.subarray(0, this.metadata.maxLen);
  }

  /** z = 1 for every adapted matrix (fresh arrays). */
  unitZ(): Record<string, Float32Array> {
    return Object.fromEntries(this.adapted.map((a) => [a.name, new Float32Array(a.rank).fill(1)]));
  }

  /**
   * The hidden state at the decision position for each text (`hiddenSize` floats each, input
   * order). `z` gives the SVF vectors by adapted-matrix name; missing ones are 1.
   */
  async encode(texts: readonly string[], z: DecoderZ = {}): Promise<Float32Array[]> {
    const zFeeds = this.zFeeds(z);
    const tokens = texts.map((text, i) => {
      if (typeof text !== 'string') throw new InputError(`text ${i} is not a string (${typeof text})`, { field: `texts[${i}]` });
      const ids = this.tokenize(text, i);
      if (ids.length === 0) throw new InputError(`text ${i} is empty: it has no tokens to encode`, { field: `texts[${i}]` });
      return ids;
    });

    const H = this.hiddenSize;
    const result = new Array<Float32Array>(texts.length);
    for (const batch of planBatches(tokens.map((t) => t.length), this.maxBatchSize)) {
      const { ids, mask, dims } = padRight(batch.map((i) => tokens[i]!), this.metadata.padTokenId);
      const out = await this.session.run({ input_ids: { data: ids, dims }, attention_mask: { data: mask, dims }, ...zFeeds }, ['hidden']);
      const hidden = out.hidden!;
      if (hidden.dims.length !== 2 || hidden.dims[0] !== batch.length || hidden.dims[1] !== H) {
        throw new InputError(`output hidden has shape [${hidden.dims.join(', ')}], expected [${batch.length}, ${H}] (metadata hidden_size ${H})`, { file: this.label });
      }
      batch.forEach((i, k) => {
        result[i] = hidden.data.slice(k * H, (k + 1) * H);
      });
    }
    return result;
  }

  release(): Promise<void> {
    return this.session.release();
  }

  private zFeeds(z: DecoderZ): Record<string, Feed> {
    for (const name of Object.keys(z)) {
      if (!this.ones.has(name)) throw new InputError(`z.${name}: not an adapted matrix of this model (adapted: ${this.adapted.map((a) => a.name).join(', ') || 'none'})`, { field: `z.${name}` });
    }
    const feeds: Record<string, Feed> = {};
    for (const a of this.adapted) {
      const given = z[a.name];
      let data = this.ones.get(a.name)!;
      if (given !== undefined) {
        if (given.length !== a.rank) throw new InputError(`z.${a.name}: expected ${a.rank} values (its rank), got ${given.length}`, { field: `z.${a.name}` });
        data = Float32Array.from(given);
        const bad = data.findIndex((v) => !Number.isFinite(v));
        if (bad >= 0) throw new InputError(`z.${a.name}[${bad}] is not finite (${given[bad]})`, { field: `z.${a.name}` });
      }
      feeds[a.input] = { data, dims: [a.rank] };
    }
    return feeds;
  }
}

/** Right-padded feeds for token id lists (already truncated): ids [B, T] (pad id after the valid
 *  tokens) and attention_mask [B, T] (1 then 0), T the longest list. */
export function padRight(batch: ReadonlyArray<ArrayLike<number>>, padTokenId = 0): { ids: BigInt64Array; mask: BigInt64Array; dims: [number, number] } {
  const B = batch.length;
  const T = Math.max(1, ...batch.map((x) => x.length));
  const ids = new BigInt64Array(B * T).fill(BigInt(padTokenId));
  const mask = new BigInt64Array(B * T);
  batch.forEach((tokens, b) => {
    for (let p = 0; p < tokens.length; p++) {
      ids[b * T + p] = BigInt(tokens[p]!);
      mask[b * T + p] = 1n;
    }
  });
  return { ids, mask, dims: [B, T] };
}

/**
 * Opens an ONNX decoder backbone from its bytes or its .onnx path (a path keeps external weight
 * files, `model.onnx.data`, resolvable). Throws a ContractError naming a missing or mismatched
 * input/output, an InputError naming a missing or bad metadata key.
 */
export async function loadDecoderBackbone(model: Uint8Array | string, opts: LoadDecoderOptions): Promise<DecoderBackbone> {
  const label = opts.label ?? (typeof model === 'string' ? model : 'decoder backbone');
  if (!opts.tokenizer || typeof opts.tokenizer.encode !== 'function') throw new InputError('loadDecoderBackbone: a tokenizer with encode(text) is required', { field: 'tokenizer' });
  const maxBatchSize = opts.maxBatchSize ?? DEFAULT_DECODER_BATCH_SIZE;
  if (!Number.isSafeInteger(maxBatchSize) || maxBatchSize < 1) throw new InputError(`maxBatchSize must be a positive integer, got ${maxBatchSize}`, { field: 'maxBatchSize' });

  const bytes = typeof model === 'string' ? new Uint8Array(await readFile(model)) : model;
  const sessionOptions: SessionOptions = { label };
  if (opts.executionProviders) sessionOptions.executionProviders = opts.executionProviders;
  if (opts.intraOpNumThreads !== undefined) sessionOptions.intraOpNumThreads = opts.intraOpNumThreads;
  const session = await createSession(typeof model === 'string' ? model : bytes, sessionOptions);
  try {
    // The fixed inputs/outputs first: a model that is not a decoder backbone at all is told so
    // before its metadata is judged.
    session.checkContract(DECODER_BACKBONE_CONTRACT);
    const metadata = parseDecoderMetadata(readModelMetadata(bytes), label);
    session.checkContract(decoderContractFor(metadata));
    const expected = new Set(['input_ids', 'attention_mask', ...metadata.adapted.map((a) => a.input)]);
    const extra = session.inputNames.filter((n) => !expected.has(n));
    if (extra.length > 0) throw new InputError(`the model has input${extra.length > 1 ? 's' : ''} ${extra.join(', ')} that the contract and its metadata "adapted" do not name`, { file: label, field: 'metadata.adapted' });
    if (opts.tokenizer.id !== undefined && opts.tokenizer.id !== metadata.tokenizer) {
      throw new InputError(`tokenizer ${opts.tokenizer.id} does not match the model's tokenizer ${metadata.tokenizer}`, { file: label, field: 'tokenizer' });
    }
    return new DecoderBackbone(session, metadata, opts.tokenizer, maxBatchSize);
  } catch (err) {
    await session.release();
    throw err;
  }
}
