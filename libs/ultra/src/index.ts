// @fugu/ultra: the Conductor (fugu-ultra) on the cluster, the executor and serving: executing
// workflows (conduct jobs -> the conductor writes -> parse -> every ready step a chat-call job ->
// final answer -> reward -> rows), the writers (llm, policy, fixed), and fugu-ultra served behind
// the OpenAI API (interactive/). What the executor, serving and the drivers share (the split and
// rankings, the flag checks, the policy's checkpoints) is in leaf modules beside them. Training-time
// code (`fugu ultra eval|run|calibrate`, GRPO, the reward service) is @fugu/ultra-training's, which
// builds on this lib; nothing here imports it.
export {
  POLICY_FILE_FORMAT,
  exportPolicyCheckpoint,
  getPolicyCheckpoint,
  importPolicyCheckpoint,
  initPolicyCheckpoint,
  loadPolicy,
  policyRecord,
  savePolicyCheckpoint,
  trainingRanking,
  type InitPolicyOptions,
  type TrainingRanking,
} from './policy-store.ts';
export * from './split.ts';
export * from './split-made.ts';
export * from './flags.ts';
export * from './engine/index.ts';
export * from './interactive/index.ts';
