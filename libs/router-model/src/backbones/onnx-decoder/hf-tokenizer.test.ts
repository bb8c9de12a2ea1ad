import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { checkReferenceIds, HfTokenizer, loadDecoderBackboneFromDir, loadHfTokenizer } from './hf-tokenizer.ts';
import { buildTinyDecoder, tinyDecoderForward } from './tiny-decoder.ts';

// --- hand-written fixtures ---------------------------------------------------------------------

/** GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the rest to U+0100.. */
function byteChars(): string[] {
  const keep = (b: number): boolean => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  let next = 256;
  return Array.from({ length: 256 }, (_, b) => String.fromCodePoint(keep(b) ? b : next++));
}

// Byte-level BPE: ids 0..255 are the bytes (id = byte value), then the merges' results.
const MERGES: Array<[string, string, string]> = [
  ['h', 'e', 'he'], // 256
  ['l', 'l', 'll'], // 257
  ['he', 'll', 'hell'], // 258
  ['hell', 'o', 'hello'], // 259
  ['Ġ', 'w', 'Ġw'], // 260
  ['o', 'r', 'or'], // 261
  ['Ġw', 'or', 'Ġwor'], // 262
  ['Ġwor', 'l', 'Ġworl'], // 263
  ['Ġworl', 'd', 'Ġworld'], // 264
  ['1', '2', '12'], // 265
];
const ENDOFTEXT = 266;
const IM_START = 267;
const IM_END = 268;
const BEGIN_OF_TEXT = 269;

function special(id: number, content: string): Record<string, unknown> {
  return { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true };
}

function bpeModel(mergeFormat: 'strings' | 'pairs'): Record<string, unknown> {
  const vocab: Record<string, number> = {};
  byteChars().forEach((ch, b) => (vocab[ch] = b));
  MERGES.forEach(([, , out], i) => (vocab[out] = 256 + i));
  const merges = MERGES.map(([a, b]) => (mergeFormat === 'strings' ? `${a} ${b}` : [a, b]));
  return { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges };
}

const BYTE_LEVEL = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };

/** GPT-2 style: ByteLevel pre-tokenizer with its own regex (digit runs stay together). */
function gpt2Json(): Record<string, unknown> {
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [special(ENDOFTEXT, '<|endoftext|>')],
    normalizer: null,
    pre_tokenizer: BYTE_LEVEL,
    post_processor: BYTE_LEVEL,
    decoder: BYTE_LEVEL,
    model: bpeModel('strings'),
  };
}

// Qwen2/Qwen3's split pattern: digits one at a time.
const QWEN_PATTERN = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/** Qwen style: NFC, Split(regex) then ByteLevel without regex, chat special tokens. */
function qwenJson(): Record<string, unknown> {
  const byteLevelNoRegex = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false };
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [special(ENDOFTEXT, '<|endoftext|>'), special(IM_START, '<|im_start|>'), special(IM_END, '<|im_end|>')],
    normalizer: { type: 'NFC' },
    pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Regex: QWEN_PATTERN }, behavior: 'Isolated', invert: false }, byteLevelNoRegex] },
    post_processor: byteLevelNoRegex,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: bpeModel('pairs'),
  };
}
const QWEN_CONFIG = { add_bos_token: false, add_prefix_space: false, bos_token: null, eos_token: '<|im_end|>', pad_token: '<|endoftext|>', model_max_length: 131072, tokenizer_class: 'Qwen2Tokenizer' };

/** Llama-3 style: the post-processor's template puts <|begin_of_text|> first. */
function llama3Json(): Record<string, unknown> {
  const json = gpt2Json();
  json.added_tokens = [...(json.added_tokens as unknown[]), special(BEGIN_OF_TEXT, '<|begin_of_text|>')];
  json.post_processor = {
    type: 'Sequence',
    processors: [
      { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
      {
        type: 'TemplateProcessing',
        single: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
        pair: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '<|begin_of_text|>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
        special_tokens: { '<|begin_of_text|>': { id: '<|begin_of_text|>', ids: [BEGIN_OF_TEXT], tokens: ['<|begin_of_text|>'] } },
      },
    ],
  };
  return json;
}

/** SentencePiece-style Unigram (Metaspace, Llama-2 <s> template). */
function unigramJson(): Record<string, unknown> {
  const pieces: Array<[string, number]> = [
    ['<unk>', 0], // 0
    ['<s>', 0], // 1
    ['</s>', 0], // 2
    ['▁', -2], // 3
    ['▁hello', -1], // 4
    ['▁world', -1.5], // 5
    ['h', -4], // 6
    ['e', -4], // 7
    ['l', -4], // 8
    ['o', -4], // 9
    ['w', -4], // 10
    ['r', -4], // 11
    ['d', -4], // 12
    ['▁he', -2.5], // 13
    ['llo', -2.5], // 14
  ];
  const metaspace = { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true };
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [special(0, '<unk>'), special(1, '<s>'), special(2, '</s>')],
    normalizer: null,
    pre_tokenizer: metaspace,
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
      pair: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
      special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } },
    },
    decoder: metaspace,
    model: { type: 'Unigram', unk_id: 0, byte_fallback: false, vocab: pieces },
  };
}

const ids = (t: HfTokenizer, text: string): number[] => Array.from(t.encode(text));

// --- tokenizer tests ---------------------------------------------------------------------------

describe('loadHfTokenizer: byte-level BPE', () => {
  it('GPT-2 style: merges, spaces, digits kept together, special tokens in text', async () => {
    const t = await loadHfTokenizer({ tokenizerJson: gpt2Json() });
    expect(t.specialTokens).toBe('post-processor');
    expect(t.vocabSize).toBe(ENDOFTEXT + 1);
    expect(ids(t, 'hello world')).toEqual([259, 264]);
    expect(ids(t, 'hello  world')).toEqual([259, 32, 264]); // the lone space is byte 0x20 ('Ġ')
    expect(ids(t, ' hello')).toEqual([32, 259]); // 'Ġhello' has no merge: Ġ then hello
    expect(ids(t, 'x12')).toEqual([120, 265]); // \p{N}+ keeps "12" whole, merged
    expect(ids(t, 'hello<|endoftext|>')).toEqual([259, ENDOFTEXT]);
    expect(t.decode(t.encode('hello world'))).toBe('hello world');
  });

  it('unicode goes through UTF-8 bytes', async () => {
    const t = await loadHfTokenizer({ tokenizerJson: JSON.stringify(gpt2Json()) });
    expect(ids(t, 'é')).toEqual([0xc3, 0xa9]);
    expect(ids(t, '日')).toEqual([0xe6, 0x97, 0xa5]);
    expect(ids(t, '👍')).toEqual([0xf0, 0x9f, 0x91, 0x8d]);
    expect(ids(t, 'hello 世')).toEqual([259, 0x20, 0xe4, 0xb8, 0x96]);
    expect(t.decode(t.encode('naïve 東京 👍'))).toBe('naïve 東京 👍');
  });

  it('Qwen style (Split regex + ByteLevel, NFC): digits one by one, no special tokens added', async () => {
    const t = await loadHfTokenizer({ tokenizerJson: qwenJson(), tokenizerConfig: QWEN_CONFIG });
    expect(t.specialTokens).toBe('config');
    expect(ids(t, 'hello world')).toEqual([259, 264]);
    expect(ids(t, 'x12')).toEqual([120, 49, 50]); // \p{N} splits digits: no "12" merge across pre-tokens
    // NFC: e + combining acute becomes é (U+00E9) before the bytes are taken.
    expect(ids(t, 'e\u0301')).toEqual([0xc3, 0xa9]);
    expect(ids(t, '<|im_start|>hello<|im_end|>')).toEqual([IM_START, 259, IM_END]);
  });

  it('Llama-3 style: the template adds <|begin_of_text|>, unless special tokens are off or the config says no', async () => {
    const t = await loadHfTokenizer({ tokenizerJson: llama3Json(), tokenizerConfig: {} });
    expect(ids(t, 'hello world')).toEqual([BEGIN_OF_TEXT, 259, 264]);
    const bare = await loadHfTokenizer({ tokenizerJson: llama3Json() }, { addSpecialTokens: false });
    expect(bare.specialTokens).toBe('none');
    expect(ids(bare, 'hello world')).toEqual([259, 264]);
    const configNo = await loadHfTokenizer({ tokenizerJson: llama3Json(), tokenizerConfig: { add_bos_token: false, bos_token: '<|begin_of_text|>' } });
    expect(ids(configNo, 'hello world')).toEqual([259, 264]);
    const configBosEos = await loadHfTokenizer({
      tokenizerJson: gpt2Json(),
      tokenizerConfig: { add_bos_token: true, add_eos_token: true, bos_token: { __type: 'AddedToken', content: '<|endoftext|>' }, eos_token: '<|endoftext|>' },
    });
    expect(ids(configBosEos, 'hello')).toEqual([ENDOFTEXT, 259, ENDOFTEXT]);
  });

  it('id: the option, else tokenizer_config name_or_path, else unset', async () => {
    expect((await loadHfTokenizer({ tokenizerJson: gpt2Json() })).id).toBeUndefined();
    expect((await loadHfTokenizer({ tokenizerJson: gpt2Json(), tokenizerConfig: { name_or_path: 'openai-community/gpt2' } })).id).toBe('openai-community/gpt2');
    expect((await loadHfTokenizer({ tokenizerJson: gpt2Json(), tokenizerConfig: { name_or_path: 'x/y' } }, { id: 'Qwen/Qwen3-0.6B' })).id).toBe('Qwen/Qwen3-0.6B');
  });
});

describe('loadHfTokenizer: Unigram', () => {
  it('Viterbi segmentation, Metaspace, <s> from add_bos_token, unknown characters as <unk>', async () => {
    const config = { add_bos_token: true, add_eos_token: false, bos_token: '<s>', eos_token: '</s>', unk_token: '<unk>' };
    const t = await loadHfTokenizer({ tokenizerJson: unigramJson(), tokenizerConfig: config });
    expect(ids(t, 'hello world')).toEqual([1, 4, 5]);
    expect(ids(t, 'hello')).toEqual([1, 4]); // ▁hello (-1) beats ▁he + llo (-5)
    expect(ids(t, 'held')).toEqual([1, 13, 8, 12]); // ▁he l d (-10.5) beats ▁ h e l d (-18)
    expect(ids(t, 'hé')).toEqual([1, 3, 6, 0]);
    // Without config flags the template adds <s> too.
    const byTemplate = await loadHfTokenizer({ tokenizerJson: unigramJson() });
    expect(ids(byTemplate, 'world')).toEqual([1, 5]);
  });
});

describe('loadHfTokenizer: bad files', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'fugu-hf-tok-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  async function errorOf(p: Promise<unknown>): Promise<InputError> {
    const err = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(InputError);
    return err as InputError;
  }

  it('malformed JSON names the file', async () => {
    const d = join(dir, 'bad-json');
    await mkdir(d);
    await writeFile(join(d, 'tokenizer.json'), '{"model": {"type": "BPE", ');
    const err = await errorOf(loadHfTokenizer(d));
    expect(err.file).toBe(join(d, 'tokenizer.json'));
    expect(err.message).toMatch(/tokenizer\.json: not valid JSON/);
  });

  it('a tokenizer.json the library cannot build, or without a model, names the file', async () => {
    const d = join(dir, 'bad-model');
    await mkdir(d);
    await writeFile(join(d, 'tokenizer.json'), JSON.stringify({ ...gpt2Json(), model: { type: 'Nonsense' } }));
    const err = await errorOf(loadHfTokenizer(d));
    expect(err.file).toBe(join(d, 'tokenizer.json'));
    expect(err.message).toMatch(/cannot build the tokenizer: .*Nonsense/);

    const noModel = await errorOf(loadHfTokenizer({ tokenizerJson: { added_tokens: [] } }));
    expect(noModel.field).toBe('model');
    expect(noModel.message).toMatch(/^tokenizer\.json, field model: /);
  });

  it('a missing tokenizer.json, or a bad config flag, is an InputError naming the file', async () => {
    const err = await errorOf(loadHfTokenizer(join(dir, 'nowhere')));
    expect(err.file).toBe(join(dir, 'nowhere', 'tokenizer.json'));
    const flag = await errorOf(loadHfTokenizer({ tokenizerJson: gpt2Json(), tokenizerConfig: { add_bos_token: 'yes' } }));
    expect(flag.file).toBe('tokenizer_config.json');
    expect(flag.field).toBe('add_bos_token');
    const noBos = await errorOf(loadHfTokenizer({ tokenizerJson: gpt2Json(), tokenizerConfig: { add_bos_token: true, bos_token: '<nope>' } }));
    expect(noBos.field).toBe('bos_token');
  });

  it('as in the Rust BPE, a piece outside the vocabulary is dropped when there is no unk token', async () => {
    const json = gpt2Json();
    const model = json.model as { vocab: Record<string, number> };
    delete model.vocab['Ā']; // byte 0x00
    const t = await loadHfTokenizer({ tokenizerJson: json });
    expect(ids(t, 'a\u0000b')).toEqual([97, 98]);
  });
});

// --- export directory end to end --------------------------------------------------------------

describe('loadDecoderBackboneFromDir', () => {
  const TOKENIZER_ID = 'fugu/test-byte-bpe';
  const TEXTS = ['hello world', 'x12 and 東京', 'hello<|endoftext|>'];
  let root: string;
  const tiny = buildTinyDecoder({ seed: 3, vocabSize: ENDOFTEXT + 1, metadata: { tokenizer: TOKENIZER_ID } });

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'fugu-hf-dir-'));
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  async function exportDir(name: string, files: { config?: unknown; reference?: unknown }): Promise<string> {
    const dir = join(root, name);
    await mkdir(dir);
    await writeFile(join(dir, 'model.onnx'), tiny.bytes);
    await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(gpt2Json()));
    if (files.config !== undefined) await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify(files.config));
    if (files.reference !== undefined) await writeFile(join(dir, 'reference.json'), JSON.stringify(files.reference));
    return dir;
  }

  it('encodes texts with the directory tokenizer, equal to the JavaScript forward; reference.json passes', async () => {
    const reference = { texts: ['hello world', 'x12'], input_ids: [[259, 264], [120, 265]], hidden: [] };
    const dir = await exportDir('ok', { config: { model_max_length: 1024 }, reference });
    const model = await loadDecoderBackboneFromDir(dir);
    try {
      expect(model.tokenizer.id).toBe(TOKENIZER_ID); // the files name no model: the metadata's id
      const got = await model.encode(TEXTS);
      TEXTS.forEach((text, i) => {
        const want = tinyDecoderForward(tiny.weights, model.tokenize(text));
        let diff = 0;
        want.forEach((v, k) => (diff = Math.max(diff, Math.abs(v - got[i]![k]!))));
        expect(diff).toBeLessThan(1e-5);
      });
      expect(Array.from(model.tokenize('hello<|endoftext|>'))).toEqual([259, ENDOFTEXT]);
    } finally {
      await model.release();
    }
  });

  it('a reference.json the tokenizer does not reproduce names the sentence and the position', async () => {
    const reference = { texts: ['hello world', 'hello  world'], input_ids: [[259, 264], [259, 264]] };
    const dir = await exportDir('mismatch', { reference });
    const err = await loadDecoderBackboneFromDir(dir).then(
      () => undefined,
      (e: unknown) => e as InputError,
    );
    expect(err).toBeInstanceOf(InputError);
    expect(err!.file).toBe(join(dir, 'reference.json'));
    expect(err!.field).toBe('input_ids[1][1]');
    expect(err!.message).toMatch(/sentence 1 "hello {2}world" differs from the export at token 1: the tokenizer gives id 32, the export 264/);
    // Skipping the check loads it.
    const model = await loadDecoderBackboneFromDir(dir, { checkReference: false });
    await model.release();
  });

  it('a tokenizer id that is not the metadata one is refused; a malformed reference.json names its field', async () => {
    const dir = await exportDir('other-id', { config: { name_or_path: 'someone/else' } });
    await expect(loadDecoderBackboneFromDir(dir)).rejects.toThrow(/tokenizer someone\/else does not match the model's tokenizer fugu\/test-byte-bpe/);
    const ok = await loadDecoderBackboneFromDir(dir, { tokenizerId: TOKENIZER_ID });
    await ok.release();

    const bad = await exportDir('bad-ref', { reference: { texts: ['a'], input_ids: [['x']] } });
    await expect(loadDecoderBackboneFromDir(bad)).rejects.toMatchObject({ name: 'InputError', field: 'input_ids[0]' });
  });

  it('checkReferenceIds compares truncated ids (the export cuts to max_len)', async () => {
    const t = await loadHfTokenizer({ tokenizerJson: gpt2Json() });
    expect(() => checkReferenceIds(t, { texts: ['hello world'], inputIds: [[259]] }, 1)).not.toThrow();
    expect(() => checkReferenceIds(t, { texts: ['hello world'], inputIds: [[259]] }, 2)).toThrow(/gives 2 tokens, the export 1/);
  });
});
