// The embedded, trainable Conductor (`policy:<checkpoint>`): README.md in this folder.
export {
  ACCESS_CHOICES,
  POLICY_ENCODING_VERSION,
  POLICY_HEADS,
  POLICY_INIT,
  ConductorPolicy,
  accessOf,
  contextSize,
  policyThetaLayout,
  policyThetaSize,
  type AccessChoice,
  type Decided,
  type DecideOptions,
  type PolicyConfig,
  type PolicyDecisions,
  type PolicyHead,
  type PolicyInitOptions,
  type PolicyStep,
  type ThetaBlock as PolicyThetaBlock,
  type WriteInput as PolicyWriteInput,
  type WriteOutput as PolicyWriteOutput,
} from './policy.ts';
export { KINDS_NEEDING_ANSWERS, POLICY_TEMPLATES, POLICY_TEMPLATE_VERSION, SUBTASK_KINDS, policySubtask, type SubtaskKind } from './templates.ts';
export { policyCheckpoint, policyConductor, policyFromCheckpoint, type PolicyCheckpoint } from './checkpoint.ts';
