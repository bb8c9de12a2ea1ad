import { describe, expect, it } from 'vitest';
import { canonicalJson, requestHash, type RequestHashSpec } from './request-hash.ts';
import type { ChatRequest } from '@fugu/core';

const spec: RequestHashSpec = { provider: 'openai', model: 'gpt-4o-mini', settings: { temperature: 0.7 } };
const req: ChatRequest = {
  messages: [{ role: 'user', content: 'Hello' }],
  tools: [{ name: 'f', parameters: { type: 'object', properties: { a: { type: 'string' } } } }],
};

describe('requestHash', () => {
  it('is a stable sha256 hex', () => {
    const h = requestHash(spec, req, 0);
    expect(h).toMatch(/^[0-9a-f]{64}$/);
    expect(requestHash(spec, structuredClone(req), 0)).toBe(h);
  });

  it('changes with every input that decides the answer', () => {
    const h = requestHash(spec, req, 0);
    expect(requestHash(spec, req, 1)).not.toBe(h);
    expect(requestHash({ ...spec, model: 'gpt-4o' }, req, 0)).not.toBe(h);
    expect(requestHash({ ...spec, provider: 'openai-compatible' }, req, 0)).not.toBe(h);
    expect(requestHash({ ...spec, baseUrl: 'http://127.0.0.1:8000/v1' }, req, 0)).not.toBe(h);
    expect(requestHash({ ...spec, settings: { temperature: 0 } }, req, 0)).not.toBe(h);
    expect(requestHash(spec, { ...req, temperature: 0 }, 0)).not.toBe(h);
    expect(requestHash(spec, { ...req, maxTokens: 10 }, 0)).not.toBe(h);
    expect(requestHash(spec, { ...req, toolChoice: 'required' }, 0)).not.toBe(h);
    expect(requestHash(spec, { ...req, tools: [] }, 0)).not.toBe(h);
    expect(requestHash(spec, { ...req, messages: [{ role: 'user', content: 'Hello!' }] }, 0)).not.toBe(h);
  });

  it('ignores key order, time limits, signals, metadata and the same settings given twice', () => {
    const h = requestHash(spec, req, 0);
    const reordered: ChatRequest = {
      tools: [{ parameters: { properties: { a: { type: 'string' } }, type: 'object' }, name: 'f' }],
      messages: [{ content: 'Hello', role: 'user' }],
    };
    expect(requestHash(spec, reordered, 0)).toBe(h);
    expect(requestHash(spec, { ...req, timeoutMs: 5, signal: new AbortController().signal, metadata: { itemId: 'x' } }, 0)).toBe(h);
    // the request repeating the worker's default is the same request
    expect(requestHash(spec, { ...req, temperature: 0.7 }, 0)).toBe(h);
    // a content list of text parts is the joined text
    expect(requestHash(spec, { ...req, messages: [{ role: 'user', content: [{ type: 'text', text: 'Hel' }, { type: 'text', text: 'lo' }] }] }, 0)).toBe(h);
  });

  it('keeps the hash of a request without the standard parameters (cache keys stay valid)', () => {
    // the value before the standard parameters existed
    expect(requestHash(spec, req, 0)).toBe('62e5bb3371603a4891436f6b047078f6caae5977b0b22801a18c12f403c3e9c5');
    // provider defaults are no parameter
    expect(requestHash(spec, { ...req, stop: [], parallelToolCalls: true, logprobs: false, responseFormat: { type: 'text' }, logitBias: {} }, 0)).toBe(requestHash(spec, req, 0));
  });

  it('changes with the standard parameters that change the answer, not with user, tier or store', () => {
    const h = requestHash(spec, req, 0);
    for (const extra of [
      { stop: ['END'] },
      { seed: 7 },
      { frequencyPenalty: 0.5 },
      { presencePenalty: 0.5 },
      { logitBias: { '50256': -100 } },
      { logprobs: true },
      { responseFormat: { type: 'json_object' as const } },
      { parallelToolCalls: false },
      { verbosity: 'low' as const },
    ]) {
      expect(requestHash(spec, { ...req, ...extra }, 0), JSON.stringify(extra)).not.toBe(h);
    }
    expect(requestHash(spec, { ...req, user: 'u1', serviceTier: 'flex', store: true, storeMetadata: { a: 'b' }, promptCacheKey: 'k' }, 0)).toBe(h);
  });

  it('rejects a bad sample index', () => {
    expect(() => requestHash(spec, req, -1)).toThrow(RangeError);
    expect(() => requestHash(spec, req, 1.5)).toThrow(RangeError);
  });

  it('canonicalJson sorts keys and drops undefined', () => {
    expect(canonicalJson({ b: 1, a: { d: undefined, c: [2, undefined] } })).toBe('{"a":{"c":[2,null]},"b":1}');
  });
});
