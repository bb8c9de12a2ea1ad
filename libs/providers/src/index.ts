// @fugu/providers: the ChatModel interface and its adapters (openai, openai-compatible,
// anthropic, google, replay, scripted), typed provider errors, the factory and the response-cache key.
// Stub servers for tests live in '@fugu/providers/testing', not here.

// the spec itself lives in @fugu/core (the Conductor lib depends on core only); re-exported here
export type { ChatModel, ChatModelOptions, ChatRequest, ChatResult, ReasoningEffort, ResponseFormat, StreamEvent, TokenLogprob } from '@fugu/core';
export { DEFAULT_TIMEOUT_MS } from '@fugu/core';
export {
  AbortedError,
  AuthError,
  BadRequestError,
  ConnectionError,
  OverloadedError,
  ProviderError,
  RateLimitError,
  ServerError,
  TimeoutError,
  errorForStatus,
  isProviderError,
  isTransientError,
  parseRetryAfter,
  redactSecrets,
  type ProviderErrorFields,
  type ProviderErrorKind,
} from './errors.ts';
export { mapAnthropicError, mapGoogleError, mapOpenAIError, type ErrorContext } from './sdk-errors.ts';
export {
  OpenAIChatModel,
  OpenAICompatibleChatModel,
  type OpenAIChatModelOptions,
  type OpenAICompatibleChatModelOptions,
} from './openai.ts';
export { ANTHROPIC_DEFAULT_MAX_TOKENS, AnthropicChatModel, THINKING_BUDGET, type AnthropicChatModelOptions } from './anthropic.ts';
export { GEMINI2_THINKING_BUDGET, GoogleChatModel, THOUGHT_SIGNATURE_SEPARATOR, type GoogleChatModelOptions } from './google.ts';
export { notInDatasetMessage, REPLAY_ADVICE, REPLAY_DEFAULT_OUTPUT_TOKENS, ReplayChatModel, type ReplayHit, type ReplayStore } from './replay.ts';
export { SCRIPT_DEFAULTS, ScriptedChatModel, argumentsFor } from './scripted.ts';
export {
  DEFAULT_API_KEY_ENV,
  apiKeyVariables,
  createChatModel,
  type CreateChatModelOptions,
  type Env,
  type ReplayStoreSource,
} from './factory.ts';
export { canonicalJson, requestHash, type RequestHashSpec } from './request-hash.ts';
export {
  ALL_PARAMS,
  PARAM_SUPPORT,
  REQUEST_PARAMS,
  honours,
  requestedParams,
  supportsAll,
  unhonoured,
  unsupportedParams,
  type ParamSupport,
  type RequestParam,
  type Support,
} from './params.ts';
