// Which standard request parameters each provider path can honour. A parameter "asks for
// something" only with a value that differs from the provider default (parallel_tool_calls
// false, logprobs true, a response_format other than text, a non-empty stop list, ...); such a
// parameter sent to a provider that cannot honour it would be silently dropped, so callers (the
// gateway) refuse it or route around it instead.
//
//   openai, openai-compatible   every field below (compatible servers get the same wire fields;
//                               one that does not know a field answers 400, which is passed on)
//   anthropic                   stop, parallel_tool_calls, user
//   google                      stop, seed, penalties, response_format (JSON mode)
//   replay                      every field: a replay worker returns what was recorded, so
//                               sampling parameters have nothing to change (they are ignored)
import type { ProviderKind } from '@fugu/core';
import type { ChatRequest } from '@fugu/core';

/** The standard fields of ChatRequest beyond messages/tools/sampling, by OpenAI wire name. */
export const STANDARD_PARAMS = {
  stop: 'stop',
  seed: 'seed',
  frequencyPenalty: 'frequency_penalty',
  presencePenalty: 'presence_penalty',
  logitBias: 'logit_bias',
  logprobs: 'logprobs',
  topLogprobs: 'top_logprobs',
  responseFormat: 'response_format',
  parallelToolCalls: 'parallel_tool_calls',
  user: 'user',
  serviceTier: 'service_tier',
  store: 'store',
  storeMetadata: 'metadata',
  verbosity: 'verbosity',
  promptCacheKey: 'prompt_cache_key',
} as const satisfies Partial<Record<keyof ChatRequest, string>>;

export type StandardParam = keyof typeof STANDARD_PARAMS;

const ALL = new Set(Object.keys(STANDARD_PARAMS) as StandardParam[]);

const SUPPORTED: Record<ProviderKind, ReadonlySet<StandardParam>> = {
  openai: ALL,
  'openai-compatible': ALL,
  anthropic: new Set<StandardParam>(['stop', 'parallelToolCalls', 'user']),
  google: new Set<StandardParam>(['stop', 'seed', 'frequencyPenalty', 'presencePenalty', 'responseFormat']),
  replay: ALL,
};

/** The standard parameters a request sets to something other than the provider default. */
export function requestedParams(req: ChatRequest): StandardParam[] {
  const out: StandardParam[] = [];
  for (const p of ALL) {
    const v = req[p];
    if (v === undefined || v === null) continue;
    if (p === 'stop' && (v as string[]).length === 0) continue;
    if (p === 'parallelToolCalls' && v === true) continue;
    if ((p === 'logprobs' || p === 'store') && v === false) continue;
    if (p === 'responseFormat' && (v as { type: string }).type === 'text') continue;
    if ((p === 'logitBias' || p === 'storeMetadata') && Object.keys(v as object).length === 0) continue;
    out.push(p);
  }
  return out;
}

/** The requested parameters a provider cannot honour, as OpenAI wire names (e.g. `seed`). */
export function unsupportedParams(provider: ProviderKind, req: ChatRequest): string[] {
  const ok = SUPPORTED[provider];
  return requestedParams(req)
    .filter((p) => !ok.has(p))
    .map((p) => STANDARD_PARAMS[p]);
}
