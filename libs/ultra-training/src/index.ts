// @fugu/ultra-training: the Conductor's training-time code, on @fugu/ultra's executor: the
// evaluation batches (`fugu ultra eval`, `fugu ultra run`), calibration (`fugu ultra calibrate`),
// GRPO training of the embedded policy (`fugu train grpo`), and the reward service for external
// RL engines (POST /v1/rewards, `fugu ultra prompts`), and exact-expectation analyses on replay
// pools (`fugu ultra analyse`). What its drivers share (a run's items, the
// local processes) is in leaf modules beside them. Serving (@fugu/ultra, apps/gateway's ultra.ts)
// never imports this lib.
export * from './run-items.ts';
export * from './locals.ts';
export * from './eval/index.ts';
export * from './calibrate.ts';
export * from './grpo/index.ts';
export * from './rewards/index.ts';
export * from './analysis/index.ts';
