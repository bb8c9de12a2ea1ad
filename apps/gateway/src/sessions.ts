// The client session a request belongs to (`requests.session`, migration 0021): the id a client
// sends as its own for every request of one session (a coding harness's conversation), so that a
// session's turns can be listed in order with the worker `fugu` chose for each and what it cost
// (`fugu requests --session S`, `fugu report session:S`). Read from what each client actually sends
// (seen through test/harness's recording proxy), first found wins:
//
//   any client    the `x-fugu-session` header, or `fugu.session` in the body (chat completions,
//                 the Responses API, the Messages API): explicit, so a bad value is a 400 naming it
//   Claude Code   the `x-claude-code-session-id` header (2.1: a uuid, on every /v1/messages request)
//   Codex CLI     the `session-id` header (0.169: a uuid, also its thread id), or `session_id`
//   OpenCode      the `x-session-id` header (1.18: `ses_...`; also sent as x-session-affinity)
//   Anthropic     metadata.user_id when it is JSON with a `session_id` (Claude Code's shape)
//   Responses     client_metadata.session_id (Codex's)
//
// Not a session: `prompt_cache_key` (Codex sets it to its session id, but OpenAI's API means it as
// a key shared by requests with a common prefix, any number of sessions), the end user, a key.
// A session id is 1 to 128 visible ASCII characters and never one of the gateway's keys or a
// provider's (`fugu-sk-`, `sk-`): a client's value that is not is ignored (no session), an explicit
// one refused.
import type { FastifyRequest } from 'fastify';
import { badField } from './errors.ts';

/** The longest session id kept. */
export const SESSION_MAX = 128;

/** The routes whose requests carry a session. */
export const SESSION_ROUTES = new Set(['/v1/chat/completions', '/v1/responses', '/v1/messages']);

const SANE = /^[\x21-\x7e]+$/;
const SECRET = /^(fugu-sk-|sk-)/i;

/** Why `v` is not a session id, or undefined when it is one. */
export function sessionProblem(v: string): string | undefined {
  if (v.length === 0) return 'is empty';
  if (v.length > SESSION_MAX) return `is ${v.length} characters long; a session id has at most ${SESSION_MAX}`;
  if (!SANE.test(v)) return 'must be visible ASCII characters (no spaces or control characters)';
  if (SECRET.test(v)) return 'looks like an API key: a session id is never a secret';
  return undefined;
}

type Headers = FastifyRequest['headers'];
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const header = (h: Headers, name: string): string | undefined => {
  const v = h[name];
  return typeof v === 'string' ? v.trim() : undefined;
};

/** The session_id of Claude Code's metadata.user_id (a JSON object as a string), if it is one. */
function userIdSession(userId: unknown): unknown {
  if (typeof userId !== 'string' || !userId.startsWith('{')) return undefined;
  try {
    return (JSON.parse(userId) as Json)?.session_id;
  } catch {
    return undefined;
  }
}

/**
 * The session of a request from its headers and body (see the file comment), or undefined.
 * Throws a 400 naming `x-fugu-session` / `fugu.session` when the explicit one is not a session id.
 */
export function sessionOf(headers: Headers, body: unknown, route: string): string | undefined {
  const b = (typeof body === 'object' && body !== null ? body : {}) as Json;
  const explicit: Array<[string, unknown]> = [
    ['x-fugu-session', headers['x-fugu-session']],
    ['fugu.session', typeof b.fugu === 'object' && b.fugu !== null ? b.fugu.session : undefined],
  ];
  for (const [name, v] of explicit) {
    if (v === undefined || v === null) continue;
    if (typeof v !== 'string') throw badField(name, 'must be a string (a session id)');
    const problem = sessionProblem(v.trim());
    if (problem) throw badField(name, problem);
    return v.trim();
  }
  const found: unknown[] = [
    header(headers, 'x-claude-code-session-id'),
    header(headers, 'session-id'),
    header(headers, 'session_id'),
    header(headers, 'x-session-id'),
    route === '/v1/messages' ? userIdSession(b.metadata?.user_id) : undefined,
    route === '/v1/responses' ? b.client_metadata?.session_id : undefined,
  ];
  for (const v of found) if (typeof v === 'string' && sessionProblem(v) === undefined) return v;
  return undefined;
}
