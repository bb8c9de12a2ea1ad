// OpenAI Chat Completions, through the `openai` SDK. The same code serves OpenAI itself and any
// OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp server); the two differ only in the
// provider kind, the name of the output-token limit and whether an API key is required.

import OpenAI from 'openai';
import type {
  ChatCompletion,
  ChatCompletionContentPart,
  ChatCompletionCreateParamsBase,
  ChatCompletionMessageParam,
  ChatCompletionTool,
  ChatCompletionToolChoiceOption,
} from 'openai/resources/chat/completions';
import type { CompletionUsage } from 'openai/resources/completions';
import type { ChatMessage, FinishReason, ProviderKind, ToolCall, ToolChoice, ToolDefinition, Usage } from '@fugu/core';
import { CallScope } from './call-scope.ts';
import { ConnectionError } from './errors.ts';
import { mapOpenAIError } from './sdk-errors.ts';
import { adapterSettings, buildResult, defined, effectiveSampling, estimatedUsage, textOf, toolCallParts, type AdapterSettings } from './shared.ts';
import { ToolCallAssembler } from './tool-call-assembler.ts';
import { supportsAll, type ParamSupport } from './param-support.ts';
import type { ChatModel, ChatModelOptions, ChatRequest, ChatResult, ResponseFormat, StreamEvent, TokenLogprob } from '@fugu/core';

type Flavour = {
  provider: Extract<ProviderKind, 'openai' | 'openai-compatible'>;
  /** OpenAI deprecated `max_tokens` for `max_completion_tokens`; compatible servers know `max_tokens` */
  maxTokensField: 'max_completion_tokens' | 'max_tokens';
};

// When no key is given to an openai-compatible endpoint the SDK still wants one; we give it a
// placeholder and remove the Authorization header it would build from it.
const NO_KEY_PLACEHOLDER = 'no-api-key';

class OpenAIChatCompletionsModel implements ChatModel {
  /** every request parameter: each is sent by its own wire name (a compatible server that does not know one answers 400, passed on) */
  static readonly params: ParamSupport = supportsAll();
  readonly params = OpenAIChatCompletionsModel.params;
  readonly provider: Flavour['provider'];
  readonly modelId: string;
  readonly #client: OpenAI;
  readonly #flavour: Flavour;
  readonly #settings: AdapterSettings<string | undefined>;

  constructor(flavour: Flavour, baseURL: string | undefined, settings: AdapterSettings<string | undefined>) {
    this.provider = flavour.provider;
    this.modelId = settings.modelId;
    this.#flavour = flavour;
    this.#settings = settings;
    this.#client = makeClient(settings, baseURL);
  }

  async generate(req: ChatRequest): Promise<ChatResult> {
    const scope = new CallScope(this.provider, req.timeoutMs ?? this.#settings.timeoutMs, req.signal);
    try {
      const completion = await this.#client.chat.completions.create(
        { ...this.#body(req), stream: false },
        { signal: scope.signal, timeout: scope.timeoutMs },
      );
      return this.#result(req, completion);
    } catch (e) {
      throw scope.failure(e, (x) => this.#mapError(x));
    } finally {
      scope.dispose();
    }
  }

  async *stream(req: ChatRequest): AsyncGenerator<StreamEvent> {
    const scope = new CallScope(this.provider, req.timeoutMs ?? this.#settings.timeoutMs, req.signal);
    try {
      const chunks = await this.#client.chat.completions.create(
        { ...this.#body(req), stream: true, stream_options: { include_usage: true } },
        { signal: scope.signal, timeout: scope.timeoutMs },
      );
      const calls = new ToolCallAssembler(`call_${this.provider}`);
      let finish: FinishReason | undefined;
      let usage: Usage | undefined;
      let model = this.modelId;
      let text = '';
      for await (const chunk of chunks) {
        if (chunk.model) model = chunk.model;
        if (chunk.usage) usage = usageFrom(chunk.usage);
        for (const choice of chunk.choices) {
          if (choice.index !== 0) continue;
          const delta = choice.delta;
          if (delta?.content) {
            text += delta.content;
            yield { type: 'text-delta', text: delta.content };
          }
          for (const tc of delta?.tool_calls ?? []) {
            calls.add(tc.index, { id: tc.id, name: tc.function?.name, argsDelta: tc.function?.arguments });
          }
          if (choice.finish_reason) finish = finishFrom(choice.finish_reason, calls.size > 0);
        }
      }
      // The SDK ends a stream quietly when its signal aborts: ask the scope why it ended.
      scope.throwIfAborted();
      if (finish === undefined) {
        throw new ConnectionError(this.provider, `${this.provider}: the stream ended before its finish_reason chunk`);
      }
      const toolCalls = calls.calls();
      for (const toolCall of toolCalls) yield { type: 'tool-call', toolCall };
      yield { type: 'finish', finishReason: finish, usage: usage ?? estimatedUsage(req.messages, text, toolCalls), model };
    } catch (e) {
      throw scope.failure(e, (x) => this.#mapError(x));
    } finally {
      scope.dispose();
    }
  }

  #mapError(e: unknown): unknown {
    return mapOpenAIError(e, { provider: this.provider, secrets: [this.#settings.apiKey] });
  }

  #body(req: ChatRequest): ChatCompletionCreateParamsBase {
    const s = effectiveSampling(req, this.#settings.defaults);
    return defined({
      model: this.modelId,
      messages: toOpenAIMessages(req.messages),
      tools: req.tools?.length ? req.tools.map(toOpenAITool) : undefined,
      tool_choice: req.toolChoice === undefined ? undefined : toOpenAIToolChoice(req.toolChoice),
      temperature: s.temperature,
      top_p: s.topP,
      [this.#flavour.maxTokensField]: s.maxTokens,
      reasoning_effort: s.reasoningEffort,
      // the standard parameters, by their own wire names
      stop: req.stop?.length ? req.stop : undefined,
      seed: req.seed,
      frequency_penalty: req.frequencyPenalty,
      presence_penalty: req.presencePenalty,
      logit_bias: req.logitBias,
      logprobs: req.logprobs,
      top_logprobs: req.topLogprobs,
      response_format: req.responseFormat && toOpenAIResponseFormat(req.responseFormat),
      // only with tools: the API refuses parallel_tool_calls without them
      parallel_tool_calls: req.tools?.length ? req.parallelToolCalls : undefined,
      user: req.user,
      service_tier: req.serviceTier,
      store: req.store,
      metadata: req.storeMetadata,
      verbosity: req.verbosity,
      prompt_cache_key: req.promptCacheKey,
    }) as ChatCompletionCreateParamsBase;
  }

  #result(req: ChatRequest, completion: ChatCompletion): ChatResult {
    const choice = completion.choices[0];
    const message = choice?.message;
    const toolCalls: ToolCall[] = [];
    for (const tc of message?.tool_calls ?? []) {
      if (tc.type === 'function') toolCalls.push({ id: tc.id, name: tc.function.name, arguments: tc.function.arguments });
    }
    const text = message?.content ?? '';
    const refusal = message?.refusal ?? undefined;
    let finishReason = choice ? finishFrom(choice.finish_reason, toolCalls.length > 0) : 'other';
    if (refusal && !text) finishReason = 'content-filter';
    const logprobs = choice?.logprobs?.content?.map(
      (t): TokenLogprob => ({ token: t.token, logprob: t.logprob, bytes: t.bytes, topLogprobs: t.top_logprobs?.map((a) => ({ token: a.token, logprob: a.logprob, bytes: a.bytes })) }),
    );
    return buildResult({
      text,
      toolCalls,
      usage: completion.usage ? usageFrom(completion.usage) : estimatedUsage(req.messages, text, toolCalls),
      finishReason,
      model: completion.model || this.modelId,
      ...(logprobs && { logprobs }),
      providerMetadata: {
        [this.provider]: defined({
          id: completion.id,
          systemFingerprint: completion.system_fingerprint ?? undefined,
          serviceTier: completion.service_tier ?? undefined,
          refusal,
        }),
      },
    });
  }
}

export type OpenAIChatModelOptions = ChatModelOptions & { apiKey: string };

/** OpenAI's hosted Chat Completions API. */
export class OpenAIChatModel extends OpenAIChatCompletionsModel {
  constructor(opts: OpenAIChatModelOptions) {
    super({ provider: 'openai', maxTokensField: 'max_completion_tokens' }, opts.baseURL, adapterSettings('openai', opts));
  }
}

export type OpenAICompatibleChatModelOptions = ChatModelOptions & { baseURL: string };

/** Any server that speaks Chat Completions (vLLM, Ollama, llama.cpp server); the key is optional. */
export class OpenAICompatibleChatModel extends OpenAIChatCompletionsModel {
  constructor(opts: OpenAICompatibleChatModelOptions) {
    super({ provider: 'openai-compatible', maxTokensField: 'max_tokens' }, opts.baseURL, adapterSettings('openai-compatible', opts, 'optional'));
  }
}

/** The SDK client; with no key (an openai-compatible endpoint), no Authorization header either. */
function makeClient(settings: AdapterSettings<string | undefined>, baseURL: string | undefined): OpenAI {
  return new OpenAI({
    apiKey: settings.apiKey || NO_KEY_PLACEHOLDER,
    // Everything explicit: the SDK would otherwise read OPENAI_* variables from process.env,
    // and an OpenAI organisation id must not be sent to a third-party endpoint.
    baseURL: baseURL ?? 'https://api.openai.com/v1',
    organization: null,
    project: null,
    adminAPIKey: null,
    webhookSecret: null,
    maxRetries: 0,
    timeout: settings.timeoutMs,
    ...(settings.apiKey ? {} : { defaultHeaders: { Authorization: null } }),
  });
}

// ---------------------------------------------------------------------------------------------
// Mapping between our types and the Chat Completions wire format

export function toOpenAIMessages(messages: ReadonlyArray<ChatMessage>): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = [];
  for (const m of messages) {
    switch (m.role) {
      case 'system':
        out.push({ role: 'system', content: m.content });
        break;
      case 'user':
        if (typeof m.content === 'string' || m.content.every((p) => p.type === 'text')) {
          // plain strings are what every compatible server understands
          out.push({ role: 'user', content: textOf(m.content) });
        } else {
          out.push({
            role: 'user',
            content: m.content.map(
              (p): ChatCompletionContentPart =>
                p.type === 'text' ? { type: 'text', text: p.text } : { type: 'image_url', image_url: { url: p.url } },
            ),
          });
        }
        break;
      case 'assistant': {
        const text = textOf(m.content);
        const calls = toolCallParts(m.content);
        out.push(
          defined({
            role: 'assistant' as const,
            content: calls.length > 0 && !text ? null : text,
            tool_calls: calls.length
              ? calls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } }))
              : undefined,
          }),
        );
        break;
      }
      case 'tool':
        // one Chat Completions message per result
        for (const r of m.content) out.push({ role: 'tool', tool_call_id: r.toolCallId, content: r.content });
        break;
    }
  }
  return out;
}

export function toOpenAITool(t: ToolDefinition): ChatCompletionTool {
  return { type: 'function', function: defined({ name: t.name, description: t.description, parameters: t.parameters }) };
}

export function toOpenAIResponseFormat(f: ResponseFormat): ChatCompletionCreateParamsBase['response_format'] {
  if (f.type !== 'json_schema') return { type: f.type };
  return { type: 'json_schema', json_schema: defined({ name: f.name, schema: f.schema, description: f.description, strict: f.strict }) };
}

export function toOpenAIToolChoice(c: ToolChoice): ChatCompletionToolChoiceOption {
  return typeof c === 'string' ? c : { type: 'function', function: { name: c.name } };
}

function finishFrom(reason: string | null, hasToolCalls: boolean): FinishReason {
  switch (reason) {
    case 'stop':
      // some compatible servers say "stop" after tool calls
      return hasToolCalls ? 'tool-calls' : 'stop';
    case 'length':
      return 'length';
    case 'tool_calls':
    case 'function_call':
      return 'tool-calls';
    case 'content_filter':
      return 'content-filter';
    default:
      return 'other';
  }
}

function usageFrom(u: CompletionUsage): Usage {
  return defined({
    inputTokens: u.prompt_tokens ?? 0,
    outputTokens: u.completion_tokens ?? 0,
    reasoningTokens: u.completion_tokens_details?.reasoning_tokens,
    cachedInputTokens: u.prompt_tokens_details?.cached_tokens,
  });
}
