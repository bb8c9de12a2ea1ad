// The subtask kinds of the embedded policy and their templates (README.md in this folder). A new
// wording is a new version, recorded in every checkpoint's config (a checkpoint keeps writing
// with its own), and a shipped version is never edited.

import { InputError } from '@fugu/core';

/** The subtask kinds, in the order of the kind head's outputs. */
export const SUBTASK_KINDS = ['solve', 'plan', 'verify', 'refine', 'aggregate'] as const;
export type SubtaskKind = (typeof SUBTASK_KINDS)[number];

/** Kinds whose subtask works on earlier answers: impossible at step 1, and never with access `none`. */
export const KINDS_NEEDING_ANSWERS: ReadonlySet<SubtaskKind> = new Set(['verify', 'refine', 'aggregate']);

/**
 * The wordings, by version; a shipped version is never edited. policy-v1 embeds the question in
 * every subtask; policy-v2 (the current one) does not, because the worker prompt gives the
 * question already ("The overall task"): a live worker reads it once.
 */
export const POLICY_TEMPLATE_VERSIONS: Readonly<Record<string, Readonly<Record<SubtaskKind, string>>>> = {
  'policy-v1': {
    solve: 'Solve this problem and give the final answer. Problem: {{question}}',
    plan: 'Do not solve this problem yet. Write a short plan for solving it: the steps to take, the facts or formulas it needs, and the mistakes to avoid. Problem: {{question}}',
    verify: 'Check the answer shown above step by step, correct any mistake, and give the final answer. Problem: {{question}}',
    refine: 'Improve on the work shown above: fill its gaps, fix its errors, complete the reasoning, and give the final answer. Problem: {{question}}',
    aggregate: 'Several attempts at the problem below are shown above. Compare them, work out which reasoning holds, and give the single best final answer. Problem: {{question}}',
  },
  'policy-v2': {
    solve: 'Solve the overall task and give the final answer.',
    plan: 'Do not solve the overall task yet. Write a short plan for solving it: the steps to take, the facts or formulas it needs, and the mistakes to avoid.',
    verify: 'Check the answer to the overall task shown above step by step, correct any mistake, and give the final answer.',
    refine: 'Improve on the work on the overall task shown above: fill its gaps, fix its errors, complete the reasoning, and give the final answer.',
    aggregate: 'Several attempts at the overall task are shown above. Compare them, work out which reasoning holds, and give the single best final answer.',
  },
};

/** The version new policies write with. */
export const POLICY_TEMPLATE_VERSION = 'policy-v2';

/** The current version's subtask text of each kind (a `{{question}}` in a version's text is replaced by the trimmed question). */
export const POLICY_TEMPLATES: Readonly<Record<SubtaskKind, string>> = POLICY_TEMPLATE_VERSIONS[POLICY_TEMPLATE_VERSION]!;

/** Whether a template version is one this code knows. */
export const isPolicyTemplateVersion = (v: unknown): v is string => typeof v === 'string' && Object.hasOwn(POLICY_TEMPLATE_VERSIONS, v);

/** The subtask of a kind for a question (one pass: a question containing "{{question}}" stays as it is). */
export function policySubtask(kind: SubtaskKind, question: string, version: string = POLICY_TEMPLATE_VERSION): string {
  if (!isPolicyTemplateVersion(version)) throw new InputError(`unknown policy template version ${JSON.stringify(version)} (known: ${Object.keys(POLICY_TEMPLATE_VERSIONS).join(', ')})`, { field: 'templateVersion' });
  const q = typeof question === 'string' ? question.trim() : '';
  if (!q) throw new InputError('the question is empty', { field: 'question' });
  return POLICY_TEMPLATE_VERSIONS[version]![kind].replace('{{question}}', () => q);
}
