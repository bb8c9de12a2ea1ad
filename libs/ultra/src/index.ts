// @fugu/ultra: the Conductor (fugu-ultra) on the cluster: executing workflows (conduct jobs ->
// the conductor writes -> parse -> every ready step a chat-call job -> final answer -> reward ->
// rows), the writers (llm, policy, fixed), and the evaluation batches (`fugu ultra eval`). What
// any driver shares (the split and rankings, the flag checks, the local processes) is in leaf
// modules beside the drivers.
export {
  POLICY_FILE_FORMAT,
  exportPolicyCheckpoint,
  getPolicyCheckpoint,
  importPolicyCheckpoint,
  initPolicyCheckpoint,
  loadPolicy,
  savePolicyCheckpoint,
  trainingRanking,
  type InitPolicyOptions,
  type TrainingRanking,
} from './policy-store.ts';
export * from './split.ts';
export * from './flags.ts';
export * from './locals.ts';
export * from './engine/index.ts';
export * from './eval/index.ts';
export * from './calibrate.ts';
export * from './grpo/index.ts';
export * from './rewards/index.ts';
export * from './interactive/index.ts';
