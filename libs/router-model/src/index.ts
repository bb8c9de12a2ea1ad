// The router model: ONNX graph building and sessions (more to come: trunks, SVF, head, policy, SFT).
export * from './onnx/index.ts';
export * from './backbones/use-lite/index.ts';
export * from './head/index.ts';
export * from './backbones/onnx-decoder/index.ts';
export * from './eval/index.ts';
