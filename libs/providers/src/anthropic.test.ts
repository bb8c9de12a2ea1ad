// Anthropic adapter against a local server speaking the Messages API, through the real SDK.

import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '@fugu/core';
import { AnthropicChatModel } from './anthropic.ts';
import { BadRequestError, OverloadedError, RateLimitError, ServerError } from './errors.ts';
import {
  WEATHER_TOOL,
  collectStream, startAnthropicStub, type AnthropicStub } from './testing/index.ts';
import { sharedFailureTests, stubPerSuite, type AdapterUnderTest } from './test-support/adapter-suite.ts';
import type { ChatModelOptions } from '@fugu/core';

const KEY = 'sk-ant-test-0123456789abcdefghij';

const WEATHER = WEATHER_TOOL; // shared with the other adapters' tests

const ADAPTER: AdapterUnderTest = {
  start: startAnthropicStub,
  make: (stub, o = {}) => new AnthropicChatModel({ model: 'claude-test', apiKey: KEY, baseURL: stub.baseURL, ...o }),
  key: KEY,
  otherKey: 'sk-ant-the-right-key-0000000',
};

describe('AnthropicChatModel', () => {
  let stub: AnthropicStub;
  const make = (o: Partial<ChatModelOptions> = {}): AnthropicChatModel => ADAPTER.make(stub, o) as AnthropicChatModel;
  stubPerSuite(() => startAnthropicStub({ chunkSize: 3 }), (s) => (stub = s));

  it('generates plain text; system split out, max_tokens defaulted', async () => {
    stub.enqueue({ type: 'text', text: 'Bonjour.', usage: { input: 14, output: 4 } });
    const r = await make().generate({
      messages: [
        { role: 'system', content: 'Answer in French.' },
        { role: 'user', content: 'Hello' },
      ],
      temperature: 0.3,
    });
    expect(r).toMatchObject({ text: 'Bonjour.', finishReason: 'stop', model: 'claude-test', toolCalls: [] });
    expect(r.usage).toEqual({ inputTokens: 14, outputTokens: 4, cachedInputTokens: 0 });
    expect(r.providerMetadata).toEqual({ anthropic: { id: 'msg_stub_1', stopReason: 'end_turn' } });

    const req = stub.lastRequest!;
    expect(req.path).toBe('/v1/messages');
    expect(req.headers['authorization'] ?? req.headers['x-api-key']).toContain(KEY);
    expect(req.headers['anthropic-version']).toBeDefined();
    expect(req.body.system).toBe('Answer in French.');
    expect(req.body.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'Hello' }] }]);
    expect(req.body.max_tokens).toBe(1024);
    // the pinned API version has no temperature/top_p
    expect(req.body).not.toHaveProperty('temperature');
    expect(req.body).not.toHaveProperty('thinking');
  });

  it('maps stop, user and parallel_tool_calls false to its own fields', async () => {
    stub.enqueue({ type: 'text', text: 'ok' });
    await make().generate({ messages: [{ role: 'user', content: 'hi' }], tools: [WEATHER], stop: ['END'], user: 'u-9', parallelToolCalls: false });
    expect(stub.lastRequest!.body).toMatchObject({ stop_sequences: ['END'], metadata: { user_id: 'u-9' }, tool_choice: { type: 'auto', disable_parallel_tool_use: true } });
  });

  it('turns reasoningEffort into a thinking budget on top of max_tokens', async () => {
    await make().generate({ messages: [{ role: 'user', content: 'think' }], maxTokens: 500, reasoningEffort: 'medium' });
    expect(stub.lastRequest!.body.thinking).toEqual({ type: 'enabled', budget_tokens: 8192 });
    expect(stub.lastRequest!.body.max_tokens).toBe(8692);
  });

  it('sends tools and tool choice, and parses tool_use blocks back', async () => {
    stub.enqueue({ type: 'tool-calls', text: 'Checking.', calls: [{ id: 'toolu_1', name: 'get_weather', arguments: '{"city":"Paris"}' }] });
    const r = await make().generate({ messages: [{ role: 'user', content: 'Weather?' }], tools: [WEATHER], toolChoice: 'required' });
    const body = stub.lastRequest!.body;
    expect(body.tools).toEqual([{ name: 'get_weather', description: 'Current weather for a city', input_schema: WEATHER.parameters }]);
    expect(body.tool_choice).toEqual({ type: 'any' });
    expect(r.text).toBe('Checking.');
    expect(r.toolCalls).toEqual([{ id: 'toolu_1', name: 'get_weather', arguments: '{"city":"Paris"}' }]);
    expect(r.content).toEqual([
      { type: 'text', text: 'Checking.' },
      { type: 'tool-call', id: 'toolu_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
    ]);
    expect(r.finishReason).toBe('tool-calls');
  });

  it('serialises a tool-result turn as tool_result blocks in a user message', async () => {
    const messages: ChatMessage[] = [
      { role: 'user', content: 'Weather in Paris and Rome?' },
      {
        role: 'assistant',
        content: [
          { type: 'tool-call', id: 'toolu_a', name: 'get_weather', arguments: '{"city":"Paris"}' },
          { type: 'tool-call', id: 'toolu_b', name: 'get_weather', arguments: '{"city":"Rome"}' },
        ],
      },
      {
        role: 'tool',
        content: [
          { type: 'tool-result', toolCallId: 'toolu_a', content: '18C' },
          { type: 'tool-result', toolCallId: 'toolu_b', content: 'no data', isError: true },
        ],
      },
      { role: 'user', content: 'Summarise.' },
    ];
    // a user spoke last: a fresh turn, so thinking may be on
    await make().generate({ messages, tools: [WEATHER], reasoningEffort: 'low' });
    const body = stub.lastRequest!.body;
    expect(body.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Weather in Paris and Rome?' }] },
      {
        role: 'assistant',
        content: [
          { type: 'tool_use', id: 'toolu_a', name: 'get_weather', input: { city: 'Paris' } },
          { type: 'tool_use', id: 'toolu_b', name: 'get_weather', input: { city: 'Rome' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_a', content: '18C' },
          { type: 'tool_result', tool_use_id: 'toolu_b', content: 'no data', is_error: true },
          { type: 'text', text: 'Summarise.' },
        ],
      },
    ]);
    expect(body.thinking).toEqual({ type: 'enabled', budget_tokens: 2048 });

    // continuing the tool loop (tool results last): no thinking, since we hold no thinking blocks
    await make().generate({ messages: messages.slice(0, 3), tools: [WEATHER], reasoningEffort: 'low' });
    expect(stub.lastRequest!.body).not.toHaveProperty('thinking');
  });

  it('rejects tool-call arguments that are not a JSON object', async () => {
    const err = await make()
      .generate({
        messages: [
          { role: 'user', content: 'x' },
          { role: 'assistant', content: [{ type: 'tool-call', id: 't1', name: 'f', arguments: '{broken' }] },
          { role: 'tool', content: [{ type: 'tool-result', toolCallId: 't1', content: 'r' }] },
        ],
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BadRequestError);
    expect((err as Error).message).toMatch(/t1 \(f\).*not valid JSON/);
    expect(stub.requestCount).toBe(0);
  });

  it('streams text deltas with usage from message_start/message_delta', async () => {
    stub.enqueue({ type: 'text', text: 'A streamed reply.', usage: { input: 11, output: 7 } });
    const s = await collectStream(make().stream({ messages: [{ role: 'user', content: 'go' }] }));
    expect(s.deltas.length).toBeGreaterThan(1);
    expect(s.text).toBe('A streamed reply.');
    expect(s.finish).toEqual({
      type: 'finish',
      finishReason: 'stop',
      usage: { inputTokens: 11, outputTokens: 7, cachedInputTokens: 0 },
      model: 'claude-test',
    });
    expect(stub.lastRequest!.body.stream).toBe(true);
  });

  it('assembles input_json_delta fragments into whole tool calls', async () => {
    stub.enqueue({
      type: 'tool-calls',
      text: 'Let me check.',
      calls: [
        { id: 'toolu_p', name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' },
        { id: 'toolu_r', name: 'get_weather', arguments: '{"city":"Rome"}' },
      ],
    });
    const s = await collectStream(make().stream({ messages: [{ role: 'user', content: 'w' }], tools: [WEATHER] }));
    expect(s.text).toBe('Let me check.');
    expect(s.toolCalls).toEqual([
      { id: 'toolu_p', name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' },
      { id: 'toolu_r', name: 'get_weather', arguments: '{"city":"Rome"}' },
    ]);
    expect(s.finish!.finishReason).toBe('tool-calls');
  });

  it('maps 429 with retry-after to RateLimitError, without SDK retries', async () => {
    stub.enqueue({ type: 'error', status: 429, message: 'Number of request tokens has exceeded your rate limit', headers: { 'retry-after': '3' } });
    const err = await make().generate({ messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitError);
    expect(err).toMatchObject({ provider: 'anthropic', status: 429, transient: true, retryAfterMs: 3000, requestId: 'req_stub_429' });
    expect(stub.requestCount).toBe(1);
  });

  it('accepts an HTTP-date retry-after', async () => {
    const t0 = Date.now();
    const at = new Date(t0 + 60_000).toUTCString();
    stub.enqueue({ type: 'error', status: 429, headers: { 'retry-after': at } });
    const err = (await make().generate({ messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as RateLimitError;
    // the date has whole seconds (up to 1 s earlier), and the wait shrinks by the time the call took
    expect(err.retryAfterMs).toBeGreaterThanOrEqual(59_000 - (Date.now() - t0));
    expect(err.retryAfterMs).toBeLessThanOrEqual(60_000);
  });

  it('maps 500 to ServerError and 529 to OverloadedError, both transient', async () => {
    stub.enqueue({ type: 'error', status: 500, message: 'Internal server error' }, { type: 'error', status: 529, message: 'Overloaded' });
    const e500 = await make().generate({ messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(e500).toBeInstanceOf(ServerError);
    expect(e500).toMatchObject({ status: 500, transient: true });
    const e529 = await make().generate({ messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(e529).toBeInstanceOf(OverloadedError);
    expect(e529).toMatchObject({ status: 529, transient: true });
    expect(stub.requestCount).toBe(2);
  });

  it('maps an overloaded error event inside a stream', async () => {
    // a stream that starts, then reports overload the way the API does
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(
        'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}\n\n',
      );
      res.end('event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const { port } = server.address() as { port: number };
    try {
      const m = new AnthropicChatModel({ model: 'claude-test', apiKey: KEY, baseURL: `http://127.0.0.1:${port}` });
      const err = await collectStream(m.stream({ messages: [{ role: 'user', content: 'x' }] })).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OverloadedError);
      expect(err).toMatchObject({ transient: true });
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  sharedFailureTests(ADAPTER, () => stub);
});
