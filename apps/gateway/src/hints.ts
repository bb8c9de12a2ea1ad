// The hints and metadata a request sends: fields that change no answer (docs/parameters.md, "hint"
// parameters; the Responses API's client_metadata), kept with the request's row (`requests.hints`,
// migration 0020) as the client wrote them, so that a client's requests can be found by its own ids
// (Codex: its turn, session and thread ids). The end user (`user` / `safety_identifier`) has a
// column of its own (`end_user`).

/** Chat Completions' hint fields a row keeps. */
export const CHAT_HINTS = ['metadata', 'prompt_cache_key', 'service_tier', 'store'] as const;

/** The Responses API's (its `store` and `metadata` are also the gateway's own: the stored response). */
export const RESPONSES_HINTS = ['client_metadata', 'metadata', 'prompt_cache_key', 'service_tier'] as const;

/** The Anthropic Messages API's (its `metadata.user_id` is the end user; no other metadata key exists). */
export const MESSAGES_HINTS = ['service_tier', 'speed', 'cache_control'] as const;

/** The fields of `names` that `body` sets (not null), as sent; undefined when it sets none. */
export function hintsOf(body: Readonly<Record<string, unknown>>, names: readonly string[]): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {};
  for (const k of names) if (body[k] !== undefined && body[k] !== null) out[k] = body[k];
  return Object.keys(out).length > 0 ? out : undefined;
}
