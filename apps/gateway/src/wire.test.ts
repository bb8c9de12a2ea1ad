import { describe, expect, it } from 'vitest';
import { GatewayError } from './errors.ts';
import { ChunkWriter, MAX_BODY_DEPTH, chatRequestSchema, checkBodyValues, checkChatFields, completionBody, parseBody, toChatRequest, usageOut } from './wire.ts';

const parse = (body: unknown) => toChatRequest(parseBody(chatRequestSchema, body));
const fieldOf = (f: () => unknown): { status: number; param: string | null; message: string } => {
  try {
    f();
  } catch (e) {
    if (e instanceof GatewayError) return { status: e.status, param: e.param, message: e.message };
    throw e;
  }
  throw new Error('no error');
};

describe('OpenAI request -> ChatRequest', () => {
  it('converts messages, tools, tool calls and sampling fields', () => {
    const req = parse({
      model: 'fugu',
      messages: [
        { role: 'developer', content: [{ type: 'text', text: 'Be ' }, { type: 'text', text: 'brief.' }] },
        { role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url: 'https://x/y.png' } }] },
        { role: 'assistant', content: 'Let me look.', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'look', arguments: '{"at":"y"}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: 'a cat' },
      ],
      tools: [{ type: 'function', function: { name: 'look', parameters: { type: 'object', properties: { at: { type: 'string' } } } } }],
      tool_choice: { type: 'function', function: { name: 'look' } },
      temperature: 0.2,
      top_p: 0.9,
      max_tokens: 10,
      max_completion_tokens: 20,
      user: 'end-user-1',
    });
    expect(req.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image', url: 'https://x/y.png' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'Let me look.' }, { type: 'tool-call', id: 'c1', name: 'look', arguments: '{"at":"y"}' }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', name: 'look', content: 'a cat' }] },
    ]);
    expect(req.tools).toEqual([{ name: 'look', parameters: { type: 'object', properties: { at: { type: 'string' } } } }]);
    expect(req.toolChoice).toEqual({ name: 'look' });
    expect(req).toMatchObject({ temperature: 0.2, topP: 0.9, maxTokens: 20, user: 'end-user-1' });
  });

  it('converts the standard parameters; provider defaults stay as given', () => {
    const req = parse({
      model: 'fugu',
      messages: [{ role: 'user', content: 'x' }],
      stop: 'END',
      seed: 3,
      frequency_penalty: 1,
      presence_penalty: -1,
      logit_bias: { '42': 10 },
      logprobs: true,
      top_logprobs: 2,
      response_format: { type: 'json_schema', json_schema: { name: 'r', schema: { type: 'object' }, strict: true } },
      parallel_tool_calls: false,
      safety_identifier: 'sid',
      user: 'old-user',
      service_tier: 'flex',
      store: true,
      metadata: { run: '1' },
      verbosity: 'high',
      prompt_cache_key: 'k',
    });
    expect(req).toMatchObject({
      stop: ['END'], seed: 3, frequencyPenalty: 1, presencePenalty: -1, logitBias: { '42': 10 }, logprobs: true, topLogprobs: 2,
      responseFormat: { type: 'json_schema', name: 'r', schema: { type: 'object' }, strict: true }, parallelToolCalls: false, user: 'sid',
      serviceTier: 'flex', store: true, storeMetadata: { run: '1' }, verbosity: 'high', promptCacheKey: 'k',
    });
    expect(fieldOf(() => parse({ model: 'fugu', messages: [{ role: 'user', content: 'x' }], top_logprobs: 2 })).param).toBe('top_logprobs');
    expect(fieldOf(() => parse({ model: 'fugu', messages: [{ role: 'user', content: 'x' }], response_format: { type: 'yaml' } })).param).toBe('response_format.type');
    expect(fieldOf(() => parse({ model: 'fugu', messages: [{ role: 'user', content: 'x' }], fugu: { lambda: -1 } })).param).toBe('fugu.lambda');
  });

  it('refuses unknown fields and the ones the gateway cannot serve, naming them', () => {
    const base = { model: 'fugu', messages: [{ role: 'user', content: 'x' }] };
    expect(fieldOf(() => checkChatFields({ ...base, frobnicate: 1 })).param).toBe('frobnicate');
    expect(fieldOf(() => checkChatFields({ ...base, functions: [] })).param).toBe('functions');
    expect(fieldOf(() => checkChatFields({ ...base, modalities: ['audio'] })).param).toBe('modalities');
    expect(() => checkChatFields({ ...base, modalities: ['text'], audio: null, seed: 1, fugu: { lambda: 1 } })).not.toThrow();
  });

  it('names the bad field', () => {
    expect(fieldOf(() => parse({ model: 'fugu' }))).toMatchObject({ status: 400, param: 'messages' });
    expect(fieldOf(() => parse({ model: '', messages: [{ role: 'user', content: 'x' }] })).param).toBe('model');
    expect(fieldOf(() => parse({ model: 'fugu', messages: [{ role: 'user', content: 'x' }], top_p: 3 })).param).toBe('top_p');
    expect(fieldOf(() => parse({ model: 'fugu', messages: [{ role: 'user', content: 'x' }], n: 2 })).message).toMatch(/^n: only n = 1/);
    expect(fieldOf(() => parse({ model: 'fugu', messages: [{ role: 'user', content: [{ type: 'audio' }] }] })).param).toBe('messages[0].content');
    expect(fieldOf(() => parse({ model: 'fugu', messages: [{ role: 'assistant', tool_calls: [{ id: 'a', type: 'function', function: { name: 'f' } }] }] })).param).toBe(
      'messages[0].tool_calls[0].function.arguments',
    );
    expect(fieldOf(() => parse({ model: 'fugu', messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'function', function: { name: 'g' } } })).param).toBe(
      'tool_choice.function.name',
    );
    expect(fieldOf(() => parseBody(chatRequestSchema, [1, 2])).param).toBe('body');
    // a function's parameters: an object schema (no type says nothing, and passes)
    const tool = (parameters: unknown) => ({ model: 'fugu', messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'function', function: { name: 'f', parameters } }] });
    expect(fieldOf(() => parse(tool({ type: 'string' })))).toMatchObject({ status: 400, param: 'tools[0].function.parameters.type', message: expect.stringMatching(/must be "object" .*got "string"$/) });
    expect(fieldOf(() => parse(tool([])))).toMatchObject({ status: 400, param: 'tools[0].function.parameters' });
    expect(parse(tool({ properties: {} })).tools![0]!.parameters).toEqual({ properties: {} });
  });

  it('refuses what Postgres cannot store and what no encoder can nest, wherever it is, naming the first place', () => {
    const user = (content: unknown) => ({ model: 'fugu', messages: [{ role: 'user', content: 'fine' }, { role: 'user', content }] });
    expect(fieldOf(() => parse(user('a\u0000b')))).toEqual({ status: 400, param: 'messages[1].content', message: 'messages[1].content: contains a NUL character (\\u0000), which the gateway cannot store' });
    expect(fieldOf(() => parse(user('lone \ud800 high')))).toEqual({ status: 400, param: 'messages[1].content', message: 'messages[1].content: contains an unpaired UTF-16 surrogate (\\ud800): not valid Unicode text' });
    expect(fieldOf(() => parse(user([{ type: 'text', text: '\udfff' }]))).message).toMatch(/^messages\[1\]\.content\[0\]\.text: contains an unpaired UTF-16 surrogate \(\\udfff\)/);
    expect(fieldOf(() => parse({ ...user('x'), metadata: { 'k\u0000': 'v' } }))).toMatchObject({ param: 'metadata', message: 'metadata: a key contains a NUL character (\\u0000), which the gateway cannot store' });
    // a pair is text (😀, 🇫🇷), as are the other control characters
    expect(parse(user('😀🇫🇷 \u0001 \u202e')).messages[1]).toEqual({ role: 'user', content: '😀🇫🇷 \u0001 \u202e' });
    // nesting: a deep tool schema passes up to the limit (the body is level 1, parameters level 5), one more level is refused
    const nest = (n: number): unknown => (n === 0 ? {} : { items: nest(n - 1) });
    const withSchema = (schema: unknown) => ({ ...user('x'), tools: [{ type: 'function', function: { name: 'f', parameters: schema } }] });
    expect(parse(withSchema(nest(MAX_BODY_DEPTH - 5))).tools).toHaveLength(1);
    const deep = fieldOf(() => parse(withSchema(nest(MAX_BODY_DEPTH - 4))));
    expect(deep.status).toBe(400);
    expect(deep.message).toMatch(new RegExp(`^tools\\[0\\]\\.function\\.parameters(\\.items)+: is nested more than ${MAX_BODY_DEPTH} levels deep$`));
    // thousands of levels (past any recursion's stack) are walked, not recursed
    const huge = JSON.parse(`{"model":"fugu","messages":${'['.repeat(20_000)}${']'.repeat(20_000)}}`);
    expect(fieldOf(() => parseBody(chatRequestSchema, huge)).message).toMatch(/^messages(\[0\]){63}: is nested more than 64 levels deep$/);
    // the first bad place in document order
    expect(fieldOf(() => checkBodyValues({ a: ['ok', 'x\u0000'], b: '\ud800' })).param).toBe('a[1]');
  });
});

describe('ChatResult -> OpenAI response', () => {
  const result = {
    text: '',
    content: [],
    toolCalls: [{ id: 't1', name: 'f', arguments: '{}' }],
    usage: { inputTokens: 5, outputTokens: 7, cachedInputTokens: 2 },
    finishReason: 'tool-calls' as const,
    model: 'provider-model',
  };

  it('writes a chat.completion with the worker as model and tool calls as sent', () => {
    const b = completionBody(result, 'alpha', undefined, 'chatcmpl-x', 1) as { choices: Array<{ message: Record<string, unknown>; finish_reason: string }>; model: string; usage: Record<string, unknown> };
    expect(b.model).toBe('alpha');
    expect(b.choices[0]!.message).toEqual({ role: 'assistant', content: null, refusal: null, tool_calls: [{ id: 't1', type: 'function', function: { name: 'f', arguments: '{}' } }] });
    expect(b.choices[0]!.finish_reason).toBe('tool_calls');
    expect(b.usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 7, total_tokens: 12, prompt_tokens_details: { cached_tokens: 2 } });
  });

  it('writes usage.cost in USD from the exact picodollars', () => {
    expect(usageOut({ inputTokens: 1, outputTokens: 2 }, 123_456_789_012n).cost).toBe(0.123456789012);
    expect(usageOut({ inputTokens: 1, outputTokens: 2 }, 0n).cost).toBe(0);
    expect(usageOut({ inputTokens: 1, outputTokens: 2 })).not.toHaveProperty('cost');
  });

  it('numbers streamed tool calls by index', () => {
    const w = new ChunkWriter('beta', 'id', 1);
    const lines = [w.toolCall({ id: 'a', name: 'f', arguments: '{}' }), w.toolCall({ id: 'b', name: 'g', arguments: '[]' })];
    const deltas = lines.map((l) => JSON.parse(l.replace(/^data: /, '')).choices[0].delta.tool_calls[0]);
    expect(deltas.map((d: { index: number; id: string }) => [d.index, d.id])).toEqual([
      [0, 'a'],
      [1, 'b'],
    ]);
    expect(ChunkWriter.done()).toBe('data: [DONE]\n\n');
  });
});
