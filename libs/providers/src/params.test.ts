import { describe, expect, it } from 'vitest';
import type { ChatRequest } from '@fugu/core';
import { requestedParams, unsupportedParams } from './params.ts';
import { ReplayChatModel } from './replay.ts';

const base: ChatRequest = { messages: [{ role: 'user', content: 'hi' }] };

describe('standard parameters per provider', () => {
  it('counts only values that ask for something beyond the provider default', () => {
    expect(requestedParams({ ...base, stop: [], parallelToolCalls: true, logprobs: false, store: false, responseFormat: { type: 'text' }, logitBias: {} })).toEqual([]);
    expect(requestedParams({ ...base, stop: ['x'], parallelToolCalls: false, seed: 0 }).sort()).toEqual(['parallelToolCalls', 'seed', 'stop']);
  });

  it('names what each provider cannot honour, by wire name', () => {
    const req: ChatRequest = { ...base, seed: 1, stop: ['x'], responseFormat: { type: 'json_object' }, logprobs: true, user: 'u' };
    expect(unsupportedParams('openai', req)).toEqual([]);
    expect(unsupportedParams('openai-compatible', req)).toEqual([]);
    expect(unsupportedParams('anthropic', req).sort()).toEqual(['logprobs', 'response_format', 'seed']);
    expect(unsupportedParams('google', req).sort()).toEqual(['logprobs', 'user']);
    expect(unsupportedParams('replay', req)).toEqual([]);
  });

  it('replay ignores them without failing', async () => {
    const m = new ReplayChatModel('r', { lookup: () => ({ itemId: 'a', outcome: { score: 1, answer: 'yes' } }) });
    const r = await m.generate({ ...base, seed: 1, stop: ['x'], responseFormat: { type: 'json_object' }, logprobs: true, frequencyPenalty: 1 });
    expect(r.text).toBe('yes');
  });
});
