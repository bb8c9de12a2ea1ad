// The subtask kinds of the embedded policy and their templates (README.md in this folder). A
// template embeds the question; a new wording is a new version (policy-v2), recorded in every
// checkpoint's config, and a shipped version is never edited.

import { InputError } from '@fugu/core';

/** The subtask kinds, in the order of the kind head's outputs. */
export const SUBTASK_KINDS = ['solve', 'plan', 'verify', 'refine', 'aggregate'] as const;
export type SubtaskKind = (typeof SUBTASK_KINDS)[number];

/** Kinds whose subtask works on earlier answers: impossible at step 1, and never with access `none`. */
export const KINDS_NEEDING_ANSWERS: ReadonlySet<SubtaskKind> = new Set(['verify', 'refine', 'aggregate']);

/** The version of the wording below. */
export const POLICY_TEMPLATE_VERSION = 'policy-v1';

/** The subtask text of each kind; `{{question}}` is replaced by the (trimmed) question. */
export const POLICY_TEMPLATES: Readonly<Record<SubtaskKind, string>> = {
  solve: 'Solve this problem and give the final answer. Problem: {{question}}',
  plan: 'Do not solve this problem yet. Write a short plan for solving it: the steps to take, the facts or formulas it needs, and the mistakes to avoid. Problem: {{question}}',
  verify: 'Check the answer shown above step by step, correct any mistake, and give the final answer. Problem: {{question}}',
  refine: 'Improve on the work shown above: fill its gaps, fix its errors, complete the reasoning, and give the final answer. Problem: {{question}}',
  aggregate: 'Several attempts at the problem below are shown above. Compare them, work out which reasoning holds, and give the single best final answer. Problem: {{question}}',
};

/** The subtask of a kind for a question (one pass: a question containing "{{question}}" stays as it is). */
export function policySubtask(kind: SubtaskKind, question: string, version: string = POLICY_TEMPLATE_VERSION): string {
  if (version !== POLICY_TEMPLATE_VERSION) throw new InputError(`unknown policy template version ${JSON.stringify(version)} (known: ${POLICY_TEMPLATE_VERSION})`, { field: 'templateVersion' });
  const q = typeof question === 'string' ? question.trim() : '';
  if (!q) throw new InputError('the question is empty', { field: 'question' });
  return POLICY_TEMPLATES[kind].replace('{{question}}', () => q);
}
