// Universal Sentence Encoder lite backbone: tokenizer, weights, exact forward specification
// (spec.md) and its executable reference. The package oracle (package-oracle.ts) is test-only.

export * from './tokenizer.ts';
export * from './weights.ts';
export * from './params.ts';
export * from './reference.ts';
export * from './load.ts';
export * from './test-sentences.ts';
export * from './graph.ts';
export * from './encoder.ts';
