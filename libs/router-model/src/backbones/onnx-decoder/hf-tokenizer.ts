// A reader of Hugging Face `tokenizer.json` (+ `tokenizer_config.json`) behind the `Tokenizer`
// seam, on @huggingface/tokenizers (pure JS: BPE incl. byte-level, WordPiece, Unigram), and
// `loadDecoderBackboneFromDir`, which opens an export directory of infra/export/export_decoder.py
// (model.onnx + tokenizer files + reference.json) and checks the token ids against the export's.
//
// Special tokens. The export feeds torch `tokenizer(text)["input_ids"]`, i.e. HF's default
// add_special_tokens=True, and this reader gives the same ids:
//   - when tokenizer_config.json sets `add_bos_token` and/or `add_eos_token` (Llama, Gemma,
//     Qwen configs do), those flags decide, as transformers' `update_post_processor` makes them:
//     [bos if add_bos_token] + tokens + [eos if add_eos_token] (Qwen3: add_bos_token false, so
//     no special token at all);
//   - otherwise the post-processor of tokenizer.json decides (what the Rust tokenizer runs with
//     add_special_tokens=True): a Llama-3 TemplateProcessing adds <|begin_of_text|>, the
//     ByteLevel post-processor of GPT-2/Qwen adds nothing.
// `addSpecialTokens: false` gives the bare tokens whatever the files say. Since the export's
// `save_pretrained` writes the post-processor transformers actually ran, the two rules agree on
// exported directories; reference.json checks it end to end.

import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { InputError } from '@fugu/core';
import { Tokenizer as HfJsTokenizer } from '@huggingface/tokenizers';
import { readModelMetadata } from './contract.ts';
import { loadDecoderBackbone, type DecoderBackbone, type LoadDecoderOptions } from './loader.ts';
import type { Tokenizer } from './tokenizer.ts';

export const TOKENIZER_JSON = 'tokenizer.json';
export const TOKENIZER_CONFIG_JSON = 'tokenizer_config.json';
export const DECODER_MODEL_FILE = 'model.onnx';
export const DECODER_REFERENCE_FILE = 'reference.json';

/** The tokenizer files in memory: parsed JSON objects, or their text. */
export interface HfTokenizerFiles {
  tokenizerJson: unknown;
  tokenizerConfig?: unknown;
}

export interface LoadHfTokenizerOptions {
  /** The vocabulary's id (the HF model id; compared with the model's `tokenizer` metadata).
   *  Default: tokenizer_config.json `name_or_path` when present, else unset (no check). */
  id?: string;
  /** false: never add special tokens. Default: as HF `tokenizer(text)` (see the file comment). */
  addSpecialTokens?: boolean;
}

/** How special tokens are added: from the config's add_bos/eos_token flags, by the
 *  tokenizer.json post-processor, or not at all. */
export type SpecialTokenMode = 'config' | 'post-processor' | 'none';

type Json = Record<string, unknown>;

function isObject(x: unknown): x is Json {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

function parseJson(source: unknown, file: string): Json {
  let value = source;
  if (typeof source === 'string') {
    try {
      value = JSON.parse(source);
    } catch (err) {
      throw new InputError(`not valid JSON (${(err as Error).message})`, { file }, { cause: err });
    }
  }
  if (!isObject(value)) throw new InputError('expected a JSON object at the top level', { file });
  return value;
}

/** A special token of tokenizer_config.json: a string, or a serialized AddedToken `{ content }`. */
function tokenContent(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (isObject(value) && typeof value.content === 'string') return value.content;
  return undefined;
}

/** The HF model id a tokenizer_config.json names (`name_or_path`; transformers' save_pretrained
 *  usually drops it, hand-made or older files may keep it). */
function configModelId(config: Json): string | undefined {
  return typeof config.name_or_path === 'string' && config.name_or_path !== '' ? config.name_or_path : undefined;
}

export class HfTokenizer implements Tokenizer {
  readonly id: string | undefined;
  /** Largest token id + 1 (model vocabulary and added tokens). */
  readonly vocabSize: number;
  readonly specialTokens: SpecialTokenMode;
  /** Where the files came from (error messages). */
  readonly label: string;
  private readonly tok: HfJsTokenizer;
  private readonly prefix: number[];
  private readonly suffix: number[];

  /** From parsed files; `label` names tokenizer.json in errors (its path when read from disk). */
  constructor(tokenizerJson: unknown, tokenizerConfig: unknown = {}, opts: LoadHfTokenizerOptions & { label?: string; configLabel?: string } = {}) {
    const file = opts.label ?? TOKENIZER_JSON;
    const configFile = opts.configLabel ?? TOKENIZER_CONFIG_JSON;
    this.label = file;
    const json = parseJson(tokenizerJson, file);
    const config = parseJson(tokenizerConfig, configFile);
    if (!isObject(json.model)) throw new InputError('no "model" object (is this a Hugging Face tokenizer.json?)', { file, field: 'model' });
    if (json.added_tokens !== undefined && !Array.isArray(json.added_tokens)) throw new InputError('"added_tokens" must be an array', { file, field: 'added_tokens' });
    // The library requires these keys to exist (null is fine); old or hand-made files may omit them.
    const normalized: Json = { normalizer: null, pre_tokenizer: null, post_processor: null, decoder: null, ...json, added_tokens: json.added_tokens ?? [] };
    try {
      this.tok = new HfJsTokenizer(normalized, config);
    } catch (err) {
      throw new InputError(`cannot build the tokenizer: ${(err as Error).message}`, { file }, { cause: err });
    }
    let maxId = -1;
    for (const id of this.tok.get_vocab(true).values()) if (id > maxId) maxId = id;
    this.vocabSize = maxId + 1;

    this.id = opts.id ?? configModelId(config);

    const flag = (key: string): boolean | undefined => {
      const v = config[key];
      if (v === undefined || v === null) return undefined;
      if (typeof v !== 'boolean') throw new InputError(`${key} must be true or false, got ${JSON.stringify(v)}`, { file: configFile, field: key });
      return v;
    };
    const addBos = flag('add_bos_token');
    const addEos = flag('add_eos_token');
    this.prefix = [];
    this.suffix = [];
    if (opts.addSpecialTokens === false) this.specialTokens = 'none';
    else if (addBos !== undefined || addEos !== undefined) {
      this.specialTokens = 'config';
      if (addBos) this.prefix.push(this.specialId(config, 'bos_token', configFile));
      if (addEos) this.suffix.push(this.specialId(config, 'eos_token', configFile));
    } else this.specialTokens = 'post-processor';
  }

  /** Token ids of one text, as HF `tokenizer(text)["input_ids"]` (see the file comment). */
  encode(text: string): Int32Array {
    const { ids, tokens } = this.tok.encode(text, { add_special_tokens: this.specialTokens === 'post-processor' });
    const out = new Int32Array(this.prefix.length + ids.length + this.suffix.length);
    out.set(this.prefix, 0);
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      // The library yields undefined for a piece outside the vocabulary when the model has no unk token.
      if (typeof id !== 'number' || !Number.isInteger(id)) {
        throw new InputError(`token ${JSON.stringify(tokens[i])} of the text is not in the vocabulary and the model has no unk_token`, { file: this.label, field: 'model.vocab' });
      }
      out[this.prefix.length + i] = id;
    }
    out.set(this.suffix, this.prefix.length + ids.length);
    return out;
  }

  /** Text of token ids (special tokens kept). */
  decode(ids: ArrayLike<number>): string {
    if (ids.length === 0) return '';
    return this.tok.decode(Array.from(ids), { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  }

  /** Id of a token string (vocabulary or added token), undefined when absent. */
  tokenToId(token: string): number | undefined {
    return this.tok.token_to_id(token);
  }

  private specialId(config: Json, key: 'bos_token' | 'eos_token', configFile: string): number {
    const content = tokenContent(config[key]);
    if (content === undefined) throw new InputError(`add_${key} is true but ${key} is not set`, { file: configFile, field: key });
    const id = this.tok.token_to_id(content);
    if (id === undefined) throw new InputError(`${key} ${JSON.stringify(content)} is not in the vocabulary of ${this.label}`, { file: configFile, field: key });
    return id;
  }
}

async function readJsonFile(path: string, required: boolean): Promise<Json | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' && !required) return undefined;
    throw new InputError(`cannot read it (${(err as Error).message})`, { file: path }, { cause: err });
  }
  return parseJson(text, path);
}

/**
 * A `Tokenizer` from Hugging Face tokenizer files: a directory holding `tokenizer.json` (and
 * optionally `tokenizer_config.json`), or the files' contents. Bad files throw an InputError
 * naming the file.
 */
export async function loadHfTokenizer(source: string | HfTokenizerFiles, opts: LoadHfTokenizerOptions = {}): Promise<HfTokenizer> {
  if (typeof source === 'string') {
    const files = await readTokenizerFiles(source);
    return new HfTokenizer(files.json, files.config, { ...opts, label: files.jsonPath, configLabel: files.configPath });
  }
  if (!isObject(source) || source.tokenizerJson === undefined) throw new InputError('loadHfTokenizer: give a directory or { tokenizerJson, tokenizerConfig? }', { field: 'tokenizerJson' });
  return new HfTokenizer(source.tokenizerJson, source.tokenizerConfig ?? {}, opts);
}

async function readTokenizerFiles(dir: string): Promise<{ json: Json; config: Json; jsonPath: string; configPath: string }> {
  const jsonPath = join(dir, TOKENIZER_JSON);
  if (!existsSync(jsonPath)) {
    throw new InputError(`no ${TOKENIZER_JSON} in ${dir} (the export writes it next to model.onnx; a model with only a slow tokenizer has none)`, { file: jsonPath });
  }
  const configPath = join(dir, TOKENIZER_CONFIG_JSON);
  const json = (await readJsonFile(jsonPath, true))!;
  const config = (await readJsonFile(configPath, false)) ?? {};
  return { json, config, jsonPath, configPath };
}

// --- export directories ------------------------------------------------------------------------

export interface LoadDecoderFromDirOptions extends Omit<LoadDecoderOptions, 'tokenizer'> {
  /** Tokenizer id; default tokenizer_config.json `name_or_path`, else the model's `tokenizer`
   *  metadata (the export writes the files next to the model it belongs to). */
  tokenizerId?: string;
  addSpecialTokens?: boolean;
  /** Check reference.json when present (default true). */
  checkReference?: boolean;
}

/** The token ids of reference.json (its `hidden` is not read here). */
export interface DecoderReference {
  texts: string[];
  inputIds: number[][];
}

function parseReference(json: Json, file: string): DecoderReference {
  const { texts, input_ids: ids } = json;
  if (!Array.isArray(texts) || !texts.every((t) => typeof t === 'string')) throw new InputError('"texts" must be an array of strings', { file, field: 'texts' });
  if (!Array.isArray(ids) || ids.length !== texts.length) throw new InputError(`"input_ids" must be an array with one id list per text (${texts.length})`, { file, field: 'input_ids' });
  ids.forEach((row, i) => {
    if (!Array.isArray(row) || !row.every((x) => Number.isSafeInteger(x))) throw new InputError(`input_ids[${i}] must be an array of integers`, { file, field: `input_ids[${i}]` });
  });
  return { texts: texts as string[], inputIds: ids as number[][] };
}

function preview(text: string): string {
  return JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text);
}

/**
 * Checks that `tokenizer` gives the export's token ids for the reference sentences (each
 * truncated to `maxLen`, as the export did). A mismatch throws an InputError naming the first
 * differing sentence and token position.
 */
export function checkReferenceIds(tokenizer: Tokenizer, reference: DecoderReference, maxLen: number, file = DECODER_REFERENCE_FILE): void {
  reference.texts.forEach((text, i) => {
    const got = Array.from(tokenizer.encode(text)).slice(0, maxLen);
    const want = reference.inputIds[i]!;
    const n = Math.min(got.length, want.length);
    let p = 0;
    while (p < n && got[p] === want[p]) p++;
    if (p === n && got.length === want.length) return;
    const detail = p < n ? `the tokenizer gives id ${got[p]}, the export ${want[p]}` : `the tokenizer gives ${got.length} tokens, the export ${want.length}`;
    throw new InputError(`sentence ${i} ${preview(text)} differs from the export at token ${p}: ${detail} (tokenizer files and model do not match, or the reader differs from HF)`, {
      file,
      field: `input_ids[${i}][${p}]`,
    });
  });
}

/**
 * Opens an export directory of infra/export/export_decoder.py: `model.onnx` (by path, so its
 * external data file is found), the HF tokenizer files, and, when present, `reference.json`,
 * whose token ids must be reproduced exactly.
 */
export async function loadDecoderBackboneFromDir(dir: string, opts: LoadDecoderFromDirOptions = {}): Promise<DecoderBackbone> {
  const { tokenizerId, addSpecialTokens, checkReference = true, ...loadOpts } = opts;
  const modelPath = join(dir, DECODER_MODEL_FILE);
  if (!existsSync(modelPath)) throw new InputError(`no ${DECODER_MODEL_FILE} in ${dir}`, { file: modelPath });
  // The graph file is small (weights are external data), so reading its metadata up front is
  // cheap; it names the tokenizer the files next to it belong to.
  const metaTokenizer = readModelMetadata(new Uint8Array(await readFile(modelPath))).tokenizer;
  const files = await readTokenizerFiles(dir);
  const id = tokenizerId ?? configModelId(files.config) ?? metaTokenizer;
  const tokenizer = new HfTokenizer(files.json, files.config, {
    label: files.jsonPath,
    configLabel: files.configPath,
    ...(id === undefined ? {} : { id }),
    ...(addSpecialTokens === undefined ? {} : { addSpecialTokens }),
  });

  const backbone = await loadDecoderBackbone(modelPath, { ...loadOpts, tokenizer });
  try {
    const refPath = join(dir, DECODER_REFERENCE_FILE);
    if (checkReference) {
      const json = await readJsonFile(refPath, false);
      if (json) checkReferenceIds(tokenizer, parseReference(json, refPath), backbone.metadata.maxLen, refPath);
    }
    return backbone;
  } catch (err) {
    await backbone.release();
    throw err;
  }
}
