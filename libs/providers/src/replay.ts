// Offline evaluation as in RouterBench: a "replay" worker answers only the questions of a
// dataset that recorded its outcomes, by returning what was recorded. No network, no cost,
// deterministic, so routers can be trained and evaluated on recorded data.

import { estimateTokens, messageText, type RecordedOutcome } from '@fugu/core';
import { AbortedError, BadRequestError } from './errors.ts';
import { buildResult, promptText } from './shared.ts';
import type { ChatModel, ChatRequest, ChatResult, StreamEvent } from '@fugu/core';

/** `replay`: further fields of the answer's `providerMetadata.replay` (e.g. a simulated step's rule and p). */
export type ReplayHit = { itemId: string; outcome: RecordedOutcome; replay?: Record<string, unknown> };

/**
 * One worker's recorded outcomes (the datasets lib implements it). `lookup` finds the item by
 * id when one is given, else by its prompt text. `metadata` is the request's metadata: a store
 * that simulates Conductor steps reads `replayStep` there (apps/provider-worker).
 */
export interface ReplayStore {
  lookup(prompt: string, itemId?: string, metadata?: Readonly<Record<string, string>>): ReplayHit | undefined;
}

/**
 * Output tokens assumed when the dataset recorded neither a token count nor an answer: a
 * typical short completion, so replayed costs stay in a realistic range.
 */
export const REPLAY_DEFAULT_OUTPUT_TOKENS = 256;

export class ReplayChatModel implements ChatModel {
  readonly provider = 'replay' as const;
  readonly modelId: string;
  readonly workerName: string;
  readonly #store: ReplayStore;

  /** `model` defaults to the worker name; it is what results report as the answering model. */
  constructor(workerName: string, store: ReplayStore, opts: { model?: string } = {}) {
    this.workerName = workerName;
    this.modelId = opts.model ?? workerName;
    this.#store = store;
  }

  /**
   * The recorded outcome of the item, found by `metadata.itemId` if given, else by the last
   * user message's text. Text: the recorded answer, else a marker naming worker and score.
   * Usage: the recorded token counts; where missing, estimated: input from the request's
   * text (about 4 characters a token), output from the answer, or REPLAY_DEFAULT_OUTPUT_TOKENS.
   */
  async generate(req: ChatRequest): Promise<ChatResult> {
    if (req.signal?.aborted) throw new AbortedError('replay', 'replay: call aborted by the caller');
    const lastUser = [...req.messages].reverse().find((m) => m.role === 'user');
    const itemId = req.metadata?.['itemId'];
    if (!lastUser && itemId === undefined) {
      throw new BadRequestError('replay', `replay: the replay worker "${this.workerName}" needs a user message (or metadata.itemId) to find the recorded item`);
    }
    const prompt = lastUser ? messageText(lastUser) : '';
    const hit = this.#store.lookup(prompt, itemId, req.metadata);
    if (!hit) {
      const what = itemId !== undefined ? `item id "${itemId}"` : `the prompt ${JSON.stringify(preview(prompt))}`;
      throw new BadRequestError(
        'replay',
        `replay: the replay worker "${this.workerName}" only answers questions of its dataset; ${what} is not in it ` +
          '(use a live provider for new questions)',
      );
    }
    const { outcome } = hit;
    const text = outcome.answer ?? `[replay:${this.workerName}] recorded score ${outcome.score}`;
    const outputEstimate = outcome.answer !== undefined ? estimateTokens(outcome.answer) : REPLAY_DEFAULT_OUTPUT_TOKENS;
    return buildResult({
      text,
      toolCalls: [],
      usage: {
        inputTokens: outcome.tokensIn ?? estimateTokens(promptText(req.messages)),
        outputTokens: outcome.tokensOut ?? outputEstimate,
      },
      finishReason: 'stop',
      model: this.modelId,
      providerMetadata: { replay: { ...hit.replay, itemId: hit.itemId, score: outcome.score } },
    });
  }

  /** The same answer as `generate`, as one text delta and the finish event. */
  async *stream(req: ChatRequest): AsyncGenerator<StreamEvent> {
    const r = await this.generate(req);
    if (r.text) yield { type: 'text-delta', text: r.text };
    yield { type: 'finish', finishReason: r.finishReason, usage: r.usage, model: r.model };
  }
}

function preview(s: string): string {
  const one = s.replace(/\s+/g, ' ').trim();
  return one.length > 80 ? `${one.slice(0, 77)}...` : one;
}
