import { describe, expect, it } from 'vitest';
import type { ChatRequest, ToolDefinition } from '@fugu/core';
import { AbortedError, RateLimitError, ServerError, TimeoutError } from './errors.ts';
import { argumentsFor, fillTemplate, ScriptedChatModel, workingDirectoryOf } from './scripted.ts';
import { createChatModel } from './factory.ts';

const weather: ToolDefinition = {
  name: 'get_weather', description: 'Current weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'] },
};
const search: ToolDefinition = { name: 'search_docs', description: 'Search the product documentation', parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] } };
const ask = (content: string, more: Partial<ChatRequest> = {}): ChatRequest => ({ messages: [{ role: 'user', content }], ...more });

describe('scripted worker', () => {
  it('answers any prompt, the same answer for the same request and seed, another for another seed; marked a simulation', async () => {
    const q = 'Who won the most gold medals in the Olympics?';
    const a = await new ScriptedChatModel('sim', { seed: 1 }).generate(ask(q));
    const again = await createChatModel({ name: 'sim', provider: 'scripted', model: 'sim', settings: {}, prices: { inputPerMTok: '0', outputPerMTok: '0' }, script: { seed: 1 } }, {}).generate(ask(q));
    const other = await new ScriptedChatModel('sim', { seed: 2 }).generate(ask(q));
    const otherRequestSeed = await new ScriptedChatModel('sim', { seed: 1 }).generate(ask(q, { seed: 9 }));
    expect(again.text).toBe(a.text);
    expect(other.text).not.toBe(a.text);
    expect(otherRequestSeed.text).not.toBe(a.text);
    expect(a.text).toMatch(/gold, medals, olympics/);
    // a fugu-ultra agent's prompt: the task it names, not the template's words
    const agent = await new ScriptedChatModel('sim', { seed: 1 }).generate(ask(`You are one agent in a small team.\n\nThe overall task:\n${q}\n\nYour step: solve it.`));
    expect(agent.text).toMatch(/On won, most, gold, medals, olympics:/);
    expect(a.finishReason).toBe('stop');
    expect(a.providerMetadata).toMatchObject({ scripted: { simulation: true, seed: 1 } });
    expect(a.usage.outputTokens).toBeGreaterThan(10);
  });

  it('style and length: detailed answers run about three times longer than concise ones; echo gives the message back; max_tokens and stop cut', async () => {
    const q = 'Explain how a heat pump works';
    const concise = await new ScriptedChatModel('s', { seed: 1, outputTokens: 40 }).generate(ask(q));
    const detailed = await new ScriptedChatModel('s', { seed: 1, outputTokens: 40, style: 'detailed' }).generate(ask(q));
    expect(detailed.usage.outputTokens).toBeGreaterThan(2 * concise.usage.outputTokens);
    expect((await new ScriptedChatModel('s', { style: 'echo' }).generate(ask(q))).text).toBe(q);
    const cut = await new ScriptedChatModel('s', { seed: 1, outputTokens: 40 }).generate(ask(q, { maxTokens: 5 }));
    expect([cut.finishReason, cut.usage.outputTokens]).toEqual(['length', 5]);
  });

  it('tools: calls the best-matching one with arguments from the prompt, then answers from its result', async () => {
    const m = new ScriptedChatModel('s', { seed: 1 });
    const q = 'What is the weather in Paris today, in celsius?';
    const first = await m.generate(ask(q, { tools: [search, weather] }));
    expect(first.finishReason).toBe('tool-calls');
    expect(first.toolCalls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([['get_weather', { city: 'Paris', unit: 'celsius' }]]);
    const call = first.toolCalls[0]!;
    const second = await m.generate({
      messages: [{ role: 'user', content: q }, { role: 'assistant', content: [{ type: 'tool-call', ...call }] }, { role: 'tool', content: [{ type: 'tool-result', toolCallId: call.id, name: call.name, content: 'sunny, 21 C' }] }],
      tools: [search, weather],
    });
    expect(second.finishReason).toBe('stop');
    expect(second.text).toContain('get_weather gave "sunny, 21 C"');
    // an agent whose prompt quotes that result (another agent's answer) answers instead of calling again
    expect((await m.generate(ask(`${q}\n\nAnother agent: ${second.text}`, { tools: [weather] }))).toolCalls).toEqual([]);
    // a documentation question picks the search tool; tool_choice none, or nothing matching, answers
    expect((await m.generate(ask('Search the documentation for the install guide', { tools: [weather, search] }))).toolCalls[0]).toMatchObject({ name: 'search_docs' });
    expect((await m.generate(ask(q, { tools: [weather], toolChoice: 'none' }))).toolCalls).toEqual([]);
    expect((await m.generate(ask('Tell me a joke', { tools: [weather] }))).toolCalls).toEqual([]);
    // required or named: that tool, matching or not
    expect((await m.generate(ask('Tell me a joke', { tools: [weather], toolChoice: 'required' }))).toolCalls[0]?.name).toBe('get_weather');
    expect((await m.generate(ask(q, { tools: [weather, search], toolChoice: { name: 'search_docs' } }))).toolCalls[0]?.name).toBe('search_docs');
    // a script that names a tool calls it whenever it is offered; one that says none, never unless required
    expect((await new ScriptedChatModel('s', { tools: 'search_docs' }).generate(ask(q, { tools: [weather, search] }))).toolCalls[0]?.name).toBe('search_docs');
    expect((await new ScriptedChatModel('s', { tools: 'none' }).generate(ask(q, { tools: [weather] }))).toolCalls).toEqual([]);
  });

  it('arguments by the schema: places from capitalised words, text from the message, numbers, enums, booleans', () => {
    const t: ToolDefinition = {
      name: 'plan', parameters: { type: 'object', properties: { origin: { type: 'string' }, destination: { type: 'string' }, days: { type: 'integer' }, query: { type: 'string' }, direct: { type: 'boolean' }, mode: { enum: ['train', 'plane'] } } },
    };
    expect(argumentsFor(t, 'Plan a trip from Lyon to Rome by train for 3 days')).toEqual({
      origin: 'Lyon', destination: 'Rome', days: 3, query: 'Plan a trip from Lyon to Rome by train for 3 days', direct: true, mode: 'train',
    });
  });

  it('failures at the declared rates, drawn per call (a retry may succeed): 429s with a wait, 500s, timeouts', async () => {
    const m = new ScriptedChatModel('flaky', { seed: 3, failures: { rateLimit: 0.2, serverError: 0.1, timeout: 0 } });
    const kinds = { ok: 0, rate: 0, server: 0 };
    for (let i = 0; i < 400; i++) {
      try {
        await m.generate(ask('the same question'));
        kinds.ok++;
      } catch (e) {
        if (e instanceof RateLimitError) {
          expect(e.retryAfterMs).toBeGreaterThan(0);
          kinds.rate++;
        } else if (e instanceof ServerError) kinds.server++;
        else throw e;
      }
    }
    expect(kinds.rate).toBeGreaterThan(50);
    expect(kinds.rate).toBeLessThan(110);
    expect(kinds.server).toBeGreaterThan(20);
    expect(kinds.server).toBeLessThan(65);
    // the same seed, the same sequence
    const again = new ScriptedChatModel('flaky', { seed: 3, failures: { rateLimit: 0.2, serverError: 0.1, timeout: 0 } });
    const seq = async (x: ScriptedChatModel) => Promise.all(Array.from({ length: 30 }, () => x.generate(ask('q')).then(() => 'ok', (e: Error) => e.name)));
    const fresh = new ScriptedChatModel('flaky', { seed: 3, failures: { rateLimit: 0.2, serverError: 0.1, timeout: 0 } });
    expect(await seq(again)).toEqual(await seq(fresh));
    await expect(new ScriptedChatModel('t', { failures: { rateLimit: 0, serverError: 0, timeout: 1 } }).generate(ask('q', { timeoutMs: 5 }))).rejects.toBeInstanceOf(TimeoutError);
    // the caller's abort ends the wait
    const abort = new AbortController();
    const slow = new ScriptedChatModel('slow', { latencyMs: 60_000 }).generate(ask('q', { signal: abort.signal }));
    abort.abort();
    await expect(slow).rejects.toBeInstanceOf(AbortedError);
  });

  describe('tool rules (a pool file\'s script.tool_rules: driving a coding harness\'s own tools)', () => {
    // Claude Code's read and edit tools as it declares them, and a tool it also offers
    const read: ToolDefinition = { name: 'Read', description: 'Reads a file', parameters: { type: 'object', properties: { file_path: { type: 'string' } }, required: ['file_path'] } };
    const edit: ToolDefinition = {
      name: 'Edit', description: 'Edits a file', parameters: { type: 'object', properties: { file_path: { type: 'string' }, old_string: { type: 'string' }, new_string: { type: 'string' } }, required: ['file_path', 'old_string', 'new_string'] },
    };
    const bash: ToolDefinition = { name: 'Bash', description: 'Runs a command: read a file, list, search', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } };
    const EDIT = "In greeting.txt, change the line 'Hello, world' to 'Hello, fugu'.";
    const rules = [
      { when: 'code word in (\\S+\\.txt)', tool: 'read', arguments: { filePath: '{{cwd}}/$1' } },
      { when: 'code word in (\\S+\\.txt)', tool: 'Read', arguments: { file_path: '{{cwd}}/$1' } },
      { when: "In (\\S+\\.txt), change the line '([^']*)' to '([^']*)'", tool: 'Read', arguments: { file_path: '{{cwd}}/$1' } },
      { when: "In (\\S+\\.txt), change the line '([^']*)' to '([^']*)'", tool: 'Edit', after: ['Read'], arguments: { file_path: '{{cwd}}/$1', old_string: '$2', new_string: '$3', replace_all: false } },
    ];
    const system = { role: 'system' as const, content: 'You are Claude Code.\nPrimary working directory: /tmp/work-1\nIs a git repo: yes' };
    const m = new ScriptedChatModel('h', { seed: 1, tools: 'none', toolRules: rules });

    it('calls the first rule whose tool is offered and whose regex matches, its arguments filled from the match and the working directory', async () => {
      const r = await m.generate({ messages: [system, { role: 'user', content: 'What is the code word in notes.txt? Answer with the word.' }], tools: [bash, read, edit] });
      // `read` (OpenCode's) is not offered here: the next rule, Claude Code's Read
      expect(r.toolCalls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([['Read', { file_path: '/tmp/work-1/notes.txt' }]]);
      expect(r.finishReason).toBe('tool-calls');
      // no rule matches, and the script calls no other tool: an answer
      expect((await m.generate({ messages: [system, { role: 'user', content: 'Hello there' }], tools: [bash, read, edit] })).toolCalls).toEqual([]);
      // a rule that needs a working directory the prompt does not state does not apply
      expect((await m.generate({ messages: [{ role: 'user', content: 'What is the code word in notes.txt?' }], tools: [read] })).toolCalls).toEqual([]);
      // tool_choice none: no call; a named tool: only its rules
      expect((await m.generate({ messages: [system, { role: 'user', content: EDIT }], tools: [read, edit], toolChoice: 'none' })).toolCalls).toEqual([]);
    });

    it('steps through a task by `after` (Read, then Edit with the captures), then answers quoting the results', async () => {
      const user = { role: 'user' as const, content: EDIT };
      const first = await m.generate({ messages: [system, user], tools: [read, edit] });
      expect(first.toolCalls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([['Read', { file_path: '/tmp/work-1/greeting.txt' }]]);
      const c1 = first.toolCalls[0]!;
      const afterRead = [system, user, { role: 'assistant' as const, content: [{ type: 'tool-call' as const, ...c1 }] }, { role: 'tool' as const, content: [{ type: 'tool-result' as const, toolCallId: c1.id, name: 'Read', content: '     1\tHello, world\n' }] }];
      const second = await m.generate({ messages: afterRead, tools: [read, edit] });
      expect(second.toolCalls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([
        ['Edit', { file_path: '/tmp/work-1/greeting.txt', old_string: 'Hello, world', new_string: 'Hello, fugu', replace_all: false }],
      ]);
      const c2 = second.toolCalls[0]!;
      const third = await m.generate({
        messages: [...afterRead, { role: 'assistant', content: [{ type: 'tool-call', ...c2 }] }, { role: 'tool', content: [{ type: 'tool-result', toolCallId: c2.id, name: 'Edit', content: 'The file greeting.txt has been updated.' }] }],
        tools: [read, edit],
      });
      expect(third.toolCalls).toEqual([]);
      expect(third.text).toContain('Read gave "1 Hello, world"');
      expect(third.text).toContain('Edit gave "The file greeting.txt has been updated."');
      // a new user message starts over: the first rule again
      expect((await m.generate({ messages: [...afterRead, { role: 'user', content: EDIT }], tools: [read, edit] })).toolCalls[0]?.name).toBe('Read');
    });

    it("an agent whose prompt quotes other agents' tool results calls nothing by rule (not another rule's tool either), and passes the quoted results on", async () => {
      const task = 'You aggregate the team.\n\nThe overall task:\nWhat is the code word in notes.txt?\n\nAn agent answered: From the tool results (Read gave "1 The code word is PERIWINKLE."): done.';
      const r = await m.generate({ messages: [system, { role: 'user', content: task }], tools: [read, edit] });
      expect(r.toolCalls).toEqual([]);
      expect(r.text).toContain('Read gave "1 The code word is PERIWINKLE."');
      // the edit was done by the others (their Edit quoted): no Read, no Edit again
      const edited = `The overall task:\n${EDIT}\n\nAn agent answered: From the tool results (Read gave "1 Hello, world"; Edit gave "updated"): done.`;
      expect((await m.generate({ messages: [system, { role: 'user', content: edited }], tools: [read, edit] })).toolCalls).toEqual([]);
    });

    it('finds the working directory as Codex, Claude Code and OpenCode state it; fills templates', () => {
      expect(workingDirectoryOf('<environment_context>\n  <cwd>/tmp/codex-1</cwd>\n</environment_context>')).toBe('/tmp/codex-1');
      expect(workingDirectoryOf('Primary working directory: /tmp/claude-1\n')).toBe('/tmp/claude-1');
      expect(workingDirectoryOf('<env>\n  Working directory: /tmp/oc-1\n</env>')).toBe('/tmp/oc-1');
      expect(workingDirectoryOf('no directory here')).toBeUndefined();
      const match = /change (\w+) to (\w+)(x)?/i.exec('Change old to new')!;
      expect(fillTemplate({ a: '$1 -> $2 ($3) $$5 {{cwd}}', n: [1, '$2'], keep: true }, match, '/w')).toEqual({ a: 'old -> new () $5 /w', n: [1, 'new'], keep: true });
      expect(fillTemplate({ p: '{{cwd}}/x' }, match, undefined)).toBeUndefined();
    });
  });

  it('streams the same answer, and the tool call as one event', async () => {
    const m = new ScriptedChatModel('s', { seed: 5, outputTokens: 60 });
    const whole = await m.generate(ask('Describe the water cycle'));
    let text = '';
    const events: string[] = [];
    for await (const e of m.stream(ask('Describe the water cycle'))) {
      events.push(e.type);
      if (e.type === 'text-delta') text += e.text;
    }
    expect(text).toBe(whole.text);
    expect(events.filter((t) => t === 'text-delta').length).toBeGreaterThan(1);
    const tools: string[] = [];
    for await (const e of m.stream(ask('Weather in Oslo?', { tools: [weather] }))) if (e.type === 'tool-call') tools.push(e.toolCall.name);
    expect(tools).toEqual(['get_weather']);
    // a tool call has no text: no empty text delta
    const kinds: string[] = [];
    for await (const e of m.stream(ask('Weather in Oslo?', { tools: [weather] }))) kinds.push(e.type);
    expect(kinds).toEqual(['tool-call', 'finish']);
  });
});
