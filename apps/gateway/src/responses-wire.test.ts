import { describe, expect, it } from 'vitest';
import { GatewayError } from './errors.ts';
import { ResponseEventWriter, conversationMessages, normaliseInput, parseResponsesRequest, responsesParam, responsesUsage, toResponsesChatRequest, type ConversationItem, type MessageOrigin } from './responses-wire.ts';

const paramOf = (f: () => unknown): string | null => {
  try {
    f();
  } catch (e) {
    if (e instanceof GatewayError && e.status === 400) return e.param;
    throw e;
  }
  throw new Error('no error');
};

const items = (input: unknown): ConversationItem[] => normaliseInput(parseResponsesRequest({ model: 'm', input }).input);

describe('Responses request -> ChatRequest', () => {
  it('makes an assistant message and the function calls after it one assistant message, and binds outputs to their calls', () => {
    const history = items([
      { role: 'user', content: 'weather in Paris and Rome?' },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Looking.', annotations: [] }] },
      { type: 'function_call', call_id: 'c1', name: 'get_weather', arguments: '{"city":"Paris"}' },
      { type: 'function_call', call_id: 'c2', name: 'get_weather', arguments: '{"city":"Rome"}' },
    ]);
    const own = items([
      { type: 'function_call_output', call_id: 'c2', output: 'sunny' },
      { type: 'function_call_output', call_id: 'c1', output: [{ type: 'input_text', text: 'rain' }] },
    ]);
    expect(conversationMessages(history, own, 'Be brief.')).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'weather in Paris and Rome?' },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Looking.' },
          { type: 'tool-call', id: 'c1', name: 'get_weather', arguments: '{"city":"Paris"}' },
          { type: 'tool-call', id: 'c2', name: 'get_weather', arguments: '{"city":"Rome"}' },
        ],
      },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c2', name: 'get_weather', content: 'sunny' }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', name: 'get_weather', content: 'rain' }] },
    ]);
    // an output before its call answers nothing
    expect(paramOf(() => conversationMessages([], items([{ type: 'function_call_output', call_id: 'c9', output: 'x' }, { type: 'function_call', call_id: 'c9', name: 'f', arguments: '{}' }])))).toBe('input[0].call_id');
  });

  it('knows which input item made each message, so a model\'s refusal of messages[i] names the item (input[j].call_id), an earlier turn or the instructions', () => {
    const history = items([
      { role: 'user', content: 'weather in Paris and Rome?' },
      { type: 'function_call', call_id: 'c1', name: 'get_weather', arguments: '{}' },
    ]);
    const own = items([
      { type: 'function_call', call_id: 'c2', name: 'get_weather', arguments: '{}' },
      { type: 'function_call_output', call_id: 'c1', output: 'rain' },
      { type: 'function_call_output', call_id: 'c2', output: 'sunny' },
      { role: 'user', content: 'and Lyon?' },
    ]);
    const origins: MessageOrigin[] = [];
    const messages = conversationMessages(history, own, 'Be brief.', origins);
    expect(messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'tool', 'user']);
    // the assistant message holds an earlier turn's call and this request's first item
    expect(origins).toEqual(['instructions', 'previous_response_id', 0, 1, 2, 3]);
    expect(responsesParam('messages[4].tool_call_id', origins)).toBe('input[2].call_id');
    expect(responsesParam('messages[5].content', origins)).toBe('input[3].content');
    expect(responsesParam('messages[2].tool_calls', origins)).toBe('input[0]');
    expect(responsesParam('messages[1].content', origins)).toBe('previous_response_id');
    expect(responsesParam('messages[0].content', origins)).toBe('instructions');
    expect(responsesParam('messages', origins)).toBe('input');
    expect(responsesParam('fugu.workers', origins)).toBe('fugu.workers');
    expect(responsesParam(null, origins)).toBeNull();
  });

  it('keeps the client\'s item ids and gives the others new ones', () => {
    const [a, b] = items([{ id: 'msg_mine', role: 'user', content: 'hi' }, { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' }]);
    expect(a!.id).toBe('msg_mine');
    expect(b!.id).toMatch(/^fc_[0-9a-f]{48}$/);
  });

  it('maps text.format, reasoning and the sampling fields; store and metadata stay the gateway\'s', () => {
    const body = parseResponsesRequest({
      model: 'm',
      input: 'hi',
      text: { format: { type: 'json_object' }, verbosity: 'low' },
      reasoning: { effort: 'low' },
      max_output_tokens: 99,
      parallel_tool_calls: false,
      user: 'u1',
      store: true,
      metadata: { a: 'b' },
      tools: [{ type: 'function', name: 'f', parameters: null, strict: true }],
      tool_choice: { type: 'function', name: 'f' },
    });
    const req = toResponsesChatRequest(body, []);
    expect(req).toEqual({
      messages: [],
      tools: [{ name: 'f', parameters: { type: 'object', properties: {} } }],
      toolChoice: { name: 'f' },
      maxTokens: 99,
      reasoningEffort: 'low',
      responseFormat: { type: 'json_object' },
      verbosity: 'low',
      parallelToolCalls: false,
      user: 'u1',
    });
  });

  it('names the field of each refusal', () => {
    const p = (body: Record<string, unknown>) => paramOf(() => parseResponsesRequest({ model: 'm', input: 'hi', ...body }));
    expect(p({ tools: [{ type: 'code_interpreter', container: { type: 'auto' } }] })).toBe('tools[0].type');
    expect(p({ tool_choice: { type: 'web_search' } })).toBe('tool_choice.type');
    expect(p({ text: { format: { type: 'grammar' } } })).toBe('text.format.type');
    expect(p({ reasoning: { effort: 'low', summary: 'auto' } })).toBe('reasoning.summary');
    expect(p({ background: true })).toBe('background');
    expect(p({ truncation: 'auto' })).toBe('truncation');
    expect(p({ prompt: { id: 'pmpt_1' } })).toBe('prompt');
    expect(p({ input: [{ type: 'item_reference', id: 'msg_1' }] })).toBe('input[0].type');
    expect(p({ input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'f' }] }] })).toBe('input[0].content[0].type');
    expect(p({ input: [{ type: 'function_call_output', output: 'x' }] })).toBe('input[0].call_id');
    expect(p({ input: 42 })).toBe('input');
    // what Postgres cannot store, named as sent (a string input is `input`)
    expect(p({ input: 'nul \u0000' })).toBe('input');
    expect(p({ input: [{ role: 'user', content: 'x' }, { role: 'user', content: 'lone \ud800' }] })).toBe('input[1].content');
    expect(p({ metadata: { a: '\udc00' } })).toBe('metadata.a');
  });
});

describe('ResponseEventWriter', () => {
  const parse = (sse: string) =>
    sse
      .split('\n\n')
      .filter(Boolean)
      .map((b) => JSON.parse(b.split('\n')[1]!.slice('data: '.length)) as Record<string, unknown>);

  it('numbers events from 0, closes the message before a tool call and keeps the items it built', () => {
    const w = new ResponseEventWriter();
    const out = parse(
      w.start({ id: 'resp_1' }) + w.text('Hel') + w.text('lo') + w.toolCall({ id: 'c1', name: 'f', arguments: '{"a":1}' }) + w.closeMessage() + w.finish({ id: 'resp_1', status: 'completed' }),
    );
    expect(out.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(out.map((e) => e.sequence_number)).toEqual(out.map((_, i) => i));
    expect(out.filter((e) => e.type === 'response.output_item.added').map((e) => e.output_index)).toEqual([0, 1]);
    expect(w.output).toEqual([
      { id: expect.stringMatching(/^msg_/), type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Hello', annotations: [] }] },
      { id: expect.stringMatching(/^fc_/), type: 'function_call', status: 'completed', arguments: '{"a":1}', call_id: 'c1', name: 'f' },
    ]);
  });
});

describe('responsesUsage', () => {
  it("names a model's nested token counts (fugu-ultra's conductor and workers) as the Responses API does, cost kept", () => {
    const u = responsesUsage({ inputTokens: 90, outputTokens: 13 }, 1_500_000_000n, {
      conductor: { prompt_tokens: 10, completion_tokens: 0, cost: 0.0001 },
      workers: { prompt_tokens: 80, completion_tokens: 13, cost: 0.0014 },
    });
    expect(u).toMatchObject({ input_tokens: 90, output_tokens: 13, total_tokens: 103, cost: 0.0015 });
    expect(u.conductor).toEqual({ input_tokens: 10, output_tokens: 0, total_tokens: 10, cost: 0.0001 });
    expect(u.workers).toEqual({ input_tokens: 80, output_tokens: 13, total_tokens: 93, cost: 0.0014 });
    expect(JSON.stringify(u)).not.toMatch(/prompt_tokens|completion_tokens/);
  });

  it("leaves a model's other extra fields as they are", () => {
    expect(responsesUsage({ inputTokens: 7, outputTokens: 3 }, 0n, { conductor_tokens: 4, note: { a: 1 } })).toMatchObject({ conductor_tokens: 4, note: { a: 1 } });
  });
});
