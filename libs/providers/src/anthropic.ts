// Anthropic Messages API, through `@anthropic-ai/sdk`.
//
// Notes on this API version (2026-10-21, pinned by SDK 1.x):
// - system messages are split out into the top-level `system` field;
// - `max_tokens` is required: the request's maxTokens, else 1024;
// - `temperature` and `top_p` no longer exist in the Messages API, so they are not sent;
// - reasoningEffort becomes an extended-thinking budget (THINKING_BUDGET), added on top of
//   max_tokens so the answer keeps its own allowance. Our message types carry no thinking
//   blocks, and the API wants the previous turn's thinking blocks back inside a tool-use loop,
//   so thinking is left off for a request that continues a tool loop.

import Anthropic from '@anthropic-ai/sdk';
import type {
  ContentBlockParam,
  ImageBlockParam,
  Message,
  MessageCreateParamsBase,
  MessageParam,
  StopReason,
  Tool,
  ToolChoice as AnthropicToolChoice,
} from '@anthropic-ai/sdk/resources/messages/messages';
import type { ChatMessage, FinishReason, ImagePart, ToolCall, ToolChoice, ToolDefinition, Usage } from '@fugu/core';
import { CallScope } from './call-scope.ts';
import { ConnectionError } from './errors.ts';
import { mapAnthropicError } from './sdk-errors.ts';
import { adapterSettings, buildResult, defined, effectiveSampling, parseToolArguments, type AdapterSettings } from './shared.ts';
import { supportsOnly, type ParamSupport } from './param-support.ts';
import type { ChatModel, ChatModelOptions, ChatRequest, ChatResult, ReasoningEffort, StreamEvent } from '@fugu/core';

export const ANTHROPIC_DEFAULT_MAX_TOKENS = 1024;

/** Extended-thinking budget (tokens) per reasoning effort; 1024 is the API's minimum. */
export const THINKING_BUDGET: Record<ReasoningEffort, number> = { minimal: 1024, low: 2048, medium: 8192, high: 24576 };

export type AnthropicChatModelOptions = ChatModelOptions & { apiKey: string };

export class AnthropicChatModel implements ChatModel {
  /** what the Messages API can be told (temperature and top_p no longer exist in it; no seed, penalties, logprobs or JSON mode) */
  static readonly params: ParamSupport = supportsOnly({
    maxTokens: true,
    reasoningEffort: { when: (req) => !continuesToolLoop(req.messages), note: 'not on a request that continues a tool loop (the API wants the earlier thinking blocks back, which messages do not carry)' },
    tools: true,
    toolChoice: true,
    parallelToolCalls: true,
    stop: true,
    user: true,
  });
  readonly params = AnthropicChatModel.params;
  readonly provider = 'anthropic' as const;
  readonly modelId: string;
  readonly #client: Anthropic;
  readonly #settings: AdapterSettings;

  constructor(opts: AnthropicChatModelOptions) {
    this.#settings = adapterSettings('anthropic', opts);
    this.modelId = this.#settings.modelId;
    this.#client = new Anthropic({
      apiKey: this.#settings.apiKey,
      // explicit, so ANTHROPIC_BASE_URL in process.env cannot redirect a configured worker
      baseURL: opts.baseURL ?? 'https://api.anthropic.com',
      maxRetries: 0,
      timeout: this.#settings.timeoutMs,
    });
  }

  async generate(req: ChatRequest): Promise<ChatResult> {
    const scope = new CallScope(this.provider, req.timeoutMs ?? this.#settings.timeoutMs, req.signal);
    try {
      const message = await this.#client.messages.create(
        { ...this.#body(req), stream: false },
        // always give the SDK a timeout: without one it refuses large max_tokens up front
        { signal: scope.signal, timeout: scope.timeoutMs },
      );
      return this.#result(message);
    } catch (e) {
      throw scope.failure(e, (x) => this.#mapError(x));
    } finally {
      scope.dispose();
    }
  }

  async *stream(req: ChatRequest): AsyncGenerator<StreamEvent> {
    const scope = new CallScope(this.provider, req.timeoutMs ?? this.#settings.timeoutMs, req.signal);
    try {
      const events = await this.#client.messages.create({ ...this.#body(req), stream: true }, { signal: scope.signal, timeout: scope.timeoutMs });
      const toolBlocks = new Map<number, { id: string; name: string; json: string; initial: unknown }>();
      let usage: Usage = { inputTokens: 0, outputTokens: 0 };
      let stop: StopReason | null = null;
      let model = this.modelId;
      let stopped = false;
      for await (const ev of events) {
        switch (ev.type) {
          case 'message_start':
            model = ev.message.model || model;
            usage = usageFrom(ev.message.usage);
            break;
          case 'content_block_start': {
            const b = ev.content_block;
            if (b.type === 'text' && b.text) yield { type: 'text-delta', text: b.text };
            if (b.type === 'tool_use') toolBlocks.set(ev.index, { id: b.id, name: b.name, json: '', initial: b.input });
            break;
          }
          case 'content_block_delta': {
            const d = ev.delta;
            if (d.type === 'text_delta' && d.text) yield { type: 'text-delta', text: d.text };
            if (d.type === 'input_json_delta') {
              const block = toolBlocks.get(ev.index);
              if (block) block.json += d.partial_json;
            }
            break;
          }
          case 'content_block_stop': {
            const block = toolBlocks.get(ev.index);
            if (block) {
              const args = block.json.trim() !== '' ? block.json : JSON.stringify(block.initial ?? {});
              yield { type: 'tool-call', toolCall: { id: block.id, name: block.name, arguments: args } };
              toolBlocks.delete(ev.index);
            }
            break;
          }
          case 'message_delta': {
            stop = ev.delta.stop_reason ?? stop;
            // message_delta usage is cumulative; input counts appear here when the server revises them
            const u = ev.usage;
            usage = mergeUsage(usage, u);
            break;
          }
          case 'message_stop':
            stopped = true;
            break;
          default:
            break;
        }
      }
      scope.throwIfAborted();
      if (!stopped) throw new ConnectionError(this.provider, 'anthropic: the stream ended before message_stop');
      yield { type: 'finish', finishReason: finishFrom(stop), usage, model };
    } catch (e) {
      throw scope.failure(e, (x) => this.#mapError(x));
    } finally {
      scope.dispose();
    }
  }

  #mapError(e: unknown): unknown {
    return mapAnthropicError(e, { provider: this.provider, secrets: [this.#settings.apiKey] });
  }

  #body(req: ChatRequest): MessageCreateParamsBase {
    const s = effectiveSampling(req, this.#settings.defaults);
    const { system, messages } = toAnthropicMessages(req.messages);
    const maxTokens = s.maxTokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS;
    const budget = s.reasoningEffort && !continuesToolLoop(req.messages) ? THINKING_BUDGET[s.reasoningEffort] : undefined;
    return defined({
      model: this.modelId,
      max_tokens: maxTokens + (budget ?? 0),
      system,
      messages,
      tools: req.tools?.length ? req.tools.map(toAnthropicTool) : undefined,
      tool_choice: toolChoiceFor(req),
      stop_sequences: req.stop?.length ? req.stop : undefined,
      metadata: req.user !== undefined ? { user_id: req.user } : undefined,
      thinking: budget === undefined ? undefined : { type: 'enabled' as const, budget_tokens: budget },
    });
  }

  #result(message: Message): ChatResult {
    let text = '';
    const toolCalls: ToolCall[] = [];
    for (const b of message.content) {
      if (b.type === 'text') text += b.text;
      else if (b.type === 'tool_use') toolCalls.push({ id: b.id, name: b.name, arguments: JSON.stringify(b.input ?? {}) });
    }
    return buildResult({
      text,
      toolCalls,
      usage: usageFrom(message.usage),
      finishReason: finishFrom(message.stop_reason),
      model: message.model || this.modelId,
      providerMetadata: {
        anthropic: defined({ id: message.id, stopReason: message.stop_reason ?? undefined, stopSequence: message.stop_sequence ?? undefined }),
      },
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Mapping

/** tool_choice with parallel_tool_calls false as `disable_parallel_tool_use` (which needs a choice: auto by default). */
function toolChoiceFor(req: ChatRequest): AnthropicToolChoice | undefined {
  const choice = req.toolChoice === undefined ? undefined : toAnthropicToolChoice(req.toolChoice);
  if (req.parallelToolCalls !== false || !req.tools?.length) return choice;
  const c = choice ?? { type: 'auto' as const };
  return c.type === 'none' ? c : { ...c, disable_parallel_tool_use: true };
}

/** Split system messages out and turn the rest into alternating user/assistant messages. */
export function toAnthropicMessages(messages: ReadonlyArray<ChatMessage>): { system: string | undefined; messages: MessageParam[] } {
  const system: string[] = [];
  const out: Array<{ role: 'user' | 'assistant'; content: ContentBlockParam[] }> = [];
  const push = (role: 'user' | 'assistant', blocks: ContentBlockParam[]): void => {
    if (blocks.length === 0) return;
    const last = out.at(-1);
    // consecutive same-role turns (tool results followed by user text) become one message
    if (last && last.role === role) last.content.push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const m of messages) {
    switch (m.role) {
      case 'system':
        system.push(m.content);
        break;
      case 'user':
        push(
          'user',
          typeof m.content === 'string'
            ? textBlocks(m.content)
            : m.content.flatMap((p) => (p.type === 'text' ? textBlocks(p.text) : [imageBlock(p)])),
        );
        break;
      case 'assistant': {
        if (typeof m.content === 'string') {
          push('assistant', textBlocks(m.content));
          break;
        }
        const blocks: ContentBlockParam[] = [];
        for (const p of m.content) {
          if (p.type === 'text') blocks.push(...textBlocks(p.text));
          else blocks.push({ type: 'tool_use', id: p.id, name: p.name, input: parseToolArguments('anthropic', p) });
        }
        push('assistant', blocks);
        break;
      }
      case 'tool':
        push(
          'user',
          m.content.map((r) => defined({ type: 'tool_result' as const, tool_use_id: r.toolCallId, content: r.content, is_error: r.isError })),
        );
        break;
    }
  }
  return { system: system.length ? system.join('\n\n') : undefined, messages: out };
}

// Anthropic rejects empty text blocks.
function textBlocks(text: string): ContentBlockParam[] {
  return text ? [{ type: 'text', text }] : [];
}

function imageBlock(p: ImagePart): ImageBlockParam {
  const m = /^data:([^;,]+);base64,(.*)$/s.exec(p.url);
  if (m) {
    return { type: 'image', source: { type: 'base64', media_type: m[1] as 'image/png', data: m[2]! } };
  }
  return { type: 'image', source: { type: 'url', url: p.url } };
}

export function toAnthropicTool(t: ToolDefinition): Tool {
  return defined({
    name: t.name,
    description: t.description,
    input_schema: { type: 'object' as const, ...t.parameters },
  });
}

export function toAnthropicToolChoice(c: ToolChoice): AnthropicToolChoice {
  if (c === 'auto') return { type: 'auto' };
  if (c === 'none') return { type: 'none' };
  if (c === 'required') return { type: 'any' };
  return { type: 'tool', name: c.name };
}

/** True when the request answers tool calls of the last assistant turn (a tool-use loop). */
function continuesToolLoop(messages: ReadonlyArray<ChatMessage>): boolean {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role === 'user') return false;
    if (m.role === 'assistant') return typeof m.content !== 'string' && m.content.some((p) => p.type === 'tool-call');
  }
  return false;
}

function finishFrom(r: StopReason | null): FinishReason {
  switch (r) {
    case 'end_turn':
    case 'stop_sequence':
      return 'stop';
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return 'tool-calls';
    case 'refusal':
      return 'content-filter';
    default:
      return 'other';
  }
}

type AnthropicUsageLike = {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
  output_tokens_details?: { thinking_tokens?: number } | null;
};

// Anthropic's input_tokens excludes cached tokens; ours counts the whole prompt.
function usageFrom(u: AnthropicUsageLike): Usage {
  const cacheRead = u.cache_read_input_tokens ?? 0;
  const cacheWrite = u.cache_creation_input_tokens ?? 0;
  return defined({
    inputTokens: (u.input_tokens ?? 0) + cacheRead + cacheWrite,
    outputTokens: u.output_tokens ?? 0,
    reasoningTokens: u.output_tokens_details?.thinking_tokens,
    cachedInputTokens: u.cache_read_input_tokens ?? undefined,
  });
}

function mergeUsage(prev: Usage, u: AnthropicUsageLike): Usage {
  const hasInput = u.input_tokens != null;
  const next = usageFrom(u);
  return defined({
    inputTokens: hasInput ? next.inputTokens : prev.inputTokens,
    outputTokens: u.output_tokens ?? prev.outputTokens,
    reasoningTokens: next.reasoningTokens ?? prev.reasoningTokens,
    cachedInputTokens: next.cachedInputTokens ?? prev.cachedInputTokens,
  });
}
