// The OpenAI Chat Completions wire format on the gateway's side: the request checked field by
// field (a bad field is a 400 naming it), converted to a ChatRequest of typed message parts, and
// ChatResults / stream events written back as `chat.completion` and `chat.completion.chunk`.
// Tools and tool calls pass through unchanged (same names, ids and argument text).
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { AssistantMessage, ChatMessage, FinishReason, TextPart, ToolCall, ToolCallPart, ToolChoice, ToolDefinition, Usage, UserMessage } from '@fugu/core';
import type { ChatRequest, ChatResult } from '@fugu/providers';
import { badField } from './errors.ts';

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
              .object({ name: z.string().min(1), description: z.string().optional(), parameters: z.record(z.string(), z.unknown()).optional(), strict: z.boolean().nullable().optional() })
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
  })
  .loose();

export type WireChatRequest = z.infer<typeof chatRequestSchema>;

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

/** Parse with a schema; the first problem is a 400 naming the field. */
export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badField('body', 'must be a JSON object');
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

export function usageOut(u: Usage): Record<string, unknown> {
  return {
    prompt_tokens: u.inputTokens,
    completion_tokens: u.outputTokens,
    total_tokens: u.inputTokens + u.outputTokens,
    prompt_tokens_details: { cached_tokens: u.cachedInputTokens ?? 0 },
    completion_tokens_details: { reasoning_tokens: u.reasoningTokens ?? 0 },
  };
}

export const completionId = (): string => `chatcmpl-${randomBytes(12).toString('base64url')}`;

const wireToolCall = (c: ToolCall) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } });

/** A whole `chat.completion`; `model` is the worker that answered. */
export function completionBody(r: ChatResult, model: string, id = completionId(), created = Math.floor(Date.now() / 1000)): Record<string, unknown> {
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
        logprobs: null,
        finish_reason: finishReasonOut(r.finishReason),
      },
    ],
    usage: usageOut(r.usage),
  };
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

  usage(u: Usage): string {
    return this.#chunk([], { usage: usageOut(u) });
  }

  static done(): string {
    return 'data: [DONE]\n\n';
  }

  /** An error after the stream started (the OpenAI SDK raises it as an APIError). */
  static error(body: unknown): string {
    return `data: ${JSON.stringify(body)}\n\n`;
  }
}
