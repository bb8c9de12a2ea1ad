// From a worker spec (pool file entry) to a ChatModel. The spec names the environment variable
// holding the key (never the key); a missing key is one clear line naming what to set.

import { ConfigError, type WorkerSpec } from '@fugu/core';
import { AnthropicChatModel } from './anthropic.ts';
import { GoogleChatModel } from './google.ts';
import { OpenAIChatModel, OpenAICompatibleChatModel } from './openai.ts';
import { ReplayChatModel, type ReplayStore } from './replay.ts';
import { ScriptedChatModel } from './scripted.ts';
import type { ChatModel } from '@fugu/core';

/** The variables read for a hosted provider's key when a worker names none (first set wins). */
export const DEFAULT_API_KEY_ENV = {
  openai: ['OPENAI_API_KEY'],
  anthropic: ['ANTHROPIC_API_KEY'],
  google: ['GEMINI_API_KEY', 'GOOGLE_API_KEY'],
} as const;

/** One store for the worker, or a function giving each replay worker (by name) its store. */
export type ReplayStoreSource = ReplayStore | ((workerName: string) => ReplayStore | undefined);

export type CreateChatModelOptions = {
  replayStore?: ReplayStoreSource;
  /** default time limit of one call, ms */
  timeoutMs?: number;
};

export type Env = Record<string, string | undefined>;

export function createChatModel(spec: WorkerSpec, env: Env, opts: CreateChatModelOptions = {}): ChatModel {
  const common = { model: spec.model, timeoutMs: opts.timeoutMs, maxRetries: 0 as const, defaults: spec.settings };
  switch (spec.provider) {
    case 'openai':
      return new OpenAIChatModel({ ...common, apiKey: requiredKey(spec, env), baseURL: spec.baseUrl });
    case 'anthropic':
      return new AnthropicChatModel({ ...common, apiKey: requiredKey(spec, env), baseURL: spec.baseUrl });
    case 'google':
      return new GoogleChatModel({ ...common, apiKey: requiredKey(spec, env), baseURL: spec.baseUrl });
    case 'openai-compatible': {
      if (!spec.baseUrl) {
        throw new ConfigError(
          `worker "${spec.name}": set baseUrl (base_url in a pool file), the endpoint of the OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1`,
          'baseUrl',
        );
      }
      // Optional key, and only from a variable the worker names: OPENAI_API_KEY is never sent
      // to a third-party endpoint by default.
      const apiKey = spec.apiKeyEnv ? requiredKey(spec, env) : undefined;
      return new OpenAICompatibleChatModel({ ...common, apiKey, baseURL: spec.baseUrl });
    }
    case 'replay': {
      const src = opts.replayStore;
      const store = typeof src === 'function' ? src(spec.name) : src;
      if (!store) {
        throw new ConfigError(
          `worker "${spec.name}": provider replay needs the recorded outcomes of a dataset (createChatModel option replayStore); none were given for this worker`,
        );
      }
      return new ReplayChatModel(spec.name, store, { model: spec.model });
    }
    case 'scripted':
      return new ScriptedChatModel(spec.name, spec.script, { model: spec.model });
    default: {
      const p: never = spec.provider;
      throw new ConfigError(`worker "${(spec as WorkerSpec).name}": unknown provider ${JSON.stringify(p)}`);
    }
  }
}

/** The variable names a worker's key may come from, in the order they are read. */
export function apiKeyVariables(spec: Pick<WorkerSpec, 'provider' | 'apiKeyEnv'>): string[] {
  if (spec.apiKeyEnv) return [spec.apiKeyEnv];
  const p = spec.provider;
  return p === 'openai' || p === 'anthropic' || p === 'google' ? [...DEFAULT_API_KEY_ENV[p]] : [];
}

function requiredKey(spec: WorkerSpec, env: Env): string {
  const vars = apiKeyVariables(spec);
  for (const v of vars) {
    const value = env[v]?.trim();
    if (value) return value;
  }
  throw new ConfigError(
    `worker "${spec.name}": set ${vars.join(' or ')} (the API key for provider ${spec.provider})`,
    vars[0],
  );
}
