// The request parameters and the shape of an adapter's declaration of those it honours (see
// params.ts, which assembles the adapters' declarations into one table).
import type { ChatRequest } from '@fugu/core';

type ParamInfo = {
  /** its Chat Completions name */
  chat: string;
  /** its Responses name (null: not a Responses parameter) */
  responses: string | null;
  kind: 'answer' | 'hint';
};

/** The request parameters of ChatRequest, with their wire names and kind. */
export const REQUEST_PARAMS = {
  temperature: { chat: 'temperature', responses: 'temperature', kind: 'answer' },
  topP: { chat: 'top_p', responses: 'top_p', kind: 'answer' },
  maxTokens: { chat: 'max_tokens', responses: 'max_output_tokens', kind: 'answer' },
  reasoningEffort: { chat: 'reasoning_effort', responses: 'reasoning.effort', kind: 'answer' },
  tools: { chat: 'tools', responses: 'tools', kind: 'answer' },
  toolChoice: { chat: 'tool_choice', responses: 'tool_choice', kind: 'answer' },
  parallelToolCalls: { chat: 'parallel_tool_calls', responses: 'parallel_tool_calls', kind: 'answer' },
  stop: { chat: 'stop', responses: null, kind: 'answer' },
  seed: { chat: 'seed', responses: null, kind: 'answer' },
  frequencyPenalty: { chat: 'frequency_penalty', responses: null, kind: 'answer' },
  presencePenalty: { chat: 'presence_penalty', responses: null, kind: 'answer' },
  logitBias: { chat: 'logit_bias', responses: null, kind: 'answer' },
  logprobs: { chat: 'logprobs', responses: null, kind: 'answer' },
  topLogprobs: { chat: 'top_logprobs', responses: null, kind: 'answer' },
  responseFormat: { chat: 'response_format', responses: 'text.format', kind: 'answer' },
  verbosity: { chat: 'verbosity', responses: 'text.verbosity', kind: 'answer' },
  user: { chat: 'user', responses: 'user', kind: 'hint' },
  serviceTier: { chat: 'service_tier', responses: 'service_tier', kind: 'hint' },
  store: { chat: 'store', responses: null, kind: 'hint' },
  storeMetadata: { chat: 'metadata', responses: null, kind: 'hint' },
  promptCacheKey: { chat: 'prompt_cache_key', responses: 'prompt_cache_key', kind: 'hint' },
} as const satisfies Partial<Record<keyof ChatRequest, ParamInfo>>;

export type RequestParam = keyof typeof REQUEST_PARAMS;

export const ALL_PARAMS = Object.keys(REQUEST_PARAMS) as RequestParam[];

/** Honoured (true), not (false), or only for some values (`when`; `note` says which, for the docs). */
export type Support = boolean | { when: (req: ChatRequest) => boolean; note: string };

/** An adapter's declaration: per parameter, whether it honours it (a hint: whether it passes it on). */
export type ParamSupport = Readonly<Record<RequestParam, Support>>;

/** Every parameter honoured (OpenAI's own wire format), with `over` changed. */
export const supportsAll = (over: Partial<Record<RequestParam, Support>> = {}): ParamSupport =>
  ({ ...Object.fromEntries(ALL_PARAMS.map((p) => [p, true])), ...over }) as ParamSupport;

/** Only the parameters named honoured (as `honoured` says); every other one not. */
export const supportsOnly = (honoured: Partial<Record<RequestParam, Support>>): ParamSupport =>
  ({ ...Object.fromEntries(ALL_PARAMS.map((p) => [p, false])), ...honoured }) as ParamSupport;

/** Whether a set value asks for something beyond the provider default. */
function asks(p: RequestParam, v: unknown): boolean {
  if (v === undefined || v === null) return false;
  switch (p) {
    case 'stop':
    case 'tools':
      return (v as unknown[]).length > 0;
    case 'parallelToolCalls':
      return v === false;
    case 'logprobs':
    case 'store':
      return v === true;
    case 'toolChoice':
      return v !== 'auto';
    case 'responseFormat':
      return (v as { type: string }).type !== 'text';
    case 'logitBias':
    case 'storeMetadata':
      return Object.keys(v as object).length > 0;
    default:
      return true;
  }
}

/** The request parameters a request sets to something other than the provider default. */
export function requestedParams(req: ChatRequest): RequestParam[] {
  return ALL_PARAMS.filter((p) => asks(p, req[p]));
}

export function honours(s: Support, req: ChatRequest): boolean {
  return typeof s === 'boolean' ? s : s.when(req);
}

/** The answer-changing parameters a request asks for that `support` cannot honour (hints never). */
export function unhonoured(support: ParamSupport, req: ChatRequest): RequestParam[] {
  return requestedParams(req).filter((p) => REQUEST_PARAMS[p].kind === 'answer' && !honours(support[p], req));
}

