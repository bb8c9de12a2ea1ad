// SVF + linear head: SVD, theta layout, ONNX graphs and RouterHead, policy, SFT.
export * from './svd.ts';
export * from './theta.ts';
export * from './svf-layer.ts';
export * from './router-graph.ts';
export * from './policy.ts';
export * from './sft.ts';
export * from './reference.ts';
