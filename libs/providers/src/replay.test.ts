import { describe, expect, it } from 'vitest';
import { estimateTokens, type RecordedOutcome } from '@fugu/core';
import { BadRequestError } from './errors.ts';
import { REPLAY_DEFAULT_OUTPUT_TOKENS, ReplayChatModel, type ReplayStore } from './replay.ts';
import { collectStream } from './testing/index.ts';

// A store for one worker, as the datasets lib builds it: by item id, else by exact prompt.
function store(items: Array<{ id: string; prompt: string; outcome: RecordedOutcome }>): ReplayStore {
  return {
    lookup(prompt, itemId) {
      const it = itemId !== undefined ? items.find((i) => i.id === itemId) : items.find((i) => i.prompt === prompt);
      return it && { itemId: it.id, outcome: it.outcome };
    },
  };
}

const ITEMS = [
  { id: 'train-000001', prompt: 'What is 2+2?', outcome: { score: 1, tokensIn: 12, tokensOut: 3, answer: '4' } },
  { id: 'train-000002', prompt: 'Name a prime above 10.', outcome: { score: 0 } },
  { id: 'train-000003', prompt: 'Same prompt', outcome: { score: 0.5, tokensIn: 7 } },
  { id: 'train-000004', prompt: 'Same prompt', outcome: { score: 1, answer: 'the other one' } },
];

describe('ReplayChatModel', () => {
  const model = new ReplayChatModel('llama-70b', store(ITEMS), { model: 'meta/llama-3.1-70b' });

  it('answers by prompt with the recorded answer, tokens and score', async () => {
    const r = await model.generate({ messages: [{ role: 'system', content: 'sys' }, { role: 'user', content: 'What is 2+2?' }] });
    expect(r.text).toBe('4');
    expect(r.content).toEqual([{ type: 'text', text: '4' }]);
    expect(r.usage).toEqual({ inputTokens: 12, outputTokens: 3 });
    expect(r.finishReason).toBe('stop');
    expect(r.model).toBe('meta/llama-3.1-70b');
    expect(model.provider).toBe('replay');
    expect(r.providerMetadata).toEqual({ replay: { itemId: 'train-000001', score: 1 } });
  });

  it('finds the item by metadata.itemId before the prompt', async () => {
    const r = await model.generate({ messages: [{ role: 'user', content: 'Same prompt' }], metadata: { itemId: 'train-000004' } });
    expect(r.providerMetadata).toEqual({ replay: { itemId: 'train-000004', score: 1 } });
    expect(r.text).toBe('the other one');
  });

  it('uses the last user message of a conversation', async () => {
    const r = await model.generate({
      messages: [
        { role: 'user', content: 'What is 2+2?' },
        { role: 'assistant', content: '4' },
        { role: 'user', content: [{ type: 'text', text: 'Name a prime ' }, { type: 'text', text: 'above 10.' }] },
      ],
    });
    expect(r.providerMetadata).toEqual({ replay: { itemId: 'train-000002', score: 0 } });
  });

  it('marks the answer and estimates usage when the dataset recorded neither', async () => {
    const messages = [{ role: 'user' as const, content: 'Name a prime above 10.' }];
    const r = await model.generate({ messages });
    expect(r.text).toBe('[replay:llama-70b] recorded score 0');
    expect(r.usage).toEqual({ inputTokens: estimateTokens('Name a prime above 10.'), outputTokens: REPLAY_DEFAULT_OUTPUT_TOKENS });
  });

  it('estimates output tokens from a recorded answer, and keeps a recorded input count', async () => {
    const r = await model.generate({ messages: [{ role: 'user', content: 'Same prompt' }], metadata: { itemId: 'train-000004' } });
    expect(r.usage).toEqual({ inputTokens: estimateTokens('Same prompt'), outputTokens: estimateTokens('the other one') });
    const r3 = await model.generate({ messages: [{ role: 'user', content: 'Same prompt' }], metadata: { itemId: 'train-000003' } });
    expect(r3.usage).toEqual({ inputTokens: 7, outputTokens: REPLAY_DEFAULT_OUTPUT_TOKENS });
  });

  it('refuses a prompt that is not in its dataset, saying why', async () => {
    const err = await model.generate({ messages: [{ role: 'user', content: 'Write a poem about the sea.' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BadRequestError);
    expect(err).toMatchObject({ provider: 'replay', transient: false });
    expect((err as Error).message).toContain('the replay worker "llama-70b" only answers questions of its dataset');
    expect((err as Error).message).toContain('your message "Write a poem about the sea." is not one of them');
    // and what to do: any prompt on the scripted pool, or live workers from a pool file with keys
    expect((err as Error).message).toMatch(/scripted pool of simulated workers \(fugu gateway --pool scripted\).*pool file whose workers have their API keys/);
    const byId = await model.generate({ messages: [{ role: 'user', content: 'x' }], metadata: { itemId: 'test-9' } }).catch((e: unknown) => e);
    expect((byId as Error).message).toContain('item id "test-9"');
  });

  it('streams the answer as one delta, then finish', async () => {
    const s = await collectStream(model.stream({ messages: [{ role: 'user', content: 'What is 2+2?' }] }));
    expect(s.events).toEqual([
      { type: 'text-delta', text: '4' },
      { type: 'finish', finishReason: 'stop', usage: { inputTokens: 12, outputTokens: 3 }, model: 'meta/llama-3.1-70b' },
    ]);
  });
});
