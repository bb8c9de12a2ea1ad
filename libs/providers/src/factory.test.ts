import { describe, expect, it } from 'vitest';
import { ConfigError, type WorkerSpec } from '@fugu/core';
import { AnthropicChatModel } from './anthropic.ts';
import { apiKeyVariables, createChatModel } from './factory.ts';
import { GoogleChatModel } from './google.ts';
import { OpenAIChatModel, OpenAICompatibleChatModel } from './openai.ts';
import { ReplayChatModel, type ReplayStore } from './replay.ts';
import { startOpenAIStub } from './testing/index.ts';

const spec = (s: Partial<WorkerSpec> & Pick<WorkerSpec, 'provider'>): WorkerSpec => ({
  name: `w-${s.provider}`,
  model: 'm',
  settings: {},
  prices: { inputPerMTok: '1', outputPerMTok: '2' },
  ...s,
});

const SECRET = 'sk-secret-value-that-must-not-leak-123456';

function thrown(f: () => unknown): Error {
  try {
    f();
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a throw');
}

describe('createChatModel', () => {
  it('builds each provider, reading the key from the default variable', () => {
    expect(createChatModel(spec({ provider: 'openai' }), { OPENAI_API_KEY: SECRET })).toBeInstanceOf(OpenAIChatModel);
    expect(createChatModel(spec({ provider: 'anthropic' }), { ANTHROPIC_API_KEY: SECRET })).toBeInstanceOf(AnthropicChatModel);
    expect(createChatModel(spec({ provider: 'google' }), { GEMINI_API_KEY: SECRET })).toBeInstanceOf(GoogleChatModel);
    expect(createChatModel(spec({ provider: 'google' }), { GOOGLE_API_KEY: SECRET })).toBeInstanceOf(GoogleChatModel);
    expect(createChatModel(spec({ provider: 'openai-compatible', baseUrl: 'http://127.0.0.1:1/v1' }), {})).toBeInstanceOf(OpenAICompatibleChatModel);
    const store: ReplayStore = { lookup: () => undefined };
    const replay = createChatModel(spec({ provider: 'replay', name: 'gpt-4', model: 'openai/gpt-4' }), {}, { replayStore: (w) => (w === 'gpt-4' ? store : undefined) });
    expect(replay).toBeInstanceOf(ReplayChatModel);
    expect(replay.modelId).toBe('openai/gpt-4');
  });

  it('names the variable to set and the worker when the key is missing', () => {
    const e = thrown(() => createChatModel(spec({ provider: 'openai', name: 'gpt-4o' }), {}));
    expect(e).toBeInstanceOf(ConfigError);
    expect(e.message).toBe('worker "gpt-4o": set OPENAI_API_KEY (the API key for provider openai)');
    expect((e as ConfigError).variable).toBe('OPENAI_API_KEY');
    expect(thrown(() => createChatModel(spec({ provider: 'google', name: 'g' }), { GEMINI_API_KEY: '  ' })).message).toBe(
      'worker "g": set GEMINI_API_KEY or GOOGLE_API_KEY (the API key for provider google)',
    );
    expect(thrown(() => createChatModel(spec({ provider: 'anthropic', name: 'c', apiKeyEnv: 'TEAM_CLAUDE_KEY' }), { ANTHROPIC_API_KEY: SECRET })).message).toBe(
      'worker "c": set TEAM_CLAUDE_KEY (the API key for provider anthropic)',
    );
  });

  it('reads the key from the variable the worker names', () => {
    expect(apiKeyVariables({ provider: 'openai', apiKeyEnv: 'MY_KEY' })).toEqual(['MY_KEY']);
    expect(createChatModel(spec({ provider: 'openai', apiKeyEnv: 'MY_KEY' }), { MY_KEY: SECRET })).toBeInstanceOf(OpenAIChatModel);
  });

  it('needs a base URL for openai-compatible, and recorded outcomes for replay', () => {
    const e = thrown(() => createChatModel(spec({ provider: 'openai-compatible', name: 'local' }), {}));
    expect(e).toBeInstanceOf(ConfigError);
    expect(e.message).toMatch(/^worker "local": set baseUrl/);
    const r = thrown(() => createChatModel(spec({ provider: 'replay', name: 'rb' }), {}));
    expect(r).toBeInstanceOf(ConfigError);
    expect(r.message).toMatch(/^worker "rb": provider replay needs/);
  });

  it('never sends OPENAI_API_KEY to an openai-compatible endpoint unless the worker names it', async () => {
    const stub = await startOpenAIStub();
    try {
      const m = createChatModel(spec({ provider: 'openai-compatible', baseUrl: stub.baseURL }), { OPENAI_API_KEY: SECRET });
      await m.generate({ messages: [{ role: 'user', content: 'hi' }] });
      expect(stub.lastRequest!.headers['authorization']).toBeUndefined();
      const named = createChatModel(spec({ provider: 'openai-compatible', baseUrl: stub.baseURL, apiKeyEnv: 'VLLM_KEY' }), { VLLM_KEY: 'vllm-token-123' });
      await named.generate({ messages: [{ role: 'user', content: 'hi' }] });
      expect(stub.lastRequest!.headers['authorization']).toBe('Bearer vllm-token-123');
    } finally {
      await stub.close();
    }
  });

  it('applies the worker settings as defaults and keeps the key out of thrown messages', async () => {
    const stub = await startOpenAIStub({ apiKey: 'sk-some-other-key-00000000000' });
    try {
      const m = createChatModel(spec({ provider: 'openai', baseUrl: stub.baseURL, settings: { temperature: 0.4, maxTokens: 77 } }), { OPENAI_API_KEY: SECRET });
      const err = (await m.generate({ messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e)) as Error;
      expect(stub.lastRequest!.body).toMatchObject({ temperature: 0.4, max_completion_tokens: 77 });
      expect(err.name).toBe('AuthError');
      expect(err.message).not.toContain(SECRET);
      expect(JSON.stringify(err)).not.toContain(SECRET);
      expect(String(err.stack)).not.toContain(SECRET);
    } finally {
      await stub.close();
    }
  });
});
