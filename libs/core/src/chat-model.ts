// The ChatModel spec: the one language-model interface every adapter (libs/providers) implements, after the Vercel AI SDK's
// provider specification: typed message parts in, text + whole tool calls + usage + finish
// reason out, and a stream of the same as events.

import type { ChatMessage, FinishReason, TextPart, ToolCall, ToolCallPart, ToolChoice, ToolDefinition, Usage } from './messages.ts';
import type { ProviderKind, SamplingSettings } from './workers.ts';

export type ReasoningEffort = NonNullable<SamplingSettings['reasoningEffort']>;

export type ChatRequest = {
  messages: ChatMessage[];
  tools?: ToolDefinition[];
  toolChoice?: ToolChoice;
  temperature?: number;
  topP?: number;
  maxTokens?: number;
  reasoningEffort?: ReasoningEffort;
  // ---- standard Chat Completions parameters (each adapter maps what its provider supports;
  // each adapter declares which it honours: PARAM_SUPPORT in @fugu/providers, docs/parameters.md)
  /** stop sequences (OpenAI `stop`, Anthropic `stop_sequences`, Gemini `stopSequences`) */
  stop?: string[];
  /** best-effort determinism */
  seed?: number;
  frequencyPenalty?: number;
  presencePenalty?: number;
  /** token id -> bias in [-100, 100] (OpenAI tokenizer ids) */
  logitBias?: Record<string, number>;
  /** return the log probabilities of the output tokens (ChatResult.logprobs) */
  logprobs?: boolean;
  /** with logprobs: the most likely alternatives per position (0-20) */
  topLogprobs?: number;
  responseFormat?: ResponseFormat;
  /** false: at most one tool call per turn */
  parallelToolCalls?: boolean;
  /** an id of the end user, for the provider's abuse monitoring (OpenAI `user`/`safety_identifier`, Anthropic `metadata.user_id`) */
  user?: string;
  /** OpenAI's processing tier (`auto`, `default`, `flex`, `priority`, ...) */
  serviceTier?: string;
  /** OpenAI: keep the completion for distillation/evals (`store`), with its tags (`storeMetadata` = wire `metadata`) */
  store?: boolean;
  storeMetadata?: Record<string, string>;
  /** OpenAI: output length preference of newer models (`low`, `medium`, `high`) */
  verbosity?: 'low' | 'medium' | 'high';
  /** OpenAI: the prompt-cache bucket key */
  promptCacheKey?: string;
  /** cancels the call; the adapter then throws an AbortedError */
  signal?: AbortSignal;
  /** bounds the whole call (for a stream: until its last event); overrides the model's default */
  timeoutMs?: number;
  /** opaque hints, e.g. replay item id (`itemId`); never sent to a provider */
  metadata?: Record<string, string>;
};

/** The shape the answer must take: free text, any JSON object, or JSON matching a schema. */
export type ResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; name: string; schema?: Record<string, unknown>; description?: string; strict?: boolean };

/** The log probability of one output token, with the most likely alternatives when asked. */
export type TokenLogprob = { token: string; logprob: number; bytes?: number[] | null; topLogprobs?: Array<{ token: string; logprob: number; bytes?: number[] | null }> };

export type ChatResult = {
  text: string;
  content: Array<TextPart | ToolCallPart>;
  toolCalls: ToolCall[];
  usage: Usage;
  finishReason: FinishReason;
  /** the model that answered, as the provider names it */
  model: string;
  /** per output token, when the request asked for logprobs and the provider gave them */
  logprobs?: TokenLogprob[];
  /** provider-specific, JSON-safe */
  providerMetadata?: Record<string, unknown>;
};

export type StreamEvent =
  | { type: 'text-delta'; text: string }
  /** a whole tool call: adapters assemble streamed argument fragments before emitting it */
  | { type: 'tool-call'; toolCall: ToolCall }
  | { type: 'finish'; finishReason: FinishReason; usage: Usage; model: string };

export interface ChatModel {
  readonly provider: ProviderKind;
  readonly modelId: string;
  generate(req: ChatRequest): Promise<ChatResult>;
  stream(req: ChatRequest): AsyncIterable<StreamEvent>;
}

/** What every SDK-backed adapter is constructed with. */
export type ChatModelOptions = {
  model: string;
  /** required by the hosted providers, optional for openai-compatible endpoints */
  apiKey?: string;
  baseURL?: string;
  /** default time limit of one call in ms (default 10 minutes); a request's timeoutMs wins */
  timeoutMs?: number;
  /**
   * SDK-internal retries are always off: retries belong to the queue, which knows about rate
   * limits across workers. Only 0 is accepted so nobody turns them on by accident.
   */
  maxRetries?: 0;
  /** sampling defaults (a worker's settings) used where a request leaves a field unset */
  defaults?: SamplingSettings;
};

export const DEFAULT_TIMEOUT_MS = 600_000;
