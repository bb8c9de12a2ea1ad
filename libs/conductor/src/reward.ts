// The reward of a workflow: 0 when it cannot be parsed, 1 when the final answer is correct,
// 0.5 otherwise (values configurable), minus an optional cost term mu x dollars. The item's
// verifier is handed in as a function (libs/datasets owns verifiers; this lib does not import it).

import { formatUsd, InputError } from '@fugu/core';
import type { ParseResult } from './text.ts';

export type RewardConfig = {
  /** the workflow could not be parsed (default 0) */
  parseFailure: number;
  /** the final answer is correct (default 1) */
  correct: number;
  /** the final answer is wrong (default 0.5) */
  incorrect: number;
  /** parsed, but the workflow ended without a final answer (a budget, a failed step; default 0) */
  unanswered: number;
  /** a verifier score at or above this is correct (default 1: only a full score) */
  correctAt: number;
  /** mu: reward units subtracted per dollar spent (default 0: no cost term) */
  costPerUsd: number;
};

export const DEFAULT_REWARD_CONFIG: Readonly<RewardConfig> = Object.freeze({ parseFailure: 0, correct: 1, incorrect: 0.5, unanswered: 0, correctAt: 1, costPerUsd: 0 });

export type RewardOutcome = 'unparsed' | 'unanswered' | 'correct' | 'incorrect';

export type WorkflowReward = {
  /** base - costTerm */
  reward: number;
  outcome: RewardOutcome;
  /** the verifier's score of the final answer, when there was one */
  score?: number;
  /** the reward before the cost term */
  base: number;
  /** dollars spent (from the picodollars, exactly: the nearest double to the decimal amount) */
  usd: number;
  /** costPerUsd x usd */
  costTerm: number;
};

/** A verifier's result (libs/datasets' Verdict has this shape) or a bare score in [0, 1]. */
export type VerifierResult = { score: number } | number;
/** Scores a final answer: e.g. `(answer) => verify(item, answer, metadata)` from @fugu/datasets. */
export type AnswerVerifier = (answer: string) => VerifierResult | Promise<VerifierResult>;

/** The reward config with defaults filled and every value checked (InputError naming the field). */
export function rewardConfig(overrides: Partial<RewardConfig> = {}): RewardConfig {
  const c = { ...DEFAULT_REWARD_CONFIG, ...overrides };
  for (const k of ['parseFailure', 'correct', 'incorrect', 'unanswered', 'correctAt', 'costPerUsd'] as const) {
    if (typeof c[k] !== 'number' || !Number.isFinite(c[k])) throw new InputError(`${k} must be a finite number, got ${String(c[k])}`, { field: k });
  }
  if (c.correctAt < 0 || c.correctAt > 1) throw new InputError(`correctAt must be in [0, 1], got ${c.correctAt}`, { field: 'correctAt' });
  if (c.costPerUsd < 0) throw new InputError(`costPerUsd must be >= 0, got ${c.costPerUsd}`, { field: 'costPerUsd' });
  return c;
}

/** Dollars of a picodollar amount as a number: the nearest double to the exact decimal. */
export function picoToUsd(pico: bigint): number {
  return Number(formatUsd(pico));
}

/**
 * The reward from what is known of a workflow: whether it parsed, the verifier's score of its
 * final answer (absent: no final answer), and what it cost (bigint picodollars, conductor and
 * workers together).
 */
export function rewardOf(input: { parsed: boolean; score?: number; costPico?: bigint }, overrides?: Partial<RewardConfig>): WorkflowReward {
  const c = rewardConfig(overrides);
  const usd = picoToUsd(input.costPico ?? 0n);
  const costTerm = c.costPerUsd * usd;
  const done = (outcome: RewardOutcome, base: number, score?: number): WorkflowReward => ({ reward: base - costTerm, outcome, ...(score !== undefined && { score }), base, usd, costTerm });
  if (!input.parsed) return done('unparsed', c.parseFailure);
  if (input.score === undefined) return done('unanswered', c.unanswered);
  const s = input.score;
  if (typeof s !== 'number' || !(s >= 0 && s <= 1)) throw new InputError(`a verifier score must be in [0, 1], got ${String(s)}`, { field: 'score' });
  return s >= c.correctAt ? done('correct', c.correct, s) : done('incorrect', c.incorrect, s);
}

/** Runs the verifier on the final answer (only when the workflow parsed and answered) and gives the reward. */
export async function scoreWorkflow(
  input: { parsed: ParseResult | boolean; finalAnswer?: string; verify: AnswerVerifier; costPico?: bigint },
  overrides?: Partial<RewardConfig>,
): Promise<WorkflowReward> {
  const parsed = typeof input.parsed === 'boolean' ? input.parsed : input.parsed.ok;
  const costPico = input.costPico ?? 0n;
  if (!parsed || input.finalAnswer === undefined) return rewardOf({ parsed, costPico }, overrides);
  rewardConfig(overrides); // a bad config fails before the verifier runs
  const v = await input.verify(input.finalAnswer);
  return rewardOf({ parsed, score: typeof v === 'number' ? v : v.score, costPico }, overrides);
}
