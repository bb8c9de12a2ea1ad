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
  /** cancels the call; the adapter then throws an AbortedError */
  signal?: AbortSignal;
  /** bounds the whole call (for a stream: until its last event); overrides the model's default */
  timeoutMs?: number;
  /** opaque hints, e.g. replay item id (`itemId`); never sent to a provider */
  metadata?: Record<string, string>;
};

export type ChatResult = {
  text: string;
  content: Array<TextPart | ToolCallPart>;
  toolCalls: ToolCall[];
  usage: Usage;
  finishReason: FinishReason;
  /** the model that answered, as the provider names it */
  model: string;
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
