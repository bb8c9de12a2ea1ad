// Google adapter against a local server speaking the Gemini API, through the real @google/genai SDK.

import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '@fugu/core';
import { BadRequestError, OverloadedError, RateLimitError, ServerError } from './errors.ts';
import { GoogleChatModel, THOUGHT_SIGNATURE_SEPARATOR } from './google.ts';
import {
  WEATHER_TOOL,
  collectStream, startGoogleStub, type GoogleStub } from './testing/index.ts';
import { sharedFailureTests, stubPerSuite, type AdapterUnderTest } from './test-support/adapter-suite.ts';
import type { ChatModelOptions } from '@fugu/core';

const KEY = 'AIzaTEST0123456789abcdefghijklmnop';

const WEATHER = WEATHER_TOOL; // shared with the other adapters' tests

const ADAPTER: AdapterUnderTest = {
  start: startGoogleStub,
  make: (stub, o = {}) => new GoogleChatModel({ model: 'gemini-2.5-flash', apiKey: KEY, baseURL: stub.baseURL, ...o }),
  key: KEY,
  otherKey: 'AIzaTheRightKey0000000000000000',
};

describe('GoogleChatModel', () => {
  let stub: GoogleStub;
  const make = (o: Partial<ChatModelOptions> = {}): GoogleChatModel => ADAPTER.make(stub, o) as GoogleChatModel;
  stubPerSuite(() => startGoogleStub({ chunkSize: 3 }), (s) => (stub = s));

  it('generates plain text; system instruction and generation config serialised', async () => {
    stub.enqueue({ type: 'text', text: 'Four.', usage: { input: 8, output: 2 } });
    const r = await make().generate({
      messages: [
        { role: 'system', content: 'Answer in one word.' },
        { role: 'user', content: '2+2?' },
      ],
      temperature: 0.1,
      topP: 0.8,
      maxTokens: 32,
      reasoningEffort: 'low',
    });
    expect(r).toMatchObject({ text: 'Four.', finishReason: 'stop', model: 'gemini-2.5-flash', toolCalls: [] });
    expect(r.usage).toEqual({ inputTokens: 8, outputTokens: 2 });

    const req = stub.lastRequest!;
    expect(req.path).toBe('/v1beta/models/gemini-2.5-flash:generateContent');
    expect(req.headers['x-goog-api-key']).toBe(KEY);
    expect(req.body.systemInstruction).toEqual({ parts: [{ text: 'Answer in one word.' }], role: 'user' });
    expect(req.body.contents).toEqual([{ role: 'user', parts: [{ text: '2+2?' }] }]);
    expect(req.body.generationConfig).toEqual({ temperature: 0.1, topP: 0.8, maxOutputTokens: 32, thinkingConfig: { thinkingBudget: 1024 } });
  });

  it('maps the standard parameters it supports: stop, seed, penalties, JSON mode', async () => {
    stub.enqueue({ type: 'text', text: '{}' }, { type: 'text', text: '{}' });
    await make().generate({ messages: [{ role: 'user', content: 'json' }], stop: ['END'], seed: 7, frequencyPenalty: 0.5, presencePenalty: -0.5, responseFormat: { type: 'json_object' } });
    expect(stub.lastRequest!.body.generationConfig).toEqual({ stopSequences: ['END'], seed: 7, frequencyPenalty: 0.5, presencePenalty: -0.5, responseMimeType: 'application/json' });
    const schema = { type: 'object', properties: { a: { type: 'string' } } };
    await make().generate({ messages: [{ role: 'user', content: 'json' }], responseFormat: { type: 'json_schema', name: 'x', schema } });
    expect(stub.lastRequest!.body.generationConfig).toEqual({ responseMimeType: 'application/json', responseJsonSchema: schema });
  });

  it('uses thinkingLevel for models after Gemini 2', async () => {
    await make({ model: 'gemini-3-pro' }).generate({ messages: [{ role: 'user', content: 'x' }], reasoningEffort: 'high' });
    expect(stub.lastRequest!.path).toBe('/v1beta/models/gemini-3-pro:generateContent');
    expect(stub.lastRequest!.body.generationConfig.thinkingConfig).toEqual({ thinkingLevel: 'HIGH' });
  });

  it('sends function declarations and tool config, and parses function calls back', async () => {
    stub.enqueue({ type: 'tool-calls', calls: [{ name: 'get_weather', arguments: '{"city":"Paris"}' }] });
    const r = await make().generate({ messages: [{ role: 'user', content: 'Weather?' }], tools: [WEATHER], toolChoice: { name: 'get_weather' } });
    const body = stub.lastRequest!.body;
    expect(body.tools).toEqual([
      { functionDeclarations: [{ name: 'get_weather', description: 'Current weather for a city', parametersJsonSchema: WEATHER.parameters }] },
    ]);
    expect(body.toolConfig).toEqual({ functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['get_weather'] } });
    expect(r.finishReason).toBe('tool-calls');
    expect(r.toolCalls).toHaveLength(1);
    expect(r.toolCalls[0]).toMatchObject({ name: 'get_weather', arguments: '{"city":"Paris"}' });
    // Gemini gave no id: a stable one is made up
    expect(r.toolCalls[0]!.id).toMatch(/^fugu_call_[0-9a-f]{16}$/);
    stub.enqueue({ type: 'tool-calls', calls: [{ name: 'get_weather', arguments: '{"city":"Paris"}' }] });
    const again = await make().generate({ messages: [{ role: 'user', content: 'Weather?' }], tools: [WEATHER] });
    expect(again.toolCalls[0]!.id).not.toBe(r.toolCalls[0]!.id); // another response id
  });

  it('serialises a tool-result turn as functionResponse parts; thought signatures round-trip', async () => {
    stub.enqueue({
      type: 'tool-calls',
      calls: [
        { id: 'fc-1', name: 'get_weather', arguments: '{"city":"Paris"}', thoughtSignature: 'c2lnbmF0dXJl' },
        { name: 'get_weather', arguments: '{"city":"Rome"}' },
      ],
    });
    const first = await make().generate({ messages: [{ role: 'user', content: 'Paris and Rome?' }], tools: [WEATHER] });
    const [paris, rome] = first.toolCalls;
    expect(paris!.id).toBe(`fc-1${THOUGHT_SIGNATURE_SEPARATOR}c2lnbmF0dXJl`);

    const messages: ChatMessage[] = [
      { role: 'user', content: 'Paris and Rome?' },
      { role: 'assistant', content: first.content },
      {
        role: 'tool',
        content: [
          { type: 'tool-result', toolCallId: paris!.id, content: '18C' },
          { type: 'tool-result', toolCallId: rome!.id, name: 'get_weather', content: 'no data', isError: true },
        ],
      },
    ];
    await make().generate({ messages, tools: [WEATHER] });
    expect(stub.lastRequest!.body.contents).toEqual([
      { role: 'user', parts: [{ text: 'Paris and Rome?' }] },
      {
        role: 'model',
        parts: [
          { functionCall: { id: 'fc-1', name: 'get_weather', args: { city: 'Paris' } }, thoughtSignature: 'c2lnbmF0dXJl' },
          // a made-up id is not sent to Gemini
          { functionCall: { name: 'get_weather', args: { city: 'Rome' } } },
        ],
      },
      {
        role: 'user',
        parts: [
          { functionResponse: { id: 'fc-1', name: 'get_weather', response: { output: '18C' } } },
          { functionResponse: { name: 'get_weather', response: { error: 'no data' } } },
        ],
      },
    ]);
  });

  it('rejects a tool result whose function name cannot be known', async () => {
    const err = await make()
      .generate({ messages: [{ role: 'user', content: 'x' }, { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'nope', content: 'r' }] }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BadRequestError);
    expect((err as Error).message).toContain('nope');
  });

  it('streams text over streamGenerateContent?alt=sse with usage and finish', async () => {
    stub.enqueue({ type: 'text', text: 'Streamed from Gemini.', usage: { input: 5, output: 6 } });
    const s = await collectStream(make().stream({ messages: [{ role: 'user', content: 'go' }] }));
    expect(stub.lastRequest!.path).toBe('/v1beta/models/gemini-2.5-flash:streamGenerateContent');
    expect(stub.lastRequest!.query.get('alt')).toBe('sse');
    expect(s.deltas.length).toBeGreaterThan(1);
    expect(s.text).toBe('Streamed from Gemini.');
    expect(s.finish).toEqual({ type: 'finish', finishReason: 'stop', usage: { inputTokens: 5, outputTokens: 6 }, model: 'gemini-2.5-flash' });
  });

  it('streams function calls as whole tool calls', async () => {
    stub.enqueue({
      type: 'tool-calls',
      text: 'Looking.',
      calls: [
        { id: 'a', name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' },
        { id: 'b', name: 'get_weather', arguments: '{"city":"Rome"}' },
      ],
    });
    const s = await collectStream(make().stream({ messages: [{ role: 'user', content: 'w' }], tools: [WEATHER] }));
    expect(s.text).toBe('Looking.');
    expect(s.toolCalls).toEqual([
      { id: 'a', name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' },
      { id: 'b', name: 'get_weather', arguments: '{"city":"Rome"}' },
    ]);
    expect(s.finish!.finishReason).toBe('tool-calls');
  });

  it('maps finish reasons: MAX_TOKENS -> length, SAFETY -> content-filter', async () => {
    stub.enqueue({ type: 'text', text: 'cut', finish: 'MAX_TOKENS' }, { type: 'text', text: '', finish: 'SAFETY' });
    expect((await make().generate({ messages: [{ role: 'user', content: 'x' }] })).finishReason).toBe('length');
    expect((await make().generate({ messages: [{ role: 'user', content: 'x' }] })).finishReason).toBe('content-filter');
  });

  it('maps 429 to RateLimitError with the RetryInfo delay, without SDK retries', async () => {
    stub.enqueue({ type: 'error', status: 429, message: 'Resource has been exhausted (e.g. check quota).', headers: { 'retry-after': '7' } });
    const err = await make().generate({ messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitError);
    expect(err).toMatchObject({ provider: 'google', status: 429, transient: true, retryAfterMs: 7000 });
    expect((err as Error).message).toContain('RESOURCE_EXHAUSTED');
    expect(stub.requestCount).toBe(1);
  });

  it('maps 500 to ServerError and 503 to OverloadedError, without SDK retries', async () => {
    stub.enqueue({ type: 'error', status: 500, message: 'Internal error' }, { type: 'error', status: 503, message: 'The model is overloaded.' });
    const e500 = await make().generate({ messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(e500).toBeInstanceOf(ServerError);
    expect(e500).toMatchObject({ status: 500, transient: true });
    const e503 = await collectStream(make().stream({ messages: [{ role: 'user', content: 'x' }] })).catch((e: unknown) => e);
    expect(e503).toBeInstanceOf(OverloadedError);
    expect(stub.requestCount).toBe(2);
  });

  sharedFailureTests(ADAPTER, () => stub);
});
