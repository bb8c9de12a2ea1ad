// Gemini API through `@google/genai` (`models.generateContent` / `generateContentStream`).
//
// - system messages become `systemInstruction`; assistant turns are role "model"; tool results
//   are `functionResponse` parts of a user turn, `{ output }` or `{ error }` as Gemini asks.
// - tools are function declarations with `parametersJsonSchema` (our tools are JSON Schema).
// - reasoningEffort becomes thinkingConfig: `thinkingBudget` for Gemini 2.x models,
//   `thinkingLevel` for later ones (a request may not carry both).
// - Gemini may omit function-call ids; we then make a stable one from the response id. Thinking
//   models attach a `thoughtSignature` to function calls that must come back with the call in
//   the next turn; our ToolCall has no field for it, so it rides inside the id after
//   THOUGHT_SIGNATURE_SEPARATOR (opaque to consumers, who only echo ids back).

import { createHash } from 'node:crypto';
import { FunctionCallingConfigMode, GoogleGenAI, ThinkingLevel } from '@google/genai';
import type {
  Content,
  FunctionCall,
  GenerateContentConfig,
  GenerateContentParameters,
  GenerateContentResponse,
  Part,
  ThinkingConfig,
  ToolConfig,
} from '@google/genai';
import type { ChatMessage, FinishReason, ImagePart, ToolCall, ToolChoice, ToolDefinition, Usage } from '@fugu/core';
import { CallScope } from './call-scope.ts';
import { BadRequestError, ConnectionError } from './errors.ts';
import { mapGoogleError } from './sdk-errors.ts';
import { adapterSettings, buildResult, defined, effectiveSampling, parseToolArguments, type AdapterSettings } from './shared.ts';
import { supportsOnly, type ParamSupport } from './param-support.ts';
import type { ChatModel, ChatModelOptions, ChatRequest, ChatResult, ReasoningEffort, StreamEvent } from '@fugu/core';

export const THOUGHT_SIGNATURE_SEPARATOR = '__thought__';

/** thinkingBudget (tokens) per effort for Gemini 2.x; 512 is the smallest every 2.5 model takes. */
export const GEMINI2_THINKING_BUDGET: Record<ReasoningEffort, number> = { minimal: 512, low: 1024, medium: 8192, high: 24576 };

// prefix of the ids we make up for function calls that came without one
const SYNTHETIC_ID_PREFIX = 'fugu_call_';

const THINKING_LEVEL: Record<ReasoningEffort, ThinkingLevel> = {
  minimal: ThinkingLevel.MINIMAL,
  low: ThinkingLevel.LOW,
  medium: ThinkingLevel.MEDIUM,
  high: ThinkingLevel.HIGH,
};

export type GoogleChatModelOptions = ChatModelOptions & { apiKey: string };

export class GoogleChatModel implements ChatModel {
  /** what generateContent's config can say (no logit bias, logprobs in this adapter, single-call limit or verbosity; no end-user id or storage) */
  static readonly params: ParamSupport = supportsOnly({
    temperature: true,
    topP: true,
    maxTokens: true,
    reasoningEffort: true,
    tools: true,
    toolChoice: true,
    stop: true,
    seed: true,
    frequencyPenalty: true,
    presencePenalty: true,
    responseFormat: true,
  });
  readonly params = GoogleChatModel.params;
  readonly provider = 'google' as const;
  readonly modelId: string;
  readonly #client: GoogleGenAI;
  readonly #settings: AdapterSettings;

  constructor(opts: GoogleChatModelOptions) {
    this.#settings = adapterSettings('google', opts);
    this.modelId = this.#settings.modelId;
    this.#client = new GoogleGenAI({
      apiKey: this.#settings.apiKey,
      // explicit, so GOOGLE_GENAI_API_VERSION in process.env cannot change the paths
      apiVersion: 'v1beta',
      // no retryOptions: the SDK then makes exactly one attempt (retries are the queue's job);
      // no timeout either: CallScope bounds the call, body included
      // explicit base URL, so GOOGLE_GEMINI_BASE_URL in process.env cannot redirect a worker
      httpOptions: { baseUrl: opts.baseURL ?? 'https://generativelanguage.googleapis.com/' },
    });
  }

  async generate(req: ChatRequest): Promise<ChatResult> {
    const scope = new CallScope(this.provider, req.timeoutMs ?? this.#settings.timeoutMs, req.signal);
    try {
      const response = await this.#client.models.generateContent(this.#params(req, scope.signal));
      return this.#result(response);
    } catch (e) {
      throw scope.failure(e, (x) => this.#mapError(x));
    } finally {
      scope.dispose();
    }
  }

  async *stream(req: ChatRequest): AsyncGenerator<StreamEvent> {
    const scope = new CallScope(this.provider, req.timeoutMs ?? this.#settings.timeoutMs, req.signal);
    try {
      const chunks = await this.#client.models.generateContentStream(this.#params(req, scope.signal));
      let finish: FinishReason | undefined;
      let usage: Usage = { inputTokens: 0, outputTokens: 0 };
      let model = this.modelId;
      let callIndex = 0;
      let sawToolCall = false;
      for await (const chunk of chunks) {
        if (chunk.modelVersion) model = chunk.modelVersion;
        // usageMetadata is cumulative; the last chunk's counts are the call's
        if (chunk.usageMetadata) usage = usageFrom(chunk);
        const candidate = chunk.candidates?.[0];
        for (const part of candidate?.content?.parts ?? []) {
          if (part.functionCall) {
            sawToolCall = true;
            // Gemini sends each function call whole, never in fragments
            yield { type: 'tool-call', toolCall: toolCallFrom(part, chunk.responseId, callIndex++) };
          } else if (part.text && !part.thought) {
            yield { type: 'text-delta', text: part.text };
          }
        }
        if (candidate?.finishReason) finish = finishFrom(candidate.finishReason, sawToolCall);
        else if (chunk.promptFeedback?.blockReason) finish = 'content-filter';
      }
      scope.throwIfAborted();
      if (finish === undefined) throw new ConnectionError(this.provider, 'google: the stream ended before a chunk with a finishReason');
      yield { type: 'finish', finishReason: finish, usage, model };
    } catch (e) {
      throw scope.failure(e, (x) => this.#mapError(x));
    } finally {
      scope.dispose();
    }
  }

  #mapError(e: unknown): unknown {
    return mapGoogleError(e, { provider: this.provider, secrets: [this.#settings.apiKey] });
  }

  #params(req: ChatRequest, signal: AbortSignal): GenerateContentParameters {
    const s = effectiveSampling(req, this.#settings.defaults);
    const { systemInstruction, contents } = toGeminiContents(req.messages);
    const config: GenerateContentConfig = defined({
      abortSignal: signal,
      systemInstruction,
      temperature: s.temperature,
      topP: s.topP,
      maxOutputTokens: s.maxTokens,
      stopSequences: req.stop?.length ? req.stop : undefined,
      seed: req.seed,
      frequencyPenalty: req.frequencyPenalty,
      presencePenalty: req.presencePenalty,
      ...responseFormatConfig(req),
      tools: req.tools?.length ? [{ functionDeclarations: req.tools.map(toGeminiFunction) }] : undefined,
      toolConfig: req.toolChoice === undefined ? undefined : toGeminiToolConfig(req.toolChoice),
      thinkingConfig: s.reasoningEffort ? thinkingConfigFor(this.modelId, s.reasoningEffort) : undefined,
    });
    return { model: this.modelId, contents, config };
  }

  #result(response: GenerateContentResponse): ChatResult {
    const candidate = response.candidates?.[0];
    let text = '';
    const toolCalls: ToolCall[] = [];
    for (const part of candidate?.content?.parts ?? []) {
      if (part.functionCall) toolCalls.push(toolCallFrom(part, response.responseId, toolCalls.length));
      else if (part.text && !part.thought) text += part.text;
    }
    let finishReason: FinishReason = candidate?.finishReason ? finishFrom(candidate.finishReason, toolCalls.length > 0) : 'other';
    if (!candidate && response.promptFeedback?.blockReason) finishReason = 'content-filter';
    return buildResult({
      text,
      toolCalls,
      usage: usageFrom(response),
      finishReason,
      model: response.modelVersion || this.modelId,
      providerMetadata: {
        google: defined({
          responseId: response.responseId,
          finishReason: candidate?.finishReason,
          blockReason: response.promptFeedback?.blockReason,
        }),
      },
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Mapping

/** response_format as Gemini's JSON mode: a MIME type, and the schema when one is given. */
function responseFormatConfig(req: ChatRequest): Pick<GenerateContentConfig, 'responseMimeType' | 'responseJsonSchema'> {
  const f = req.responseFormat;
  if (!f || f.type === 'text') return {};
  if (f.type === 'json_object' || !f.schema) return { responseMimeType: 'application/json' };
  return { responseMimeType: 'application/json', responseJsonSchema: f.schema };
}

export function toGeminiContents(messages: ReadonlyArray<ChatMessage>): { systemInstruction: string | undefined; contents: Content[] } {
  const system: string[] = [];
  const contents: Content[] = [];
  // functionResponse needs the function's name; our tool results may only carry the call id
  const nameById = new Map<string, string>();
  const push = (role: 'user' | 'model', parts: Part[]): void => {
    if (parts.length === 0) return;
    const last = contents.at(-1);
    // parallel function responses (and a following user text) belong in one turn
    if (last && last.role === role) last.parts!.push(...parts);
    else contents.push({ role, parts });
  };
  for (const m of messages) {
    switch (m.role) {
      case 'system':
        system.push(m.content);
        break;
      case 'user':
        push(
          'user',
          typeof m.content === 'string' ? textParts(m.content) : m.content.flatMap((p) => (p.type === 'text' ? textParts(p.text) : [imagePart(p)])),
        );
        break;
      case 'assistant': {
        if (typeof m.content === 'string') {
          push('model', textParts(m.content));
          break;
        }
        const parts: Part[] = [];
        for (const p of m.content) {
          if (p.type === 'text') {
            parts.push(...textParts(p.text));
            continue;
          }
          nameById.set(p.id, p.name);
          const { id, thoughtSignature } = splitCallId(p.id);
          parts.push(defined({ functionCall: defined({ id, name: p.name, args: parseToolArguments('google', p) }), thoughtSignature }));
        }
        push('model', parts);
        break;
      }
      case 'tool':
        push(
          'user',
          m.content.map((r) => {
            const name = r.name ?? nameById.get(r.toolCallId);
            if (!name) {
              throw new BadRequestError(
                'google',
                `google: the tool result for call ${r.toolCallId} has no name and no earlier assistant tool call has that id; Gemini needs the function name`,
              );
            }
            return {
              functionResponse: defined({
                id: splitCallId(r.toolCallId).id,
                name,
                response: r.isError ? { error: r.content } : { output: r.content },
              }),
            };
          }),
        );
        break;
    }
  }
  return { systemInstruction: system.length ? system.join('\n\n') : undefined, contents };
}

function textParts(text: string): Part[] {
  return text ? [{ text }] : [];
}

function imagePart(p: ImagePart): Part {
  const m = /^data:([^;,]+);base64,(.*)$/s.exec(p.url);
  if (m) return { inlineData: { mimeType: m[1]!, data: m[2]! } };
  return { fileData: defined({ fileUri: p.url, mimeType: p.mediaType }) };
}

export function toGeminiFunction(t: ToolDefinition): { name: string; description?: string; parametersJsonSchema: unknown } {
  return defined({ name: t.name, description: t.description, parametersJsonSchema: t.parameters });
}

export function toGeminiToolConfig(c: ToolChoice): ToolConfig {
  if (c === 'auto') return { functionCallingConfig: { mode: FunctionCallingConfigMode.AUTO } };
  if (c === 'none') return { functionCallingConfig: { mode: FunctionCallingConfigMode.NONE } };
  if (c === 'required') return { functionCallingConfig: { mode: FunctionCallingConfigMode.ANY } };
  return { functionCallingConfig: { mode: FunctionCallingConfigMode.ANY, allowedFunctionNames: [c.name] } };
}

export function thinkingConfigFor(model: string, effort: ReasoningEffort): ThinkingConfig {
  return /(^|\/)gemini-2(\.|-)/.test(model) ? { thinkingBudget: GEMINI2_THINKING_BUDGET[effort] } : { thinkingLevel: THINKING_LEVEL[effort] };
}

function toolCallFrom(part: Part, responseId: string | undefined, index: number): ToolCall {
  const fc = part.functionCall as FunctionCall;
  const name = fc.name ?? '';
  const args = JSON.stringify(fc.args ?? {});
  const base = fc.id || syntheticCallId(responseId, index, name, args);
  const id = part.thoughtSignature ? `${base}${THOUGHT_SIGNATURE_SEPARATOR}${part.thoughtSignature}` : base;
  return { id, name, arguments: args };
}

// Stable: the same response gives the same ids (a response cache replays them unchanged).
function syntheticCallId(responseId: string | undefined, index: number, name: string, args: string): string {
  const h = createHash('sha256').update(`${responseId ?? ''}\0${index}\0${name}\0${args}`).digest('hex').slice(0, 16);
  return `${SYNTHETIC_ID_PREFIX}${h}`;
}

function splitCallId(id: string): { id: string | undefined; thoughtSignature: string | undefined } {
  const at = id.indexOf(THOUGHT_SIGNATURE_SEPARATOR);
  const base = at < 0 ? id : id.slice(0, at);
  const thoughtSignature = at < 0 ? undefined : id.slice(at + THOUGHT_SIGNATURE_SEPARATOR.length);
  // ids we made up were never Gemini's: do not send them as if they were
  return { id: base.startsWith(SYNTHETIC_ID_PREFIX) ? undefined : base, thoughtSignature };
}

function finishFrom(reason: string, hasToolCalls: boolean): FinishReason {
  switch (reason) {
    case 'STOP':
      // Gemini reports STOP when it answers with function calls
      return hasToolCalls ? 'tool-calls' : 'stop';
    case 'MAX_TOKENS':
      return 'length';
    case 'SAFETY':
    case 'RECITATION':
    case 'BLOCKLIST':
    case 'PROHIBITED_CONTENT':
    case 'SPII':
    case 'IMAGE_SAFETY':
    case 'IMAGE_PROHIBITED_CONTENT':
      return 'content-filter';
    case 'MALFORMED_FUNCTION_CALL':
    case 'UNEXPECTED_TOOL_CALL':
      return 'error';
    default:
      return 'other';
  }
}

// Gemini bills thinking as output: outputTokens = candidates + thoughts.
function usageFrom(r: GenerateContentResponse): Usage {
  const u = r.usageMetadata;
  const thoughts = u?.thoughtsTokenCount;
  return defined({
    inputTokens: u?.promptTokenCount ?? 0,
    outputTokens: (u?.candidatesTokenCount ?? 0) + (thoughts ?? 0),
    reasoningTokens: thoughts,
    cachedInputTokens: u?.cachedContentTokenCount,
  });
}
