// GRPO training of the embedded Conductor (`fugu train grpo`). See README.md in this folder.
export * from './config.ts';
export * from './cost-weight.ts';
export * from './criterion.ts';
export * from './plan.ts';
export * from './update.ts';
export * from './local.ts';
export * from './session.ts';
export * from './driver.ts';
export * from './run.ts';
export * from './warm-start.ts';
