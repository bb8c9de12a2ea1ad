// Fitness tasks of the ES stage (single-step routing, multi-turn episodes), the baselines and the
// held-out comparison; and the routing data, split and feature cache they share with SFT.
export * from './types.ts';
export * from './routing-data.ts';
export * from './features.ts';
export * from './task-data.ts';
export * from './single-step.ts';
export * from './episodes.ts';
export * from './theta-policy.ts';
export * from './create.ts';
export * from './compare.ts';
