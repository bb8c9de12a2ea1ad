// Which request parameters each adapter can honour: one table, each row declared by the adapter
// itself (its class's static `params`, after the Vercel AI SDK's habit of adapters reporting the
// settings they cannot honour). A parameter "asks for something" only with a value that differs
// from the provider default (parallel_tool_calls false, logprobs true, a response_format other than
// text, a non-empty stop list, ...). Two kinds:
//
//   answer  changes the answer: an adapter honours it, or the caller (the gateway) refuses it with
//           a 400 naming the field, or routes around the worker; never sent and silently dropped
//   hint    changes no answer (the end user's id, the provider's service tier, its storage and
//           prompt-cache bucket): passed on where the provider takes it, ignored elsewhere, never
//           refused
//
// docs/parameters.md is generated from this table (apps/gateway/src/parameters.ts; a test keeps
// it true).
import type { ProviderKind } from '@fugu/core';
import type { ChatRequest } from '@fugu/core';
import { AnthropicChatModel } from './anthropic.ts';
import { GoogleChatModel } from './google.ts';
import { OpenAIChatModel, OpenAICompatibleChatModel } from './openai.ts';
import { ReplayChatModel } from './replay.ts';
import { ScriptedChatModel } from './scripted.ts';
import { REQUEST_PARAMS, unhonoured, type ParamSupport } from './param-support.ts';

export * from './param-support.ts';

/** The table: each provider kind's adapter's own declaration. */
export const PARAM_SUPPORT: Readonly<Record<ProviderKind, ParamSupport>> = {
  openai: OpenAIChatModel.params,
  'openai-compatible': OpenAICompatibleChatModel.params,
  anthropic: AnthropicChatModel.params,
  google: GoogleChatModel.params,
  replay: ReplayChatModel.params,
  scripted: ScriptedChatModel.params,
};

/** The requested parameters a provider cannot honour, as Chat Completions names (e.g. `seed`). */
export function unsupportedParams(provider: ProviderKind, req: ChatRequest): string[] {
  return unhonoured(PARAM_SUPPORT[provider], req).map((p) => REQUEST_PARAMS[p].chat);
}
