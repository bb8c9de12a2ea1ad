// ONNX model writing, graph building and ONNX Runtime sessions for the router model.
export * from './protobuf.ts';
export * from './model.ts';
export * from './builder.ts';
export * from './session.ts';
