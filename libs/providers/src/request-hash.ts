// The response-cache key: sha256 over everything that decides a provider's answer (provider,
// model, endpoint, effective sampling settings, messages, tools, tool choice, the standard
// parameters that change the answer: stop, seed, penalties, logit bias, logprobs, response
// format, parallel tool calls, verbosity) and the sample
// index (so n repetitions of one request are n cache entries). Secrets, signals, time limits
// and metadata hints are not part of it. Canonical JSON (sorted keys, undefined dropped) keeps
// the hash independent of property order.

import { createHash } from 'node:crypto';
import type { ChatMessage, ProviderKind, SamplingSettings } from '@fugu/core';
import { effectiveSampling } from './shared.ts';
import type { ChatRequest } from '@fugu/core';

/** The parts of a WorkerSpec that matter to the answer. */
export type RequestHashSpec = { provider: ProviderKind; model: string; baseUrl?: string; settings?: SamplingSettings };

// Bump when the hashed shape changes, so old cache entries stop matching.
const HASH_VERSION = 1;

export function requestHash(spec: RequestHashSpec, req: ChatRequest, sampleIndex: number): string {
  if (!Number.isInteger(sampleIndex) || sampleIndex < 0) {
    throw new RangeError(`sampleIndex must be a non-negative integer, got ${sampleIndex}`);
  }
  const s = effectiveSampling(req, spec.settings);
  const payload = {
    v: HASH_VERSION,
    provider: spec.provider,
    model: spec.model,
    baseUrl: spec.baseUrl,
    sampling: s,
    messages: req.messages.map(normaliseMessage),
    tools: req.tools,
    toolChoice: req.toolChoice,
    // only when set, so the hash of a request without them is what it always was
    params: answerParams(req),
    sampleIndex,
  };
  return createHash('sha256').update(canonicalJson(payload)).digest('hex');
}

/**
 * The standard parameters that change the answer (not user, service tier, store, metadata or
 * the prompt-cache key); undefined when the request sets none.
 */
function answerParams(req: ChatRequest): Record<string, unknown> | undefined {
  const p = {
    stop: req.stop?.length ? req.stop : undefined,
    seed: req.seed,
    frequencyPenalty: req.frequencyPenalty,
    presencePenalty: req.presencePenalty,
    logitBias: req.logitBias && Object.keys(req.logitBias).length > 0 ? req.logitBias : undefined,
    logprobs: req.logprobs || undefined,
    topLogprobs: req.topLogprobs,
    responseFormat: req.responseFormat && req.responseFormat.type !== 'text' ? req.responseFormat : undefined,
    parallelToolCalls: req.parallelToolCalls === false ? false : undefined,
    verbosity: req.verbosity,
  };
  return Object.values(p).some((v) => v !== undefined) ? p : undefined;
}

// A content list of text parts only means the same as the joined string.
function normaliseMessage(m: ChatMessage): unknown {
  if (m.role === 'tool' || typeof m.content === 'string') return m;
  const parts = m.content as ReadonlyArray<{ type: string; text?: string }>;
  if (parts.every((p) => p.type === 'text')) return { ...m, content: parts.map((p) => p.text ?? '').join('') };
  return m;
}

/** JSON with object keys sorted at every level and undefined members dropped. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map((x) => (x === undefined ? null : sortKeys(x)));
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) {
      const x = (v as Record<string, unknown>)[k];
      if (x !== undefined) out[k] = sortKeys(x);
    }
    return out;
  }
  return v;
}
