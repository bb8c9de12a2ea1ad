// A worker is one configured LLM of the pool: provider, model id, sampling settings, prices.

export const PROVIDERS = ['openai', 'anthropic', 'google', 'openai-compatible', 'replay'] as const;
export type ProviderKind = (typeof PROVIDERS)[number];

export type SamplingSettings = {
  temperature?: number;
  topP?: number;
  maxTokens?: number;
  /** providers that have it: OpenAI reasoning models, Anthropic extended thinking budget, Gemini thinking */
  reasoningEffort?: 'minimal' | 'low' | 'medium' | 'high';
};

export type WorkerSpec = {
  /** unique name in the pool; what routers choose and reports show */
  name: string;
  provider: ProviderKind;
  /** the provider's model id */
  model: string;
  /** OpenAI-compatible endpoints (vLLM, Ollama, llama.cpp server) and proxies */
  baseUrl?: string;
  /** name of the environment variable that holds the API key (never the key itself) */
  apiKeyEnv?: string;
  settings: SamplingSettings;
  /** USD per million tokens, as decimal strings (exact) */
  prices: { inputPerMTok: string; outputPerMTok: string };
};

export type WorkerPool = { name: string; workers: WorkerSpec[] };
