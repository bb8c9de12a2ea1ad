// ONNX decoder backbones (Hugging Face decoder LMs exported by infra/export/): the contract, the
// loader, the tokenizer seam, and a tiny decoder built in TypeScript for tests.

export * from './contract.ts';
export * from './tokenizer.ts';
export * from './loader.ts';
export * from './tiny-decoder.ts';
export * from './hf-tokenizer.ts';
