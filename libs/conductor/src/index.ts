// @fugu/conductor: the Conductor's workflow model, text form (renderer, tolerant parser,
// validator), schedule (DAG), prompt templates, reward, conductor specs and the fixed
// topologies. Pure computation on @fugu/core (the prompt templates are files of the package,
// read once). README.md has the details.

export {
  DEFAULT_MAX_STEPS,
  MAX_STEPS_LIMIT,
  resolveMaxSteps,
  conductorPool,
  workerName,
  workerId,
  visibleSteps,
  canonicalAccess,
  checkWorkflow,
  sameWorkflow,
  type Access,
  type Step,
  type Workflow,
  type PoolEntry,
  type ConductorPool,
  type ListName,
  type WorkflowError,
} from './workflow.ts';
export { renderWorkflow, parseWorkflow, PARSE_LIMITS, type ParseResult, type ParseOptions } from './text.ts';
export { scheduleOf, readySteps, TOPOLOGIES, type Schedule, type Topology } from './schedule.ts';
export {
  DEFAULT_WORKER_PROMPT,
  DEFAULT_CONDUCTOR_PROMPT,
  promptVersions,
  loadPromptTemplate,
  renderWorkerPrompt,
  renderConductorPrompt,
  type PromptTemplate,
  type RenderedPrompt,
  type WorkerPromptInput,
  type ConductorPromptInput,
} from './prompts.ts';
export {
  DEFAULT_REWARD_CONFIG,
  rewardConfig,
  rewardOf,
  scoreWorkflow,
  picoToUsd,
  type RewardConfig,
  type RewardOutcome,
  type WorkflowReward,
  type VerifierResult,
  type AnswerVerifier,
} from './reward.ts';
export {
  CONDUCTOR_KINDS,
  FIXED_TOPOLOGIES,
  parseConductorSpec,
  parseConductorSpecs,
  checkConductorSpec,
  type ConductorKind,
  type ConductorSpec,
  type ConductorSpecContext,
  type FixedConductorSpec,
  type FixedTopology,
} from './spec.ts';
export { FIXED_SUBTASKS, FIXED_SUBTASKS_VERSION, fixedWorkflow, type FixedWorkflowInput } from './fixed.ts';
export { fixedConductor, llmConductor, type Conductor, type ConductorInput, type ConductorOutput, type CompleteFn } from './conductor.ts';

// the offline (replay) environment's step model (src/replay/README.md)
export * from './replay/index.ts';

// the embedded, trainable Conductor (src/policy/README.md)
export * from './policy/index.ts';
