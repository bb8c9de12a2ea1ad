import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InputError, rng } from '@fugu/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageTokenizer } from './package-oracle.ts';
import { USE_LITE_TEST_TEXTS, USE_LITE_TOKENIZER_EDGE_CASES } from './test-sentences.ts';
import { loadUseLiteVocabulary, parseVocabulary, processInput, UseLiteTokenizer, type Vocabulary } from './tokenizer.ts';
import { resolveUseLiteDir } from './weights.ts';

let vocabulary: Vocabulary;
let ours: UseLiteTokenizer;
let theirs: { encode(text: string): number[] };

beforeAll(async () => {
  vocabulary = await loadUseLiteVocabulary(resolveUseLiteDir());
  ours = new UseLiteTokenizer(vocabulary);
  theirs = packageTokenizer(vocabulary);
});

const same = (text: string) => expect(Array.from(ours.encode(text)), JSON.stringify(text)).toEqual(theirs.encode(text));

describe('UseLiteTokenizer vs the package tokenizer', () => {
  it('gives the same ids on every test sentence', () => {
    expect(USE_LITE_TEST_TEXTS.length).toBeGreaterThanOrEqual(100);
    for (const text of USE_LITE_TEST_TEXTS) same(text);
  });

  it('gives the same ids on edge cases (empty, lone surrogates, null-score and duplicated pieces)', () => {
    for (const text of USE_LITE_TOKENIZER_EDGE_CASES) same(text);
  });

  it('gives the same ids on seeded random strings mixing pieces, spaces and unknown symbols', () => {
    const r = rng('use-lite-tokenizer-fuzz', 1);
    const pieces = vocabulary.map(([p]) => p.replace(/\u2581/g, ' '));
    const extras = [' ', '  ', '\t', '\n', ':', '😀', '\ue000', '\u0301', 'ﬁ', '１', '\ud800', '漢', 'é', '”5'];
    for (let n = 0; n < 400; n++) {
      let text = '';
      const parts = 1 + r.int(12);
      for (let k = 0; k < parts; k++) text += r.next() < 0.7 ? pieces[r.int(pieces.length)] : extras[r.int(extras.length)];
      same(text);
    }
  });

  it('encodes every test sentence to at least one id, all inside the vocabulary', () => {
    for (const text of USE_LITE_TEST_TEXTS) {
      const ids = ours.encode(text);
      expect(ids.length, text).toBeGreaterThan(0);
      for (const id of ids) expect(id >= 0 && id < vocabulary.length).toBe(true);
    }
  });
});

describe('UseLiteTokenizer behaviour', () => {
  it('encodes the empty text to no ids, as the package does', () => {
    expect(ours.encode('')).toEqual(new Int32Array(0));
    expect(theirs.encode('')).toEqual([]);
  });

  it('marks word starts with U+2581 after NFKC normalisation', () => {
    expect(processInput('')).toBe('');
    expect(processInput('ﬁne day')).toBe('\u2581fine\u2581day');
    expect(processInput('a\tb')).toBe('\u2581a\tb'); // only U+0020 becomes the separator
  });

  it('merges a run of unknown symbols into one unknown id', () => {
    const ids = Array.from(ours.encode('\ue000\ue001\ue002'));
    expect(ids.filter((id) => id === 0)).toHaveLength(1);
  });

  it('reads a null vocabulary score as 0 (the shipped file has seven)', () => {
    expect(vocabulary.filter(([, s]) => s === null).length).toBe(7);
    const asZero: Vocabulary = vocabulary.map(([p, s]) => [p, s ?? 0] as const);
    const zeroed = new UseLiteTokenizer(asZero);
    for (const text of ['10:30 :) :-) https://x.org', ...USE_LITE_TEST_TEXTS.slice(0, 30)]) {
      expect(zeroed.encode(text)).toEqual(ours.encode(text));
    }
  });
});

describe('vocabulary parsing', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'use-lite-vocab-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('names the file and the entry of a malformed vocabulary', async () => {
    expect(() => parseVocabulary('[["a", 1], ["b"]]', 'v.json')).toThrow(/v\.json, field \[1\]: entry 1/);
    expect(() => parseVocabulary('{', 'v.json')).toThrow(InputError);
    expect(() => parseVocabulary('{}', 'v.json')).toThrow(/expected an array/);
    await writeFile(join(dir, 'vocab.json'), '[["x", "y"]]');
    await expect(loadUseLiteVocabulary(dir)).rejects.toThrow(/vocab\.json, field \[0\]/);
  });

  it('names the missing file', async () => {
    await expect(loadUseLiteVocabulary(join(dir, 'nope'))).rejects.toThrow(/nope\/vocab\.json: cannot read/);
  });
});
