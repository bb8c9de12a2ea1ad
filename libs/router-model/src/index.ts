// The router model: ONNX graph building and sessions, backbones, the SVF head, policy, SFT,
// evaluation, and the runtime (loadRouterModel, the execution-provider choice).
export * from './onnx/index.ts';
export * from './backbones/use-lite/index.ts';
export * from './head/index.ts';
export * from './backbones/onnx-decoder/index.ts';
export * from './eval/index.ts';
export * from './runtime/index.ts';
