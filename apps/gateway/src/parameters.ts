// docs/parameters.md, generated: what the gateway does with every Chat Completions and Responses
// request parameter, for each model kind. The request parameters' rows come from the adapters'
// own declarations (PARAM_SUPPORT in @fugu/providers) and fugu-ultra's (ULTRA_PARAMS); the other
// fields' from the tables below. parameters.test.ts checks that the file holds this text and that
// every field the request schemas know (or refuse) has a row.
import { ALL_PARAMS, PARAM_SUPPORT, REQUEST_PARAMS, type RequestParam, type Support } from '@fugu/providers';
import type { ProviderKind } from '@fugu/core';
import { REFUSED as RESPONSES_REFUSED } from './responses-wire.ts';
import { ULTRA_PARAMS } from './ultra.ts';
import { REFUSED as CHAT_REFUSED } from './wire.ts';

/** Chat Completions fields that are not request parameters of an adapter: what the gateway does with each. */
export const CHAT_FIELDS: Readonly<Record<string, string>> = {
  model: '`fugu`, `fugu-ultra` or a worker\'s name (else a 404 naming `model`)',
  messages: 'the conversation (system, developer, user with text and image parts, assistant with tool calls, tool)',
  max_completion_tokens: 'as `max_tokens` (it wins when both are sent)',
  safety_identifier: 'as `user` (it wins when both are sent): a hint',
  stream: 'honoured: `chat.completion.chunk` events (with `logprobs`: a 400 naming `logprobs`)',
  stream_options: '`include_usage` honoured (the final chunk\'s usage, with `cost`)',
  n: 'only 1 (another value: a 400 naming `n`)',
  modalities: 'only `["text"]` (another: a 400 naming `modalities`)',
  fugu: '`lambda` (fugu only: a 400 naming `fugu.lambda` elsewhere), `workers` (every model), `conversation`, `shared_memory`, `merge_tool_calls` (fugu-ultra only: a 400 naming the field elsewhere)',
};

/** Responses fields that are not request parameters of an adapter (or are the gateway's own). */
export const RESPONSES_FIELDS: Readonly<Record<string, string>> = {
  model: 'as on Chat Completions',
  input: 'the conversation\'s new items (message, function_call, function_call_output; other kinds: a 400 naming the item)',
  instructions: 'honoured: a system message first (never carried over a chain)',
  previous_response_id: 'honoured: continues the chain of stored responses (the conversation fugu-ultra keeps)',
  store: 'the gateway\'s: stores the response (default true)',
  metadata: 'the gateway\'s: stored with the response and kept with the request\'s row (`requests.hints`)',
  client_metadata: 'a hint: the client\'s own tags (Codex: its turn, session and thread ids; at most 32 keys, values up to 8,192 characters), kept with the request\'s row (`requests.hints`), not sent to the worker',
  safety_identifier: 'as `user` (it wins when both are sent): a hint',
  stream: 'honoured: the Responses SSE events',
  stream_options: 'accepted (`include_obfuscation`: the gateway adds no obfuscation)',
  text: '`format` and `verbosity`: see `text.format`, `text.verbosity`',
  reasoning: '`effort`: see `reasoning.effort`; `summary` (and the deprecated `generate_summary`): only `"auto"` (the workers give no reasoning summary, so none comes back; `concise`, `detailed`: a 400 naming them)',
  truncation: 'only `"disabled"` (another: a 400 naming `truncation`)',
  include: 'only `reasoning.encrypted_content` (accepted: the answers have no reasoning items, so there is none to include); another value: a 400 naming `include[i]`',
  background: 'only `false` (another: a 400 naming `background`)',
  fugu: 'as on Chat Completions, but `fugu.conversation` is a 400 naming it for every model: a Responses conversation is its chain (previous_response_id)',
};

const PROVIDERS: ProviderKind[] = ['openai', 'openai-compatible', 'anthropic', 'google', 'replay', 'scripted'];

function cell(p: RequestParam, s: Support): string {
  const hint = REQUEST_PARAMS[p].kind === 'hint';
  if (s === true) return hint ? 'sent' : 'yes';
  if (s === false) return hint ? 'ignored' : '**400**';
  return `only ${s.note}`;
}

const code = (s: string | null): string => (s === null ? '-' : `\`${s}\``);

/** The generated body of docs/parameters.md between its markers. */
export function parametersMarkdown(): string {
  const out: string[] = [];
  out.push('| Chat Completions | Responses | kind | ' + PROVIDERS.join(' | ') + ' | fugu-ultra |');
  out.push('|' + ' --- |'.repeat(4 + PROVIDERS.length));
  for (const p of ALL_PARAMS) {
    const info = REQUEST_PARAMS[p];
    const u = ULTRA_PARAMS[p];
    out.push(`| ${code(info.chat)} | ${code(info.responses)} | ${info.kind} | ${PROVIDERS.map((k) => cell(p, PARAM_SUPPORT[k][p])).join(' | ')} | ${u === false ? '**400**' : u} |`);
  }
  out.push('');
  out.push('The other Chat Completions fields:');
  out.push('');
  out.push('| field | what the gateway does |');
  out.push('| --- | --- |');
  for (const [k, v] of Object.entries(CHAT_FIELDS)) out.push(`| \`${k}\` | ${v} |`);
  for (const [k, v] of Object.entries(CHAT_REFUSED)) out.push(`| \`${k}\` | **400**: ${v} |`);
  out.push('');
  out.push('The other Responses fields:');
  out.push('');
  out.push('| field | what the gateway does |');
  out.push('| --- | --- |');
  for (const [k, v] of Object.entries(RESPONSES_FIELDS)) out.push(`| \`${k}\` | ${v} |`);
  for (const [k, v] of Object.entries(RESPONSES_REFUSED)) out.push(`| \`${k}\` | **400**: ${v} |`);
  return out.join('\n');
}

export const BEGIN_MARK = '<!-- generated by apps/gateway/src/parameters.ts: do not edit by hand -->';
export const END_MARK = '<!-- end of generated text -->';
