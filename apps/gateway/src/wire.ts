// The OpenAI Chat Completions wire format on the gateway's side: the request checked field by
// field (a bad field is a 400 naming it), converted to a ChatRequest of typed message parts, and
// ChatResults / stream events written back as `chat.completion` and `chat.completion.chunk`.
// Tools and tool calls pass through unchanged (same names, ids and argument text).
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { formatUsd, type AssistantMessage, type ChatMessage, type FinishReason, type TextPart, type ToolCall, type ToolCallPart, type ToolChoice, type ToolDefinition, type Usage, type UserMessage } from '@fugu/core';
import type { ChatRequest, ChatResult } from '@fugu/providers';
import { badField } from './errors.ts';
import type { Completion } from './chat-types.ts';

const textPart = z.object({ type: z.literal('text'), text: z.string() }).loose();
const imagePart = z.object({ type: z.literal('image_url'), image_url: z.object({ url: z.string().min(1), detail: z.string().optional() }).loose() }).loose();
const toolCallSchema = z
  .object({
    id: z.string().min(1),
    type: z.literal('function'),
    function: z.object({ name: z.string().min(1), arguments: z.string() }).loose(),
  })
  .loose();

const systemMessage = (role: 'system' | 'developer') =>
  z.object({ role: z.literal(role), content: z.union([z.string(), z.array(textPart)]), name: z.string().optional() }).loose();

const messageSchema = z.discriminatedUnion('role', [
  systemMessage('system'),
  systemMessage('developer'),
  z.object({ role: z.literal('user'), content: z.union([z.string(), z.array(z.discriminatedUnion('type', [textPart, imagePart]))]), name: z.string().optional() }).loose(),
  z
    .object({
      role: z.literal('assistant'),
      content: z.union([z.string(), z.array(textPart), z.null()]).optional(),
      tool_calls: z.array(toolCallSchema).nullable().optional(),
      name: z.string().optional(),
    })
    .loose(),
  z.object({ role: z.literal('tool'), content: z.union([z.string(), z.array(textPart)]), tool_call_id: z.string().min(1) }).loose(),
]);

const maxTokens = z.number().int().positive().nullable().optional();

/**
 * A function's parameters: a JSON Schema object whose root, when it says, is of type "object" (a
 * function takes named arguments; OpenAI, Anthropic and Gemini all refuse another root type, which
 * through fugu-ultra was a failed step, a 502).
 */
export const toolParametersSchema = z.record(z.string(), z.unknown()).superRefine((p, ctx) => {
  if ('type' in p && p.type !== 'object') {
    ctx.addIssue({ code: 'custom', path: ['type'], message: `must be "object" (a function's parameters are a JSON Schema object of named arguments), got ${JSON.stringify(p.type)}` });
  }
});

export const chatRequestSchema = z
  .object({
    model: z.string().min(1),
    messages: z.array(messageSchema).min(1),
    tools: z
      .array(
        z
          .object({
            type: z.literal('function'),
            function: z
              .object({ name: z.string().min(1), description: z.string().optional(), parameters: toolParametersSchema.optional(), strict: z.boolean().nullable().optional() })
              .loose(),
          })
          .loose(),
      )
      .nullable()
      .optional(),
    tool_choice: z
      .union([z.enum(['auto', 'none', 'required']), z.object({ type: z.literal('function'), function: z.object({ name: z.string().min(1) }).loose() }).loose()])
      .nullable()
      .optional(),
    temperature: z.number().min(0).max(2).nullable().optional(),
    top_p: z.number().min(0).max(1).nullable().optional(),
    max_tokens: maxTokens,
    max_completion_tokens: maxTokens,
    reasoning_effort: z.enum(['minimal', 'low', 'medium', 'high']).nullable().optional(),
    stream: z.boolean().nullable().optional(),
    stream_options: z.object({ include_usage: z.boolean().nullable().optional() }).loose().nullable().optional(),
    n: z.literal(1, { error: 'only n = 1 is supported' }).nullable().optional(),
    // the standard parameters that reach the chosen worker's provider where it can honour them
    stop: z.union([z.string(), z.array(z.string()).max(4)]).nullable().optional(),
    seed: z.number().int().nullable().optional(),
    frequency_penalty: z.number().min(-2).max(2).nullable().optional(),
    presence_penalty: z.number().min(-2).max(2).nullable().optional(),
    logit_bias: z.record(z.string().regex(/^\d+$/, 'keys must be token ids'), z.number().min(-100).max(100)).nullable().optional(),
    logprobs: z.boolean().nullable().optional(),
    top_logprobs: z.number().int().min(0).max(20).nullable().optional(),
    response_format: z
      .discriminatedUnion('type', [
        z.object({ type: z.literal('text') }).loose(),
        z.object({ type: z.literal('json_object') }).loose(),
        z
          .object({
            type: z.literal('json_schema'),
            json_schema: z
              .object({ name: z.string().min(1), description: z.string().optional(), schema: z.record(z.string(), z.unknown()).optional(), strict: z.boolean().nullable().optional() })
              .loose(),
          })
          .loose(),
      ])
      .nullable()
      .optional(),
    parallel_tool_calls: z.boolean().nullable().optional(),
    user: z.string().nullable().optional(),
    safety_identifier: z.string().nullable().optional(),
    service_tier: z.string().min(1).nullable().optional(),
    store: z.boolean().nullable().optional(),
    metadata: z.record(z.string(), z.string()).nullable().optional(),
    verbosity: z.enum(['low', 'medium', 'high']).nullable().optional(),
    prompt_cache_key: z.string().nullable().optional(),
    modalities: z.array(z.string()).nullable().optional(),
    /** fugu's extension: the cost preference and a subset of the key's workers (docs/architecture.md §9) */
    fugu: z
      .object({
        lambda: z.number().min(0).optional(),
        workers: z.array(z.string().min(1)).min(1).optional(),
        // fugu-ultra: continue this conversation (its shared tool memory); false: no shared memory this turn
        conversation: z.string().regex(/^[A-Za-z0-9_.:-]{1,100}$/, 'must be 1 to 100 letters, digits, _ . : -').optional(),
        shared_memory: z.boolean().optional(),
        // fugu-ultra: false sends every agent's tool call to the client (default: identical calls of one answer merged)
        merge_tool_calls: z.boolean().optional(),
        // the client session the request belongs to (sessions.ts; the row's session), checked there
        session: z.string().optional(),
      })
      .strict()
      .nullable()
      .optional(),
  })
  .loose();

export type WireChatRequest = z.infer<typeof chatRequestSchema>;

// Chat Completions fields the gateway knows but cannot serve: a 400 naming them, not a silent drop.
export const REFUSED: Record<string, string> = {
  audio: 'audio output is not supported by the gateway',
  prediction: 'predicted outputs are not supported by the gateway',
  web_search_options: 'web search is not supported by the gateway',
  functions: 'the deprecated functions parameter is not supported: send tools',
  function_call: 'the deprecated function_call parameter is not supported: send tool_choice',
};

/** Fields of a chat request the schema does not know, or knows to refuse: a 400 naming the first. */
export function checkChatFields(body: Record<string, unknown>): void {
  const known = chatRequestSchema.shape;
  for (const [k, v] of Object.entries(body)) {
    if (v === undefined || v === null) continue;
    if (k in REFUSED) throw badField(k, REFUSED[k]!);
    if (!(k in known)) throw badField(k, 'is not a Chat Completions parameter this gateway knows (extensions go in the "fugu" object)');
  }
  const m = body.modalities;
  if (Array.isArray(m) && m.some((x) => x !== 'text')) throw badField('modalities', 'only text output is supported');
}

export const routeRequestSchema = z
  .object({
    messages: z.array(messageSchema).min(1).optional(),
    text: z.string().min(1).optional(),
    lambda: z.number().min(0).optional(),
  })
  .loose();

/** `messages[2].content` style path of a zod issue. */
function pathOf(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : `${out ? '.' : ''}${String(p)}`;
  return out || 'body';
}

/** A body nested deeper than this is refused: providers' JSON encoders and the request hash recurse through it (a stack overflow at a few thousand levels). */
export const MAX_BODY_DEPTH = 64;

// a NUL character, or a UTF-16 surrogate without its other half
// eslint-disable-next-line no-control-regex -- NUL is what it looks for
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function unstorable(s: string): string | undefined {
  const m = UNSTORABLE.exec(s);
  if (!m) return undefined;
  if (m[0] === '\u0000') return 'contains a NUL character (\\u0000), which the gateway cannot store';
  return `contains an unpaired UTF-16 surrogate (\\u${m[0].charCodeAt(0).toString(16)}): not valid Unicode text`;
}

/**
 * What no request body may hold, wherever it is (a 400 naming the first place, in document order):
 * a string or key with a NUL character (Postgres text and jsonb cannot store it) or an unpaired
 * UTF-16 surrogate (not Unicode text; jsonb refuses it), and nesting deeper than MAX_BODY_DEPTH.
 * Iterative, so any depth the JSON parser accepted is walked without recursion.
 */
export function checkBodyValues(body: unknown): void {
  const stack: Array<{ v: unknown; path: readonly PropertyKey[] }> = [{ v: body, path: [] }];
  while (stack.length > 0) {
    const { v, path } = stack.pop()!;
    if (typeof v === 'string') {
      const why = unstorable(v);
      if (why) throw badField(pathOf(path), why);
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (path.length >= MAX_BODY_DEPTH) throw badField(pathOf(path), `is nested more than ${MAX_BODY_DEPTH} levels deep`);
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ v: v[i], path: [...path, i] });
      continue;
    }
    const entries = Object.entries(v);
    for (const [k] of entries) {
      const why = unstorable(k);
      if (why) throw badField(pathOf(path), `a key ${why}`);
    }
    for (let i = entries.length - 1; i >= 0; i--) stack.push({ v: entries[i]![1], path: [...path, entries[i]![0]] });
  }
}

/** Parse with a schema; the first problem is a 400 naming the field (checkBodyValues first). */
export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badField('body', 'must be a JSON object');
  checkBodyValues(body);
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  let msg = issue.message;
  // a discriminated union names the allowed values of its discriminator
  if (issue.code === 'invalid_union' && 'discriminator' in issue && issue.discriminator) {
    const d = issue.discriminator as string;
    const at = pathOf(issue.path.at(-1) === d ? issue.path : [...issue.path, d]);
    const value = issue.discriminator === 'role' ? 'system, developer, user, assistant or tool' : 'text or image_url';
    throw badField(at, `must be one of ${value}`);
  }
  if (issue.code === 'invalid_type' && msg.includes('received undefined')) msg = 'is required';
  throw badField(pathOf(issue.path), msg);
}

function joinText(content: string | ReadonlyArray<{ text: string }>): string {
  return typeof content === 'string' ? content : content.map((p) => p.text).join('');
}

/** OpenAI messages -> typed message parts. A tool result gets its tool's name from the call it answers. */
export function toChatMessages(messages: WireChatRequest['messages']): ChatMessage[] {
  const toolNames = new Map<string, string>();
  return messages.map((m, i): ChatMessage => {
    switch (m.role) {
      case 'system':
      case 'developer':
        return { role: 'system', content: joinText(m.content) };
      case 'user': {
        if (typeof m.content === 'string') return { role: 'user', content: m.content };
        const parts: UserMessage['content'] = m.content.map((p) => (p.type === 'text' ? { type: 'text' as const, text: p.text } : { type: 'image' as const, url: p.image_url.url }));
        return { role: 'user', content: parts };
      }
      case 'assistant': {
        const calls = m.tool_calls ?? [];
        const text = m.content == null ? '' : joinText(m.content);
        if (calls.length === 0) return { role: 'assistant', content: text };
        const parts: Array<TextPart | ToolCallPart> = text ? [{ type: 'text', text }] : [];
        for (const c of calls) {
          toolNames.set(c.id, c.function.name);
          parts.push({ type: 'tool-call', id: c.id, name: c.function.name, arguments: c.function.arguments });
        }
        return { role: 'assistant', content: parts } satisfies AssistantMessage;
      }
      case 'tool': {
        const name = toolNames.get(m.tool_call_id);
        if (name === undefined) throw badField(`messages[${i}].tool_call_id`, `"${m.tool_call_id}" answers no tool call of an earlier assistant message`);
        return { role: 'tool', content: [{ type: 'tool-result', toolCallId: m.tool_call_id, name, content: joinText(m.content) }] };
      }
    }
  });
}

export function toChatRequest(body: WireChatRequest): ChatRequest {
  const req: ChatRequest = { messages: toChatMessages(body.messages) };
  if (body.tools && body.tools.length > 0) {
    req.tools = body.tools.map(
      (t): ToolDefinition => ({
        name: t.function.name,
        ...(t.function.description !== undefined && { description: t.function.description }),
        parameters: t.function.parameters ?? { type: 'object', properties: {} },
      }),
    );
  }
  if (body.tool_choice != null) {
    const tc = body.tool_choice;
    const choice: ToolChoice = typeof tc === 'string' ? tc : { name: tc.function.name };
    if (typeof choice === 'object' && !req.tools?.some((t) => t.name === choice.name)) throw badField('tool_choice.function.name', `"${choice.name}" is not one of the tools`);
    req.toolChoice = choice;
  }
  if (body.temperature != null) req.temperature = body.temperature;
  if (body.top_p != null) req.topP = body.top_p;
  const max = body.max_completion_tokens ?? body.max_tokens;
  if (max != null) req.maxTokens = max;
  if (body.reasoning_effort != null) req.reasoningEffort = body.reasoning_effort;
  if (body.stop != null) req.stop = typeof body.stop === 'string' ? [body.stop] : body.stop;
  if (body.seed != null) req.seed = body.seed;
  if (body.frequency_penalty != null) req.frequencyPenalty = body.frequency_penalty;
  if (body.presence_penalty != null) req.presencePenalty = body.presence_penalty;
  if (body.logit_bias != null) req.logitBias = body.logit_bias;
  if (body.logprobs != null) req.logprobs = body.logprobs;
  if (body.top_logprobs != null) {
    if (body.logprobs !== true) throw badField('top_logprobs', 'needs logprobs: true');
    req.topLogprobs = body.top_logprobs;
  }
  const rf = body.response_format;
  if (rf != null) {
    req.responseFormat =
      rf.type === 'json_schema'
        ? {
            type: 'json_schema',
            name: rf.json_schema.name,
            ...(rf.json_schema.schema !== undefined && { schema: rf.json_schema.schema }),
            ...(rf.json_schema.description !== undefined && { description: rf.json_schema.description }),
            ...(rf.json_schema.strict != null && { strict: rf.json_schema.strict }),
          }
        : { type: rf.type };
  }
  if (body.parallel_tool_calls != null) req.parallelToolCalls = body.parallel_tool_calls;
  // safety_identifier replaces user in OpenAI's API; both name the end user
  const user = body.safety_identifier ?? body.user;
  if (user != null) req.user = user;
  if (body.service_tier != null) req.serviceTier = body.service_tier;
  if (body.store != null) req.store = body.store;
  if (body.metadata != null) req.storeMetadata = body.metadata;
  if (body.verbosity != null) req.verbosity = body.verbosity;
  if (body.prompt_cache_key != null) req.promptCacheKey = body.prompt_cache_key;
  return req;
}

export function finishReasonOut(r: FinishReason): string {
  switch (r) {
    case 'tool-calls':
      return 'tool_calls';
    case 'length':
      return 'length';
    case 'content-filter':
      return 'content_filter';
    default:
      return 'stop';
  }
}

/** OpenAI usage, with `cost`: the exact picodollar cost in USD (a number; e.g. 0.000123). */
export function usageOut(u: Usage, cost?: bigint): Record<string, unknown> {
  return {
    prompt_tokens: u.inputTokens,
    completion_tokens: u.outputTokens,
    total_tokens: u.inputTokens + u.outputTokens,
    prompt_tokens_details: { cached_tokens: u.cachedInputTokens ?? 0 },
    completion_tokens_details: { reasoning_tokens: u.reasoningTokens ?? 0 },
    ...(cost !== undefined && { cost: usdNumber(cost) }),
  };
}

/** Picodollars as a JSON number of USD, from the exact decimal (12 places, trailing zeros cut). */
export function usdNumber(pico: bigint): number {
  return Number(formatUsd(pico));
}

function logprobsOut(r: ChatResult): Record<string, unknown> | null {
  if (!r.logprobs) return null;
  return {
    content: r.logprobs.map((t) => ({ token: t.token, logprob: t.logprob, bytes: t.bytes ?? null, top_logprobs: (t.topLogprobs ?? []).map((a) => ({ token: a.token, logprob: a.logprob, bytes: a.bytes ?? null })) })),
    refusal: null,
  };
}

export const completionId = (): string => `chatcmpl-${randomBytes(12).toString('base64url')}`;

const wireToolCall = (c: ToolCall) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } });

/** A whole `chat.completion`; `model` is the worker that answered. */
export function completionBody(r: ChatResult, model: string, cost?: bigint, id = completionId(), created = Math.floor(Date.now() / 1000)): Record<string, unknown> {
  return {
    id,
    object: 'chat.completion',
    created,
    model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: r.toolCalls.length > 0 && !r.text ? null : r.text,
          refusal: null,
          ...(r.toolCalls.length > 0 && { tool_calls: r.toolCalls.map(wireToolCall) }),
        },
        logprobs: logprobsOut(r),
        finish_reason: finishReasonOut(r.finishReason),
      },
    ],
    usage: usageOut(r.usage, cost),
  };
}

/** What POST /v1/chat/completions answers for a whole answer: the completion, with a model's extra usage fields and its `fugu` object. */
export function chatCompletionOf(c: Completion): Record<string, unknown> {
  const out = completionBody(c.result, c.model ?? c.worker, c.cost);
  if (c.usageExtra) Object.assign(out.usage as Record<string, unknown>, c.usageExtra);
  if (c.extension) out.fugu = c.extension;
  return out;
}

/** Writes `chat.completion.chunk` SSE lines for one completion. */
export class ChunkWriter {
  readonly id: string;
  readonly created: number;
  readonly model: string;
  #toolIndex = 0;

  constructor(model: string, id = completionId(), created = Math.floor(Date.now() / 1000)) {
    this.model = model;
    this.id = id;
    this.created = created;
  }

  #chunk(choices: unknown[], extra: Record<string, unknown> = {}): string {
    return `data: ${JSON.stringify({ id: this.id, object: 'chat.completion.chunk', created: this.created, model: this.model, choices, ...extra })}\n\n`;
  }

  #delta(delta: Record<string, unknown>, finish: string | null = null): string {
    return this.#chunk([{ index: 0, delta, logprobs: null, finish_reason: finish }]);
  }

  role(): string {
    return this.#delta({ role: 'assistant', content: '' });
  }

  text(text: string): string {
    return this.#delta({ content: text });
  }

  /** A whole tool call in one delta (adapters assemble streamed fragments), with its index. */
  toolCall(c: ToolCall): string {
    return this.#delta({ tool_calls: [{ index: this.#toolIndex++, ...wireToolCall(c) }] });
  }

  finish(reason: FinishReason): string {
    return this.#delta({}, finishReasonOut(reason));
  }

  usage(u: Usage, cost?: bigint, extra?: Record<string, unknown>): string {
    return this.#chunk([], { usage: { ...usageOut(u, cost), ...extra } });
  }

  /** An extension chunk (no choices; standard clients skip it): `{"fugu": {...}}`, e.g. a workflow's progress. */
  progress(p: Record<string, unknown>): string {
    return this.#chunk([], { fugu: p });
  }

  static done(): string {
    return 'data: [DONE]\n\n';
  }

  /** An error after the stream started (the OpenAI SDK raises it as an APIError). */
  static error(body: unknown): string {
    return `data: ${JSON.stringify(body)}\n\n`;
  }
}
