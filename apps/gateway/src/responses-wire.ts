// The OpenAI Responses API wire format on the gateway's side (docs/responses-api.md): a request
// checked field by field (a bad field is a 400 naming it, as wire.ts does for Chat Completions),
// its input items normalised to the item shapes a stored response keeps, the conversation
// (earlier turns' items, then this request's) converted to a ChatRequest of typed message parts,
// and answers written back as a `response` object or as the SSE events of a streamed response.
//
// Served: function tools, custom (freeform) tools and namespaces of them (each offered to the
// worker as a function: ResponsesTools), and text, function-call and custom-tool-call items;
// built-in tools, images, files and the other item kinds are refused with a 400 naming the field,
// never silently dropped. Hints and metadata (client_metadata, metadata, prompt_cache_key,
// safety_identifier, user, service_tier) are accepted and kept with the request's row (hintsOf).
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { AssistantMessage, ChatMessage, FinishReason, TextPart, ToolCall, ToolCallPart, ToolChoice, ToolDefinition, Usage } from '@fugu/core';
import { REQUEST_PARAMS, type ChatRequest, type ChatResult } from '@fugu/providers';
import { GatewayError, badField, type OpenAIErrorBody } from './errors.ts';
import type { Completion, FuguOptions } from './chat-types.ts';
import { chatRequestSchema, checkBodyValues, finishReasonOut, parseBody, toolParametersSchema, usdNumber } from './wire.ts';

// ---- the request ------------------------------------------------------------------------------

const inputText = z.object({ type: z.literal('input_text'), text: z.string() }).loose();
const outputText = z.object({ type: z.literal('output_text'), text: z.string() }).loose();
const refusalPart = z.object({ type: z.literal('refusal'), refusal: z.string() }).loose();
const itemStatus = z.enum(['in_progress', 'completed', 'incomplete']).nullable().optional();

const messageItem = z
  .object({
    type: z.literal('message'),
    role: z.enum(['user', 'assistant', 'system', 'developer']),
    // a string content is made a one-part list before parsing (parseResponsesRequest)
    content: z.array(z.discriminatedUnion('type', [inputText, outputText, refusalPart])),
    id: z.string().nullable().optional(),
    status: itemStatus,
  })
  .loose();

const functionCallItem = z
  .object({
    type: z.literal('function_call'),
    call_id: z.string().min(1),
    name: z.string().min(1),
    arguments: z.string(),
    namespace: z.string().min(1).nullable().optional(),
    id: z.string().min(1).nullable().optional(),
    status: itemStatus,
  })
  .loose();

const functionCallOutputItem = z
  .object({
    type: z.literal('function_call_output'),
    call_id: z.string().min(1),
    output: z.union([z.string(), z.array(inputText)]),
    id: z.string().min(1).nullable().optional(),
    status: itemStatus,
  })
  .loose();

const customToolCallItem = z
  .object({
    type: z.literal('custom_tool_call'),
    call_id: z.string().min(1),
    name: z.string().min(1),
    input: z.string(),
    namespace: z.string().min(1).nullable().optional(),
    id: z.string().min(1).nullable().optional(),
    status: itemStatus,
  })
  .loose();

const customToolCallOutputItem = z
  .object({
    type: z.literal('custom_tool_call_output'),
    call_id: z.string().min(1),
    output: z.union([z.string(), z.array(inputText)]),
    id: z.string().min(1).nullable().optional(),
    status: itemStatus,
  })
  .loose();

const inputItem = z.discriminatedUnion('type', [messageItem, functionCallItem, functionCallOutputItem, customToolCallItem, customToolCallOutputItem]);

/** A tool's options that change nothing when left at their defaults (checked by checkTool). */
const toolOptions = {
  defer_loading: z.literal(false, { error: 'deferred tools (discovered by tool search) are not supported by the gateway: offer the tool itself' }).nullable().optional(),
  async: z.literal(false, { error: 'asynchronous tool results are not supported by the gateway' }).nullable().optional(),
};

const functionTool = z
  .object({
    type: z.literal('function'),
    name: z.string().min(1),
    description: z.string().nullable().optional(),
    parameters: toolParametersSchema.nullable().optional(),
    strict: z.boolean().nullable().optional(),
    ...toolOptions,
  })
  .loose();

/** A custom (freeform) tool's input format: unconstrained text, or text in a grammar (Lark or a regex). */
const customFormat = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text') }).strict(),
  z.object({ type: z.literal('grammar'), syntax: z.enum(['lark', 'regex']), definition: z.string().min(1) }).strict(),
]);

const customTool = z
  .object({
    type: z.literal('custom'),
    name: z.string().min(1),
    description: z.string().nullable().optional(),
    format: customFormat.nullable().optional(),
    ...toolOptions,
  })
  .loose();

const namespaceTool = z
  .object({
    type: z.literal('namespace'),
    name: z.string().min(1),
    description: z.string().nullable().optional(),
    tools: z.array(z.discriminatedUnion('type', [functionTool, customTool])).min(1),
  })
  .loose();

export const toolSchema = z.discriminatedUnion('type', [functionTool, customTool, namespaceTool]);
export type WireTool = z.infer<typeof toolSchema>;

/** `client_metadata`: the client's own tags for the request (Codex: its turn, session and thread ids), recorded with the request's row, not sent to the worker. */
export const CLIENT_METADATA_LIMITS = { keys: 32, keyChars: 64, valueChars: 8192 } as const;

const textFormat = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text') }).strict(),
  z.object({ type: z.literal('json_object') }).strict(),
  z
    .object({
      type: z.literal('json_schema'),
      name: z.string().min(1),
      schema: z.record(z.string(), z.unknown()),
      description: z.string().optional(),
      strict: z.boolean().nullable().optional(),
    })
    .strict(),
]);

export const responsesRequestSchema = z
  .object({
    model: z.string().min(1),
    // a string input is made one user message before parsing (parseResponsesRequest)
    input: z.array(inputItem, { error: 'must be a string or a list of input items' }).min(1),
    instructions: z.string().nullable().optional(),
    tools: z.array(toolSchema).nullable().optional(),
    tool_choice: z
      .union([
        z.enum(['auto', 'none', 'required']),
        z.object({ type: z.enum(['function', 'custom']), name: z.string().min(1), namespace: z.string().min(1).nullable().optional() }).strict(),
      ])
      .nullable()
      .optional(),
    parallel_tool_calls: z.boolean().nullable().optional(),
    temperature: z.number().min(0).max(2).nullable().optional(),
    top_p: z.number().min(0).max(1).nullable().optional(),
    max_output_tokens: z.number().int().positive().nullable().optional(),
    text: z
      .object({ format: textFormat.nullable().optional(), verbosity: z.enum(['low', 'medium', 'high']).nullable().optional() })
      .strict()
      .nullable()
      .optional(),
    reasoning: z
      .object({
        effort: z.enum(['minimal', 'low', 'medium', 'high']).nullable().optional(),
        // "auto": a summary when the model gives one; the workers behind the gateway give none (no reasoning items)
        summary: z.literal('auto', { error: 'only "auto" is supported: the workers behind the gateway return no reasoning summaries' }).nullable().optional(),
        generate_summary: z.literal('auto', { error: 'only "auto" is supported: the workers behind the gateway return no reasoning summaries' }).nullable().optional(),
      })
      .strict()
      .nullable()
      .optional(),
    metadata: z
      .record(z.string().max(64), z.string().max(512))
      .refine((m) => Object.keys(m).length <= 16, 'at most 16 keys')
      .nullable()
      .optional(),
    client_metadata: z
      .record(z.string().max(CLIENT_METADATA_LIMITS.keyChars), z.string().max(CLIENT_METADATA_LIMITS.valueChars))
      .refine((m) => Object.keys(m).length <= CLIENT_METADATA_LIMITS.keys, `at most ${CLIENT_METADATA_LIMITS.keys} keys`)
      .nullable()
      .optional(),
    user: z.string().nullable().optional(),
    safety_identifier: z.string().nullable().optional(),
    store: z.boolean().nullable().optional(),
    previous_response_id: z.string().min(1).nullable().optional(),
    stream: z.boolean().nullable().optional(),
    stream_options: z.object({ include_obfuscation: z.boolean().nullable().optional() }).strict().nullable().optional(),
    service_tier: z.string().min(1).nullable().optional(),
    prompt_cache_key: z.string().nullable().optional(),
    truncation: z.literal('disabled', { error: 'only "disabled" is supported (the gateway never truncates a conversation)' }).nullable().optional(),
    // what a response may include (INCLUDABLE); checkResponsesFields refuses the rest, naming include[i]
    include: z.array(z.string()).nullable().optional(),
    background: z.literal(false, { error: 'background responses are not supported by the gateway' }).nullable().optional(),
    /** fugu's extension, as on chat completions: the cost preference and a subset of the key's workers */
    fugu: chatRequestSchema.shape.fugu,
  })
  .loose();

export type WireResponsesRequest = z.infer<typeof responsesRequestSchema>;

// Responses parameters the gateway knows but cannot serve: a 400 naming them, not a silent drop.
export const REFUSED: Record<string, string> = {
  conversation: 'server-side conversations are not supported: continue a response with previous_response_id',
  prompt: 'stored prompt templates are not supported by the gateway',
  max_tool_calls: 'built-in tool call limits are not supported (only function tools are served)',
  top_logprobs: 'log probabilities are not supported on /v1/responses (ask /v1/chat/completions with logprobs)',
  context_management: 'context management is not supported by the gateway',
  background_options: 'background responses are not supported by the gateway',
  prompt_cache_options: 'prompt cache options are not supported by the gateway (prompt_cache_key is)',
  prompt_cache_retention: 'prompt cache retention is not supported by the gateway (prompt_cache_key is)',
  moderation: 'moderation settings are not supported by the gateway',
  image: 'image settings are not supported by the gateway',
  access_programs: 'access programs are not supported by the gateway',
};

/** OpenAI's hosted tools: served by OpenAI's platform, not by a worker behind the gateway. */
const BUILT_IN_TOOLS = new Set([
  'web_search',
  'web_search_preview',
  'web_search_2025_08_26',
  'web_search_preview_2025_03_11',
  'file_search',
  'computer',
  'computer_use',
  'computer_use_preview',
  'code_interpreter',
  'image_generation',
  'mcp',
  'local_shell',
  'shell',
  'apply_patch',
  'tool_search',
  'programmatic_tool_calling',
]);

/**
 * OpenAI's shell and patch tools run on the client but are typed by OpenAI's models only (a
 * `local_shell_call` item with an argv action, an `apply_patch_call` with a diff operation): a
 * chat worker has no such tool. The same tools as function or custom tools are served; Codex
 * declares them so for any model that is not one of OpenAI's (`exec_command` / `shell_command`
 * functions, `apply_patch` as a custom tool).
 */
const HOSTED_SHELL_NOTE: Readonly<Record<string, string>> = {
  local_shell: ' (local_shell is the codex-mini models\' own shell tool; offer a shell as a function tool, as Codex does for other models)',
  shell: ' (offer a shell as a function tool, as Codex does for models that are not OpenAI\'s)',
  apply_patch: ' (offer apply_patch as a custom tool, as Codex does with apply_patch_tool_type "freeform")',
};

const ITEM_TYPES = 'message, function_call, function_call_output, custom_tool_call or custom_tool_call_output';
const SERVED_ITEMS = new Set(['message', 'function_call', 'function_call_output', 'custom_tool_call', 'custom_tool_call_output']);

/**
 * What `include` may name: `reasoning.encrypted_content` asks for the encrypted reasoning of the
 * reasoning items, for a client that sends them back with store: false (Codex). The workers behind
 * the gateway give no reasoning items, so there is nothing to include and nothing to send back;
 * the request is served as asked. Every other value asks for data the gateway does not have.
 */
export const INCLUDABLE: Readonly<Record<string, string>> = {
  'reasoning.encrypted_content': 'accepted: the answers have no reasoning items, so there is no encrypted reasoning to include',
};

const NOT_INCLUDABLE: Readonly<Record<string, string>> = {
  'message.output_text.logprobs': 'log probabilities are not supported on /v1/responses (ask /v1/chat/completions with logprobs)',
  'message.input_image.image_url': 'images are not supported on /v1/responses by the gateway',
  'computer_call_output.output.image_url': 'built-in tools are not supported by the gateway',
  'file_search_call.results': 'built-in tools are not supported by the gateway',
  'web_search_call.results': 'built-in tools are not supported by the gateway',
  'web_search_call.action.sources': 'built-in tools are not supported by the gateway',
  'code_interpreter_call.outputs': 'built-in tools are not supported by the gateway',
};

/** A tool of `tools` (or of a namespace's `tools`) whose type the gateway does not serve: the 400 naming it. */
function checkToolType(t: unknown, at: string, inNamespace: boolean): void {
  const type = isObject(t) ? t.type : undefined;
  if (type === 'function' || type === 'custom') return;
  if (type === 'namespace' && !inNamespace) {
    const inner = isObject(t) ? t.tools : undefined;
    if (Array.isArray(inner)) inner.forEach((x, j) => checkToolType(x, `${at.slice(0, -'.type'.length)}.tools[${j}].type`, true));
    return;
  }
  const served = inNamespace ? 'function or custom tools' : 'function tools, custom tools and namespaces of them';
  if (type === 'web_search' || type === 'web_search_preview') {
    throw badField(at, `the built-in tool "${type}" is not supported by the gateway: only ${served} are served (Codex: set web_search = "disabled" in its config.toml)`);
  }
  if (typeof type === 'string' && BUILT_IN_TOOLS.has(type)) throw badField(at, `the built-in tool "${type}" is not supported by the gateway: only ${served} are served${HOSTED_SHELL_NOTE[type] ?? ''}`);
  throw badField(at, type === undefined ? 'is required ("function", "custom" or "namespace")' : `"${String(type)}" is not supported: only ${served} are served`);
}

/**
 * What the schema cannot say well: unknown and refused top-level fields, built-in tools, item and
 * content-part kinds the gateway does not serve, the tool choice and text format kinds, the values
 * of `include`. Each is a 400 naming the field. Runs before the schema, so the schema's
 * discriminated unions only see kinds they know.
 */
export function checkResponsesFields(body: Record<string, unknown>): void {
  const known = responsesRequestSchema.shape;
  for (const [k, v] of Object.entries(body)) {
    if (v === undefined || v === null) continue;
    if (k in REFUSED) throw badField(k, REFUSED[k]!);
    if (!(k in known)) throw badField(k, 'is not a Responses parameter this gateway knows (extensions go in the "fugu" object)');
  }
  // a Responses conversation is its chain of stored responses (ChatInput.conversation), for every model
  if (isObject(body.fugu) && body.fugu.conversation !== undefined && body.fugu.conversation !== null) {
    throw badField('fugu.conversation', 'on /v1/responses a conversation is its chain of responses: continue one with previous_response_id');
  }
  if (Array.isArray(body.tools)) body.tools.forEach((t: unknown, i) => checkToolType(t, `tools[${i}].type`, false));
  const tc = body.tool_choice;
  if (isObject(tc) && tc.type !== 'function' && tc.type !== 'custom') {
    throw badField('tool_choice.type', `${JSON.stringify(tc.type ?? null)} is not supported: send "auto", "none", "required", {"type": "function", "name": ...} or {"type": "custom", "name": ...}`);
  }
  const format = isObject(body.text) ? body.text.format : undefined;
  if (isObject(format) && !['text', 'json_object', 'json_schema'].includes(format.type as string)) {
    throw badField('text.format.type', 'must be one of text, json_object or json_schema');
  }
  if (Array.isArray(body.include)) {
    body.include.forEach((v: unknown, i) => {
      if (typeof v === 'string' && v in INCLUDABLE) return;
      const why = typeof v === 'string' ? NOT_INCLUDABLE[v] : undefined;
      throw badField(`include[${i}]`, why ?? `${JSON.stringify(v)} is not available from the gateway (it can include: ${Object.keys(INCLUDABLE).join(', ')})`);
    });
  }
  if (Array.isArray(body.input)) body.input.forEach((item: unknown, i) => checkItem(item, i));
}

function checkItem(item: unknown, i: number): void {
  if (!isObject(item)) throw badField(`input[${i}]`, 'must be an object (an input item)');
  const type = item.type ?? (item.role !== undefined ? 'message' : undefined);
  if (type === undefined) throw badField(`input[${i}].type`, `is required (${ITEM_TYPES})`);
  if (type === 'item_reference') throw badField(`input[${i}].type`, 'item references are not supported: send the item itself, or continue with previous_response_id');
  if (typeof type !== 'string' || !SERVED_ITEMS.has(type)) {
    throw badField(`input[${i}].type`, `${JSON.stringify(type)} items are not supported by the gateway (only ${ITEM_TYPES})`);
  }
  if (type !== 'message' || !Array.isArray(item.content)) return;
  item.content.forEach((p: unknown, j) => {
    const pt = isObject(p) ? p.type : undefined;
    const at = `input[${i}].content[${j}].type`;
    if (pt === 'input_image') throw badField(at, 'images are not supported on /v1/responses by the gateway');
    if (pt === 'input_file') throw badField(at, 'files are not supported by the gateway');
    if (pt === 'input_audio') throw badField(at, 'audio input is not supported by the gateway');
    if (pt !== 'input_text' && pt !== 'output_text' && pt !== 'refusal') throw badField(at, 'must be one of input_text, output_text or refusal');
    const assistant = item.role === 'assistant';
    if (assistant && pt === 'input_text') throw badField(at, 'an assistant message\'s parts are output_text (or refusal)');
    if (!assistant && pt !== 'input_text') throw badField(at, `a ${String(item.role)} message's parts are input_text`);
  });
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The whole request checked: unknown, refused and unsupported fields first, then the schema, on
 * the input in its long form (a string input is one user message; a message item's type may be
 * left out and its content be a string, as in OpenAI's "easy" input message), so that a bad
 * field inside an item is named by its own path.
 */
export function parseResponsesRequest(body: unknown): WireResponsesRequest {
  if (!isObject(body)) throw badField('body', 'must be a JSON object');
  // on the body as sent, so that a bad string of a string input is named `input`
  checkBodyValues(body);
  checkResponsesFields(body);
  if (body.input === '') throw badField('input', 'must not be empty');
  const items = typeof body.input === 'string' ? [{ role: 'user', content: body.input }] : body.input;
  const input = Array.isArray(items) ? items.map(longForm) : items;
  return parseBody(responsesRequestSchema, { ...body, input });
}

function longForm(item: unknown): unknown {
  if (!isObject(item) || (item.type !== undefined && item.type !== 'message')) return item;
  const assistant = item.role === 'assistant';
  const content = typeof item.content === 'string' ? [assistant ? { type: 'output_text', text: item.content, annotations: [] } : { type: 'input_text', text: item.content }] : item.content;
  return { ...item, type: 'message', content };
}

// ---- items ------------------------------------------------------------------------------------

export type InputTextPart = { type: 'input_text'; text: string };
export type OutputTextPart = { type: 'output_text'; text: string; annotations: unknown[] };
export type RefusalPart = { type: 'refusal'; refusal: string };

export type ItemStatus = 'in_progress' | 'completed' | 'incomplete';
export type InputMessageItem = { id: string; type: 'message'; status: 'completed'; role: 'user' | 'system' | 'developer'; content: InputTextPart[] };
export type OutputMessageItem = { id: string; type: 'message'; status: ItemStatus; role: 'assistant'; content: Array<OutputTextPart | RefusalPart> };
export type FunctionCallItem = { id: string; type: 'function_call'; status: ItemStatus; arguments: string; call_id: string; name: string; namespace?: string };
export type FunctionCallOutputItem = { id: string; type: 'function_call_output'; status: 'completed'; call_id: string; output: string };
export type CustomToolCallItem = { id: string; type: 'custom_tool_call'; status: ItemStatus; input: string; call_id: string; name: string; namespace?: string };
export type CustomToolCallOutputItem = { id: string; type: 'custom_tool_call_output'; status: 'completed'; call_id: string; output: string };

/** An item of a conversation as stored: OpenAI's item shapes, each with an id. */
export type ConversationItem = InputMessageItem | OutputMessageItem | FunctionCallItem | FunctionCallOutputItem | CustomToolCallItem | CustomToolCallOutputItem;

const hex = (bytes: number): string => randomBytes(bytes).toString('hex');
export const newResponseId = (): string => `resp_${hex(24)}`;
export const newItemId = (prefix: 'msg' | 'fc' | 'fco' | 'ctc' | 'ctco'): string => `${prefix}_${hex(24)}`;

const joinedText = (o: string | ReadonlyArray<{ text: string }>): string => (typeof o === 'string' ? o : o.map((p) => p.text).join(''));

/** This request's input as conversation items, each with an id (the client's, else a new one). */
export function normaliseInput(input: WireResponsesRequest['input']): ConversationItem[] {
  return input.map((it): ConversationItem => {
    switch (it.type) {
      case 'message': {
        const id = it.id || newItemId('msg');
        if (it.role === 'assistant') {
          const content: OutputMessageItem['content'] = it.content.map((p) =>
            p.type === 'refusal' ? { type: 'refusal' as const, refusal: p.refusal } : { type: 'output_text' as const, text: p.type === 'output_text' ? p.text : '', annotations: [] },
          );
          return { id, type: 'message', status: 'completed', role: 'assistant', content };
        }
        const content: InputTextPart[] = it.content.map((p) => ({ type: 'input_text', text: p.type === 'input_text' ? p.text : '' }));
        return { id, type: 'message', status: 'completed', role: it.role, content };
      }
      case 'function_call':
        return { id: it.id || newItemId('fc'), type: 'function_call', status: 'completed', arguments: it.arguments, call_id: it.call_id, name: it.name, ...(it.namespace != null && { namespace: it.namespace }) };
      case 'function_call_output':
        return { id: it.id || newItemId('fco'), type: 'function_call_output', status: 'completed', call_id: it.call_id, output: joinedText(it.output) };
      case 'custom_tool_call':
        return { id: it.id || newItemId('ctc'), type: 'custom_tool_call', status: 'completed', input: it.input, call_id: it.call_id, name: it.name, ...(it.namespace != null && { namespace: it.namespace }) };
      case 'custom_tool_call_output':
        return { id: it.id || newItemId('ctco'), type: 'custom_tool_call_output', status: 'completed', call_id: it.call_id, output: joinedText(it.output) };
    }
  });
}

// ---- tools ------------------------------------------------------------------------------------

/** Between a namespace and a member's name in the name the worker sees (function names are `[A-Za-z0-9_-]`: no dot). */
export const NAMESPACE_SEPARATOR = '__';

/** A tool's name as the worker sees it: a namespace's member is `<namespace>__<name>`. */
export const workerToolName = (name: string, namespace?: string | null): string => (namespace ? `${namespace}${NAMESPACE_SEPARATOR}${name}` : name);

type ToolEntry = { kind: 'function' | 'custom'; name: string; namespace?: string };

/** The note a custom tool's one `input` parameter carries: what the client's tool reads (its grammar, when it has one). */
function customInputNote(t: Extract<WireTool, { type: 'custom' }>): string {
  const f = t.format;
  if (!f || f.type === 'text') return 'The whole input of the tool, as free text.';
  return `The whole input of the tool, as text in this ${f.syntax === 'lark' ? 'Lark grammar' : 'regular expression'} (the tool refuses other text):\n${f.definition}`;
}

/**
 * The request's tools as the worker sees them, and the way back. A function tool is itself. A
 * custom (freeform) tool, whose input is text rather than JSON, is offered as a function with one
 * string parameter `input` (its grammar, when it has one, in that parameter's description: a
 * chat worker is not constrained by it, the client's tool checks it, as Codex's apply_patch
 * does); the worker's call comes back as a `custom_tool_call` item whose `input` is that string.
 * A namespace's members are offered as `<namespace>__<name>` and come back with their
 * `namespace` and own `name`. Two tools that the worker would see under one name are a 400.
 */
export class ResponsesTools {
  readonly definitions: ToolDefinition[] = [];
  readonly #entries = new Map<string, ToolEntry>();

  constructor(tools: readonly WireTool[] | null | undefined) {
    (tools ?? []).forEach((t, i) => {
      if (t.type === 'namespace') t.tools.forEach((m, j) => this.#add(m, `tools[${i}].tools[${j}].name`, t.name, t.description ?? undefined));
      else this.#add(t, `tools[${i}].name`);
    });
  }

  #add(t: Extract<WireTool, { type: 'function' | 'custom' }>, at: string, namespace?: string, namespaceDescription?: string): void {
    const name = workerToolName(t.name, namespace);
    if (this.#entries.has(name)) throw badField(at, `a tool named "${name}" is given twice (a namespace's tools are offered to the worker as <namespace>${NAMESPACE_SEPARATOR}<name>)`);
    this.#entries.set(name, { kind: t.type, name: t.name, ...(namespace !== undefined && { namespace }) });
    const about = [namespace !== undefined ? `[${namespace}${namespaceDescription ? `: ${namespaceDescription}` : ''}]` : '', t.description ?? ''].filter(Boolean).join(' ');
    const parameters =
      t.type === 'function'
        ? (t.parameters ?? { type: 'object', properties: {} })
        : { type: 'object', properties: { input: { type: 'string', description: customInputNote(t) } }, required: ['input'], additionalProperties: false };
    this.definitions.push({ name, ...(about && { description: about }), parameters });
  }

  /** tool_choice naming one of the tools, as the worker sees it (a 400 naming tool_choice.name when it is not one of them, or of another kind). */
  choice(tc: { type: 'function' | 'custom'; name: string; namespace?: string | null }): ToolChoice {
    const name = workerToolName(tc.name, tc.namespace);
    const e = this.#entries.get(name);
    if (!e) throw badField('tool_choice.name', `"${name}" is not one of the tools`);
    if (e.kind !== tc.type) throw badField('tool_choice.type', `"${name}" is a ${e.kind} tool, not a ${tc.type} tool`);
    return { name };
  }

  /** A worker's tool call as its output item: a function_call, or a custom_tool_call for a custom tool (with the namespace of a namespace's tool). */
  item(c: ToolCall, status: ItemStatus, id?: string): FunctionCallItem | CustomToolCallItem {
    const e = this.#entries.get(c.name);
    const ns = e?.namespace !== undefined ? { namespace: e.namespace } : {};
    if (e?.kind === 'custom') return { id: id ?? newItemId('ctc'), type: 'custom_tool_call', status, input: customInputOf(c.arguments), call_id: callIdOf(c), name: e.name, ...ns };
    return { id: id ?? newItemId('fc'), type: 'function_call', status, arguments: c.arguments, call_id: callIdOf(c), name: e?.name ?? c.name, ...ns };
  }
}

/** A custom tool's input from the worker's arguments: their `input` string (or their one string value); arguments that are no JSON object are the input as they are. */
export function customInputOf(args: string): string {
  let v: unknown;
  try {
    v = JSON.parse(args);
  } catch {
    return args;
  }
  if (!isObject(v)) return typeof v === 'string' ? v : args;
  if (typeof v.input === 'string') return v.input;
  const strings = Object.values(v).filter((x): x is string => typeof x === 'string');
  return strings.length === 1 ? strings[0]! : args;
}

/** The tools as a response echoes them (OpenAI's shapes, null where the request left a field out). */
function echoTool(t: WireTool): Record<string, unknown> {
  switch (t.type) {
    case 'function':
      return { type: 'function', name: t.name, description: t.description ?? null, parameters: t.parameters ?? null, strict: t.strict ?? null };
    case 'custom':
      return { type: 'custom', name: t.name, description: t.description ?? null, format: t.format ?? { type: 'text' } };
    case 'namespace':
      return { type: 'namespace', name: t.name, description: t.description ?? '', tools: t.tools.map(echoTool) };
  }
}

const messageText = (m: InputMessageItem | OutputMessageItem): string => m.content.map((p) => (p.type === 'refusal' ? p.refusal : p.text)).join('');

/** Where a chat message of the conversation came from: this request's input item (its index), an earlier response, or the instructions. */
export type MessageOrigin = number | 'previous_response_id' | 'instructions';

/**
 * The conversation as chat messages: `instructions` (a system message first), the earlier turns'
 * items, then this request's. An assistant message and the function calls after it are one
 * assistant message (text, then tool-call parts); a function_call_output is a tool message bound
 * to its call (by call_id, which must answer a function_call earlier in the conversation: a 400
 * naming `input[i].call_id` otherwise). `origins`, when given, gets each message's origin (the
 * first of this request's items that made it), for responsesParam.
 */
export function conversationMessages(history: readonly ConversationItem[], own: readonly ConversationItem[], instructions?: string | null, origins: MessageOrigin[] = []): ChatMessage[] {
  const messages: ChatMessage[] = [];
  origins.length = 0;
  const push = (m: ChatMessage, origin: MessageOrigin): void => {
    messages.push(m);
    origins.push(origin);
  };
  if (instructions) push({ role: 'system', content: instructions }, 'instructions');
  const callNames = new Map<string, string>();
  let turn: Array<TextPart | ToolCallPart> | undefined;
  let turnOrigin: MessageOrigin = 'previous_response_id';
  const flush = (): void => {
    if (!turn) return;
    const onlyText = turn.every((p) => p.type === 'text');
    push({ role: 'assistant', content: onlyText ? turn.map((p) => (p as TextPart).text).join('') : turn } satisfies AssistantMessage, turnOrigin);
    turn = undefined;
  };
  const into = (at: number): Array<TextPart | ToolCallPart> => {
    if (!turn) {
      turn = [];
      turnOrigin = 'previous_response_id';
    }
    if (at >= 0 && turnOrigin === 'previous_response_id') turnOrigin = at;
    return turn;
  };
  const all = [...history.map((item) => ({ item, at: -1 })), ...own.map((item, at) => ({ item, at }))];
  for (const { item, at } of all) {
    const origin: MessageOrigin = at >= 0 ? at : 'previous_response_id';
    switch (item.type) {
      case 'message':
        if (item.role === 'assistant') {
          // text after tool calls starts a new assistant message
          if (turn?.some((p) => p.type === 'tool-call')) flush();
          const text = messageText(item);
          const parts = into(at);
          if (text) parts.push({ type: 'text', text });
        } else {
          flush();
          const text = messageText(item);
          push(item.role === 'user' ? { role: 'user', content: text } : { role: 'system', content: text }, origin);
        }
        break;
      case 'function_call':
      case 'custom_tool_call': {
        const name = workerToolName(item.name, item.namespace);
        const args = item.type === 'function_call' ? item.arguments : JSON.stringify({ input: item.input });
        into(at).push({ type: 'tool-call', id: item.call_id, name, arguments: args });
        callNames.set(item.call_id, name);
        break;
      }
      case 'function_call_output':
      case 'custom_tool_call_output': {
        flush();
        const name = callNames.get(item.call_id);
        if (name === undefined) {
          const where = at >= 0 ? `input[${at}].call_id` : 'previous_response_id';
          throw badField(where, `"${item.call_id}" answers no function_call or custom_tool_call earlier in this conversation`);
        }
        push({ role: 'tool', content: [{ type: 'tool-result', toolCallId: item.call_id, name, content: item.output }] }, origin);
        break;
      }
    }
  }
  flush();
  return messages;
}

/**
 * A model's error names the chat message it refuses (fugu-ultra reads the conversation as chat
 * messages: `messages[4].tool_call_id`); on /v1/responses the param names what the client sent
 * instead: the input item the message came from (`input[2].call_id`, `input[0].content`,
 * `input[1]`), `previous_response_id` for an earlier turn's, `instructions`; `messages` is `input`.
 * Any other param is kept.
 */
export function responsesParam(param: string | null, origins: readonly MessageOrigin[]): string | null {
  if (param === null) return null;
  if (param === 'messages') return 'input';
  const m = /^messages\[(\d+)\](.*)$/.exec(param);
  if (!m) return param;
  const origin = origins[Number(m[1])];
  if (origin === undefined) return 'input';
  if (typeof origin === 'string') return origin;
  const field = m[2] === '.tool_call_id' ? '.call_id' : m[2]!.startsWith('.content') ? '.content' : '';
  return `input[${origin}]${field}`;
}

/** A request parameter's Responses name where it differs from its Chat Completions name (`max_tokens` -> `max_output_tokens`, `response_format` -> `text.format`, ...). */
const RESPONSES_NAME: ReadonlyMap<string, string> = new Map(
  Object.values(REQUEST_PARAMS).flatMap((p): Array<[string, string]> => (p.responses !== null && p.responses !== p.chat ? [[p.chat, p.responses]] : [])),
);

/**
 * A model's refusal in this request's terms: one that names a chat message (`messages[i]...`)
 * names the input item it came from instead (responsesParam); one of the conversation, the chain
 * (previous_response_id); a parameter, by its Responses name (`text.format`, `reasoning.effort`).
 */
export async function inResponsesTerms<T>(call: () => Promise<T>, origins: readonly MessageOrigin[]): Promise<T> {
  try {
    return await call();
  } catch (e) {
    if (!(e instanceof GatewayError) || !e.param) throw e;
    let param: string;
    if (e.param.startsWith('messages')) param = responsesParam(e.param, origins) ?? e.param;
    // the conversation a model keeps state under is the chain's (ChatInput.conversation), whatever the body's fugu object says
    else if (e.param === 'fugu.conversation') param = 'previous_response_id';
    else if (RESPONSES_NAME.has(e.param)) param = RESPONSES_NAME.get(e.param)!;
    else throw e;
    const message = e.message.startsWith(`${e.param}: `) ? `${param}: ${e.message.slice(e.param.length + 2)}` : e.message;
    throw new GatewayError(e.status, message, { type: e.type, param, code: e.errorCode, headers: e.headers, cost: e.cost });
  }
}

/** The request's parameters on a ChatRequest of these messages (`store` and `metadata` are the gateway's, not the worker's). */
export function toResponsesChatRequest(body: WireResponsesRequest, messages: ChatMessage[]): ChatRequest {
  const req: ChatRequest = { messages };
  const tools = new ResponsesTools(body.tools);
  if (tools.definitions.length > 0) req.tools = tools.definitions;
  if (body.tool_choice != null) {
    const tc = body.tool_choice;
    req.toolChoice = typeof tc === 'string' ? tc : tools.choice(tc);
  }
  if (body.temperature != null) req.temperature = body.temperature;
  if (body.top_p != null) req.topP = body.top_p;
  if (body.max_output_tokens != null) req.maxTokens = body.max_output_tokens;
  if (body.reasoning?.effort != null) req.reasoningEffort = body.reasoning.effort;
  const f = body.text?.format;
  if (f != null) {
    req.responseFormat =
      f.type === 'json_schema'
        ? { type: 'json_schema', name: f.name, schema: f.schema, ...(f.description !== undefined && { description: f.description }), ...(f.strict != null && { strict: f.strict }) }
        : { type: f.type };
  }
  if (body.text?.verbosity != null) req.verbosity = body.text.verbosity;
  if (body.parallel_tool_calls != null) req.parallelToolCalls = body.parallel_tool_calls;
  // safety_identifier replaces user in OpenAI's API; both name the end user
  const user = body.safety_identifier ?? body.user;
  if (user != null) req.user = user;
  if (body.service_tier != null) req.serviceTier = body.service_tier;
  if (body.prompt_cache_key != null) req.promptCacheKey = body.prompt_cache_key;
  return req;
}

export const fuguOptionsOf = (body: WireResponsesRequest): FuguOptions => body.fugu ?? {};

// ---- the response -----------------------------------------------------------------------------

export type ResponseStatus = 'in_progress' | 'completed' | 'incomplete' | 'failed';

/** `status` and `incomplete_details` of a finished answer: `length` is incomplete (max_output_tokens), as is a content filter. */
export function statusOf(r: FinishReason): { status: 'completed' | 'incomplete'; incomplete: { reason: 'max_output_tokens' | 'content_filter' } | null } {
  const out = finishReasonOut(r);
  if (out === 'length') return { status: 'incomplete', incomplete: { reason: 'max_output_tokens' } };
  if (out === 'content_filter') return { status: 'incomplete', incomplete: { reason: 'content_filter' } };
  return { status: 'completed', incomplete: null };
}

/**
 * Responses usage, with `cost` (USD number, as chat's usage.cost) and a model's extra fields. A
 * model gives its nested token counts as chat completions name them (fugu-ultra's
 * `conductor` / `workers`: `prompt_tokens`, `completion_tokens`, `cost`); here they take the
 * Responses API's names (`input_tokens`, `output_tokens`, `total_tokens`, the rest as it is), so one
 * usage object never mixes the two.
 */
export function responsesUsage(u: Usage, cost: bigint, extra?: Record<string, unknown>): Record<string, unknown> {
  return {
    input_tokens: u.inputTokens,
    input_tokens_details: { cached_tokens: u.cachedInputTokens ?? 0, cache_write_tokens: 0 },
    output_tokens: u.outputTokens,
    output_tokens_details: { reasoning_tokens: u.reasoningTokens ?? 0 },
    total_tokens: u.inputTokens + u.outputTokens,
    cost: usdNumber(cost),
    ...(extra && Object.fromEntries(Object.entries(extra).map(([k, v]) => [k, responsesTokens(v)]))),
  };
}

/** `{ prompt_tokens, completion_tokens, ...rest }` as `{ input_tokens, output_tokens, total_tokens, ...rest }`; anything else as it is. */
function responsesTokens(v: unknown): unknown {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return v;
  const { prompt_tokens: input, completion_tokens: output, ...rest } = v as Record<string, unknown>;
  if (typeof input !== 'number' || typeof output !== 'number') return v;
  return { input_tokens: input, output_tokens: output, total_tokens: input + output, ...rest };
}

const callIdOf = (c: ToolCall): string => c.id || `call_${hex(12)}`;

export const outputMessage = (text: string, status: ItemStatus, id = newItemId('msg')): OutputMessageItem => ({
  id,
  type: 'message',
  status,
  role: 'assistant',
  content: [{ type: 'output_text', text, annotations: [] }],
});

/** A whole answer's output items: the message when there is text, then one function_call (custom_tool_call for a custom tool) per tool call. */
export function outputItems(r: ChatResult, tools: ResponsesTools): ConversationItem[] {
  const { status } = statusOf(r.finishReason);
  const items: ConversationItem[] = [];
  if (r.text) items.push(outputMessage(r.text, status === 'incomplete' ? 'incomplete' : 'completed'));
  for (const c of r.toolCalls) items.push(tools.item(c, 'completed'));
  return items;
}

/**
 * Builds the `response` objects of one request: the request's parameters echoed as OpenAI does,
 * the SDK's required fields (null where the gateway does not know them), and what the answer
 * brings (status, model = the worker that answered, output, usage, the `fugu` extension).
 */
export class ResponseObject {
  readonly id: string;
  readonly createdAt: number;
  /** the request's tools and the way from a worker's tool call back to its output item */
  readonly tools: ResponsesTools;
  readonly #body: WireResponsesRequest;
  readonly #store: boolean;

  constructor(body: WireResponsesRequest, store: boolean, id = newResponseId(), createdAt = Math.floor(Date.now() / 1000)) {
    this.id = id;
    this.createdAt = createdAt;
    this.tools = new ResponsesTools(body.tools);
    this.#body = body;
    this.#store = store;
  }

  build(p: {
    status: ResponseStatus;
    model: string;
    output: readonly ConversationItem[];
    usage?: Record<string, unknown> | null;
    error?: { code: string; message: string } | null;
    incomplete?: { reason: string } | null;
    extension?: Record<string, unknown>;
  }): Record<string, unknown> {
    const b = this.#body;
    const done = p.status !== 'in_progress';
    return {
      id: this.id,
      object: 'response',
      created_at: this.createdAt,
      status: p.status,
      background: false,
      completed_at: p.status === 'completed' ? Math.floor(Date.now() / 1000) : null,
      error: p.error ?? null,
      incomplete_details: p.incomplete ?? null,
      instructions: b.instructions ?? null,
      max_output_tokens: b.max_output_tokens ?? null,
      max_tool_calls: null,
      model: p.model,
      output: p.output,
      parallel_tool_calls: b.parallel_tool_calls ?? true,
      previous_response_id: b.previous_response_id ?? null,
      prompt_cache_key: b.prompt_cache_key ?? null,
      reasoning: { effort: b.reasoning?.effort ?? null, summary: b.reasoning?.summary ?? null },
      safety_identifier: b.safety_identifier ?? null,
      service_tier: b.service_tier ?? null,
      store: this.#store,
      temperature: b.temperature ?? null,
      text: { format: b.text?.format ?? { type: 'text' }, verbosity: b.text?.verbosity ?? null },
      tool_choice: b.tool_choice ?? 'auto',
      tools: (b.tools ?? []).map(echoTool),
      top_logprobs: 0,
      top_p: b.top_p ?? null,
      truncation: 'disabled',
      usage: done ? (p.usage ?? null) : null,
      user: b.user ?? null,
      metadata: b.metadata ?? {},
      access_programs: null,
      ...(p.extension && { fugu: p.extension }),
    };
  }
}

/** What POST /v1/responses answers for a whole answer (`shell`: the request's response object), and its output items. */
export function completedResponse(shell: ResponseObject, c: Completion): { response: Record<string, unknown>; output: ConversationItem[] } {
  const output = outputItems(c.result, shell.tools);
  const { status, incomplete } = statusOf(c.result.finishReason);
  const response = shell.build({ status, model: c.model ?? c.worker, output, usage: responsesUsage(c.result.usage, c.cost, c.usageExtra), incomplete, ...(c.extension && { extension: c.extension }) });
  return { response, output };
}

// ---- streaming --------------------------------------------------------------------------------

/**
 * Writes one streamed response's SSE events (`event: <type>` and `data: <json>` lines, each with
 * `sequence_number` from 0) in OpenAI's order, and keeps the output items they built:
 * text deltas open a message item (output_item.added, content_part.added, output_text.delta...),
 * a tool call closes it (output_text.done, content_part.done, output_item.done) and is one
 * function_call item (added, arguments delta, arguments done, done).
 */
export class ResponseEventWriter {
  #seq = 0;
  readonly output: ConversationItem[] = [];
  #message: { item: OutputMessageItem; index: number; text: string } | undefined;
  readonly #tools: ResponsesTools;

  /** `tools`: the request's (a custom tool's call is a custom_tool_call item) */
  constructor(tools: ResponsesTools = new ResponsesTools([])) {
    this.#tools = tools;
  }

  event(type: string, fields: Record<string, unknown>): string {
    return `event: ${type}\ndata: ${JSON.stringify({ type, ...fields, sequence_number: this.#seq++ })}\n\n`;
  }

  /** response.created, response.in_progress */
  start(response: Record<string, unknown>): string {
    return this.event('response.created', { response }) + this.event('response.in_progress', { response });
  }

  /** A text delta (an empty one writes nothing: no message item is opened for it). */
  text(delta: string): string {
    if (delta === '') return '';
    let out = '';
    if (!this.#message) {
      const item = outputMessage('', 'in_progress');
      item.content = [];
      const index = this.output.length;
      this.output.push(item);
      this.#message = { item, index, text: '' };
      out += this.event('response.output_item.added', { output_index: index, item: structuredClone(item) });
      out += this.event('response.content_part.added', { item_id: item.id, output_index: index, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
      item.content = [{ type: 'output_text', text: '', annotations: [] }];
    }
    const m = this.#message;
    m.text += delta;
    return out + this.event('response.output_text.delta', { item_id: m.item.id, output_index: m.index, content_index: 0, delta, logprobs: [] });
  }

  /** Closes the open message item, if any (`status`: completed, or incomplete when the answer was cut). */
  closeMessage(status: ItemStatus = 'completed'): string {
    const m = this.#message;
    if (!m) return '';
    this.#message = undefined;
    const part: OutputTextPart = { type: 'output_text', text: m.text, annotations: [] };
    m.item.content = [part];
    m.item.status = status;
    return (
      this.event('response.output_text.done', { item_id: m.item.id, output_index: m.index, content_index: 0, text: m.text, logprobs: [] }) +
      this.event('response.content_part.done', { item_id: m.item.id, output_index: m.index, content_index: 0, part }) +
      this.event('response.output_item.done', { output_index: m.index, item: structuredClone(m.item) })
    );
  }

  /** After a failure: the open message item keeps its text so far, marked incomplete (no events). */
  abandon(): void {
    const m = this.#message;
    if (!m) return;
    this.#message = undefined;
    m.item.content = [{ type: 'output_text', text: m.text, annotations: [] }];
    m.item.status = 'incomplete';
  }

  /**
   * A whole tool call (adapters assemble streamed fragments): one function_call item (added,
   * arguments delta, arguments done, done), or for a custom tool one custom_tool_call item (added,
   * input delta, input done, done).
   */
  toolCall(c: ToolCall): string {
    let out = this.closeMessage();
    const done = this.#tools.item(c, 'completed');
    const index = this.output.length;
    this.output.push(done);
    if (done.type === 'custom_tool_call') {
      out += this.event('response.output_item.added', { output_index: index, item: { ...done, status: 'in_progress', input: '' } });
      if (done.input) out += this.event('response.custom_tool_call_input.delta', { item_id: done.id, output_index: index, delta: done.input });
      out += this.event('response.custom_tool_call_input.done', { item_id: done.id, output_index: index, input: done.input });
    } else {
      out += this.event('response.output_item.added', { output_index: index, item: { ...done, status: 'in_progress', arguments: '' } });
      if (done.arguments) out += this.event('response.function_call_arguments.delta', { item_id: done.id, output_index: index, delta: done.arguments });
      out += this.event('response.function_call_arguments.done', { item_id: done.id, output_index: index, arguments: done.arguments });
    }
    return out + this.event('response.output_item.done', { output_index: index, item: structuredClone(done) });
  }

  /** response.completed or response.incomplete, carrying the whole response. */
  finish(response: Record<string, unknown>): string {
    return this.event(response.status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response });
  }

  /** A failure after the stream started, as OpenAI sends it: an `error` event, then response.failed. */
  fail(error: OpenAIErrorBody['error'], response: Record<string, unknown>): string {
    return this.event('error', { code: error.code, message: error.message, param: error.param, error }) + this.event('response.failed', { response });
  }
}

/** The `error` object of a failed response (OpenAI's codes: rate_limit_exceeded, else server_error). */
export function responseError(status: number, message: string): { code: string; message: string } {
  return { code: status === 429 ? 'rate_limit_exceeded' : 'server_error', message };
}
