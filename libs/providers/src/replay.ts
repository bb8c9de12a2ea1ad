// Offline evaluation as in RouterBench: a "replay" worker answers only the questions of a
// dataset that recorded its outcomes, by returning what was recorded. No network, no cost,
// deterministic, so routers can be trained and evaluated on recorded data.

import { estimateTokens, messageText, type RecordedOutcome } from '@fugu/core';
import { AbortedError, BadRequestError } from './errors.ts';
import { buildResult, promptText } from './shared.ts';
import { supportsAll, type ParamSupport } from './param-support.ts';
import type { ChatModel, ChatRequest, ChatResult, FinishReason, StreamEvent } from '@fugu/core';

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

/** What to do when a prompt is not a question of the replay workers' dataset. */
export const REPLAY_ADVICE =
  'to try any prompt, serve the scripted pool of simulated workers (fugu gateway --pool scripted); ' +
  'to use live workers, serve a pool file whose workers have their API keys in the environment (fugu gateway --pool pool.yaml)';

/**
 * The refusal of a message that is not a question of the replay workers' dataset: the message
 * quoted (the first 80 characters), how questions match, and REPLAY_ADVICE. `who`: the replay
 * worker, or the workers of a workflow.
 */
export function notInDatasetMessage(message: string, who: string): string {
  return `${who} only answers questions of its dataset (their recorded outcomes): your message ${JSON.stringify(preview(message))} is not one of them ` +
    `(a question matches ignoring case, spacing and trailing punctuation); ${REPLAY_ADVICE}`;
}

export class ReplayChatModel implements ChatModel {
  /**
   * A recorded answer cannot be sampled again: what reshapes it is honoured (max_tokens and stop
   * cut it, as the model would have stopped), what would have sampled another answer is not.
   */
  static readonly params: ParamSupport = supportsAll({
    temperature: false,
    topP: false,
    reasoningEffort: false,
    toolChoice: { when: (req) => req.toolChoice === undefined || req.toolChoice === 'auto' || req.toolChoice === 'none', note: '"auto" or "none" (a recorded answer calls no tool)' },
    seed: false,
    frequencyPenalty: false,
    presencePenalty: false,
    logitBias: false,
    logprobs: false,
    topLogprobs: false,
    responseFormat: false,
    verbosity: false,
    // hints: nowhere to send them
    user: false,
    serviceTier: false,
    store: false,
    storeMetadata: false,
    promptCacheKey: false,
  });
  readonly params = ReplayChatModel.params;
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
      if (itemId !== undefined) {
        throw new BadRequestError('replay', `replay: the replay worker "${this.workerName}" only answers questions of its dataset; item id "${itemId}" is not in it (or has no recorded outcome for this worker)`);
      }
      throw new BadRequestError('replay', notInDatasetMessage(prompt, `the replay worker "${this.workerName}"`));
    }
    const { outcome } = hit;
    const recorded = outcome.answer ?? `[replay:${this.workerName}] recorded score ${outcome.score}`;
    const outputEstimate = outcome.answer !== undefined ? estimateTokens(outcome.answer) : REPLAY_DEFAULT_OUTPUT_TOKENS;
    const { text, outputTokens, finishReason } = cut(recorded, outcome.tokensOut ?? outputEstimate, req);
    return buildResult({
      text,
      toolCalls: [],
      usage: {
        inputTokens: outcome.tokensIn ?? estimateTokens(promptText(req.messages)),
        outputTokens,
      },
      finishReason,
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

/**
 * The recorded answer as the request's stop sequences and output limit would have ended it: cut
 * before the first stop sequence (finish `stop`), then to maxTokens when its tokens are more
 * (about 4 characters a token; finish `length`, outputTokens = maxTokens).
 */
export function cut(text: string, outputTokens: number, req: Pick<ChatRequest, 'stop' | 'maxTokens'>): { text: string; outputTokens: number; finishReason: FinishReason } {
  let out = text;
  let tokens = outputTokens;
  const at = Math.min(...(req.stop ?? []).filter((s) => s !== '').map((s) => (out.includes(s) ? out.indexOf(s) : Infinity)));
  if (at !== Infinity) {
    out = out.slice(0, at);
    tokens = Math.min(tokens, estimateTokens(out));
  }
  if (req.maxTokens !== undefined && tokens > req.maxTokens) {
    return { text: out.slice(0, req.maxTokens * 4), outputTokens: req.maxTokens, finishReason: 'length' };
  }
  return { text: out, outputTokens: tokens, finishReason: 'stop' };
}

function preview(s: string): string {
  const one = s.replace(/\s+/g, ' ').trim();
  return one.length > 80 ? `${one.slice(0, 77)}...` : one;
}
