import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError, rng } from '@fugu/core';
import { ContractError } from '../../onnx/session.ts';
import { DECODER_BACKBONE_CONTRACT, DECODER_CONTRACT_VERSION, parseDecoderMetadata, readModelMetadata } from './contract.ts';
import { loadDecoderBackbone, padRight, type DecoderBackbone } from './loader.ts';
import { buildTinyDecoder, tinyDecoderForward, type TinyDecoder } from './tiny-decoder.ts';
import { CharTokenizer, WhitespaceTokenizer } from './tokenizer.ts';

const TEXTS = ['hello world', 'a', 'ab', 'The quick brown fox jumps over the lazy dog.', 'x = 2 * (y + 3)', 'naïve café — 東京', 'ok?'];

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

describe('tiny decoder behind the decoder-backbone contract', () => {
  let tiny: TinyDecoder;
  let model: DecoderBackbone;
  beforeAll(async () => {
    tiny = buildTinyDecoder({ seed: 7 });
    model = await loadDecoderBackbone(tiny.bytes, { tokenizer: tiny.tokenizer, maxBatchSize: 3 });
  });
  afterAll(() => model.release());

  it('loads, meets the contract and reports its metadata', () => {
    expect(model.hiddenSize).toBe(16);
    expect(model.adapted).toEqual([{ name: 'o_proj', rank: 16, input: 'z_o_proj' }]);
    expect(model.metadata).toMatchObject({ contract: DECODER_CONTRACT_VERSION, backboneKind: 'fugu-tiny-decoder', layer: 2, maxLen: 32, vocabSize: 64, tokenizer: 'fugu/char-64', padTokenId: 0 });
    expect(DECODER_BACKBONE_CONTRACT.inputs.map((i) => i.name)).toEqual(['input_ids', 'attention_mask']);
  });

  it('equals a plain JavaScript forward of the same weights (1e-5), batched and padded', async () => {
    const got = await model.encode(TEXTS);
    TEXTS.forEach((text, i) => {
      const want = tinyDecoderForward(tiny.weights, tiny.tokenizer.encode(text));
      expect(maxAbsDiff(got[i]!, want)).toBeLessThan(1e-5);
    });
  });

  it('z = 1 equals the unadapted model, and z only matters up to scale (the rescale)', async () => {
    const plain = await loadDecoderBackbone(buildTinyDecoder({ seed: 7, adapt: [] }).bytes, { tokenizer: tiny.tokenizer });
    try {
      expect(plain.adapted).toEqual([]);
      const base = await plain.encode(TEXTS);
      const ones = await model.encode(TEXTS, { o_proj: new Float32Array(16).fill(1) });
      const byDefault = await model.encode(TEXTS);
      const twos = await model.encode(TEXTS, { o_proj: new Float32Array(16).fill(2) });
      TEXTS.forEach((_, i) => {
        expect(maxAbsDiff(ones[i]!, base[i]!)).toBeLessThan(1e-5);
        expect(maxAbsDiff(byDefault[i]!, ones[i]!)).toBe(0);
        expect(maxAbsDiff(twos[i]!, ones[i]!)).toBeLessThan(1e-5);
      });
    } finally {
      await plain.release();
    }
  });

  it('changing z changes the output, as the JavaScript forward says', async () => {
    const r = rng('z', 1);
    const z = Float32Array.from({ length: 16 }, () => 1 + 0.5 * r.normal());
    const adapted = await model.encode(TEXTS, { o_proj: z });
    const base = await model.encode(TEXTS);
    TEXTS.forEach((text, i) => {
      expect(maxAbsDiff(adapted[i]!, base[i]!)).toBeGreaterThan(1e-3);
      expect(maxAbsDiff(adapted[i]!, tinyDecoderForward(tiny.weights, tiny.tokenizer.encode(text), { z: { o_proj: z } }))).toBeLessThan(1e-5);
    });
  });

  it('padding does not change valid rows', async () => {
    const alone = await Promise.all(TEXTS.map(async (t) => (await model.encode([t]))[0]!));
    const padded = await model.encode(TEXTS); // batches of 3 padded to their longest text
    const oneBatch = await loadDecoderBackbone(tiny.bytes, { tokenizer: tiny.tokenizer, maxBatchSize: 64 });
    try {
      const allTogether = await oneBatch.encode(TEXTS);
      TEXTS.forEach((_, i) => {
        expect(maxAbsDiff(padded[i]!, alone[i]!)).toBeLessThan(1e-6);
        expect(maxAbsDiff(allTogether[i]!, alone[i]!)).toBeLessThan(1e-6);
      });
    } finally {
      await oneBatch.release();
    }
  });

  it('takes the penultimate token: the last token does not matter, the penultimate does', async () => {
    const [base, lastDiffers, penultimateDiffers] = await model.encode(['route this?', 'route this!', 'route thiz?']);
    expect(maxAbsDiff(base!, lastDiffers!)).toBeLessThan(1e-6);
    expect(maxAbsDiff(base!, penultimateDiffers!)).toBeGreaterThan(1e-3);
  });

  it('truncates to max_len before taking the decision position', async () => {
    const long = 'abcdefghijklmnopqrstuvwxyz0123456789'; // 36 chars > max_len 32
    const [a, b] = await model.encode([long, long.slice(0, 32)]);
    expect(maxAbsDiff(a!, b!)).toBe(0);
    // The graph truncates too: a row longer than max_len fed directly gives the same state.
    const ids = tiny.tokenizer.encode(long);
    expect(maxAbsDiff(a!, tinyDecoderForward(tiny.weights, ids))).toBeLessThan(1e-5);
  });

  it('a one-token text uses that token (the decision position is clamped at 0)', async () => {
    const [a] = await model.encode(['Q']);
    expect(maxAbsDiff(a!, tinyDecoderForward(tiny.weights, tiny.tokenizer.encode('Q')))).toBeLessThan(1e-5);
  });

  it('takes the hidden state of the chosen layer L', async () => {
    const first = buildTinyDecoder({ seed: 7, layer: 1, adapt: ['q_proj', 'v_proj'] });
    const m = await loadDecoderBackbone(first.bytes, { tokenizer: first.tokenizer });
    try {
      expect(m.metadata.layer).toBe(1);
      expect(m.adapted.map((a) => a.input)).toEqual(['z_q_proj', 'z_v_proj']);
      const r = rng('z', 2);
      const z = { q_proj: Float32Array.from({ length: 16 }, () => 1 + 0.3 * r.normal()), v_proj: Float32Array.from({ length: 16 }, () => 1 + 0.3 * r.normal()) };
      const got = await m.encode(TEXTS, z);
      TEXTS.forEach((text, i) => {
        expect(maxAbsDiff(got[i]!, tinyDecoderForward(first.weights, first.tokenizer.encode(text), { layer: 1, z }))).toBeLessThan(1e-5);
      });
    } finally {
      await m.release();
    }
  });

  it('refuses bad z and bad texts with errors naming the field', async () => {
    await expect(model.encode(['a b'], { q_proj: new Float32Array(16) })).rejects.toThrow(/z\.q_proj: not an adapted matrix of this model \(adapted: o_proj\)/);
    await expect(model.encode(['a b'], { o_proj: new Float32Array(3) })).rejects.toThrow(/z\.o_proj: expected 16 values/);
    await expect(model.encode(['a b'], { o_proj: new Float32Array(16).fill(Number.NaN) })).rejects.toThrow(/z\.o_proj\[0\] is not finite/);
    await expect(model.encode(['ok', ''])).rejects.toThrow(/texts\[1\].*text 1 is empty/);
  });
});

describe('loadDecoderBackbone refuses models that break the contract', () => {
  it('names a missing attention_mask in a ContractError', async () => {
    const broken = buildTinyDecoder({ omitAttentionMask: true });
    const err = await loadDecoderBackbone(broken.bytes, { tokenizer: broken.tokenizer, label: 'broken.onnx' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ContractError);
    expect((err as ContractError).missingInputs).toEqual(['attention_mask']);
    expect((err as Error).message).toMatch(/broken\.onnx: ONNX model breaks the contract: missing input attention_mask/);
  });

  it('names a missing metadata key in an InputError', async () => {
    const tiny = buildTinyDecoder({ metadata: { hidden_size: null } });
    const err = await loadDecoderBackbone(tiny.bytes, { tokenizer: tiny.tokenizer, label: 'tiny.onnx' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InputError);
    expect((err as InputError).field).toBe('metadata.hidden_size');
    expect((err as Error).message).toMatch(/tiny\.onnx, field metadata\.hidden_size: ONNX metadata is missing key hidden_size/);
  });

  it('names a z input the metadata lists but the graph lacks', async () => {
    const tiny = buildTinyDecoder({ metadata: { adapted: JSON.stringify([{ name: 'o_proj', rank: 16 }, { name: 'q_proj', rank: 16 }]) } });
    await expect(loadDecoderBackbone(tiny.bytes, { tokenizer: tiny.tokenizer })).rejects.toThrow(/missing input z_q_proj/);
    const wrongRank = buildTinyDecoder({ metadata: { adapted: JSON.stringify([{ name: 'o_proj', rank: 8 }]) } });
    await expect(loadDecoderBackbone(wrongRank.bytes, { tokenizer: wrongRank.tokenizer })).rejects.toThrow(/input z_o_proj has shape \[16\], expected \[8\]/);
    const unlisted = buildTinyDecoder({ metadata: { adapted: '[]' } });
    await expect(loadDecoderBackbone(unlisted.bytes, { tokenizer: unlisted.tokenizer })).rejects.toThrow(/input z_o_proj that the contract and its metadata "adapted" do not name/);
  });

  it('refuses a tokenizer of another vocabulary, and ids outside the vocabulary', async () => {
    const tiny = buildTinyDecoder();
    await expect(loadDecoderBackbone(tiny.bytes, { tokenizer: new WhitespaceTokenizer(64) })).rejects.toThrow(/tokenizer fugu\/words-64 does not match the model's tokenizer fugu\/char-64/);
    const m = await loadDecoderBackbone(tiny.bytes, { tokenizer: new CharTokenizer(100, 'fugu/char-64') });
    try {
      await expect(m.encode(['!\u00a2'])).rejects.toThrow(/text 0: the tokenizer gave id 64 at token 1, outside the model's vocabulary \[0, 64\)/);
    } finally {
      await m.release();
    }
  });
});

describe('decoder metadata', () => {
  const good = buildTinyDecoder().metadata;

  it('reads metadata_props from the model bytes', () => {
    expect(readModelMetadata(buildTinyDecoder().bytes)).toEqual(good);
  });

  it('lists every missing key and checks values', () => {
    expect(() => parseDecoderMetadata({})).toThrow(/missing keys contract, backbone_kind, hidden_size, layer, max_len, vocab_size, adapted, tokenizer/);
    expect(() => parseDecoderMetadata({ ...good, layer: '0' })).toThrow(/metadata layer: expected an integer >= 1, got "0"/);
    expect(() => parseDecoderMetadata({ ...good, hidden_size: '16.5' })).toThrow(/metadata hidden_size: expected an integer/);
    expect(() => parseDecoderMetadata({ ...good, contract: 'other/9' })).toThrow(/metadata contract: expected fugu-decoder-backbone\/1/);
    expect(() => parseDecoderMetadata({ ...good, padding_side: 'left' })).toThrow(/metadata padding_side: the contract pads on the right/);
    expect(() => parseDecoderMetadata({ ...good, adapted: '{' })).toThrow(/metadata adapted: not JSON/);
    expect(() => parseDecoderMetadata({ ...good, adapted: '[{"name":"q","rank":0}]' })).toThrow(/entry 0 \(q\): rank must be a positive integer/);
    expect(() => parseDecoderMetadata({ ...good, adapted: '[{"name":"q","rank":2},{"name":"q","rank":2}]' })).toThrow(/q is listed twice/);
    expect(() => parseDecoderMetadata({ ...good, pad_token_id: '64' })).toThrow(/pad_token_id: 64 is not below vocab_size 64/);
  });

  it('right-pads with the pad id and a 1/0 mask', () => {
    const { ids, mask, dims } = padRight([[5, 6, 7], [9]], 3);
    expect(dims).toEqual([2, 3]);
    expect(Array.from(ids, Number)).toEqual([5, 6, 7, 9, 3, 3]);
    expect(Array.from(mask, Number)).toEqual([1, 1, 1, 1, 0, 0]);
  });
});
