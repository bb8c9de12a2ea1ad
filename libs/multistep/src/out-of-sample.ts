// The out-of-sample check of the step model (issue 29, 3): fit on half of the questions, and on
// the other half predict a round's accuracy, the share of questions its majority gets right and
// the share any agent gets right, from the round before's recorded outcomes alone; then set the
// prediction, with its 95% interval, against what was recorded. The interval carries both the
// parameters' uncertainty (a bootstrap of the fit half) and the draws of the outcomes themselves
// (each parameter draw simulates the round once). The check can fail: an observed figure outside
// its interval is a miss, and a miss says the model (not the check) must change.

import { normalQuantile, rng } from '@fugu/core';
import { estimateReplayParams, percentileInterval, stepProbability, type ReplayParams } from '@fugu/conductor';
import { observationsOf, stepOf } from './observations.ts';
import type { MultistepQuestion } from './types.ts';

/** The two halves, by a seeded draw per question id (the same seed, the same halves). */
export function splitHalves(questions: readonly MultistepQuestion[], seed: number | string): { fit: MultistepQuestion[]; test: MultistepQuestion[] } {
  const fit: MultistepQuestion[] = [], test: MultistepQuestion[] = [];
  for (const q of questions) (rng('fugu-multistep-halves', seed, q.source, q.id).next() < 0.5 ? fit : test).push(q);
  return { fit, test };
}

export type Statistic = 'accuracy' | 'majority' | 'any';
export const STATISTICS: readonly Statistic[] = ['accuracy', 'majority', 'any'];

export type Predicted = {
  statistic: Statistic;
  /** the mean over the parameter draws' simulations */
  predicted: number;
  /** 95% interval of the simulated statistic */
  interval: [number, number];
  observed: number;
  /** observed within the interval */
  inside: boolean;
  /**
   * The two-sided predictive p-value (mid-p: ties count half): how surprising the observed
   * figure is under the model. With many figures checked some fall outside their 95% intervals
   * by chance (1 in 20); a p-value below 0.001 is a miss no chance explains.
   */
  p: number;
};

export type RoundPrediction = {
  /** the round predicted (1: the second), from the round before */
  round: number;
  /** questions of the test half that reached the round */
  questions: number;
  /** answers of the round, and how many of them the model predicts (the others are recorded outcomes, kept as they are) */
  answers: number;
  modelled: number;
  stats: Predicted[];
};

/** The round's statistics from its answers' outcomes: accuracy over answers, majority (more than half right) and any, over questions. */
function statsOf(outcomes: readonly boolean[][]): Record<Statistic, number> {
  let right = 0, n = 0, majority = 0, any = 0;
  for (const q of outcomes) {
    const k = q.filter(Boolean).length;
    right += k;
    n += q.length;
    if (k * 2 > q.length) majority++;
    if (k > 0) any++;
  }
  return { accuracy: n === 0 ? 0 : right / n, majority: outcomes.length === 0 ? 0 : majority / outcomes.length, any: outcomes.length === 0 ? 0 : any / outcomes.length };
}

/** The questions that reached round `round` (some answer there), and that round's recorded statistics. */
function reachedRound(questions: readonly MultistepQuestion[], round: number): { reached: MultistepQuestion[]; observed: Record<Statistic, number> } {
  const reached = questions.filter((q) => q.rounds.length > round && q.rounds[round]!.length > 0);
  return { reached, observed: statsOf(reached.map((q) => q.rounds[round]!.map((a) => a.correct))) };
}

/**
 * One simulated round of a question: each answer the model describes is right with its step
 * probability P, the answers of one question sharing a part of their draw (a Gaussian copula
 * with correlation rho: right iff sqrt(rho) z_question + sqrt(1 - rho) z_answer < Φ⁻¹(P)), so
 * each answer's own chance is P whatever rho, and rho only makes a question's answers move
 * together. rho 0: independent draws (the replay step model as it is). The answers the model
 * does not describe keep their recorded outcomes; an answer that read answers of its own round
 * reads the simulated ones.
 */
export function simulateRound(q: MultistepQuestion, round: number, params: ReplayParams, rho: number, r: ReturnType<typeof rng>): boolean[] {
  const shared = r.normal();
  const now = new Map<number, boolean>();
  for (const a of q.rounds[round]!) {
    const st = stepOf(q, round, a, now);
    if (typeof st === 'string') {
      now.set(a.agent, a.correct);
      continue;
    }
    const z = Math.sqrt(rho) * shared + Math.sqrt(1 - rho) * r.normal();
    // (P can leave [0, 1] by a rounding error at a corner)
    now.set(a.agent, z < normalQuantile(Math.min(1, Math.max(0, stepProbability(params, st.s, st.f)))));
  }
  return [...now.values()];
}

/**
 * The correlation of a question's answers, by the method of moments on the questions given (the
 * fit half): the rho of a grid (0 to 0.95 by 0.05) whose simulated share of questions with any
 * answer right and with the majority right (40 replicates each) lies nearest the recorded ones.
 */
export function estimateRho(questions: readonly MultistepQuestion[], round: number, params: ReplayParams, seed: number | string): number {
  const { reached, observed } = reachedRound(questions, round);
  if (reached.length === 0) return 0;
  let best = 0, bestErr = Infinity;
  for (let k = 0; k <= 19; k++) {
    const rho = k / 20;
    const r = rng('fugu-multistep-rho', seed, round);
    let any = 0, majority = 0;
    for (let i = 0; i < 40; i++) {
      const st = statsOf(reached.map((q) => simulateRound(q, round, params, rho, r)));
      any += st.any / 40;
      majority += st.majority / 40;
    }
    const err = (any - observed.any) ** 2 + (majority - observed.majority) ** 2;
    if (err < bestErr) [best, bestErr] = [rho, err];
  }
  return best;
}

/**
 * Predicts round `round` of the test questions from the round before's recorded outcomes, under
 * each of `draws` (parameter sets, e.g. the fit half's bootstrap) and the parameters a question
 * gets (`paramsOf`: one set for all, or one per level); each draw simulates every modelled answer
 * once (seeded).
 */
export function predictRound(
  test: readonly MultistepQuestion[],
  round: number,
  paramsOf: (q: MultistepQuestion, draw: number) => ReplayParams,
  draws: number,
  seed: number | string,
  rho: number | ((q: MultistepQuestion) => number) = 0,
): RoundPrediction {
  const rhoOf = typeof rho === 'number' ? () => rho : rho;
  const { reached, observed } = reachedRound(test, round);
  const modelled = reached.reduce((t, q) => t + q.rounds[round]!.filter((a) => typeof stepOf(q, round, a) !== 'string').length, 0);
  const sims: Record<Statistic, number[]> = { accuracy: [], majority: [], any: [] };
  const r = rng('fugu-multistep-predict', seed, round);
  for (let d = 0; d < draws; d++) {
    // each question's answers in their order: an answer that read answers of this round reads the simulated ones
    const outcomes = reached.map((q) => simulateRound(q, round, paramsOf(q, d), rhoOf(q), r));
    const st = statsOf(outcomes);
    for (const s of STATISTICS) sims[s].push(st[s]);
  }
  const stats = STATISTICS.map((statistic): Predicted => {
    const v = sims[statistic];
    const interval = percentileInterval(v);
    const predicted = v.reduce((t, x) => t + x, 0) / v.length;
    const obs = observed[statistic];
    const below = v.filter((x) => x < obs - 1e-12).length, ties = v.filter((x) => Math.abs(x - obs) <= 1e-12).length;
    const lower = (below + ties / 2) / v.length;
    const p = Math.min(1, 2 * Math.min(lower, 1 - lower));
    return { statistic, predicted, interval, observed: obs, inside: obs >= interval[0] - 1e-12 && obs <= interval[1] + 1e-12, p };
  });
  const answers = reached.reduce((t, q) => t + q.rounds[round]!.length, 0);
  return { round, questions: reached.length, answers, modelled, stats };
}

export type OutOfSample = {
  fitQuestions: number;
  testQuestions: number;
  /** the fit half's estimate (point and bootstrap intervals), by fit group (`all`, or e.g. a level) */
  fits: Record<string, ReturnType<typeof estimateReplayParams>>;
  /** the test half's predictions, by report group */
  predictions: Record<string, RoundPrediction>;
  /** with `correlated`: each fit group's rho (estimateRho on the fit half, at its point estimate) */
  rho?: Record<string, number>;
};

/**
 * The whole check: split, fit the fit half (one parameter set per `fitBy` group, e.g. per MATH
 * level; default one for all), bootstrap each `samples` times, and predict round `round` of the
 * test half per `reportBy` group (default: the fit groups), each question with its own fit
 * group's draws: the d-th simulation uses every group's d-th resample.
 */
export function outOfSample(
  questions: readonly MultistepQuestion[],
  opts: { seed: number | string; samples: number; round?: number; fitBy?: (q: MultistepQuestion) => string; reportBy?: (q: MultistepQuestion) => string; correlated?: boolean },
): OutOfSample {
  const round = opts.round ?? 1;
  const { fit, test } = splitHalves(questions, opts.seed);
  const fitBy = opts.fitBy ?? (() => 'all');
  const reportBy = opts.reportBy ?? fitBy;
  const fits: OutOfSample['fits'] = {};
  const drawsOf: Record<string, ReplayParams[]> = {};
  for (const g of [...new Set(questions.map(fitBy))].sort()) {
    const { observations } = observationsOf(fit.filter((q) => fitBy(q) === g), { rounds: [round] });
    if (observations.length === 0) continue;
    const est = estimateReplayParams(observations, { bootstrap: { samples: opts.samples, seed: `${opts.seed}/${g}`, keepDraws: true } });
    const { draws, ...intervals } = est.bootstrap!;
    fits[g] = { ...est, bootstrap: intervals };
    drawsOf[g] = draws!;
  }
  const rho: Record<string, number> = {};
  if (opts.correlated) for (const g of Object.keys(fits)) rho[g] = estimateRho(fit.filter((q) => fitBy(q) === g), round, fits[g]!.params, `${opts.seed}/${g}`);
  const predictions: OutOfSample['predictions'] = {};
  for (const g of [...new Set(test.map(reportBy))].sort()) {
    const inGroup = test.filter((q) => reportBy(q) === g && drawsOf[fitBy(q)] !== undefined);
    if (inGroup.length === 0) continue;
    predictions[g] = predictRound(inGroup, round, (q, d) => drawsOf[fitBy(q)]![d]!, opts.samples, `${opts.seed}/${g}`, (q) => rho[fitBy(q)] ?? 0);
  }
  return { fitQuestions: fit.length, testQuestions: test.length, fits, predictions, ...(opts.correlated && { rho }) };
}
