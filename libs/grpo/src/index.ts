// GRPO building blocks: group advantages, the clipped surrogate with k3 KL, Adam and gradient
// clipping, and a generic multi-epoch update driver. Pure computation on @fugu/core (no I/O, no
// clock, no Math.random). See README.md for the formulas, the variants and the defaults.
export * from './advantages.ts';
export * from './surrogate.ts';
export * from './adam.ts';
export * from './update.ts';
