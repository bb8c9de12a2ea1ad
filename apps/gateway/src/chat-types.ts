// The types the model handlers (models.ts) and the wire formats (wire.ts, responses-wire.ts)
// share: the request's `fugu` extension object a handler reads, and the whole answer a handler
// gives back. Their own module, so that models.ts and wire.ts need not import each other.
import type { ChatResult } from '@fugu/providers';

/**
 * The fugu extension of a chat request: `{"fugu": {"lambda": 0.5, "workers": ["a", "b"]}}`;
 * fugu-ultra also reads `conversation`, `shared_memory` and `merge_tool_calls`; `session` names the
 * client session (sessions.ts: the request row's, for any model).
 */
export type FuguOptions = { lambda?: number; workers?: string[]; conversation?: string; shared_memory?: boolean; merge_tool_calls?: boolean; session?: string };

/**
 * A whole answer: `worker` names the answering worker (the response's `model`), `cost` is exact.
 * `extension` is the response's `fugu` object (fugu-ultra: the workflow that ran), `usageExtra`
 * extra fields of its `usage` (fugu-ultra: conductor and worker tokens apart); both optional.
 */
export type Completion = {
  result: ChatResult;
  worker: string;
  cost: bigint;
  headers: Record<string, string>;
  extension?: Record<string, unknown>;
  usageExtra?: Record<string, unknown>;
  /** the response's `model` when it is not the answering worker (fugu-ultra: the deployment's name) */
  model?: string;
};
