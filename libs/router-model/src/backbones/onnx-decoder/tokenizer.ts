// The tokenizer seam of decoder backbones. An exported model ships the HF `tokenizer.json` next to
// its .onnx, read by `loadHfTokenizer` (hf-tokenizer.ts); the loader takes token ids from any object
// that implements `Tokenizer`. The two here are for tests and demos.

import { InputError, hash32 } from '@fugu/core';

export interface Tokenizer {
  /** Which vocabulary this is (the HF model id for a real one). When set, the loader checks it
   *  against the model's `tokenizer` metadata, so ids of another vocabulary are never fed. */
  readonly id?: string;
  /** Token ids of one text, as HF `tokenizer(text)["input_ids"]` gives them (untruncated). */
  encode(text: string): ArrayLike<number>;
}

function checkVocab(vocabSize: number, what: string): void {
  if (!Number.isSafeInteger(vocabSize) || vocabSize < 2) throw new InputError(`${what}: vocabSize must be an integer >= 2, got ${vocabSize}`, { field: 'vocabSize' });
}

/** One token per Unicode code point: id = 1 + (codePoint mod (vocabSize - 1)); 0 is left for padding. */
export class CharTokenizer implements Tokenizer {
  readonly id: string;
  readonly vocabSize: number;
  constructor(vocabSize: number, id = `fugu/char-${vocabSize}`) {
    checkVocab(vocabSize, 'CharTokenizer');
    this.vocabSize = vocabSize;
    this.id = id;
  }
  encode(text: string): Int32Array {
    return Int32Array.from(text, (ch) => 1 + (ch.codePointAt(0)! % (this.vocabSize - 1)));
  }
}

/** One token per whitespace-separated word: id = 1 + (FNV-1a(word) mod (vocabSize - 1)). */
export class WhitespaceTokenizer implements Tokenizer {
  readonly id: string;
  readonly vocabSize: number;
  constructor(vocabSize: number, id = `fugu/words-${vocabSize}`) {
    checkVocab(vocabSize, 'WhitespaceTokenizer');
    this.vocabSize = vocabSize;
    this.id = id;
  }
  encode(text: string): Int32Array {
    const words = text.split(/\s+/u).filter((w) => w.length > 0);
    return Int32Array.from(words, (w) => 1 + (hash32(w) % (this.vocabSize - 1)));
  }
}
