// A worker is one configured LLM of the pool: provider, model id, sampling settings, prices.

export const PROVIDERS = ['openai', 'anthropic', 'google', 'openai-compatible', 'replay', 'scripted'] as const;
export type ProviderKind = (typeof PROVIDERS)[number];

export type SamplingSettings = {
  temperature?: number;
  topP?: number;
  maxTokens?: number;
  /** providers that have it: OpenAI reasoning models, Anthropic extended thinking budget, Gemini thinking */
  reasoningEffort?: 'minimal' | 'low' | 'medium' | 'high';
};

/**
 * A scripted worker's behaviour (provider `scripted`, the pool file's `script`): a simulation that
 * answers any prompt, deterministically per seed, for trying fugu without keys, load tests and CI.
 */
export type ScriptSpec = {
  seed: number;
  /** mean latency of a call (each call draws 0.75x to 1.25x) */
  latencyMs: number;
  /** mean output tokens of an answer (each draws 0.7x to 1.3x; `detailed`: three times) */
  outputTokens: number;
  /** concise or detailed text on the prompt's words; echo: the user's message back */
  style: 'concise' | 'detailed' | 'echo';
  /** the share of calls that fail: a 429, a 500, a timeout */
  failures: { rateLimit: number; serverError: number; timeout: number };
  /** when tools are offered: `auto` (the best-matching tool), `none`, or a tool's name */
  tools: string;
  /**
   * the tool calls a script makes by rule, before `tools` decides (the pool file's `tool_rules`):
   * in order, the first whose tool is offered, whose `when` matches the last user message and
   * whose `after` is the tools already called since it; for driving a client's own tools (a coding
   * harness's Read, Edit, apply_patch) with the arguments their schemas ask for
   */
  toolRules?: ScriptToolRule[];
};

/**
 * A scripted worker's rule for one tool call. `when`: a regular expression (JavaScript syntax,
 * case-insensitive) searched in the last user message; `arguments`: the call's arguments, whose
 * strings are templates: `$0`..`$9` the match and its groups, `{{cwd}}` the client's working
 * directory as its prompt states it, `$$` a dollar sign; `after`: the tools this agent has called
 * since that message, in order (default none: the first call).
 */
export type ScriptToolRule = { when: string; tool: string; arguments: Record<string, unknown>; after?: string[] };

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
  /** provider `scripted`: its behaviour (the defaults where a field is left out) */
  script?: Partial<ScriptSpec>;
};

/**
 * `defaultWorker`: the worker model `fugu` answers with while no router trained on this pool is
 * published (the pool file's `default_worker`; absent: the pool's first worker).
 */
export type WorkerPool = { name: string; workers: WorkerSpec[]; defaultWorker?: string };
