import { describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { answerReplayRequest, decodeReplayStepRequest, encodeReplayStepRequest, REPLAY_PRESETS, REPLAY_STEP_METADATA } from '@fugu/conductor';
import { REPLAY_DEFAULT_OUTPUT_TOKENS, ReplayChatModel } from '@fugu/providers';
import { validateWorkflowOptions } from './options.ts';
import { replayStepMetadata } from './executor.ts';

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
  it('count the output of an answer without recorded tokens alike', async () => {
    // a replay worker as apps/provider-worker builds it: its store answers a Conductor step (request
    // metadata replayStep) by the step model, any other request by the item's recorded outcome
    const item = { id: 'q1', recorded: { w: { score: 1 }, v: { score: 0 }, x: { score: 1, answer: 'It is 42, by a long computation written out in full.' } } };
    const model = (worker: string) => new ReplayChatModel(worker, {
      lookup: (prompt, _itemId, metadata) => {
        const a = answerReplayRequest(worker, item, prompt, metadata);
        return a && { itemId: item.id, ...a };
      },
    });
    const ask = (sources?: string[]) => ({
      messages: [{ role: 'user' as const, content: 'What is 6 x 7?' }],
      ...(sources && { metadata: { replayStep: encodeReplayStepRequest({ seed: 3, sources, seenTokens: 0, params: { ...REPLAY_PRESETS.large } }) } }),
    });
    const outputTokens = async (worker: string, sources?: string[]) => (await model(worker).generate(ask(sources))).usage.outputTokens;
    // neither tokens nor an answer recorded: the provider's default, for the plain call, a step that
    // sees nothing and a step that sees another worker's answer (whose text is the short marker)
    expect(await outputTokens('w')).toBe(REPLAY_DEFAULT_OUTPUT_TOKENS);
    expect(await outputTokens('w', [])).toBe(REPLAY_DEFAULT_OUTPUT_TOKENS);
    expect(await outputTokens('w', ['v'])).toBe(REPLAY_DEFAULT_OUTPUT_TOKENS);
    // an answer recorded without tokens: its length, alike on both paths (not the default)
    const plain = await outputTokens('x');
    expect(plain).not.toBe(REPLAY_DEFAULT_OUTPUT_TOKENS);
    expect(await outputTokens('x', [])).toBe(plain);
    expect(await outputTokens('x', ['v'])).toBe(plain);
  });
});

describe('a replay step request carries the parameters for the number of sources it reads', () => {
  it('one source: the worker\'s; two distinct others (itself not counted): the config\'s two-source override', () => {
    const options = { replay: { presets: { large: { adopt: 0.5 } }, sources: { '2': { adopt: 0.9 } } } };
    const worker = { name: 'gpt-4o', model: 'gpt-4o' };
    const adoptOf = (sources: string[]) => decodeReplayStepRequest(replayStepMetadata({ itemId: 'q1', seed: 0, options, worker, sources, seenTokens: 0 })[REPLAY_STEP_METADATA]!).params.adopt;
    expect(adoptOf(['a'])).toBe(0.5);
    expect(adoptOf(['a', 'gpt-4o'])).toBe(0.5);
    expect(adoptOf(['a', 'b'])).toBe(0.9);
  });
});
