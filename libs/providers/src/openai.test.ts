// OpenAI and OpenAI-compatible adapters against a local server speaking Chat Completions,
// through the real `openai` SDK.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatMessage } from '@fugu/core';
import { AbortedError, OverloadedError, RateLimitError, ServerError, TimeoutError } from './errors.ts';
import { OpenAIChatModel, OpenAICompatibleChatModel } from './openai.ts';
import {
  WEATHER_TOOL,
  collectStream, startOpenAIStub, type OpenAIStub } from './testing/index.ts';
import { sharedFailureTests, stubPerSuite } from './test-support/adapter-suite.ts';
import type { ChatModel, ChatModelOptions } from '@fugu/core';

const KEY = 'sk-test-0123456789abcdefghijklmnop';

const WEATHER = WEATHER_TOOL; // shared with the other adapters' tests

type Flavour = {
  kind: 'openai' | 'openai-compatible';
  maxField: 'max_completion_tokens' | 'max_tokens';
  otherMaxField: 'max_completion_tokens' | 'max_tokens';
  make: (stub: OpenAIStub, o?: Partial<ChatModelOptions>) => ChatModel;
};

const flavours: Flavour[] = [
  {
    kind: 'openai',
    maxField: 'max_completion_tokens',
    otherMaxField: 'max_tokens',
    make: (stub, o = {}) => new OpenAIChatModel({ model: 'gpt-test', apiKey: KEY, baseURL: stub.baseURL, ...o }),
  },
  {
    kind: 'openai-compatible',
    maxField: 'max_tokens',
    otherMaxField: 'max_completion_tokens',
    make: (stub, o = {}) => new OpenAICompatibleChatModel({ model: 'llama-test', apiKey: KEY, baseURL: stub.baseURL, ...o }),
  },
];

describe.each(flavours)('$kind adapter', (f) => {
  let stub: OpenAIStub;
  stubPerSuite(() => startOpenAIStub({ chunkSize: 3 }), (s) => (stub = s));

  it('generates plain text with usage, finish reason and the request serialised', async () => {
    stub.enqueue({ type: 'text', text: 'Paris is the capital.', usage: { input: 21, output: 6 } });
    const model = f.make(stub);
    const r = await model.generate({
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Capital of France?' },
      ],
      temperature: 0.2,
      topP: 0.9,
      maxTokens: 64,
      reasoningEffort: 'low',
    });
    expect(model.provider).toBe(f.kind);
    expect(r.text).toBe('Paris is the capital.');
    expect(r.content).toEqual([{ type: 'text', text: 'Paris is the capital.' }]);
    expect(r.toolCalls).toEqual([]);
    expect(r.finishReason).toBe('stop');
    expect(r.usage).toEqual({ inputTokens: 21, outputTokens: 6, reasoningTokens: 0, cachedInputTokens: 0 });
    expect(r.model).toBe(model.modelId);

    const req = stub.lastRequest!;
    expect(req.path).toBe('/v1/chat/completions');
    expect(req.headers['authorization']).toBe(`Bearer ${KEY}`);
    expect(req.body.model).toBe(model.modelId);
    expect(req.body.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Capital of France?' },
    ]);
    expect(req.body[f.maxField]).toBe(64);
    expect(req.body).not.toHaveProperty(f.otherMaxField);
    expect(req.body.temperature).toBe(0.2);
    expect(req.body.top_p).toBe(0.9);
    expect(req.body.reasoning_effort).toBe('low');
    expect(req.body.stream ?? false).toBe(false);
  });

  it('sends the standard parameters by their wire names, parallel_tool_calls only with tools, and reads logprobs back', async () => {
    const logprobs = { content: [{ token: 'Hi', logprob: -0.1, bytes: [72, 105], top_logprobs: [{ token: 'Hi', logprob: -0.1, bytes: [72, 105] }] }], refusal: null };
    stub.enqueue({ type: 'raw', status: 200, body: { id: 'x', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'Hi' }, logprobs, finish_reason: 'stop' }] } });
    const r = await f.make(stub).generate({
      messages: [{ role: 'user', content: 'hi' }],
      stop: ['END'], seed: 1, frequencyPenalty: 0.1, presencePenalty: 0.2, logitBias: { '1': 5 }, logprobs: true, topLogprobs: 1,
      responseFormat: { type: 'json_schema', name: 'n', schema: { type: 'object' }, strict: true }, parallelToolCalls: false, user: 'u', serviceTier: 'flex',
      store: true, storeMetadata: { a: 'b' }, verbosity: 'low', promptCacheKey: 'k',
    });
    expect(stub.lastRequest!.body).toMatchObject({
      stop: ['END'], seed: 1, frequency_penalty: 0.1, presence_penalty: 0.2, logit_bias: { '1': 5 }, logprobs: true, top_logprobs: 1,
      response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { type: 'object' }, strict: true } }, user: 'u', service_tier: 'flex',
      store: true, metadata: { a: 'b' }, verbosity: 'low', prompt_cache_key: 'k',
    });
    expect(stub.lastRequest!.body.parallel_tool_calls).toBeUndefined();
    expect(r.logprobs).toEqual([{ token: 'Hi', logprob: -0.1, bytes: [72, 105], topLogprobs: [{ token: 'Hi', logprob: -0.1, bytes: [72, 105] }] }]);
    await f.make(stub).generate({ messages: [{ role: 'user', content: 'hi' }], tools: [WEATHER], parallelToolCalls: false });
    expect(stub.lastRequest!.body.parallel_tool_calls).toBe(false);
  });

  it('uses the worker defaults where the request leaves a setting unset', async () => {
    const model = f.make(stub, { defaults: { temperature: 0.7, maxTokens: 99 } });
    await model.generate({ messages: [{ role: 'user', content: 'hi' }], temperature: 0 });
    expect(stub.lastRequest!.body.temperature).toBe(0);
    expect(stub.lastRequest!.body[f.maxField]).toBe(99);
  });

  it('sends tools and tool choice, and parses tool calls back', async () => {
    stub.enqueue({ type: 'tool-calls', calls: [{ id: 'call_abc', name: 'get_weather', arguments: '{"city":"Paris"}' }], usage: { input: 40, output: 12 } });
    const r = await f.make(stub).generate({
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [WEATHER],
      toolChoice: { name: 'get_weather' },
    });
    const body = stub.lastRequest!.body;
    expect(body.tools).toEqual([
      { type: 'function', function: { name: 'get_weather', description: 'Current weather for a city', parameters: WEATHER.parameters } },
    ]);
    expect(body.tool_choice).toEqual({ type: 'function', function: { name: 'get_weather' } });
    expect(r.toolCalls).toEqual([{ id: 'call_abc', name: 'get_weather', arguments: '{"city":"Paris"}' }]);
    expect(r.content).toEqual([{ type: 'tool-call', id: 'call_abc', name: 'get_weather', arguments: '{"city":"Paris"}' }]);
    expect(r.finishReason).toBe('tool-calls');
    expect(r.text).toBe('');
  });

  it('serialises a tool-result turn', async () => {
    const messages: ChatMessage[] = [
      { role: 'user', content: 'Weather in Paris and Rome?' },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Checking.' },
          { type: 'tool-call', id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
          { type: 'tool-call', id: 'call_2', name: 'get_weather', arguments: '{"city":"Rome"}' },
        ],
      },
      {
        role: 'tool',
        content: [
          { type: 'tool-result', toolCallId: 'call_1', content: '18C, sunny' },
          { type: 'tool-result', toolCallId: 'call_2', content: 'unavailable', isError: true },
        ],
      },
    ];
    await f.make(stub).generate({ messages, tools: [WEATHER] });
    expect(stub.lastRequest!.body.messages).toEqual([
      { role: 'user', content: 'Weather in Paris and Rome?' },
      {
        role: 'assistant',
        content: 'Checking.',
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: '18C, sunny' },
      { role: 'tool', tool_call_id: 'call_2', content: 'unavailable' },
    ]);
  });

  it('streams text deltas, then finish with usage', async () => {
    stub.enqueue({ type: 'text', text: 'Streaming works fine.', usage: { input: 9, output: 5 } });
    const s = await collectStream(f.make(stub).stream({ messages: [{ role: 'user', content: 'go' }] }));
    expect(s.deltas.length).toBeGreaterThan(1);
    expect(s.text).toBe('Streaming works fine.');
    expect(s.finish).toEqual({ type: 'finish', finishReason: 'stop', usage: { inputTokens: 9, outputTokens: 5, reasoningTokens: 0, cachedInputTokens: 0 }, model: stub.lastRequest!.body.model });
    expect(s.events.at(-1)!.type).toBe('finish');
    expect(stub.lastRequest!.body.stream).toBe(true);
    expect(stub.lastRequest!.body.stream_options).toEqual({ include_usage: true });
  });

  it('assembles streamed tool-call arguments into whole tool calls', async () => {
    const args1 = '{"city":"Paris","unit":"celsius"}';
    const args2 = '{"city":"Rome"}';
    stub.enqueue({
      type: 'tool-calls',
      text: 'Let me look.',
      calls: [
        { id: 'call_p', name: 'get_weather', arguments: args1 },
        { id: 'call_r', name: 'get_weather', arguments: args2 },
      ],
    });
    const s = await collectStream(f.make(stub).stream({ messages: [{ role: 'user', content: 'weather' }], tools: [WEATHER] }));
    expect(s.text).toBe('Let me look.');
    expect(s.toolCalls).toEqual([
      { id: 'call_p', name: 'get_weather', arguments: args1 },
      { id: 'call_r', name: 'get_weather', arguments: args2 },
    ]);
    expect(s.finish!.finishReason).toBe('tool-calls');
  });

  it('maps 429 with retry-after to RateLimitError, without SDK retries', async () => {
    stub.enqueue({ type: 'error', status: 429, message: 'Rate limit reached', headers: { 'retry-after': '2' } });
    const err = await f.make(stub).generate({ messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitError);
    expect(err).toMatchObject({ provider: f.kind, kind: 'rate-limit', status: 429, transient: true, retryAfterMs: 2000 });
    expect(stub.requestCount).toBe(1);
  });

  it('prefers retry-after-ms', async () => {
    stub.enqueue({ type: 'error', status: 429, headers: { 'retry-after-ms': '1500', 'retry-after': '2' } });
    const err = await f.make(stub).generate({ messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(err).toMatchObject({ retryAfterMs: 1500 });
  });

  it('maps 500 to a transient ServerError and 503 to OverloadedError', async () => {
    stub.enqueue({ type: 'error', status: 500, message: 'boom' }, { type: 'error', status: 503, message: 'busy' });
    const model = f.make(stub);
    const e500 = await model.generate({ messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(e500).toBeInstanceOf(ServerError);
    expect(e500).toMatchObject({ status: 500, transient: true });
    const e503 = await model.generate({ messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(e503).toBeInstanceOf(OverloadedError);
    expect(stub.requestCount).toBe(2);
  });

  it("a request's timeoutMs overrides the model's", async () => {
    stub.enqueue({ type: 'hang' });
    const err = await f
      .make(stub, { timeoutMs: 600_000 })
      .generate({ messages: [{ role: 'user', content: 'x' }], timeoutMs: 200 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TimeoutError);
  });

  it('reports a caller abort as AbortedError', async () => {
    stub.enqueue({ type: 'hang' });
    const ac = new AbortController();
    const p = f.make(stub).generate({ messages: [{ role: 'user', content: 'x' }], signal: ac.signal });
    setTimeout(() => ac.abort(), 50);
    await expect(p).rejects.toBeInstanceOf(AbortedError);
  });

  sharedFailureTests({ start: startOpenAIStub, make: f.make, key: KEY, otherKey: 'sk-the-right-key-000000000' }, () => stub);
});

describe('openai-compatible specifics', () => {
  let stub: OpenAIStub;
  beforeAll(async () => {
    stub = await startOpenAIStub();
  });
  afterAll(() => stub.close());

  it('works without an API key and sends no Authorization header', async () => {
    const model = new OpenAICompatibleChatModel({ model: 'qwen', baseURL: stub.baseURL });
    const r = await model.generate({ messages: [{ role: 'user', content: 'hi' }] });
    expect(r.text).toBe('stub answer');
    expect(stub.lastRequest!.headers['authorization']).toBeUndefined();
  });

  it('estimates usage when the server reports none', async () => {
    stub.enqueue({
      type: 'raw',
      status: 200,
      body: {
        id: 'x',
        object: 'chat.completion',
        created: 1,
        model: 'qwen',
        choices: [{ index: 0, message: { role: 'assistant', content: 'twelve chars' }, finish_reason: 'stop', logprobs: null }],
      },
    });
    const r = await new OpenAICompatibleChatModel({ model: 'qwen', baseURL: stub.baseURL }).generate({ messages: [{ role: 'user', content: 'abcdefgh' }] });
    expect(r.usage).toEqual({ inputTokens: 2, outputTokens: 3 });
  });

  it('sends user image parts as content parts', async () => {
    const model = new OpenAICompatibleChatModel({ model: 'llava', baseURL: stub.baseURL });
    await model.generate({
      messages: [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image', url: 'https://example.com/cat.png' }] }],
    });
    expect(stub.lastRequest!.body.messages[0].content).toEqual([
      { type: 'text', text: 'What is this?' },
      { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } },
    ]);
  });
});
