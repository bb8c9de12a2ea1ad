// A replay step as a chat request carries it: the executor (libs/ultra) puts the step's replay
// inputs in the request metadata `replayStep` (a JSON string; metadata values are strings), and
// the replay provider's store (apps/provider-worker) answers the step with `answerReplayStep`.
//
// A step with no source (it sees nothing, or only its own worker's answers) answers the worker's
// own outcome s on the item: the recorded score when it is 0 or 1, a Bernoulli(score) draw (once
// per (seed, item, worker)) when it is fractional; the recorded answer text is kept where there
// is one. A step with sources gets `replayStep`'s simulated outcome: score 1 or 0 and the
// `replayAnswerText` marker. A step that reads earlier answers pays for them: its input tokens
// are its solo input tokens plus the output tokens of the answers it reads (`seenTokens`).

import { estimateTokens, InputError, type DatasetItem, type RecordedOutcome } from '@fugu/core';
import { replayAnswerText, replayItemOf, replayStep, type ReplayRule } from './model.ts';
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
  /** the other workers whose own answers reach the step by any path (`sourcesOf`) */
  sources: string[];
  /** output tokens of the earlier answers the step reads (its access list): added to its input tokens */
  seenTokens: number;
  /** the performing worker's parameters (resolveWorkerParams) */
  params: ReplayParams;
};

export function encodeReplayStepRequest(r: ReplayStepRequest): string {
  return JSON.stringify({ seed: r.seed, sources: [...r.sources], seenTokens: r.seenTokens, params: r.params });
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
  if (!Array.isArray(o.sources)) throw new InputError('sources must be a list of worker names', { field: 'metadata.replayStep.sources' });
  const sources = o.sources.map((x: unknown, i) => {
    if (typeof x !== 'string' || x === '') throw new InputError('each source is a worker name', { field: `metadata.replayStep.sources[${i}]` });
    return x;
  });
  if (typeof o.seenTokens !== 'number' || !Number.isInteger(o.seenTokens) || o.seenTokens < 0) throw new InputError('seenTokens must be an integer >= 0', { field: 'metadata.replayStep.seenTokens' });
  return { seed: o.seed, sources, seenTokens: o.seenTokens, params: validateReplayParams(o.params, 'metadata.replayStep.params') };
}

/**
 * A worker's recorded answer to an item in tokens, as the replay provider charges it: the
 * recorded counts, else estimated from the question's text (in) and the recorded answer, or
 * REPLAY_STEP_OUTPUT_TOKENS where there is none (out).
 */
export function recordedCallTokens(recorded: RecordedOutcome, prompt: string): { tokensIn: number; tokensOut: number } {
  return {
    tokensIn: recorded.tokensIn ?? estimateTokens(prompt),
    tokensOut: recorded.tokensOut ?? (recorded.answer !== undefined ? estimateTokens(recorded.answer) : REPLAY_STEP_OUTPUT_TOKENS),
  };
}

export type ReplayStepAnswer = {
  /** what the replay provider answers with (score, answer text, tokens) */
  outcome: RecordedOutcome;
  /** the replay cell: further fields of the answer's providerMetadata.replay */
  replay: { rule: ReplayRule; p: number; correct: boolean; s: boolean; f?: number; key: string; sources: string[] };
};

/**
 * Answers one replay step of `worker` on `item`, or undefined when the item has no recorded
 * outcome for the worker. `prompt` is the step's prompt text: its input tokens are estimated from
 * it (as the replay provider does) when the dataset recorded none.
 */
export function answerReplayStep(worker: string, item: Pick<DatasetItem, 'id' | 'recorded'>, req: ReplayStepRequest, prompt = ''): ReplayStepAnswer | undefined {
  const recorded = item.recorded?.[worker];
  if (!recorded) return undefined;
  const r = replayStep({ params: req.params, item: replayItemOf(item), worker, sources: req.sources, seed: req.seed });
  const replay = { rule: r.rule, p: r.p, correct: r.correct, s: r.s, ...(r.f !== undefined && { f: r.f }), key: r.key, sources: r.sources };
  // the worker's recorded tokens; output: as the replay provider counts it for the recorded outcome
  const solo = recordedCallTokens(recorded, prompt);
  const tokensOut = solo.tokensOut;
  // input: the solo input plus every answer the step reads
  const tokensIn = req.seenTokens > 0 ? solo.tokensIn + req.seenTokens : recorded.tokensIn;
  const tokens = { ...(tokensIn !== undefined && { tokensIn }), tokensOut };
  // no source: the worker's own outcome (the recorded score itself when it is 0 or 1)
  if (r.sources.length === 0) return { outcome: { ...recorded, ...tokens, score: r.correct ? 1 : 0, answer: recorded.answer ?? replayAnswerText(worker, r) }, replay };
  return { outcome: { score: r.correct ? 1 : 0, answer: replayAnswerText(worker, r), ...tokens }, replay };
}

/**
 * What a replay worker answers for a request on an item (the replay provider's store): a
 * Conductor step (request metadata `replayStep`) by the step model, anything else by the item's
 * recorded outcome; undefined when the item recorded nothing for the worker.
 */
export function answerReplayRequest(
  worker: string,
  item: Pick<DatasetItem, 'id' | 'recorded'>,
  prompt: string,
  metadata: Readonly<Record<string, string>> | undefined,
): { outcome: RecordedOutcome; replay?: ReplayStepAnswer['replay'] } | undefined {
  const step = metadata?.[REPLAY_STEP_METADATA];
  if (step !== undefined) return answerReplayStep(worker, item, decodeReplayStepRequest(step), prompt);
  const outcome = item.recorded?.[worker];
  return outcome && { outcome };
}
