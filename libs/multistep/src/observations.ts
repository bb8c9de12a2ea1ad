// From a recorded run's table to the step model's observations: each answer of a round after
// the first is one dependent step, with s = the agent's own outcome in the round before, f = the
// share of the OTHER agents' previous-round answers it was shown that were correct, and its own
// outcome now. Its own earlier answer, shown back to it, is not a source (the model's rule: a
// worker re-reading itself has no new information), so an answer shown only its own is left out.

import type { CalibrationObservation } from '@fugu/conductor';
import type { AgentAnswer, MultistepQuestion } from './types.ts';

/** One dependent step of a recorded question, and where it stands. */
export type StepObservation = CalibrationObservation & {
  /** `<source>/<question id>`: what a bootstrap resamples as a whole */
  cluster: string;
  /** the round it was answered in (1: the second round) */
  round: number;
  /** how many other agents' answers it read */
  sources: number;
};

export type ObservationCounts = { steps: number; noOwnEarlier: number; noOtherSource: number };

/** Why an answer is not a dependent step of the model: its agent did not answer the round before, or it was shown no other agent's answer. */
export type NotAStep = 'noOwnEarlier' | 'noOtherSource';

/**
 * An answer of round r (r >= 1) as the model sees it: its own earlier outcome s, and the share f
 * of the other agents' answers it read that were right: their previous round's (`read`), and
 * where a round is sequential their answers of this round given before it (`readThisRound`).
 * Answers it read that the log does not keep are not counted.
 */
export function stepOf(q: MultistepQuestion, round: number, answer: AgentAnswer, now?: ReadonlyMap<number, boolean>): { s: boolean; f: number; sources: number } | NotAStep {
  const before = new Map(q.rounds[round - 1]!.map((a) => [a.agent, a.correct]));
  const current = now ?? new Map(q.rounds[round]!.map((a) => [a.agent, a.correct]));
  const s = before.get(answer.agent);
  if (s === undefined) return 'noOwnEarlier';
  const seen = [
    ...answer.read.filter((x) => x !== answer.agent && before.has(x)).map((x) => before.get(x)!),
    ...(answer.readThisRound ?? []).filter((x) => x !== answer.agent && current.has(x)).map((x) => current.get(x)!),
  ];
  if (seen.length === 0) return 'noOtherSource';
  return { s, f: seen.filter(Boolean).length / seen.length, sources: seen.length };
}

/**
 * The dependent steps of the questions (the rounds given, default every round after the first).
 * Counts say what was left out and why.
 */
export function observationsOf(questions: readonly MultistepQuestion[], opts: { rounds?: readonly number[] } = {}): { observations: StepObservation[]; counts: ObservationCounts } {
  const observations: StepObservation[] = [];
  const counts: ObservationCounts = { steps: 0, noOwnEarlier: 0, noOtherSource: 0 };
  for (const q of questions) {
    for (let r = 1; r < q.rounds.length; r++) {
      if (opts.rounds && !opts.rounds.includes(r)) continue;
      for (const a of q.rounds[r]!) {
        const st = stepOf(q, r, a);
        if (typeof st === 'string') {
          counts[st]++;
          continue;
        }
        observations.push({ s: st.s, f: st.f, correct: a.correct, worker: q.source, cluster: `${q.source}/${q.id}`, round: r, sources: st.sources });
        counts.steps++;
      }
    }
  }
  return { observations, counts };
}
