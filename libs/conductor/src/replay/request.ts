// A replay step as a chat request carries it: the executor (libs/ultra) puts the step's replay
// inputs in the request metadata `replayStep` (a JSON string; metadata values are strings), and
// the replay provider's store (apps/provider-worker) answers the step with `answerReplayStep`.
//
// A step that sees no earlier step answers the worker's own outcome s on the item: the recorded
// score when it is 0 or 1, a Bernoulli(score) draw (once per (seed, item, worker)) when it is
// fractional, so the final answer's verdict and what later steps see are the same outcome; the
// recorded answer text is kept where there is one. A step that sees earlier answers gets `replayStep`'s simulated outcome: score 1 or 0 and
// the `replayAnswerText` marker.

import { estimateTokens, InputError, type DatasetItem, type RecordedOutcome } from '@fugu/core';
import { replayAnswerText, replayItemOf, replayStep, type ReplayRule, type VisibleAnswer } from './model.ts';
import { validateReplayParams, type ReplayParams } from './params.ts';

/**
 * Output tokens of a replayed step whose worker recorded neither a token count nor an answer:
 * the replay provider's default for a typical short completion (REPLAY_DEFAULT_OUTPUT_TOKENS in
 * libs/providers), so a step's cost does not depend on the length of its marker text.
 */
export const REPLAY_STEP_OUTPUT_TOKENS = 256;

/** The request metadata key of a replay step. */
export const REPLAY_STEP_METADATA = 'replayStep';

export type ReplayStepRequest = {
  seed: number;
  /** `stepKeyOf(worker, visible steps' keys)` */
  key: string;
  /** the earlier answers the step sees: who gave them, and whether they were (simulated) correct */
  visible: VisibleAnswer[];
  /** the performing worker's parameters (resolveWorkerParams) */
  params: ReplayParams;
};

export function encodeReplayStepRequest(r: ReplayStepRequest): string {
  return JSON.stringify({ seed: r.seed, key: r.key, visible: r.visible.map((v) => ({ worker: v.worker, correct: v.correct })), params: r.params });
}

/** Reads a `replayStep` metadata value back; anything malformed is an InputError naming the field. */
export function decodeReplayStepRequest(text: string): ReplayStepRequest {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new InputError('replayStep metadata is not JSON', { field: 'metadata.replayStep' });
  }
  const o = v as Partial<ReplayStepRequest> | null;
  if (o === null || typeof o !== 'object') throw new InputError('replayStep metadata must be an object', { field: 'metadata.replayStep' });
  if (typeof o.seed !== 'number' || !Number.isInteger(o.seed)) throw new InputError('seed must be an integer', { field: 'metadata.replayStep.seed' });
  if (typeof o.key !== 'string' || o.key === '') throw new InputError('key must be a non-empty string', { field: 'metadata.replayStep.key' });
  if (!Array.isArray(o.visible)) throw new InputError('visible must be a list', { field: 'metadata.replayStep.visible' });
  const visible = o.visible.map((x: unknown, i) => {
    const e = x as Partial<VisibleAnswer> | null;
    if (!e || typeof e.worker !== 'string' || typeof e.correct !== 'boolean') throw new InputError('each visible answer is {worker, correct}', { field: `metadata.replayStep.visible[${i}]` });
    return { worker: e.worker, correct: e.correct };
  });
  return { seed: o.seed, key: o.key, visible, params: validateReplayParams(o.params, 'metadata.replayStep.params') };
}

export type ReplayStepAnswer = {
  /** what the replay provider answers with (score, answer text, the worker's recorded tokens) */
  outcome: RecordedOutcome;
  /** the replay cell: further fields of the answer's providerMetadata.replay */
  replay: { rule: ReplayRule; p: number; correct: boolean; s: boolean; f?: number; key: string };
};

/**
 * Answers one replay step of `worker` on `item`, or undefined when the item has no recorded
 * outcome for the worker.
 */
export function answerReplayStep(worker: string, item: Pick<DatasetItem, 'id' | 'recorded'>, req: ReplayStepRequest): ReplayStepAnswer | undefined {
  const recorded = item.recorded?.[worker];
  if (!recorded) return undefined;
  const r = replayStep({ params: req.params, item: replayItemOf(item), worker, visible: req.visible, seed: req.seed, stepKey: req.key });
  const replay = { rule: r.rule, p: r.p, correct: r.correct, s: r.s, ...(r.f !== undefined && { f: r.f }), key: req.key };
  // the worker's recorded tokens; output: as the replay provider counts it for the recorded outcome
  const tokensOut = recorded.tokensOut ?? (recorded.answer !== undefined ? estimateTokens(recorded.answer) : REPLAY_STEP_OUTPUT_TOKENS);
  const tokens = { ...(recorded.tokensIn !== undefined && { tokensIn: recorded.tokensIn }), tokensOut };
  // nothing visible: the worker's own outcome (the recorded score itself when it is 0 or 1)
  if (req.visible.length === 0) return { outcome: { ...recorded, ...tokens, score: r.correct ? 1 : 0, answer: recorded.answer ?? replayAnswerText(worker, r) }, replay };
  return { outcome: { score: r.correct ? 1 : 0, answer: replayAnswerText(worker, r), ...tokens }, replay };
}
