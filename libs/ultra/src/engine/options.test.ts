import { describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { REPLAY_STEP_OUTPUT_TOKENS } from '@fugu/conductor';
import { REPLAY_DEFAULT_OUTPUT_TOKENS } from '@fugu/providers';
import { validateWorkflowOptions } from './options.ts';

const fieldOf = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    return (e as InputError).field;
  }
  throw new Error('no error');
};

describe('workflow options', () => {
  it('accepts a full set and keeps it', () => {
    const o = { maxSteps: 3, maxTokensPerStep: 64, maxUsd: '0.05', reward: { incorrect: 0.25 }, ranking: ['a', 'b'], temperature: 0.2, replay: { presets: { large: { keep: 0.9 } } }, workerPrompt: 'worker-v1', conductorPrompt: 'conductor-v1' };
    expect(validateWorkflowOptions(o)).toEqual(o);
  });

  it('names the field of each fault', () => {
    expect(fieldOf(() => validateWorkflowOptions({ maxSteps: 0 }, 'rows[1].options'))).toBe('rows[1].options.maxSteps');
    expect(fieldOf(() => validateWorkflowOptions({ maxSteps: 11 }))).toBe('options.maxSteps');
    expect(validateWorkflowOptions({}).maxSteps).toBe(5);
    expect(fieldOf(() => validateWorkflowOptions({ maxSteps: 2, maxTokensPerStep: 0 }))).toBe('options.maxTokensPerStep');
    expect(fieldOf(() => validateWorkflowOptions({ maxSteps: 2, maxUsd: '-1' }))).toBe('options.maxUsd');
    expect(fieldOf(() => validateWorkflowOptions({ maxSteps: 2, maxUsd: 0.5 }))).toBe('options.maxUsd');
    expect(fieldOf(() => validateWorkflowOptions({ maxSteps: 2, reward: { costPerUsd: -1 } }))).toBe('options.reward.costPerUsd');
    expect(fieldOf(() => validateWorkflowOptions({ maxSteps: 2, temperature: 3 }))).toBe('options.temperature');
    expect(fieldOf(() => validateWorkflowOptions({ maxSteps: 2, replay: { presets: { large: { keep: 2 } } } }))).toMatch(/^options\.replay\./);
    expect(fieldOf(() => validateWorkflowOptions({ maxSteps: 2, workerPrompt: 'worker-v99' }))).toBe('options.workerPrompt');
    expect(fieldOf(() => validateWorkflowOptions({ maxSteps: 2, maxStep: 3 }))).toBe('options.maxStep');
  });
});

describe('replay steps and the replay provider', () => {
  it('count the output of an answer without recorded tokens alike', () => {
    expect(REPLAY_STEP_OUTPUT_TOKENS).toBe(REPLAY_DEFAULT_OUTPUT_TOKENS);
  });
});
