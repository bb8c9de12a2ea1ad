// fugu-ultra's tool-call ids: the ids a client sees are fugu's own, never a worker's. Each names
// its workflow, step (the agent) and sequence number, and carries an HMAC-SHA256 over those, the
// conversation and the API key, so a forged or altered id, or one shown to another key, does not
// verify:   call_fu_<workflow>_<step>_<seq>_<signature, 22 base64url chars>
// Only [A-Za-z0-9_-] (every provider's and harness's id alphabet), at most 64 characters.
import { createHmac, timingSafeEqual } from 'node:crypto';

export type ToolCallRef = { workflowId: number; step: number; seq: number };

const ID_RE = /^call_fu_(\d{1,15})_(\d{1,2})_(\d{1,6})_([A-Za-z0-9_-]{22})$/;

function signature(secret: Buffer, keyId: string | null, conversationId: string, ref: ToolCallRef): string {
  return createHmac('sha256', secret).update(`fugu-ultra-call/v1|${keyId ?? '-'}|${conversationId}|${ref.workflowId}|${ref.step}|${ref.seq}`).digest('base64url').slice(0, 22);
}

export function signToolCallId(secret: Buffer, keyId: string | null, conversationId: string, ref: ToolCallRef): string {
  return `call_fu_${ref.workflowId}_${ref.step}_${ref.seq}_${signature(secret, keyId, conversationId, ref)}`;
}

/** The workflow, step and sequence an id names, unverified (undefined: not a fugu-ultra id). */
export function parseToolCallId(id: string): (ToolCallRef & { sig: string }) | undefined {
  const m = ID_RE.exec(id);
  if (!m) return undefined;
  return { workflowId: Number(m[1]), step: Number(m[2]), seq: Number(m[3]), sig: m[4]! };
}

/** Whether `id` was issued by this secret to this key in this conversation. */
export function verifyToolCallId(secret: Buffer, keyId: string | null, conversationId: string, id: string): boolean {
  const p = parseToolCallId(id);
  if (!p) return false;
  const want = Buffer.from(signature(secret, keyId, conversationId, p));
  const got = Buffer.from(p.sig);
  return want.length === got.length && timingSafeEqual(want, got);
}
