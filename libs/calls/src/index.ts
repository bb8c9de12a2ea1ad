// @fugu/calls: the one call pipeline for every model call (request hash, response cache, shared
// rate limits, provider adapter, exact cost, call row), and the chat-call job kind on top of it.
export * from './pipeline.ts';
export * from './limits.ts';
export * from './wire-error.ts';
export * from './call-writer.ts';
export * from './batching.ts';
export * from './chat-calls.ts';

/** Redis hash counting every provider call started, per provider (the fault tests read re-executions from it). */
export const providerCallCounterKey = (prefix: string): string => `${prefix}:stats:provider-calls`;
