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
  /** a short description of the worker (the pool file's `description`; an LLMRouter card's `feature`): what a Conductor reads */
  description?: string;
  /** the model's parameter count as its card writes it ("7B", "8x7B"; the pool file's `size`): the replay model's size class */
  size?: string;
};

export type WorkerPool = { name: string; workers: WorkerSpec[] };
