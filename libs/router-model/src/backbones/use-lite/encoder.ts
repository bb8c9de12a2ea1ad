// USE-lite texts -> 512-d vectors through the ONNX graph (graph.ts): tokenize, clip to 128
// tokens, group texts of similar length into padded batches (little wasted padding), run,
// and return the rows in input order.

import { createHash } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { InputError } from '@fugu/core';
import { createSession, type OnnxSession, type SessionOptions } from '../../onnx/session.ts';
import { USE_LITE_GRAPH_CONTRACT, buildUseLiteGraph } from './graph.ts';
import { loadUseLite, type UseLiteBackbone } from './load.ts';
import { USE_LITE_DIMS } from './params.ts';
import type { UseLiteTokenizer } from './tokenizer.ts';

/** `pooled`: the transformer feature the router caches; `embedding`: the package's output. */
export type UseLiteOutput = 'pooled' | 'embedding';

export interface UseLiteEncoderOptions {
  /** Model directory (model.json, shards, vocab.json); default: the installed package. */
  dir?: string;
  /** An already loaded backbone (then `dir` is ignored). */
  backbone?: UseLiteBackbone;
  /** ONNX Runtime threads inside one op; default os.availableParallelism(). */
  intraOpNumThreads?: number;
  /** Most texts per graph run; default 64. */
  maxBatchSize?: number;
  /** Further session options (execution providers, spinning); intraOpNumThreads above wins. */
  session?: Omit<SessionOptions, 'label' | 'intraOpNumThreads'>;
}

export interface EncodeOptions {
  /** Default 'pooled'. */
  output?: UseLiteOutput;
}

export const DEFAULT_MAX_BATCH_SIZE = 64;

/** Feature-cache key of a text: sha256 (hex) of its exact UTF-8 bytes (no normalisation). */
export function textHash(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/**
 * Indices of the texts grouped into batches: sorted by length (stable, so equal lengths keep
 * input order), then cut into runs of at most `maxBatchSize`. Each batch is padded to its own
 * longest text, so similar lengths share a batch.
 */
export function planBatches(lengths: readonly number[], maxBatchSize: number = DEFAULT_MAX_BATCH_SIZE): number[][] {
  if (!Number.isSafeInteger(maxBatchSize) || maxBatchSize < 1) throw new InputError(`maxBatchSize must be a positive integer, got ${maxBatchSize}`, { field: 'maxBatchSize' });
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[a]! - lengths[b]! || a - b);
  const batches: number[][] = [];
  for (let i = 0; i < order.length; i += maxBatchSize) batches.push(order.slice(i, i + maxBatchSize));
  return batches;
}

/** The graph's feeds for a batch of token id lists (already clipped): ids [B, T] padded with 0, lengths [B]. */
export function padTokenBatch(batch: ReadonlyArray<ArrayLike<number>>): { ids: BigInt64Array; lengths: BigInt64Array; dims: [number, number] } {
  const B = batch.length;
  const T = Math.max(1, ...batch.map((x) => x.length));
  const ids = new BigInt64Array(B * T); // 0 = a valid id (the unknown piece) at padding
  const lengths = new BigInt64Array(B);
  batch.forEach((tokens, b) => {
    for (let p = 0; p < tokens.length; p++) ids[b * T + p] = BigInt(tokens[p]!);
    lengths[b] = BigInt(tokens.length);
  });
  return { ids, lengths, dims: [B, T] };
}

/** USE-lite on ONNX Runtime: create once (`UseLiteEncoder.create`), then `encode` any number of batches. */
export class UseLiteEncoder {
  /** Identifies the weights + vocabulary (sha256 prefix); part of the feature-cache key. */
  readonly backboneId: string;
  readonly dims: { readonly pooled: number; readonly embedding: number } = { pooled: USE_LITE_DIMS.modelDim, embedding: USE_LITE_DIMS.outputDim };
  /** Tokens past this many are dropped (as the package does). */
  readonly maxTokens: number = USE_LITE_DIMS.maxSeqLen;
  readonly maxBatchSize: number;
  readonly tokenizer: UseLiteTokenizer;
  private readonly session: OnnxSession;

  private constructor(backbone: UseLiteBackbone, session: OnnxSession, maxBatchSize: number) {
    this.backboneId = backbone.backboneId;
    this.tokenizer = backbone.tokenizer;
    this.session = session;
    this.maxBatchSize = maxBatchSize;
  }

  /** Loads the model (once), builds the graph and opens an ONNX Runtime session. */
  static async create(opts: UseLiteEncoderOptions = {}): Promise<UseLiteEncoder> {
    const maxBatchSize = opts.maxBatchSize ?? DEFAULT_MAX_BATCH_SIZE;
    if (!Number.isSafeInteger(maxBatchSize) || maxBatchSize < 1) throw new InputError(`maxBatchSize must be a positive integer, got ${maxBatchSize}`, { field: 'maxBatchSize' });
    const threads = opts.intraOpNumThreads ?? availableParallelism();
    if (!Number.isSafeInteger(threads) || threads < 1) throw new InputError(`intraOpNumThreads must be a positive integer, got ${threads}`, { field: 'intraOpNumThreads' });
    const backbone = opts.backbone ?? (await loadUseLite(opts.dir));
    const graph = buildUseLiteGraph(backbone.params, { metadata: { backbone: 'use-lite', backbone_id: backbone.backboneId } });
    const session = await createSession(graph, { ...opts.session, intraOpNumThreads: threads, label: `USE-lite ONNX graph (${backbone.backboneId})` });
    session.checkContract(USE_LITE_GRAPH_CONTRACT);
    return new UseLiteEncoder(backbone, session, maxBatchSize);
  }

  /** Token ids of one text, clipped to `maxTokens`. */
  tokenize(text: string): Int32Array {
    return this.tokenizer.encode(text).subarray(0, this.maxTokens);
  }

  /**
   * One vector per text, in input order (`dims.pooled` or `dims.embedding` floats each).
   * Throws an InputError naming the index of the first text that is not a string or has no tokens.
   */
  async encode(texts: readonly string[], opts: EncodeOptions = {}): Promise<Float32Array[]> {
    const tokens = texts.map((text, i) => {
      if (typeof text !== 'string') throw new InputError(`text ${i} is not a string (${typeof text})`, { field: `texts[${i}]` });
      return this.tokenize(text);
    });
    return this.encodeTokens(tokens, opts);
  }

  /**
   * `encode` for texts already tokenized (`tokenize`: clipped to maxTokens), so a caller that
   * needed the tokens first does not tokenize twice. Throws an InputError naming the first empty one.
   */
  async encodeTokens(tokens: readonly Int32Array[], opts: EncodeOptions = {}): Promise<Float32Array[]> {
    const output = opts.output ?? 'pooled';
    if (output !== 'pooled' && output !== 'embedding') throw new InputError(`output must be 'pooled' or 'embedding', got ${String(output)}`, { field: 'output' });
    tokens.forEach((ids, i) => {
      if (ids.length === 0) throw new InputError(`text ${i} is empty: it has no tokens to encode`, { field: `texts[${i}]` });
      if (ids.length > this.maxTokens) throw new InputError(`text ${i} has ${ids.length} tokens, more than ${this.maxTokens} (clip with tokenize)`, { field: `texts[${i}]` });
    });

    const width = this.dims[output];
    const result: Float32Array[] = new Array<Float32Array>(tokens.length);
    for (const batch of planBatches(tokens.map((t) => t.length), this.maxBatchSize)) {
      const feed = padTokenBatch(batch.map((i) => tokens[i]!));
      const out = await this.session.run({ ids: { data: feed.ids, dims: feed.dims }, lengths: { data: feed.lengths, dims: [feed.dims[0]] } }, [output]);
      const rows = out[output]!.data;
      batch.forEach((i, k) => {
        result[i] = rows.slice(k * width, (k + 1) * width);
      });
    }
    return result;
  }

  /** Frees the ONNX Runtime session. */
  release(): Promise<void> {
    return this.session.release();
  }
}
