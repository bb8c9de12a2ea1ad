// The measured step model against a total it did not see (issue 29, 3): ADAS's "LLM Debate"
// against its "Chain-of-Thought" with gpt-3.5 on MMLU (3 agents answer, each reads the other
// two and answers again, then a final answer), predicted from DyLAN's gpt-3.5 MMLU run of 3
// agents: its recorded first rounds as the three solo answers of a question (their correlation
// included), the parameters fitted on that table (bootstrap draws) and its rho. The final answer
// is taken to be the second round's majority (ADAS's final decision agent reads the three
// answers). The prediction is the debate's accuracy less one agent's solo accuracy, in points;
// ADAS measured each design on its own sample, so its difference has no interval of its own.

import { estimateReplayParams, percentileInterval, type ReplayParams } from '@fugu/conductor';
import { rng } from '@fugu/core';
import { observationsOf } from './observations.ts';
import { estimateRho, simulateRound } from './out-of-sample.ts';
import type { MultistepQuestion } from './types.ts';
import type { AdasTable } from './adas.ts';

export type DebatePrediction = {
  questions: number;
  /** one agent's first-round accuracy in the source table */
  solo: number;
  /** the debate's final accuracy: point (mean over draws) and 95% interval */
  debate: { mean: number; interval: [number, number] };
  /** debate - solo, in points */
  gain: { mean: number; interval: [number, number] };
  rho: number;
  /** ADAS's figures: Chain-of-Thought, LLM Debate, and their difference in points */
  adas?: { cot: number; debate: number; gain: number };
};

export function predictDebateGain(table: readonly MultistepQuestion[], opts: { samples: number; seed: number; adas?: AdasTable; benchmark?: string }): DebatePrediction {
  // the questions with three solo answers, as a debate of three: each reads the other two, then the majority
  const debates: MultistepQuestion[] = table
    .filter((q) => q.rounds[0]!.length >= 3)
    .map((q) => {
      const first = q.rounds[0]!.slice(0, 3);
      const agents = first.map((a) => a.agent);
      return { ...q, rounds: [first, first.map((a) => ({ agent: a.agent, answer: null, correct: false, read: agents }))] };
    });
  const { observations } = observationsOf(table, { rounds: [1] });
  const est = estimateReplayParams(observations, { bootstrap: { samples: opts.samples, seed: `adas/${opts.seed}`, keepDraws: true } });
  const rho = estimateRho(table, 1, est.params, `adas/${opts.seed}`);
  const solo = debates.reduce((t, q) => t + q.rounds[0]!.filter((a) => a.correct).length, 0) / (3 * debates.length);
  const r = rng('fugu-multistep-adas', opts.seed);
  const accs = est.bootstrap!.draws!.map((p: ReplayParams) => debates.filter((q) => simulateRound(q, 1, p, rho, r).filter(Boolean).length >= 2).length / debates.length);
  const [lo, hi] = percentileInterval(accs);
  const mean = accs.reduce((t, x) => t + x, 0) / accs.length;
  const a = opts.adas?.[opts.benchmark ?? 'mmlu'];
  const cot = a?.['Chain-of-Thought']?.accuracy, deb = a?.['LLM Debate']?.accuracy;
  return {
    questions: debates.length,
    solo,
    debate: { mean, interval: [lo, hi] },
    gain: { mean: 100 * (mean - solo), interval: [100 * (lo - solo), 100 * (hi - solo)] },
    rho,
    ...(cot !== undefined && deb !== undefined && { adas: { cot, debate: deb, gain: 100 * (deb - cot) } }),
  };
}
