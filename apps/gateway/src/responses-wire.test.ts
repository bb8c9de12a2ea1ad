import { describe, expect, it } from 'vitest';
import { GatewayError } from './errors.ts';
import {
  ResponseEventWriter, ResponseObject, ResponsesTools, conversationMessages, customInputOf, normaliseInput, parseResponsesRequest, responsesParam, responsesUsage, toResponsesChatRequest,
  type ConversationItem, type MessageOrigin,
} from './responses-wire.ts';

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
    expect(p({ reasoning: { effort: 'low', summary: 'concise' } })).toBe('reasoning.summary');
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

// What Codex CLI 0.169 sends (codex exec, a model_providers entry with wire_api = "responses"), cut
// to its kinds: hints and metadata, reasoning summary "auto", include of encrypted reasoning,
// function tools, a namespace of functions, a custom (freeform) tool, store false.
const APPLY_PATCH_GRAMMAR = 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\nend_patch: "*** End Patch" LF?';
const codexBody = (more: Record<string, unknown> = {}): Record<string, unknown> => ({
  model: 'fugu',
  input: [
    { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'You are a coding agent running in the Codex CLI.' }] },
    { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'What is the code word in notes.txt?' }] },
  ],
  tools: [
    { type: 'function', name: 'shell_command', description: 'Runs a shell command.', strict: false, parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'], additionalProperties: false } },
    { type: 'custom', name: 'apply_patch', description: 'Edit files with a patch.', format: { type: 'grammar', syntax: 'lark', definition: APPLY_PATCH_GRAMMAR } },
    {
      type: 'namespace', name: 'multi_agent_v1', description: 'Tools for spawning and managing sub-agents.',
      tools: [{ type: 'function', name: 'spawn_agent', description: 'Spawn a sub-agent.', strict: false, parameters: { type: 'object', properties: { message: { type: 'string' } }, additionalProperties: false } }],
    },
  ],
  tool_choice: 'auto',
  parallel_tool_calls: true,
  reasoning: { summary: 'auto' },
  store: false,
  stream: true,
  include: ['reasoning.encrypted_content'],
  prompt_cache_key: '01a248ce-3020-7870-816a-430414fe9185',
  client_metadata: { turn_id: '01a248ce-30c7', 'x-codex-window-id': '01a248ce:0', session_id: '01a248ce-3020', thread_id: '01a248ce-3020' },
  ...more,
});

describe('Codex CLI 0.169 requests', () => {
  it('accepts its hints and metadata, reasoning summary auto and include of encrypted reasoning', () => {
    const body = parseResponsesRequest(codexBody());
    expect(body.client_metadata).toMatchObject({ turn_id: '01a248ce-30c7' });
    const req = toResponsesChatRequest(body, conversationMessages([], normaliseInput(body.input), body.instructions));
    // hints change nothing the worker is asked: only the prompt cache key is passed on (where a provider takes it)
    expect(req).toMatchObject({ promptCacheKey: '01a248ce-3020-7870-816a-430414fe9185', toolChoice: 'auto', parallelToolCalls: true });
    expect(req.reasoningEffort).toBeUndefined();
    expect(JSON.stringify(req)).not.toContain('turn_id');
    const echoed = new ResponseObject(body, false).build({ status: 'completed', model: 'w', output: [] });
    expect(echoed.reasoning).toEqual({ effort: null, summary: 'auto' });
    expect(echoed.tools).toEqual([
      expect.objectContaining({ type: 'function', name: 'shell_command' }),
      { type: 'custom', name: 'apply_patch', description: 'Edit files with a patch.', format: { type: 'grammar', syntax: 'lark', definition: APPLY_PATCH_GRAMMAR } },
      { type: 'namespace', name: 'multi_agent_v1', description: 'Tools for spawning and managing sub-agents.', tools: [expect.objectContaining({ type: 'function', name: 'spawn_agent' })] },
    ]);
  });

  it('offers a custom tool as a function of one string input (its grammar in the description) and a namespace member as <namespace>__<name>', () => {
    const body = parseResponsesRequest(codexBody());
    const req = toResponsesChatRequest(body, []);
    expect(req.tools!.map((t) => t.name)).toEqual(['shell_command', 'apply_patch', 'multi_agent_v1__spawn_agent']);
    const patch = req.tools![1]!;
    expect(patch.parameters).toEqual({
      type: 'object', required: ['input'], additionalProperties: false,
      properties: { input: { type: 'string', description: expect.stringContaining(APPLY_PATCH_GRAMMAR) } },
    });
    expect(patch.description).toBe('Edit files with a patch.');
    expect(req.tools![2]!.description).toBe('[multi_agent_v1: Tools for spawning and managing sub-agents.] Spawn a sub-agent.');
    // tool_choice names a custom tool, or a namespace's function, as the client declared it
    expect(toResponsesChatRequest(parseResponsesRequest(codexBody({ tool_choice: { type: 'custom', name: 'apply_patch' } })), []).toolChoice).toEqual({ name: 'apply_patch' });
    expect(toResponsesChatRequest(parseResponsesRequest(codexBody({ tool_choice: { type: 'function', name: 'spawn_agent', namespace: 'multi_agent_v1' } })), []).toolChoice).toEqual({
      name: 'multi_agent_v1__spawn_agent',
    });
  });

  it("returns a worker's call of a custom tool as a custom_tool_call item, a namespace's as a function_call with its namespace, and reads them back", () => {
    const tools = new ResponsesTools(parseResponsesRequest(codexBody()).tools);
    const patch = '*** Begin Patch\n*** Update File: a.txt\n@@\n-old\n+new\n*** End Patch\n';
    expect(tools.item({ id: 'c1', name: 'apply_patch', arguments: JSON.stringify({ input: patch }) }, 'completed')).toEqual({
      id: expect.stringMatching(/^ctc_/), type: 'custom_tool_call', status: 'completed', call_id: 'c1', name: 'apply_patch', input: patch,
    });
    expect(tools.item({ id: 'c2', name: 'multi_agent_v1__spawn_agent', arguments: '{"message":"go"}' }, 'completed')).toEqual({
      id: expect.stringMatching(/^fc_/), type: 'function_call', status: 'completed', call_id: 'c2', name: 'spawn_agent', namespace: 'multi_agent_v1', arguments: '{"message":"go"}',
    });
    expect(tools.item({ id: 'c3', name: 'shell_command', arguments: '{"command":"cat notes.txt"}' }, 'completed')).toMatchObject({ type: 'function_call', name: 'shell_command' });
    // a worker that wrote the input bare, or under another name, still gives the text
    expect(customInputOf('not json')).toBe('not json');
    expect(customInputOf('{"patch":"x"}')).toBe('x');
    expect(customInputOf('"x"')).toBe('x');
    // the next turn sends them back with their outputs: tool calls and results of the worker's names
    const own = items([
      { role: 'user', content: 'edit a.txt' },
      { type: 'custom_tool_call', call_id: 'c1', name: 'apply_patch', input: patch, status: 'completed' },
      { type: 'function_call', call_id: 'c2', name: 'spawn_agent', namespace: 'multi_agent_v1', arguments: '{"message":"go"}' },
      { type: 'custom_tool_call_output', call_id: 'c1', output: 'Success. Updated the following files:\nM a.txt' },
      { type: 'function_call_output', call_id: 'c2', output: 'agent 7' },
    ]);
    expect(conversationMessages([], own)).toEqual([
      { role: 'user', content: 'edit a.txt' },
      {
        role: 'assistant',
        content: [
          { type: 'tool-call', id: 'c1', name: 'apply_patch', arguments: JSON.stringify({ input: patch }) },
          { type: 'tool-call', id: 'c2', name: 'multi_agent_v1__spawn_agent', arguments: '{"message":"go"}' },
        ],
      },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', name: 'apply_patch', content: 'Success. Updated the following files:\nM a.txt' }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c2', name: 'multi_agent_v1__spawn_agent', content: 'agent 7' }] },
    ]);
    expect(own[1]).toMatchObject({ id: expect.stringMatching(/^ctc_/), type: 'custom_tool_call' });
    expect(own[1]).not.toHaveProperty('namespace');
  });

  it('streams a custom tool call as custom_tool_call_input events', () => {
    const w = new ResponseEventWriter(new ResponsesTools(parseResponsesRequest(codexBody()).tools));
    const events = (w.toolCall({ id: 'c1', name: 'apply_patch', arguments: '{"input":"*** Begin Patch\\n*** End Patch\\n"}' }))
      .split('\n\n').filter(Boolean).map((b) => JSON.parse(b.split('\n')[1]!.slice('data: '.length)) as Record<string, unknown>);
    expect(events.map((e) => e.type)).toEqual(['response.output_item.added', 'response.custom_tool_call_input.delta', 'response.custom_tool_call_input.done', 'response.output_item.done']);
    expect(events[0]!.item).toMatchObject({ type: 'custom_tool_call', status: 'in_progress', input: '' });
    expect(events[2]).toMatchObject({ input: '*** Begin Patch\n*** End Patch\n' });
    expect(w.output).toEqual([expect.objectContaining({ type: 'custom_tool_call', name: 'apply_patch', call_id: 'c1' })]);
  });

  it('refuses, naming the field, what no worker behind the gateway can do', () => {
    const p = (more: Record<string, unknown>) =>
      paramOf(() => {
        const body = parseResponsesRequest(codexBody(more));
        return toResponsesChatRequest(body, conversationMessages([], normaliseInput(body.input)));
      });
    const tools = codexBody().tools as unknown[];
    // Codex's default web search: a hosted tool (Codex: web_search = "disabled")
    expect(p({ tools: [...tools, { type: 'web_search', external_web_access: false }] })).toBe('tools[3].type');
    expect(p({ tools: [{ type: 'namespace', name: 'n', description: '', tools: [{ type: 'web_search' }] }] })).toBe('tools[0].tools[0].type');
    expect(p({ tools: [{ type: 'local_shell' }] })).toBe('tools[0].type');
    expect(p({ tools: [{ type: 'function', name: 'f', parameters: { type: 'object' }, defer_loading: true }] })).toBe('tools[0].defer_loading');
    expect(p({ tools: [{ type: 'custom', name: 'f', format: { type: 'grammar', syntax: 'peg', definition: 'x' } }] })).toBe('tools[0].format.syntax');
    // two tools the worker would see under one name
    expect(p({ tools: [{ type: 'function', name: 'n__f' }, { type: 'namespace', name: 'n', description: '', tools: [{ type: 'function', name: 'f' }] }] })).toBe('tools[1].tools[0].name');
    expect(p({ tool_choice: { type: 'function', name: 'apply_patch' } })).toBe('tool_choice.type');
    expect(p({ tool_choice: { type: 'custom', name: 'nope' } })).toBe('tool_choice.name');
    expect(p({ reasoning: { summary: 'detailed' } })).toBe('reasoning.summary');
    expect(p({ include: ['reasoning.encrypted_content', 'message.output_text.logprobs'] })).toBe('include[1]');
    expect(p({ client_metadata: { k: 'x'.repeat(8193) } })).toBe('client_metadata.k');
    expect(p({ input: [{ type: 'reasoning', summary: [], encrypted_content: 'x' }] })).toBe('input[0].type');
    expect(p({ input: [{ type: 'custom_tool_call_output', call_id: 'nope', output: 'x' }] })).toBe('input[0].call_id');
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
      w.start({ id: 'resp_1' }) + w.text('') + w.text('Hel') + w.text('lo') + w.toolCall({ id: 'c1', name: 'f', arguments: '{"a":1}' }) + w.closeMessage() + w.finish({ id: 'resp_1', status: 'completed' }),
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
