// The Anthropic Messages API wire format on the gateway's side (docs/anthropic-api.md): a request
// checked field by field (a bad field is a 400 naming it in Anthropic's way, `messages.2.content.0
// .tool_use_id`), converted to the gateway's ChatRequest of typed message parts (as wire.ts does
// for Chat Completions), and answers written back as a `message` object or as the SSE events of a
// streamed message; errors in Anthropic's shape (`{"type": "error", "error": {"type", "message"}}`).
//
// Both ways, after LiteLLM's Anthropic-compatible endpoint: `tool_use` blocks are tool calls (the
// worker's ids, fugu-ultra's signed ones), `tool_result` blocks are tool messages bound to them,
// usage is `input_tokens` / `output_tokens` (cache fields 0), the finish reason a `stop_reason`.
// What the gateway cannot serve (server tools, documents, images inside a tool result, top_k,
// an assistant prefill, ...) is a 400 naming the field, never silently dropped.
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { estimateTokens, messageText, type ChatMessage, type FinishReason, type ReasoningEffort, type TextPart, type ToolCall, type ToolCallPart, type ToolChoice, type ToolDefinition, type Usage, type UserMessage } from '@fugu/core';
import { THINKING_BUDGET, type ChatRequest } from '@fugu/providers';
import { GatewayError, badField } from './errors.ts';
import type { Completion, FuguOptions } from './chat-types.ts';
import { chatRequestSchema, checkBodyValues, toolParametersSchema, usdNumber } from './wire.ts';

// ---- the request ------------------------------------------------------------------------------

const cacheControl = z.object({ type: z.literal('ephemeral'), ttl: z.string().optional() }).loose().nullable().optional();
const textBlock = z.object({ type: z.literal('text'), text: z.string(), cache_control: cacheControl, citations: z.array(z.unknown()).nullable().optional() }).loose();
const imageBlock = z
  .object({
    type: z.literal('image'),
    source: z.discriminatedUnion('type', [
      z.object({ type: z.literal('base64'), media_type: z.enum(['image/jpeg', 'image/png', 'image/gif', 'image/webp']), data: z.string().min(1) }).loose(),
      z.object({ type: z.literal('url'), url: z.string().min(1) }).loose(),
    ]),
    cache_control: cacheControl,
  })
  .loose();
const toolUseBlock = z
  .object({ type: z.literal('tool_use'), id: z.string().min(1), name: z.string().min(1), input: z.record(z.string(), z.unknown()), cache_control: cacheControl })
  .loose();
// a tool search's result (Claude Code's ToolSearch): the deferred tool it names is loaded
const toolReferenceBlock = z.object({ type: z.literal('tool_reference'), tool_name: z.string().min(1), cache_control: cacheControl }).loose();
const toolResultBlock = z
  .object({
    type: z.literal('tool_result'),
    tool_use_id: z.string().min(1),
    // text and tool references (images and documents inside a result are refused before the schema)
    content: z.union([z.string(), z.array(z.discriminatedUnion('type', [textBlock, toolReferenceBlock]))]).optional(),
    is_error: z.boolean().nullable().optional(),
    cache_control: cacheControl,
  })
  .loose();
const thinkingBlock = z.object({ type: z.literal('thinking'), thinking: z.string(), signature: z.string().optional() }).loose();
const redactedThinkingBlock = z.object({ type: z.literal('redacted_thinking'), data: z.string() }).loose();

const messageSchema = z.discriminatedUnion('role', [
  z.object({ role: z.literal('user'), content: z.union([z.string(), z.array(z.discriminatedUnion('type', [textBlock, imageBlock, toolResultBlock])).min(1)]) }).loose(),
  z.object({ role: z.literal('assistant'), content: z.union([z.string(), z.array(z.discriminatedUnion('type', [textBlock, toolUseBlock, thinkingBlock, redactedThinkingBlock])).min(1)]) }).loose(),
  // a system turn inside the conversation (Claude Code 2.1 sends its environment as one)
  z.object({ role: z.literal('system'), content: z.union([z.string(), z.array(textBlock).min(1)]) }).loose(),
]);

const customTool = z
  .object({
    type: z.literal('custom').nullable().optional(),
    name: z.string().min(1).max(128),
    description: z.string().nullable().optional(),
    input_schema: toolParametersSchema,
    cache_control: cacheControl,
    defer_loading: z.boolean().nullable().optional(),
    strict: z.boolean().nullable().optional(),
    input_examples: z.array(z.record(z.string(), z.unknown())).nullable().optional(),
    eager_input_streaming: z.boolean().nullable().optional(),
    allowed_callers: z.array(z.string()).nullable().optional(),
  })
  .loose();

const parallel = z.boolean().nullable().optional();

/** The Messages API's request (count_tokens: the same, max_tokens optional). */
const requestShape = {
  model: z.string().min(1),
  messages: z.array(messageSchema).min(1),
  max_tokens: z.number().int().min(1),
  system: z.union([z.string(), z.array(textBlock)]).nullable().optional(),
  stop_sequences: z.array(z.string().min(1)).nullable().optional(),
  stream: z.boolean().nullable().optional(),
  temperature: z.number().min(0).max(1).nullable().optional(),
  top_p: z.number().min(0).max(1).nullable().optional(),
  metadata: z.object({ user_id: z.string().max(512).nullable().optional() }).strict().nullable().optional(),
  thinking: z
    .discriminatedUnion('type', [
      z.object({ type: z.literal('enabled'), budget_tokens: z.number().int().min(1024), display: z.enum(['summarized', 'omitted']).nullable().optional() }).strict(),
      z.object({ type: z.literal('disabled') }).strict(),
      z.object({ type: z.literal('adaptive'), display: z.enum(['summarized', 'omitted']).nullable().optional() }).strict(),
      z.object({ type: z.literal('between_tools') }).strict(),
    ])
    .nullable()
    .optional(),
  tools: z.array(customTool).nullable().optional(),
  tool_choice: z
    .discriminatedUnion('type', [
      z.object({ type: z.literal('auto'), disable_parallel_tool_use: parallel }).strict(),
      z.object({ type: z.literal('any'), disable_parallel_tool_use: parallel }).strict(),
      z.object({ type: z.literal('tool'), name: z.string().min(1), disable_parallel_tool_use: parallel }).strict(),
      z.object({ type: z.literal('none') }).strict(),
    ])
    .nullable()
    .optional(),
  output_config: z
    .object({
      effort: z.enum(['low', 'medium', 'high', 'xhigh', 'max']).nullable().optional(),
      format: z.object({ type: z.literal('json_schema'), schema: z.record(z.string(), z.unknown()) }).strict().nullable().optional(),
    })
    .strict()
    .nullable()
    .optional(),
  // only clear_thinking edits (checked before the schema): a worker is never given earlier thinking
  context_management: z.object({ edits: z.array(z.object({ type: z.string() }).loose()).nullable().optional() }).strict().nullable().optional(),
  cache_control: cacheControl,
  service_tier: z.enum(['auto', 'standard_only']).nullable().optional(),
  speed: z.enum(['standard', 'fast']).nullable().optional(),
  /** fugu's extension, as on chat completions: the cost preference, a subset of the key's workers, fugu-ultra's options */
  fugu: chatRequestSchema.shape.fugu,
};

export const messagesRequestSchema = z.object(requestShape).loose();
export const countTokensRequestSchema = z.object({ ...requestShape, max_tokens: requestShape.max_tokens.optional() }).loose();

export type WireMessagesRequest = z.infer<typeof countTokensRequestSchema>;

// Messages parameters the gateway knows but cannot serve: a 400 naming them, not a silent drop.
export const REFUSED: Record<string, string> = {
  top_k: 'is not supported by the gateway: its requests to the workers carry temperature and top_p, not top_k (leave it out)',
  container: 'code execution containers run on Anthropic\'s platform, not behind the gateway',
  mcp_servers: 'the MCP connector runs on Anthropic\'s platform: give the tools as custom tools (the client runs them)',
  inference_geo: 'the gateway cannot choose where a worker runs its inference',
};

/** Block types of a message's content the gateway does not serve, and why (a 400 naming the block). */
const REFUSED_BLOCKS: Record<string, string> = {
  document: 'documents (PDF, plain-text sources) are not supported by the gateway: send the text as a text block',
  search_result: 'search result blocks are not supported by the gateway: send the text as a text block',
  container_upload: 'container uploads are for code execution, which runs on Anthropic\'s platform',
  server_tool_use: 'server tools run on Anthropic\'s platform; no worker behind the gateway made this call',
  web_search_tool_result: 'server tools run on Anthropic\'s platform; no worker behind the gateway made this call',
  web_fetch_tool_result: 'server tools run on Anthropic\'s platform; no worker behind the gateway made this call',
  code_execution_tool_result: 'server tools run on Anthropic\'s platform; no worker behind the gateway made this call',
  bash_code_execution_tool_result: 'server tools run on Anthropic\'s platform; no worker behind the gateway made this call',
  text_editor_code_execution_tool_result: 'server tools run on Anthropic\'s platform; no worker behind the gateway made this call',
  tool_search_tool_result: 'server tools run on Anthropic\'s platform; no worker behind the gateway made this call',
  mcp_tool_use: 'the MCP connector runs on Anthropic\'s platform',
  mcp_tool_result: 'the MCP connector runs on Anthropic\'s platform',
};

const BLOCKS_OF: Record<'user' | 'assistant' | 'system', readonly string[]> = {
  user: ['text', 'image', 'tool_result'],
  assistant: ['text', 'tool_use', 'thinking', 'redacted_thinking'],
  system: ['text'],
};

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * What the schema cannot say well: unknown and refused top-level fields, server tools, block kinds
 * the gateway does not serve (per role), context-management edits. Each is a 400 naming the field.
 * Runs before the schema, so its discriminated unions only see kinds they know.
 */
export function checkMessagesFields(body: Record<string, unknown>, known: Record<string, unknown>): void {
  for (const [k, v] of Object.entries(body)) {
    if (v === undefined || v === null) continue;
    if (k in REFUSED) throw badField(k, REFUSED[k]!);
    if (!(k in known)) throw badField(k, 'is not a Messages parameter this gateway knows (extensions go in the "fugu" object)');
  }
  if (Array.isArray(body.tools)) {
    body.tools.forEach((t: unknown, i) => {
      if (!isObject(t)) return;
      const type = t.type;
      if (type === undefined || type === null || type === 'custom') return;
      throw badField(
        `tools.${i}.type`,
        typeof type === 'string'
          ? `the tool type "${type}" is an Anthropic server or built-in tool, which the gateway's workers cannot run: only custom tools (a name, a description and an input_schema; the client runs them) are served`
          : 'must be "custom" or left out',
      );
    });
  }
  const edits = isObject(body.context_management) ? body.context_management.edits : undefined;
  if (Array.isArray(edits)) {
    edits.forEach((e: unknown, i) => {
      const type = isObject(e) ? e.type : undefined;
      // earlier thinking is never given to a worker (the gateway carries no thinking blocks): clearing it is what happens anyway
      if (typeof type === 'string' && type.startsWith('clear_thinking_')) return;
      throw badField(`context_management.edits.${i}.type`, `${JSON.stringify(type ?? null)} is not supported: the gateway does not edit a conversation's context (only clear_thinking edits, which change nothing here, are accepted)`);
    });
  }
  if (Array.isArray(body.messages)) body.messages.forEach((m: unknown, i) => checkMessage(m, i));
}

function checkMessage(m: unknown, i: number): void {
  if (!isObject(m)) throw badField(`messages.${i}`, 'must be an object (a message)');
  const role = m.role;
  if (role !== 'user' && role !== 'assistant' && role !== 'system') throw badField(`messages.${i}.role`, 'must be one of user, assistant or system');
  if (!Array.isArray(m.content)) return;
  m.content.forEach((b: unknown, j) => {
    const at = `messages.${i}.content.${j}`;
    if (!isObject(b)) throw badField(at, 'must be an object (a content block)');
    const type = b.type;
    if (typeof type === 'string' && type in REFUSED_BLOCKS) throw badField(`${at}.type`, REFUSED_BLOCKS[type]!);
    const allowed = BLOCKS_OF[role];
    if (typeof type !== 'string' || !allowed.includes(type)) throw badField(`${at}.type`, `a ${role} message's blocks are ${allowed.join(', ')}`);
    if (type === 'tool_result' && Array.isArray(b.content)) {
      b.content.forEach((p: unknown, k) => {
        const pt = isObject(p) ? p.type : undefined;
        if (pt === 'text' || pt === 'tool_reference') return;
        const why =
          pt === 'image'
            ? 'images inside a tool_result are not supported by the gateway (a worker\'s tool result is text): describe the image in text, or send it in a user message'
            : `a tool_result's content is text and tool_reference blocks (or a string)${typeof pt === 'string' && pt in REFUSED_BLOCKS ? `: ${REFUSED_BLOCKS[pt]}` : ''}`;
        throw badField(`${at}.content.${k}.type`, why);
      });
    }
  });
}

/** `messages[2].content[0]` (wire.ts's, checkBodyValues') as Anthropic names it: `messages.2.content.0`. */
export function dotted(param: string): string {
  return param.replace(/\[(\d+)\]/g, '.$1').replace(/^\./, '');
}

/** `messages.2.content` style path of a zod issue. */
function pathOf(path: readonly PropertyKey[]): string {
  return path.length === 0 ? 'body' : path.map(String).join('.');
}

/** A badField named in Anthropic's way (its param dotted). */
const renamed = (e: unknown, name: (param: string) => string): unknown => {
  if (!(e instanceof GatewayError) || e.param === null) return e;
  const param = name(e.param);
  if (param === e.param) return e;
  const message = e.message.startsWith(`${e.param}: `) ? `${param}: ${e.message.slice(e.param.length + 2)}` : e.message;
  return new GatewayError(e.status, message, { type: e.type, param, code: e.errorCode, headers: e.headers, cost: e.cost });
};

/**
 * The whole request checked: a JSON object, no unstorable strings or deep nesting
 * (checkBodyValues), unknown, refused and unsupported fields, then the schema (count_tokens: no
 * max_tokens needed). The first problem is a 400 naming the field in Anthropic's way.
 */
export function parseMessagesRequest(body: unknown, opts: { countTokens?: boolean } = {}): WireMessagesRequest {
  if (!isObject(body)) throw badField('body', 'must be a JSON object');
  try {
    checkBodyValues(body);
  } catch (e) {
    throw renamed(e, dotted);
  }
  const schema = opts.countTokens ? countTokensRequestSchema : messagesRequestSchema;
  checkMessagesFields(body, schema.shape);
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const issue = deepest(r.error.issues[0]!);
  let msg = issue.message;
  if (issue.code === 'invalid_union' && 'discriminator' in issue && issue.discriminator) {
    const d = issue.discriminator as string;
    const at = pathOf(issue.path.at(-1) === d ? issue.path : [...issue.path, d]);
    throw badField(at, msg);
  }
  if (issue.code === 'invalid_union' && issue.path.at(-1) === 'content') throw badField(pathOf(issue.path), 'must be a string or a list of content blocks');
  if (issue.code === 'invalid_type' && msg.includes('received undefined')) msg = 'Field required';
  throw badField(pathOf(issue.path), msg);
}

type Issue = z.core.$ZodIssue;

/**
 * A union's issue (a content that is neither a string nor a list of blocks it knows) as the issue
 * of the alternative that got furthest into the value (the list's bad block), its path whole.
 */
function deepest(issue: Issue): Issue {
  if (issue.code !== 'invalid_union' || !('errors' in issue) || !Array.isArray(issue.errors) || issue.errors.length === 0) return issue;
  const firsts = (issue.errors as Issue[][]).map((branch) => branch[0]).filter((x): x is Issue => x !== undefined);
  const best = firsts.sort((a, b) => b.path.length - a.path.length)[0];
  if (!best || best.path.length === 0) return issue;
  return deepest({ ...best, path: [...issue.path, ...best.path] } as Issue);
}

/** Where a chat message came from: the top-level `system`, or message i of the request (block j: a tool_result). */
export type MessageOrigin = { system: true } | { message: number; block?: number };

/**
 * How the request's Anthropic fields are named where a model's refusal names a Chat Completions
 * parameter (`reasoning_effort` -> `thinking` or `output_config.effort`, `stop` -> `stop_sequences`,
 * ...), and where each chat message came from.
 */
export type MessagesTerms = { origins: MessageOrigin[]; params: Record<string, string> };

/** The effort a thinking budget buys: the largest whose budget (the Anthropic adapter's THINKING_BUDGET) fits in it. */
export function effortOfBudget(budget: number): ReasoningEffort {
  const fits = (Object.entries(THINKING_BUDGET) as Array<[ReasoningEffort, number]>).filter(([, b]) => b <= budget).sort((a, b) => b[1] - a[1]);
  return fits[0]?.[0] ?? 'minimal';
}

/** output_config.effort as a reasoning effort: `high` is the API's default (the same as leaving it out), `xhigh` and `max` the most a worker can be asked. */
const EFFORT: Record<string, ReasoningEffort | undefined> = { low: 'low', medium: 'medium', high: undefined, xhigh: 'high', max: 'high' };

const joinText = (blocks: ReadonlyArray<{ text: string }>, sep = ''): string => blocks.map((b) => b.text).join(sep);

type WireMessage = WireMessagesRequest['messages'][number];

/**
 * The request as a ChatRequest, and the terms to name its fields in. The conversation: the
 * top-level `system` first (its blocks joined), then each message in order. A user message's
 * tool_result blocks are tool messages (one each, bound to the tool_use they answer: a 400 naming
 * `messages.i.content.j.tool_use_id` when none earlier in the conversation has that id); its text
 * after them is appended to the last result (so a turn that answers tool calls stays one answer
 * to them, as fugu-ultra continues a workflow from the results the messages end with), its images
 * are a user message after them. An assistant message's tool_use blocks are tool calls (their
 * input as JSON text), its thinking blocks are not sent on. A system message in the conversation
 * is a system message where it is. A last assistant message (a prefill) is refused.
 */
export function toMessagesChatRequest(body: WireMessagesRequest): { req: ChatRequest; terms: MessagesTerms } {
  const messages: ChatMessage[] = [];
  const origins: MessageOrigin[] = [];
  const push = (m: ChatMessage, origin: MessageOrigin): void => {
    messages.push(m);
    origins.push(origin);
  };
  const system = typeof body.system === 'string' ? body.system : body.system ? joinText(body.system, '\n\n') : '';
  if (system) push({ role: 'system', content: system }, { system: true });
  const toolNames = new Map<string, string>();
  // deferred tools a tool search loaded (tool_reference blocks in the results): offered from then on
  const loaded = new Set<string>();
  const last = body.messages.length - 1;
  body.messages.forEach((m: WireMessage, i) => {
    if (m.role === 'system') {
      push({ role: 'system', content: typeof m.content === 'string' ? m.content : joinText(m.content, '\n\n') }, { message: i });
      return;
    }
    if (m.role === 'assistant') {
      if (i === last) throw badField(`messages.${i}.role`, 'a last assistant message (a prefill, for the model to continue) is not supported by the gateway: end the conversation with a user message');
      if (typeof m.content === 'string') {
        push({ role: 'assistant', content: m.content }, { message: i });
        return;
      }
      const parts: Array<TextPart | ToolCallPart> = [];
      for (const b of m.content) {
        if (b.type === 'text') parts.push({ type: 'text', text: b.text });
        else if (b.type === 'tool_use') {
          toolNames.set(b.id, b.name);
          parts.push({ type: 'tool-call', id: b.id, name: b.name, arguments: JSON.stringify(b.input) });
        }
        // thinking and redacted_thinking: a worker is not given earlier reasoning
      }
      if (parts.length === 0) return;
      const onlyText = parts.every((p) => p.type === 'text');
      push({ role: 'assistant', content: onlyText ? joinText(parts as TextPart[]) : parts }, { message: i });
      return;
    }
    if (typeof m.content === 'string') {
      push({ role: 'user', content: m.content }, { message: i });
      return;
    }
    const results = m.content.some((b) => b.type === 'tool_result');
    const userParts: Exclude<UserMessage['content'], string> = [];
    // the text after the results: appended to the last one
    const resultText: string[] = [];
    let lastResult: { content: string } | undefined;
    m.content.forEach((b, j) => {
      if (b.type === 'tool_result') {
        const name = toolNames.get(b.tool_use_id);
        if (name === undefined) throw badField(`messages.${i}.content.${j}.tool_use_id`, `"${b.tool_use_id}" answers no tool_use block of an earlier assistant message`);
        const content = b.content === undefined ? '' : typeof b.content === 'string' ? b.content : toolResultText(b.content, loaded);
        const part = { type: 'tool-result' as const, toolCallId: b.tool_use_id, name, content, ...(b.is_error === true && { isError: true }) };
        push({ role: 'tool', content: [part] }, { message: i, block: j });
        lastResult = part;
      } else if (b.type === 'text') {
        if (results) resultText.push(b.text);
        else userParts.push({ type: 'text', text: b.text });
      } else {
        userParts.push({ type: 'image', url: b.source.type === 'base64' ? `data:${b.source.media_type};base64,${b.source.data}` : b.source.url, ...(b.source.type === 'base64' && { mediaType: b.source.media_type }) });
      }
    });
    if (lastResult && resultText.length > 0) lastResult.content = [lastResult.content, ...resultText].filter((t) => t !== '').join('\n\n');
    if (userParts.length === 0) return;
    const onlyText = userParts.every((p) => p.type === 'text');
    push({ role: 'user', content: onlyText && userParts.length === 1 ? (userParts[0] as TextPart).text : userParts }, { message: i });
  });

  const req: ChatRequest = { messages };
  const params: Record<string, string> = { stop: 'stop_sequences', response_format: 'output_config.format', parallel_tool_calls: 'tool_choice.disable_parallel_tool_use', user: 'metadata.user_id' };
  if (body.max_tokens !== undefined) req.maxTokens = body.max_tokens;
  if (body.stop_sequences && body.stop_sequences.length > 0) req.stop = body.stop_sequences;
  if (body.temperature != null) req.temperature = body.temperature;
  if (body.top_p != null) req.topP = body.top_p;
  if (body.metadata?.user_id != null) req.user = body.metadata.user_id;
  // a deferred tool (defer_loading) is offered once a tool search's result has loaded it (a tool_reference)
  const tools = (body.tools ?? []).filter((t) => t.defer_loading !== true || loaded.has(t.name));
  body.tools?.forEach((t, i) => {
    if (t.allowed_callers && !t.allowed_callers.includes('direct')) throw badField(`tools.${i}.allowed_callers`, 'must include "direct": the gateway\'s workers call tools directly (programmatic calls from code execution run on Anthropic\'s platform)');
  });
  if (tools.length > 0) {
    req.tools = tools.map(
      (t): ToolDefinition => {
        const examples = t.input_examples?.length ? `Examples of input: ${t.input_examples.map((x) => JSON.stringify(x)).join('; ')}` : '';
        const description = [t.description ?? '', examples].filter((s) => s !== '').join('\n\n');
        return { name: t.name, ...(description !== '' && { description }), parameters: t.input_schema };
      },
    );
  }
  const tc = body.tool_choice;
  if (tc != null) {
    const choice: ToolChoice = tc.type === 'auto' ? 'auto' : tc.type === 'none' ? 'none' : tc.type === 'any' ? 'required' : { name: tc.name };
    if (typeof choice === 'object' && !req.tools?.some((t) => t.name === choice.name)) throw badField('tool_choice.name', `"${choice.name}" is not one of the tools`);
    req.toolChoice = choice;
    if (tc.type !== 'none' && tc.disable_parallel_tool_use === true) req.parallelToolCalls = false;
    params.tool_choice = 'tool_choice';
  }
  // reasoning: output_config.effort when it asks for other than the default, else an enabled thinking budget
  const effort = body.output_config?.effort != null ? EFFORT[body.output_config.effort] : undefined;
  if (effort !== undefined) {
    req.reasoningEffort = effort;
    params.reasoning_effort = 'output_config.effort';
  } else if (body.thinking?.type === 'enabled') {
    if (body.max_tokens !== undefined && body.thinking.budget_tokens >= body.max_tokens) throw badField('thinking.budget_tokens', `must be less than max_tokens (${body.max_tokens})`);
    req.reasoningEffort = effortOfBudget(body.thinking.budget_tokens);
    params.reasoning_effort = 'thinking';
  }
  const format = body.output_config?.format;
  if (format != null) req.responseFormat = { type: 'json_schema', name: 'output', schema: format.schema };
  return { req, terms: { origins, params } };
}

/** A tool result's blocks as its text: text blocks, and a line per tool a tool_reference loads (the tool itself joins the offered tools). */
function toolResultText(blocks: ReadonlyArray<{ type: 'text'; text: string } | { type: 'tool_reference'; tool_name: string }>, loaded: Set<string>): string {
  return blocks
    .map((b) => {
      if (b.type === 'text') return b.text;
      loaded.add(b.tool_name);
      return `Tool loaded: ${b.tool_name} (its definition is now among the tools)`;
    })
    .join('\n');
}

/** The request's fugu extension object (as on chat completions). */
export const fuguOptionsOf = (body: WireMessagesRequest): FuguOptions => body.fugu ?? {};

/**
 * A model's refusal in this request's terms: one naming a chat message (`messages[4].tool_call_id`,
 * fugu-ultra's) names the block it came from (`messages.2.content.1.tool_use_id`), one naming a
 * Chat Completions parameter its Anthropic field (`thinking`, `stop_sequences`, ...); others dotted.
 */
export function messagesParam(param: string, terms: MessagesTerms): string {
  if (param in terms.params) return terms.params[param]!;
  const m = /^messages\[(\d+)\](.*)$/.exec(param);
  if (!m) return dotted(param);
  const origin = terms.origins[Number(m[1])];
  if (origin === undefined) return 'messages';
  if ('system' in origin) return 'system';
  if (m[2] === '.tool_call_id' && origin.block !== undefined) return `messages.${origin.message}.content.${origin.block}.tool_use_id`;
  if (m[2]!.startsWith('.content')) return `messages.${origin.message}.content`;
  return `messages.${origin.message}`;
}

export async function inMessagesTerms<T>(call: () => Promise<T>, terms: MessagesTerms): Promise<T> {
  try {
    return await call();
  } catch (e) {
    throw renamed(e, (p) => messagesParam(p, terms));
  }
}

/** The request's input tokens as the gateway estimates them (about 4 characters a token, a fixed 1,600 per image): count_tokens and message_start. */
export function estimateInputTokens(req: Pick<ChatRequest, 'messages' | 'tools'>): number {
  let n = 0;
  for (const m of req.messages) {
    n += estimateTokens(messageText(m));
    if (m.role === 'user' && typeof m.content !== 'string') n += 1600 * m.content.filter((p) => p.type === 'image').length;
  }
  if (req.tools) n += estimateTokens(JSON.stringify(req.tools));
  return n;
}

// ---- the answer -------------------------------------------------------------------------------

export type StopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'refusal';

/**
 * Anthropic's stop_reason of an answer: tool calls -> tool_use, length -> max_tokens, a content
 * filter -> refusal, a stop -> stop_sequence when the provider says which sequence stopped it
 * (an Anthropic worker does), else end_turn (OpenAI's `stop` does not say whether a sequence did).
 */
export function stopReasonOf(finish: FinishReason, toolCalls: number, stopSequence?: string): { stop_reason: StopReason; stop_sequence: string | null } {
  if (toolCalls > 0 || finish === 'tool-calls') return { stop_reason: 'tool_use', stop_sequence: null };
  if (finish === 'length') return { stop_reason: 'max_tokens', stop_sequence: null };
  if (finish === 'content-filter') return { stop_reason: 'refusal', stop_sequence: null };
  if (stopSequence !== undefined) return { stop_reason: 'stop_sequence', stop_sequence: stopSequence };
  return { stop_reason: 'end_turn', stop_sequence: null };
}

/** The stop sequence an Anthropic worker reported (providerMetadata.anthropic.stopSequence). */
export function stopSequenceOf(providerMetadata: Record<string, unknown> | undefined): string | undefined {
  const a = providerMetadata?.anthropic;
  const s = isObject(a) ? a.stopSequence : undefined;
  return typeof s === 'string' ? s : undefined;
}

/**
 * Anthropic usage, with `cost` (USD number, as chat's usage.cost) and a model's extra fields in
 * this API's names (fugu-ultra's `conductor` / `workers`: `input_tokens`, `output_tokens`, `cost`).
 * The input tokens are the whole prompt's (no cache reads are split out: the cache fields are 0).
 */
export function messagesUsage(u: Usage, cost?: bigint, extra?: Record<string, unknown>): Record<string, unknown> {
  return {
    input_tokens: u.inputTokens,
    output_tokens: u.outputTokens,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    server_tool_use: null,
    service_tier: 'standard',
    ...(cost !== undefined && { cost: usdNumber(cost) }),
    ...(extra && Object.fromEntries(Object.entries(extra).map(([k, v]) => [k, anthropicTokens(v)]))),
  };
}

function anthropicTokens(v: unknown): unknown {
  if (!isObject(v)) return v;
  const { prompt_tokens: input, completion_tokens: output, ...rest } = v;
  if (typeof input !== 'number' || typeof output !== 'number') return v;
  return { input_tokens: input, output_tokens: output, ...rest };
}

export const newMessageId = (): string => `msg_${randomBytes(18).toString('base64url')}`;

/** A tool call as a tool_use block: its id (one made up when the worker gave none), its arguments as the input object ({} when they are not a JSON object). */
export function toolUseBlockOf(c: ToolCall): Record<string, unknown> {
  return { type: 'tool_use', id: c.id || `toolu_${randomBytes(12).toString('base64url')}`, name: c.name, input: inputOf(c.arguments), caller: { type: 'direct' } };
}

function inputOf(args: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(args);
    return isObject(v) ? v : {};
  } catch {
    return {};
  }
}

const textBlockOf = (text: string): Record<string, unknown> => ({ type: 'text', text, citations: null });

/** What POST /v1/messages answers for a whole answer: the `message`, its model the answering worker (or the model kind's name), with the `fugu` object when the model has one. */
export function messageOf(c: Completion, id = newMessageId()): Record<string, unknown> {
  const r = c.result;
  const content = [...(r.text ? [textBlockOf(r.text)] : []), ...r.toolCalls.map(toolUseBlockOf)];
  return {
    id,
    type: 'message',
    role: 'assistant',
    model: c.model ?? c.worker,
    content,
    ...stopReasonOf(r.finishReason, r.toolCalls.length, stopSequenceOf(r.providerMetadata)),
    stop_details: null,
    container: null,
    usage: messagesUsage(r.usage, c.cost, c.usageExtra),
    ...(c.extension && { fugu: c.extension }),
  };
}

// ---- streaming --------------------------------------------------------------------------------

/**
 * Writes one streamed message's SSE events (`event: <type>` and `data: <json>` lines) in
 * Anthropic's order: message_start (the message with empty content and the estimated input
 * tokens), ping, then per block content_block_start / content_block_delta (text_delta; for a
 * tool_use its whole input as one input_json_delta: the adapters assemble a call before passing
 * it on) / content_block_stop, then message_delta (stop_reason, usage) and message_stop. A ping
 * stands for a model's progress (fugu-ultra's workflow steps) and keeps the connection alive.
 */
export class MessageEventWriter {
  readonly id: string;
  #index = 0;
  #textOpen = false;

  constructor(id = newMessageId()) {
    this.id = id;
  }

  event(type: string, fields: Record<string, unknown> = {}): string {
    return `event: ${type}\ndata: ${JSON.stringify({ type, ...fields })}\n\n`;
  }

  start(model: string, inputTokens: number): string {
    const message = {
      id: this.id, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, stop_details: null, container: null,
      usage: messagesUsage({ inputTokens, outputTokens: 0 }),
    };
    return this.event('message_start', { message }) + this.ping();
  }

  ping(): string {
    return this.event('ping');
  }

  text(delta: string): string {
    let out = '';
    if (!this.#textOpen) {
      out += this.event('content_block_start', { index: this.#index, content_block: textBlockOf('') });
      this.#textOpen = true;
    }
    return out + this.event('content_block_delta', { index: this.#index, delta: { type: 'text_delta', text: delta } });
  }

  #closeText(): string {
    if (!this.#textOpen) return '';
    this.#textOpen = false;
    return this.event('content_block_stop', { index: this.#index++ });
  }

  toolCall(c: ToolCall): string {
    const block = toolUseBlockOf(c);
    const closing = this.#closeText();
    const index = this.#index++;
    return (
      closing +
      this.event('content_block_start', { index, content_block: { ...block, input: {} } }) +
      this.event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) } }) +
      this.event('content_block_stop', { index })
    );
  }

  /** message_delta and message_stop (the open text block closed first). */
  finish(stop: { stop_reason: StopReason; stop_sequence: string | null }, usage: Record<string, unknown>): string {
    return this.#closeText() + this.event('message_delta', { delta: { ...stop, stop_details: null, container: null }, usage }) + this.event('message_stop');
  }

  /** A failure after the stream started: an `error` event (the Anthropic client raises it). */
  error(body: AnthropicErrorBody): string {
    return this.event('error', { error: body.error, ...(body.request_id !== undefined && { request_id: body.request_id }) });
  }
}

// ---- errors -----------------------------------------------------------------------------------

export type AnthropicErrorBody = { type: 'error'; error: { type: string; message: string }; request_id?: string };

/** Anthropic's error type for an HTTP status (its documented pairs; 503 as overloaded_error). */
export function anthropicErrorType(status: number): string {
  switch (status) {
    case 400:
    case 409:
    case 415:
    case 422:
      return 'invalid_request_error';
    case 401:
      return 'authentication_error';
    case 402:
      return 'billing_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 503:
    case 529:
      return 'overloaded_error';
    case 504:
      return 'timeout_error';
    default:
      return status >= 500 ? 'api_error' : 'invalid_request_error';
  }
}

/** A gateway error in Anthropic's shape: its message names the field first (`messages.2.content.0.tool_use_id: ...`), as badField's do. */
export function anthropicErrorBody(e: GatewayError, requestId?: string): AnthropicErrorBody {
  const message = e.param !== null && !e.message.startsWith(`${e.param}: `) ? `${e.param}: ${e.message}` : e.message;
  return { type: 'error', error: { type: anthropicErrorType(e.status), message }, ...(requestId !== undefined && { request_id: requestId }) };
}
