/**
 * SentencePiece-style tokenizer of the Universal Sentence Encoder lite.
 *
 * Port of the tokenizer in the npm package `@energetic-ai/embeddings` 0.2.0
 * (dist/index.js: `processInput`, `Trie`, `Tokenizer`), itself derived from
 * `@tensorflow-models/universal-sentence-encoder`.
 *   Copyright 2019 Google LLC. All Rights Reserved.
 *   Licensed under the Apache License, Version 2.0 (the "License"); you may not use
 *   this file except in compliance with the License. You may obtain a copy of the
 *   License at http://www.apache.org/licenses/LICENSE-2.0
 *   Unless required by applicable law or agreed to in writing, software distributed
 *   under the License is distributed on an "AS IS" BASIS, WITHOUT WARRANTIES OR
 *   CONDITIONS OF ANY KIND, either express or implied. See the License for the
 *   specific language governing permissions and limitations under the License.
 * Changes from the original: TypeScript types, a Map-based trie, the prefix search
 * takes a start offset instead of a sliced copy, the lattice is an array per end
 * position. The token ids produced are identical, including the original's quirks,
 * which are kept on purpose and marked "quirk" below.
 *
 * Empty text: the package encodes '' as no tokens (`[]`); so does this port. The
 * package's model then cannot embed it: `embed([''])` throws inside TF.js, and an
 * empty text at the end of a batch is silently dropped from the output. Callers
 * (the router) reject empty text before it gets here.
 */

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { InputError } from '@fugu/core';

/**
 * Vocabulary as shipped in vocab.json: `[piece, log-probability score]`, id = array index.
 * The shipped file has `null` scores (7 pieces containing ':'); the original adds them to numbers,
 * where null counts as 0, so null is read as 0 here.
 */
export type Vocabulary = ReadonlyArray<readonly [string, number | null]>;

/** Ids 0..5 are reserved (0 = unknown '\uFFFD', 1 = <s>, 2 = </s>, 3..5 extra); never matched as pieces. */
export const RESERVED_SYMBOLS_COUNT = 6;
/** Id emitted for a symbol no piece starts with; consecutive unknowns are merged into one. */
export const UNKNOWN_TOKEN_ID = 0;
/** SentencePiece word-boundary marker (U+2581), replaces every ASCII space and prefixes the text. */
export const WORD_SEPARATOR = '\u2581';

/**
 * NFKC-normalise, then mark word starts: '▁' + text with every ' ' (U+0020 only, not tabs or
 * newlines) replaced by '▁'. Empty stays empty.
 */
export function processInput(text: string): string {
  const normalized = text.normalize('NFKC');
  return normalized.length > 0 ? WORD_SEPARATOR + normalized.replace(/ /g, WORD_SEPARATOR) : normalized;
}

/** A vocabulary piece found by the prefix search: `length` in symbols (code points). */
interface PieceMatch {
  readonly length: number;
  readonly score: number;
  readonly id: number;
}

class TrieNode {
  readonly children = new Map<string, TrieNode>();
  /** Set when a piece ends here; a later insert of the same piece overwrites it (quirk: last wins). */
  piece: PieceMatch | undefined = undefined;
}

class Trie {
  private readonly root = new TrieNode();

  insert(symbols: readonly string[], score: number, id: number): void {
    let node = this.root;
    for (const symbol of symbols) {
      let child = node.children.get(symbol);
      if (!child) {
        child = new TrieNode();
        node.children.set(symbol, child);
      }
      node = child;
    }
    // An empty piece marks nothing (the original's loop body never runs for it).
    if (symbols.length > 0) node.piece = { length: symbols.length, score, id };
  }

  /**
   * Every piece that is a prefix of symbols[start..], shortest first. When there is none, a
   * single-symbol unknown (score 0, id 0) - even if longer pieces pass through this symbol
   * without ending on it.
   */
  commonPrefixSearch(symbols: readonly string[], start: number): PieceMatch[] {
    const output: PieceMatch[] = [];
    let node = this.root.children.get(symbols[start]!);
    for (let i = start; i < symbols.length && node; i++) {
      if (node.piece) output.push(node.piece);
      const next = symbols[i + 1];
      node = next === undefined ? undefined : node.children.get(next);
    }
    if (output.length === 0) output.push({ length: 1, score: 0, id: UNKNOWN_TOKEN_ID });
    return output;
  }
}

export class UseLiteTokenizer {
  private readonly vocabulary: Vocabulary;
  private readonly trie = new Trie();

  constructor(vocabulary: Vocabulary, reservedSymbolsCount: number = RESERVED_SYMBOLS_COUNT) {
    this.vocabulary = vocabulary;
    for (let id = reservedSymbolsCount; id < vocabulary.length; id++) {
      const entry = vocabulary[id]!;
      this.trie.insert(Array.from(entry[0]), entry[1] ?? 0, id);
    }
  }

  get vocabularySize(): number {
    return this.vocabulary.length;
  }

  /** Token ids of `text` (best-score segmentation, unknown runs merged). '' gives no tokens. */
  encode(text: string): Int32Array {
    const symbols = Array.from(processInput(text)); // code points, as the original's for..of
    const n = symbols.length;

    // lattice[end] = pieces ending at symbol position `end`, pushed in ascending start order.
    const lattice: Array<Array<{ start: number; piece: PieceMatch }>> = [];
    for (let i = 0; i <= n; i++) lattice.push([]);
    for (let start = 0; start < n; start++) {
      for (const piece of this.trie.commonPrefixSearch(symbols, start)) {
        lattice[start + piece.length]!.push({ start, piece });
      }
    }

    // Viterbi over the lattice. quirk: best === 0 means "unset", so a reached best of exactly 0
    // (an unknown at the start) is replaced by any later candidate; ties (>=) go to the
    // candidate with the later start. Positions nothing ends at keep id 0 and best 0.
    const best = new Float64Array(n + 1);
    const ids = new Int32Array(n + 1);
    for (let end = 0; end <= n; end++) {
      for (const { start, piece } of lattice[end]!) {
        const score = piece.score + best[start]!;
        if (best[end] === 0 || score >= best[end]!) {
          best[end] = score;
          ids[end] = piece.id;
        }
      }
    }

    // Backtrack. quirk: steps back by the UTF-16 length of the vocabulary string of the chosen
    // id (for an unknown, of vocabulary[0] = '\uFFFD', i.e. 1), not by the matched length.
    const reversed: number[] = [];
    let pos = n;
    while (pos > 0) {
      const id = ids[pos]!;
      reversed.push(id);
      pos -= this.vocabulary[id]![0].length;
    }

    // Merge runs of unknowns into one, then restore left-to-right order.
    const merged: number[] = [];
    let previousUnknown = false;
    for (const id of reversed) {
      if (!(previousUnknown && id === UNKNOWN_TOKEN_ID)) merged.push(id);
      previousUnknown = id === UNKNOWN_TOKEN_ID;
    }
    merged.reverse();
    return Int32Array.from(merged);
  }
}

/** Parse vocab.json text: an array of `[string, number | null]`; errors name the file and the entry. */
export function parseVocabulary(text: string, file: string): Vocabulary {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new InputError(`not valid JSON: ${(err as Error).message}`, { file }, { cause: err });
  }
  if (!Array.isArray(raw)) throw new InputError('expected an array of [piece, score] pairs', { file });
  raw.forEach((entry: unknown, i) => {
    if (
      !Array.isArray(entry) ||
      entry.length !== 2 ||
      typeof entry[0] !== 'string' ||
      (typeof entry[1] !== 'number' && entry[1] !== null)
    ) {
      throw new InputError(`entry ${i} is not a [string, number | null] pair`, { file, field: `[${i}]` });
    }
  });
  return raw as Array<[string, number | null]>;
}

/** Load vocab.json from a USE-lite model directory (see `resolveUseLiteDir` in weights.ts). */
export async function loadUseLiteVocabulary(dir: string): Promise<Vocabulary> {
  const file = join(dir, 'vocab.json');
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new InputError(`cannot read the vocabulary: ${(err as Error).message}`, { file }, { cause: err });
  }
  return parseVocabulary(text, file);
}
