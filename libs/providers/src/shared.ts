// Small pieces every adapter uses: effective sampling settings, tool-argument parsing,
// result assembly, usage estimates.

import {
  ConfigError,
  estimateTokens,
  messageText,
  type ChatMessage,
  type ProviderKind,
  type SamplingSettings,
  type TextPart,
  type ToolCall,
  type ToolCallPart,
  type Usage,
} from '@fugu/core';
import { BadRequestError } from './errors.ts';
import { DEFAULT_TIMEOUT_MS, type ChatModelOptions, type ChatRequest, type ChatResult, type ReasoningEffort } from '@fugu/core';

export type EffectiveSampling = {
  temperature: number | undefined;
  topP: number | undefined;
  maxTokens: number | undefined;
  reasoningEffort: ReasoningEffort | undefined;
};

/** The request's sampling fields, falling back to the worker's defaults field by field. */
export function effectiveSampling(req: ChatRequest, defaults: SamplingSettings | undefined): EffectiveSampling {
  return {
    temperature: req.temperature ?? defaults?.temperature,
    topP: req.topP ?? defaults?.topP,
    maxTokens: req.maxTokens ?? defaults?.maxTokens,
    reasoningEffort: req.reasoningEffort ?? defaults?.reasoningEffort,
  };
}

/**
 * A tool call's JSON arguments as an object, for providers whose wire format wants an object
 * (Anthropic `input`, Gemini `args`). Empty arguments are `{}`.
 */
export function parseToolArguments(provider: ProviderKind, call: { id: string; name: string; arguments: string }): Record<string, unknown> {
  if (call.arguments.trim() === '') return {};
  let v: unknown;
  try {
    v = JSON.parse(call.arguments);
  } catch {
    throw new BadRequestError(
      provider,
      `${provider}: tool call ${call.id} (${call.name}) has arguments that are not valid JSON; ${provider} needs a JSON object`,
    );
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) {
    throw new BadRequestError(provider, `${provider}: tool call ${call.id} (${call.name}) has arguments that are not a JSON object`);
  }
  return v as Record<string, unknown>;
}

export function textOf(content: string | ReadonlyArray<{ type: string }>): string {
  if (typeof content === 'string') return content;
  return content
    .filter((p): p is TextPart => p.type === 'text')
    .map((p) => p.text)
    .join('');
}

export function toolCallParts(content: string | ReadonlyArray<{ type: string }>): ToolCallPart[] {
  if (typeof content === 'string') return [];
  return content.filter((p): p is ToolCallPart => p.type === 'tool-call');
}

/** Build a ChatResult's content list: the text (if any) first, then the tool calls. */
export function buildResult(
  fields: Omit<ChatResult, 'content' | 'text' | 'toolCalls'> & { text: string; toolCalls: ToolCall[] },
): ChatResult {
  const content: Array<TextPart | ToolCallPart> = [];
  if (fields.text) content.push({ type: 'text', text: fields.text });
  for (const c of fields.toolCalls) content.push({ type: 'tool-call', id: c.id, name: c.name, arguments: c.arguments });
  const result: ChatResult = {
    text: fields.text,
    content,
    toolCalls: fields.toolCalls,
    usage: fields.usage,
    finishReason: fields.finishReason,
    model: fields.model,
  };
  if (fields.logprobs) result.logprobs = fields.logprobs;
  if (fields.providerMetadata) result.providerMetadata = fields.providerMetadata;
  return result;
}

/** All message text of a request, as the token estimate sees it. */
export function promptText(messages: ReadonlyArray<ChatMessage>): string {
  return messages.map(messageText).join('\n');
}

/**
 * Usage for a response whose provider reported none (some OpenAI-compatible servers): an
 * estimate at about 4 characters a token, so costs are not silently zero.
 */
export function estimatedUsage(messages: ReadonlyArray<ChatMessage>, outputText: string, toolCalls: ReadonlyArray<ToolCall>): Usage {
  const out = outputText + toolCalls.map((c) => `${c.name}(${c.arguments})`).join('');
  return { inputTokens: estimateTokens(promptText(messages)), outputTokens: estimateTokens(out) };
}

/** Drop undefined fields, so request bodies carry only what was set. */
export function defined<T extends Record<string, unknown>>(o: T): { [K in keyof T]: Exclude<T[K], undefined> } {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out as { [K in keyof T]: Exclude<T[K], undefined> };
}

export function requireApiKey(provider: ProviderKind, apiKey: string | undefined): string {
  if (!apiKey) {
    throw new ConfigError(`${provider}: the ${provider} adapter needs an API key (createChatModel reads it from the environment)`);
  }
  return apiKey;
}

/** A model's default call time limit as the SDK clients take it: whole ms, within timer range. */
export function clientTimeoutMs(timeoutMs: number | undefined): number {
  const ms = timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!(ms > 0)) throw new ConfigError(`timeoutMs must be a positive number of ms, got ${ms}`);
  return Math.min(Math.ceil(ms), 2 ** 31 - 1);
}

/** What an adapter's constructor settles from its options, checked the same way in every adapter. */
export type AdapterSettings<Key extends string | undefined = string> = {
  modelId: string;
  /** the API key: checked present unless the adapter takes none (openai-compatible) */
  apiKey: Key;
  /** the model's call time limit, as clientTimeoutMs gives it; a request's timeoutMs wins */
  timeoutMs: number;
  /** the worker's sampling settings, for the fields a request leaves unset */
  defaults: SamplingSettings | undefined;
};

/**
 * The options every adapter takes, settled: the model, the key (a ConfigError when it is
 * required and missing, checked first), the call time limit (a ConfigError unless positive)
 * and the sampling defaults.
 */
export function adapterSettings(provider: ProviderKind, opts: ChatModelOptions): AdapterSettings;
export function adapterSettings(provider: ProviderKind, opts: ChatModelOptions, key: 'optional'): AdapterSettings<string | undefined>;
export function adapterSettings(provider: ProviderKind, opts: ChatModelOptions, key: 'required' | 'optional' = 'required'): AdapterSettings<string | undefined> {
  const apiKey = key === 'required' ? requireApiKey(provider, opts.apiKey) : opts.apiKey;
  return { modelId: opts.model, apiKey, timeoutMs: clientTimeoutMs(opts.timeoutMs), defaults: opts.defaults };
}
