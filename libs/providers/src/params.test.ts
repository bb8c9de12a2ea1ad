import { describe, expect, it } from 'vitest';
import type { ChatRequest } from '@fugu/core';
import { ALL_PARAMS, PARAM_SUPPORT, requestedParams, unsupportedParams } from './params.ts';
import { ReplayChatModel } from './replay.ts';
import { AnthropicChatModel } from './anthropic.ts';

const base: ChatRequest = { messages: [{ role: 'user', content: 'hi' }] };

describe('request parameters per provider', () => {
  it('counts only values that ask for something beyond the provider default', () => {
    expect(requestedParams({ ...base, stop: [], tools: [], parallelToolCalls: true, logprobs: false, store: false, toolChoice: 'auto', responseFormat: { type: 'text' }, logitBias: {} })).toEqual([]);
    expect(requestedParams({ ...base, stop: ['x'], parallelToolCalls: false, seed: 0, temperature: 0 }).sort()).toEqual(['parallelToolCalls', 'seed', 'stop', 'temperature']);
  });

  it('each adapter declares every parameter: the table is theirs', () => {
    for (const [kind, support] of Object.entries(PARAM_SUPPORT)) expect(Object.keys(support).sort(), kind).toEqual([...ALL_PARAMS].sort());
    expect(PARAM_SUPPORT.anthropic).toBe(AnthropicChatModel.params);
    expect(PARAM_SUPPORT.replay).toBe(new ReplayChatModel('r', { lookup: () => undefined }).params);
  });

  it('names what each provider cannot honour, by wire name; hints are never refused', () => {
    const req: ChatRequest = { ...base, seed: 1, stop: ['x'], responseFormat: { type: 'json_object' }, logprobs: true, user: 'u', store: true, serviceTier: 'flex', promptCacheKey: 'k' };
    expect(unsupportedParams('openai', req)).toEqual([]);
    expect(unsupportedParams('openai-compatible', req)).toEqual([]);
    expect(unsupportedParams('anthropic', req).sort()).toEqual(['logprobs', 'response_format', 'seed']);
    expect(unsupportedParams('google', req).sort()).toEqual(['logprobs']);
    expect(unsupportedParams('replay', req).sort()).toEqual(['logprobs', 'response_format', 'seed']);
    expect(unsupportedParams('anthropic', { ...base, temperature: 0.2, topP: 0.5 })).toEqual(['temperature', 'top_p']);
  });

  it('a declaration may depend on the value: replay forces no tool call, Anthropic thinks only outside a tool loop', () => {
    const tools = [{ name: 'f', parameters: { type: 'object' } }];
    expect(unsupportedParams('replay', { ...base, tools, toolChoice: 'none' })).toEqual([]);
    expect(unsupportedParams('replay', { ...base, tools, toolChoice: 'required' })).toEqual(['tool_choice']);
    expect(unsupportedParams('replay', { ...base, tools, toolChoice: { name: 'f' } })).toEqual(['tool_choice']);
    expect(unsupportedParams('anthropic', { ...base, reasoningEffort: 'low' })).toEqual([]);
    const loop: ChatRequest = {
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: [{ type: 'tool-call', id: 'c1', name: 'f', arguments: '{}' }] },
        { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', name: 'f', content: '1' }] },
      ],
      tools,
      reasoningEffort: 'low',
    };
    expect(unsupportedParams('anthropic', loop)).toEqual(['reasoning_effort']);
  });

  it('replay honours max_tokens and stop by cutting the recorded answer as the model would have stopped', async () => {
    const m = new ReplayChatModel('r', { lookup: () => ({ itemId: 'a', outcome: { score: 1, answer: 'The answer is 42. END of story, told at length.', tokensOut: 12 } }) });
    // a stop sequence the answer does not contain and a limit of exactly its 12 tokens cut nothing;
    // one token less cuts it to that many (4 characters a token), finish length
    const whole = await m.generate({ ...base, stop: ['zzz'], maxTokens: 12 });
    expect([whole.text, whole.finishReason, whole.usage.outputTokens]).toEqual(['The answer is 42. END of story, told at length.', 'stop', 12]);
    const shy = await m.generate({ ...base, stop: ['zzz'], maxTokens: 11 });
    expect([shy.text, shy.finishReason, shy.usage.outputTokens]).toEqual(['The answer is 42. END of story, told at leng', 'length', 11]);
    const stopped = await m.generate({ ...base, stop: ['zzz', ' END'] });
    expect([stopped.text, stopped.finishReason, stopped.usage.outputTokens]).toEqual(['The answer is 42.', 'stop', 5]);
    const short = await m.generate({ ...base, maxTokens: 2 });
    expect([short.text, short.finishReason, short.usage.outputTokens]).toEqual(['The answ', 'length', 2]);
  });
});
