// A fugu-ultra deployment's options (the `options` of its ultra_deployments row, set by `fugu
// ultra publish`): the workflow's bounds, the tool loops' bounds and the shared memory's limits.
// Checked at publish and again when the gateway loads it; an error names the field.
import { InputError } from '@fugu/core';
import { validateWorkflowOptions, type WorkflowOptions } from '../engine/options.ts';

export type InteractiveOptions = {
  /** the workflows' own options (maxSteps, maxTokensPerStep, maxUsd, workerPrompt, temperature, replay, ...) */
  workflow: WorkflowOptions;
  /** model calls of one agent that end in tool calls, at most (then its step ends `budget-tool-turns`) */
  maxToolTurnsPerAgent: number;
  /** tool-call turns of all the agents of one workflow together, at most */
  maxToolTurnsPerWorkflow: number;
  /** how long the client has to send the results of a workflow's tool calls (then it ends `tool-timeout`) */
  toolResultTimeoutMs: number;
  /** later workflows of a conversation see the tool calls and results of its earlier ones */
  sharedMemory: boolean;
  /** the newest entries of the shared memory an agent is shown, at most (the older are dropped, and counted) */
  memoryMaxEntries: number;
  /** characters of the shared memory an agent is shown, at most (each result cut to fit, the oldest dropped first) */
  memoryMaxChars: number;
};

export const INTERACTIVE_DEFAULTS: Omit<InteractiveOptions, 'workflow'> = {
  maxToolTurnsPerAgent: 8,
  maxToolTurnsPerWorkflow: 24,
  toolResultTimeoutMs: 15 * 60_000,
  sharedMemory: true,
  memoryMaxEntries: 50,
  memoryMaxChars: 16_000,
};

const KNOWN = ['workflow', ...Object.keys(INTERACTIVE_DEFAULTS)] as const;

/** Checks a deployment's options (defaults filled in); `field` prefixes every error's field. */
export function validateInteractiveOptions(raw: unknown, field = 'options'): InteractiveOptions {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new InputError('deployment options must be an object', { field });
  const o = raw as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!(KNOWN as readonly string[]).includes(k)) throw new InputError(`unknown deployment option "${k}" (known: ${KNOWN.join(', ')})`, { field: `${field}.${k}` });
  const int = (k: keyof typeof INTERACTIVE_DEFAULTS, min: number, max: number): number => {
    const v = o[k] ?? INTERACTIVE_DEFAULTS[k];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw new InputError(`${k} must be an integer in [${min}, ${max}], got ${JSON.stringify(v)}`, { field: `${field}.${k}` });
    return v;
  };
  const shared = o.sharedMemory ?? INTERACTIVE_DEFAULTS.sharedMemory;
  if (typeof shared !== 'boolean') throw new InputError(`sharedMemory must be true or false, got ${JSON.stringify(shared)}`, { field: `${field}.sharedMemory` });
  const workflow = validateWorkflowOptions(o.workflow ?? {}, `${field}.workflow`);
  for (const k of ['completion', 'sample', 'workers'] as const) {
    if (workflow[k] !== undefined) throw new InputError(`${k} is set per request, not per deployment`, { field: `${field}.workflow.${k}` });
  }
  return {
    workflow,
    maxToolTurnsPerAgent: int('maxToolTurnsPerAgent', 0, 100),
    maxToolTurnsPerWorkflow: int('maxToolTurnsPerWorkflow', 0, 1000),
    toolResultTimeoutMs: int('toolResultTimeoutMs', 1_000, 7 * 24 * 3_600_000),
    sharedMemory: shared,
    memoryMaxEntries: int('memoryMaxEntries', 0, 10_000),
    memoryMaxChars: int('memoryMaxChars', 0, 1_000_000),
  };
}
