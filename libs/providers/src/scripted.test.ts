import { describe, expect, it } from 'vitest';
import type { ChatRequest, ToolDefinition } from '@fugu/core';
import { AbortedError, RateLimitError, ServerError, TimeoutError } from './errors.ts';
import { argumentsFor, ScriptedChatModel } from './scripted.ts';
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
  });
});
