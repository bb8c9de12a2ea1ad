// The router model at run time: USE-lite + the SVF head loaded with its stored SVD, and the
// ONNX Runtime execution-provider choice. Serving and training both load the model from here.
export * from './execution.ts';
export * from './model.ts';
