import { describe, expect, it } from 'vitest';
import { GatewayError, badField } from './errors.ts';
import {
  MessageEventWriter,
  anthropicErrorBody,
  anthropicErrorType,
  effortOfBudget,
  estimateInputTokens,
  inMessagesTerms,
  messageOf,
  parseMessagesRequest,
  stopReasonOf,
  toMessagesChatRequest,
} from './anthropic-wire.ts';

const parse = (body: unknown) => toMessagesChatRequest(parseMessagesRequest(body));
const refusal = (f: () => unknown): { status: number; param: string | null; message: string } => {
  try {
    f();
  } catch (e) {
    if (e instanceof GatewayError) return { status: e.status, param: e.param, message: e.message };
    throw e;
  }
  throw new Error('no error');
};

const WEATHER = { name: 'get_weather', description: 'Current weather of a city', input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };

describe('Anthropic request -> ChatRequest', () => {
  it('converts system blocks, text, images, tool_use and tool_result blocks, a system turn; thinking blocks are not sent on', () => {
    const { req, terms } = parse({
      model: 'fugu',
      max_tokens: 100,
      system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }, { type: 'text', text: 'Answer in English.' }],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBOR' } }, { type: 'image', source: { type: 'url', url: 'https://x/y.png' } }] },
        { role: 'assistant', content: [{ type: 'thinking', thinking: 'hmm', signature: 's' }, { type: 'text', text: 'Let me look.' }, { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'rain' }, { type: 'text', text: '12 C' }], is_error: false }, { type: 'text', text: 'And be quick.' }] },
        { role: 'system', content: 'The date is today.' },
        { role: 'assistant', content: 'It rains.' },
        { role: 'user', content: 'Thanks' },
      ],
      tools: [WEATHER],
    });
    expect(req.messages).toEqual([
      { role: 'system', content: 'Be brief.\n\nAnswer in English.' },
      { role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image', url: 'data:image/png;base64,iVBOR', mediaType: 'image/png' }, { type: 'image', url: 'https://x/y.png' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'Let me look.' }, { type: 'tool-call', id: 'toolu_1', name: 'get_weather', arguments: '{"city":"Paris"}' }] },
      // the text after the results is the last result's (the turn stays the answer to the calls)
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'toolu_1', name: 'get_weather', content: 'rain\n12 C\n\nAnd be quick.' }] },
      { role: 'system', content: 'The date is today.' },
      { role: 'assistant', content: 'It rains.' },
      { role: 'user', content: 'Thanks' },
    ]);
    expect(req.tools).toEqual([{ name: 'get_weather', description: 'Current weather of a city', parameters: WEATHER.input_schema }]);
    expect(req.maxTokens).toBe(100);
    expect(terms.origins).toEqual([{ system: true }, { message: 0 }, { message: 1 }, { message: 2, block: 0 }, { message: 3 }, { message: 4 }, { message: 5 }]);
  });

  it('converts the parameters: stop_sequences, temperature, top_p, metadata.user_id, tool_choice, disable_parallel_tool_use, output_config.format', () => {
    const { req } = parse({
      model: 'fugu', max_tokens: 50, messages: [{ role: 'user', content: 'x' }], tools: [WEATHER],
      stop_sequences: ['END'], temperature: 0.5, top_p: 0.9, metadata: { user_id: 'u-1' },
      tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true },
      output_config: { format: { type: 'json_schema', schema: { type: 'object' } } },
      cache_control: { type: 'ephemeral' }, service_tier: 'auto',
    });
    expect(req).toMatchObject({ maxTokens: 50, stop: ['END'], temperature: 0.5, topP: 0.9, user: 'u-1', toolChoice: { name: 'get_weather' }, parallelToolCalls: false, responseFormat: { type: 'json_schema', name: 'output', schema: { type: 'object' } } });
    const choice = (tc: unknown) => parse({ model: 'fugu', max_tokens: 5, messages: [{ role: 'user', content: 'x' }], tools: [WEATHER], tool_choice: tc }).req;
    expect(choice({ type: 'auto' })).toMatchObject({ toolChoice: 'auto' });
    expect(choice({ type: 'any' })).toMatchObject({ toolChoice: 'required' });
    expect(choice({ type: 'none' })).toMatchObject({ toolChoice: 'none' });
    expect(choice({ type: 'auto' }).parallelToolCalls).toBeUndefined();
  });

  it('thinking and effort: an enabled budget or an effort other than the default asks for reasoning; disabled, adaptive and effort "high" ask for none', () => {
    const base = { model: 'fugu', max_tokens: 30_000, messages: [{ role: 'user', content: 'x' }] };
    expect(parse({ ...base, thinking: { type: 'enabled', budget_tokens: 1024 } }).req.reasoningEffort).toBe('minimal');
    expect(parse({ ...base, thinking: { type: 'enabled', budget_tokens: 10_000 } })).toMatchObject({ req: { reasoningEffort: 'medium' }, terms: { params: { reasoning_effort: 'thinking' } } });
    expect(parse({ ...base, thinking: { type: 'disabled' } }).req.reasoningEffort).toBeUndefined();
    expect(parse({ ...base, thinking: { type: 'adaptive', display: 'omitted' }, output_config: { effort: 'high' } }).req.reasoningEffort).toBeUndefined();
    expect(parse({ ...base, thinking: { type: 'adaptive' }, output_config: { effort: 'low' } })).toMatchObject({ req: { reasoningEffort: 'low' }, terms: { params: { reasoning_effort: 'output_config.effort' } } });
    expect(parse({ ...base, output_config: { effort: 'max' } }).req.reasoningEffort).toBe('high');
    expect([1024, 2047, 2048, 8192, 24_576, 100_000].map(effortOfBudget)).toEqual(['minimal', 'minimal', 'low', 'medium', 'high', 'high']);
    expect(refusal(() => parse({ ...base, max_tokens: 2000, thinking: { type: 'enabled', budget_tokens: 4000 } }))).toMatchObject({ status: 400, param: 'thinking.budget_tokens', message: 'thinking.budget_tokens: must be less than max_tokens (2000)' });
  });

  it('Claude Code\'s request: deferred tools are not offered, clear_thinking edits and cache_control are accepted', () => {
    const { req } = parse({
      model: 'fugu', max_tokens: 32_000, stream: true,
      system: [{ type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1.328' }, { type: 'text', text: 'You are an agent.', cache_control: { type: 'ephemeral' } }],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'What is 6 * 7?' }] }, { role: 'system', content: [{ type: 'text', text: '# Environment', cache_control: { type: 'ephemeral' } }] }],
      tools: [{ ...WEATHER, name: 'Bash' }, { name: 'DeferredToolPlaceholder', description: 'never call this tool', input_schema: { type: 'object', properties: {} }, defer_loading: true }],
      metadata: { user_id: '{"device_id":"d","session_id":"s"}' },
      thinking: { type: 'adaptive', display: 'omitted' },
      context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
      output_config: { effort: 'high' },
    });
    expect(req.tools!.map((t) => t.name)).toEqual(['Bash']);
    expect(req.messages.map((m) => m.role)).toEqual(['system', 'user', 'system']);
    expect(req.user).toBe('{"device_id":"d","session_id":"s"}');
    expect(req.reasoningEffort).toBeUndefined();
  });

  it('a tool search\'s result (tool_reference blocks) loads the deferred tools it names: they are offered, the result says so', () => {
    const { req } = parse({
      model: 'fugu', max_tokens: 100,
      tools: [{ ...WEATHER, name: 'ToolSearch' }, { ...WEATHER, name: 'ExitWorktree', defer_loading: true }, { ...WEATHER, name: 'Monitor', defer_loading: true }],
      messages: [
        { role: 'user', content: 'Leave the worktree.' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'call_s', name: 'ToolSearch', input: { query: 'worktree' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_s', content: [{ type: 'tool_reference', tool_name: 'ExitWorktree' }], cache_control: { type: 'ephemeral' } }] },
      ],
    });
    expect(req.tools!.map((t) => t.name)).toEqual(['ToolSearch', 'ExitWorktree']);
    expect(req.messages.at(-1)).toEqual({ role: 'tool', content: [{ type: 'tool-result', toolCallId: 'call_s', name: 'ToolSearch', content: 'Tool loaded: ExitWorktree (its definition is now among the tools)' }] });
  });

  it('a bad field is a 400 naming it in Anthropic\'s way', () => {
    const ok = { model: 'fugu', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };
    const cases: Array<[unknown, string, RegExp]> = [
      [{ ...ok, max_tokens: undefined }, 'max_tokens', /Field required/],
      [{ ...ok, max_tokens: 0 }, 'max_tokens', /.+/],
      [{ ...ok, messages: [] }, 'messages', /.+/],
      [{ ...ok, top_k: 5 }, 'top_k', /not supported by the gateway/],
      [{ ...ok, frequency_penalty: 1 }, 'frequency_penalty', /is not a Messages parameter/],
      [{ ...ok, temperature: 1.5 }, 'temperature', /.+/],
      [{ ...ok, tools: [{ type: 'web_search_20250305', name: 'web_search' }] }, 'tools.0.type', /"web_search_20250305" is an Anthropic server or built-in tool/],
      [{ ...ok, tools: [{ name: 'f', input_schema: { type: 'array' } }] }, 'tools.0.input_schema.type', /must be "object"/],
      [{ ...ok, messages: [{ role: 'robot', content: 'x' }] }, 'messages.0.role', /user, assistant or system/],
      [{ ...ok, messages: [{ role: 'user', content: [{ type: 'document', source: {} }] }] }, 'messages.0.content.0.type', /documents/],
      [{ ...ok, messages: [{ role: 'assistant', content: [{ type: 'image', source: {} }] }, { role: 'user', content: 'x' }] }, 'messages.0.content.0.type', /an assistant message's blocks|a assistant/],
      [{ ...ok, messages: [{ role: 'user', content: [{ type: 'text' }] }] }, 'messages.0.content.0.text', /.+/],
      [
        { ...ok, messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: {} }] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't2', content: 'r' }] }] },
        'messages.2.content.0.tool_use_id', /"t2" answers no tool_use block of an earlier assistant message/,
      ],
      [{ ...ok, messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: {} }] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'image', source: {} }] }] }] }, 'messages.2.content.0.content.0.type', /images inside a tool_result/],
      [{ ...ok, messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: 'The answer is' }] }, 'messages.1.role', /prefill/],
      [{ ...ok, tool_choice: { type: 'tool', name: 'nope' }, tools: [WEATHER] }, 'tool_choice.name', /"nope" is not one of the tools/],
      [{ ...ok, context_management: { edits: [{ type: 'clear_tool_uses_20250919' }] } }, 'context_management.edits.0.type', /does not edit a conversation's context/],
      [{ ...ok, messages: [{ role: 'user', content: 'nul\u0000' }] }, 'messages.0.content', /NUL/],
      [{ ...ok, metadata: { user_id: 'u', other: 1 } }, 'metadata', /other/],
    ];
    for (const [body, param, message] of cases) {
      const r = refusal(() => parse(body));
      expect({ status: r.status, param: r.param }, param).toEqual({ status: 400, param });
      expect(r.message.startsWith(`${param}: `), r.message).toBe(true);
      expect(r.message).toMatch(message);
    }
  });

  it('count_tokens needs no max_tokens; its estimate counts text, tools and images', () => {
    const body = parseMessagesRequest({ model: 'fugu', messages: [{ role: 'user', content: 'x'.repeat(400) }], tools: [WEATHER] }, { countTokens: true });
    const { req } = toMessagesChatRequest(body);
    expect(estimateInputTokens(req)).toBe(100 + Math.ceil(JSON.stringify(req.tools).length / 4));
    const image = toMessagesChatRequest(parseMessagesRequest({ model: 'fugu', messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://x/y.png' } }] }] }, { countTokens: true }));
    expect(estimateInputTokens(image.req)).toBe(1600);
  });

  it('a model\'s refusal names the Anthropic field: a chat message as its block, a parameter by its name', async () => {
    const { terms } = parse({
      model: 'fugu-ultra', max_tokens: 4000, system: 'Be brief.', thinking: { type: 'enabled', budget_tokens: 2048 }, tools: [WEATHER],
      messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: [{ type: 'tool_use', id: 'call_fu_1', name: 'get_weather', input: {} }] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_fu_1', content: 'r' }] }],
    });
    const named = async (e: GatewayError) => (await inMessagesTerms(() => Promise.reject(e), terms).catch((x: GatewayError) => x)) as GatewayError;
    expect(await named(badField('messages[3].tool_call_id', 'is not valid'))).toMatchObject({ param: 'messages.2.content.0.tool_use_id', message: 'messages.2.content.0.tool_use_id: is not valid' });
    expect((await named(badField('messages[1].content', 'is empty'))).param).toBe('messages.0.content');
    expect((await named(badField('messages[0].content', 'too long'))).param).toBe('system');
    expect(await named(badField('reasoning_effort', 'no worker can honour it'))).toMatchObject({ param: 'thinking', message: 'thinking: no worker can honour it' });
    expect((await named(badField('stop', 'x'))).param).toBe('stop_sequences');
    expect((await named(badField('fugu.workers', 'x'))).param).toBe('fugu.workers');
  });
});

describe('answers and errors in Anthropic\'s shape', () => {
  const completion = (over: object = {}) => ({
    result: { text: 'It rains.', content: [], toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' }], usage: { inputTokens: 12, outputTokens: 5 }, finishReason: 'tool-calls' as const, model: 'alpha-model' },
    worker: 'alpha', cost: 1_500_000n, headers: {}, ...over,
  });

  it('a whole answer is a message: text then tool_use blocks, stop_reason, usage with the cache fields 0 and cost', () => {
    expect(messageOf(completion(), 'msg_1')).toEqual({
      id: 'msg_1', type: 'message', role: 'assistant', model: 'alpha',
      content: [{ type: 'text', text: 'It rains.', citations: null }, { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Paris' }, caller: { type: 'direct' } }],
      stop_reason: 'tool_use', stop_sequence: null, stop_details: null, container: null,
      usage: { input_tokens: 12, output_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, server_tool_use: null, service_tier: 'standard', cost: 0.0000015 },
    });
  });

  it('stop reasons: end_turn, max_tokens, stop_sequence (when the provider names it), refusal, tool_use', () => {
    expect(stopReasonOf('stop', 0)).toEqual({ stop_reason: 'end_turn', stop_sequence: null });
    expect(stopReasonOf('length', 0).stop_reason).toBe('max_tokens');
    expect(stopReasonOf('stop', 0, 'END')).toEqual({ stop_reason: 'stop_sequence', stop_sequence: 'END' });
    expect(stopReasonOf('content-filter', 0).stop_reason).toBe('refusal');
    expect(stopReasonOf('stop', 1).stop_reason).toBe('tool_use');
    const m = messageOf(completion({ result: { ...completion().result, toolCalls: [], finishReason: 'stop', providerMetadata: { anthropic: { stopSequence: 'END' } } } }));
    expect(m).toMatchObject({ stop_reason: 'stop_sequence', stop_sequence: 'END', content: [{ type: 'text', text: 'It rains.' }] });
  });

  it('a tool call whose arguments are not a JSON object has input {}', () => {
    const m = messageOf(completion({ result: { ...completion().result, text: '', toolCalls: [{ id: 'c', name: 'f', arguments: 'not json' }] } }));
    expect(m.content).toEqual([{ type: 'tool_use', id: 'c', name: 'f', input: {}, caller: { type: 'direct' } }]);
  });

  it('streams the events in Anthropic\'s order', () => {
    const w = new MessageEventWriter('msg_s');
    const text = w.start('alpha', 9) + w.ping() + w.text('It ') + w.text('rains.') + w.toolCall({ id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' }) + w.finish({ stop_reason: 'tool_use', stop_sequence: null }, { output_tokens: 5 });
    const events = text.split('\n\n').filter(Boolean).map((b) => ({ event: b.split('\n')[0]!.slice(7), data: JSON.parse(b.split('\n')[1]!.slice(6)) }));
    expect(events.map((e) => e.event)).toEqual([
      'message_start', 'ping', 'ping', 'content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_stop',
      'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop',
    ]);
    for (const e of events) expect(e.data.type).toBe(e.event);
    expect(events[0]!.data.message).toMatchObject({ id: 'msg_s', model: 'alpha', content: [], stop_reason: null, usage: { input_tokens: 9, output_tokens: 0 } });
    expect(events.filter((e) => e.event.startsWith('content_block')).map((e) => e.data.index)).toEqual([0, 0, 0, 0, 1, 1, 1]);
    expect(events[7]!.data.content_block).toEqual({ type: 'tool_use', id: 'call_1', name: 'get_weather', input: {}, caller: { type: 'direct' } });
    expect(events[8]!.data.delta).toEqual({ type: 'input_json_delta', partial_json: '{"city":"Paris"}' });
    expect(events[10]!.data).toMatchObject({ delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 5 } });
  });

  it('errors: the type matches the status, the message names the field, the request id is given', () => {
    expect([400, 401, 403, 404, 413, 429, 500, 502, 503, 504].map(anthropicErrorType)).toEqual([
      'invalid_request_error', 'authentication_error', 'permission_error', 'not_found_error', 'request_too_large', 'rate_limit_error', 'api_error', 'api_error', 'overloaded_error', 'timeout_error',
    ]);
    expect(anthropicErrorBody(badField('max_tokens', 'Field required'), 'req_1')).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: 'max_tokens: Field required' }, request_id: 'req_1' });
    const w = new MessageEventWriter();
    expect(w.error(anthropicErrorBody(new GatewayError(502, 'broke'), 'req_2'))).toBe('event: error\ndata: {"type":"error","error":{"type":"api_error","message":"broke"},"request_id":"req_2"}\n\n');
  });
});
