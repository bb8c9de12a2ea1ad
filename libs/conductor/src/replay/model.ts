// The replay step model: how a replay worker answers one step of a workflow on a dataset item
// from the item's recorded scores. Pure and seeded; see ./README.md for the model, the key of
// its random numbers and the answer text form.

import { InputError, rng, type DatasetItem } from '@fugu/core';
import { REPLAY_PARAM_NAMES, type ReplayParams } from './params.ts';

/** What the replay needs of a dataset item: its id and each worker's recorded score in [0, 1]. */
export type ReplayItem = { id: string; recorded: Readonly<Record<string, number>> };

/** The replay view of a dataset item: its id and each worker's recorded score (`recorded[w].score`). */
export function replayItemOf(item: Pick<DatasetItem, 'id' | 'recorded'>): ReplayItem {
  return { id: item.id, recorded: Object.fromEntries(Object.entries(item.recorded ?? {}).map(([w, o]) => [w, o.score])) };
}

export const REPLAY_RULES = ['recorded', 'keep', 'misled', 'adopt', 'fix', 'mixed'] as const;
/**
 * Which cell of the model decided the step: `recorded` (no source: the worker's own outcome), or,
 * with sources (other workers whose answers reach the step), `keep` (s=1, all sources correct),
 * `misled` (s=1, all wrong), `adopt` (s=0, all correct), `fix` (s=0, all wrong), `mixed` (some
 * but not all correct: the herd curve between the two corners of the worker's own outcome).
 */
export type ReplayRule = (typeof REPLAY_RULES)[number];

export type ReplayStepResult = {
  correct: boolean;
  /** P(correct) under the model for this step (for `recorded`, the recorded score itself) */
  p: number;
  rule: ReplayRule;
  /** the step worker's own outcome on the item (the recorded score, drawn once when fractional) */
  s: boolean;
  /** the share of the step's sources whose own outcome is correct; undefined when it has none */
  f?: number;
};

/** Namespace of every replay random number, so they never coincide with another stream's. */
const NS = 'fugu-replay-v1';

/** g_h(f) = f^h / (f^h + (1-f)^h): 0 at 0, 1/2 at 1/2, 1 at 1; linear when h = 1; steeper around 1/2 (majority-following) as h grows. */
export function herdCurve(f: number, h: number): number {
  if (f <= 0) return 0;
  if (f >= 1) return 1;
  const a = Math.pow(f, h), b = Math.pow(1 - f, h);
  return a / (a + b);
}

/**
 * P(correct) of a step whose worker has own outcome `s` and sees answers of which the fraction
 * `f` is correct: L_s + (U_s - L_s) * g_h(f), with (L_1, U_1) = (1 - misled, keep) and
 * (L_0, U_0) = (fix, adopt).
 */
export function stepProbability(params: ReplayParams, s: boolean, f: number): number {
  const g = herdCurve(f, params.herd);
  const [lo, hi] = s ? [1 - params.misled, params.keep] : [params.fix, params.adopt];
  return lo + (hi - lo) * g;
}

function recordedScore(item: ReplayItem, worker: string): number {
  const r = item.recorded[worker];
  if (r === undefined) {
    throw new InputError(`worker "${worker}" has no recorded score on item "${item.id}" (a replay worker answers only items that recorded it)`, { field: 'worker' });
  }
  if (typeof r !== 'number' || !(r >= 0 && r <= 1)) throw new InputError(`recorded score of "${worker}" on item "${item.id}" must be in [0, 1], got ${r}`, { field: `recorded.${worker}` });
  return r;
}

/** The uniform in [0, 1) of the worker's own outcome on the item: one per (seed, item, worker). */
export function ownOutcomeUniform(seed: number | string, itemId: string, worker: string): number {
  return rng(NS, 'own', seed, itemId, worker).next();
}

/** The uniform in [0, 1) of a dependent step: one per (seed, item, step key). */
export function stepUniform(seed: number | string, itemId: string, stepKey: string): number {
  return rng(NS, 'step', seed, itemId, stepKey).next();
}

/**
 * The worker's own outcome `s` on the item: the recorded score when it is 0 or 1; a fractional
 * score r (F1, coverage) is a Bernoulli(r) draw with the item's own-outcome uniform, the same
 * wherever the worker appears on that item under that seed.
 */
export function ownOutcome(item: ReplayItem, worker: string, seed: number | string): boolean {
  const r = recordedScore(item, worker);
  if (r >= 1) return true;
  if (r <= 0) return false;
  return ownOutcomeUniform(seed, item.id, worker) < r;
}

function quoteKeyPart(s: string): string {
  // worker names are free text: escape the characters the key syntax uses
  return s.replace(/[\\[\],:]/g, (c) => `\\${c}`);
}

/**
 * The sources of a step: the distinct workers, other than the step's own, whose own answers
 * reach it by any path (sorted). The model's outcome of a step is a function of its worker, its
 * sources and their own outcomes only, so it is the same whatever the path's length, the
 * access lists' shape, or how often an answer is seen.
 */
export function normalizeSources(worker: string, sources: Iterable<string>): string[] {
  return [...new Set(sources)].filter((w) => w !== worker).sort();
}

/**
 * The key of a step's random number: the worker and its sources (`normalizeSources`), `w` for a
 * step with no source, `w[a,b]` otherwise. It names the information the step has, not where the
 * step sits, so two steps of one worker with the same information share the draw and the outcome.
 * The subtask text is not part of it: the model ignores it.
 */
export function stepKeyOf(worker: string, sources: readonly string[] = []): string {
  const w = quoteKeyPart(worker);
  const src = normalizeSources(worker, sources);
  return src.length === 0 ? w : `${w}[${src.map(quoteKeyPart).join(',')}]`;
}

/** A workflow as the replay sees it: each step's worker and the indices of the earlier steps it sees. */
export type ReplayWorkflowStep = { worker: string; sees: readonly number[] };

/**
 * Each step's sources (`normalizeSources`) along the access lists: the workers of the steps it
 * sees and, recursively, theirs. A step may see only earlier steps (an InputError names the step).
 */
export function sourcesOf(steps: readonly ReplayWorkflowStep[]): string[][] {
  const reach: Array<Set<string>> = []; // every worker whose own answer reaches step i, itself included
  return steps.map((st, i) => {
    const r = new Set<string>([st.worker]);
    for (const j of st.sees) {
      if (!Number.isInteger(j) || j < 0 || j >= i) throw new InputError(`step ${i} may see only earlier steps (0..${i - 1}), not ${j}`, { field: `steps[${i}].sees` });
      for (const w of reach[j]!) r.add(w);
    }
    reach.push(r);
    return normalizeSources(st.worker, r);
  });
}

export type ReplayStepInput = {
  params: ReplayParams;
  item: ReplayItem;
  /** the worker performing the step */
  worker: string;
  /** the workers whose own answers reach the step (`sourcesOf`); the worker itself and repeats are ignored; empty: an independent step */
  sources: readonly string[];
  seed: number | string;
};

function checkParams(p: ReplayParams): void {
  for (const n of REPLAY_PARAM_NAMES) {
    const v = p[n];
    if (typeof v !== 'number' || !Number.isFinite(v) || (n === 'herd' ? v <= 0 : v < 0 || v > 1)) {
      throw new InputError(`replay parameter ${n} is out of range: ${v}`, { field: `params.${n}` });
    }
  }
}

function ruleOf(s: boolean, f: number): ReplayRule {
  return f > 0 && f < 1 ? 'mixed' : s ? (f === 1 ? 'keep' : 'misled') : f === 1 ? 'adopt' : 'fix';
}

/**
 * One replay step. No source (nothing seen, or only the worker's own answers): the worker's own
 * outcome (rule `recorded`, p = the recorded score). Otherwise f is the share of the sources
 * whose own outcome is correct, P(correct) = stepProbability(params, s, f), and the step is
 * correct iff the uniform of its key (`stepKeyOf(worker, sources)`) is below it, so raising P
 * never turns a correct step wrong.
 */
export function replayStep(input: ReplayStepInput): ReplayStepResult & { key: string; sources: string[] } {
  const { params, item, worker, seed } = input;
  const sources = normalizeSources(worker, input.sources);
  const key = stepKeyOf(worker, sources);
  const s = ownOutcome(item, worker, seed);
  if (sources.length === 0) return { correct: s, p: recordedScore(item, worker), rule: 'recorded', s, key, sources };
  checkParams(params);
  const f = sources.filter((w) => ownOutcome(item, w, seed)).length / sources.length;
  const p = stepProbability(params, s, f);
  const correct = stepUniform(seed, item.id, key) < p;
  return { correct, p, rule: ruleOf(s, f), s, f, key, sources };
}

/**
 * P(correct) of a step in expectation over every draw: the dependent step's uniform and, for
 * fractional recorded scores, the own outcomes of the worker and its sources (all 2^n cases of
 * the fractional ones, weighted). For binary scores it is the step's `p`. Exact, seed-free.
 */
export function expectedStepCorrect(params: ReplayParams, item: ReplayItem, worker: string, sources: readonly string[]): number {
  const src = normalizeSources(worker, sources);
  const r = recordedScore(item, worker);
  if (src.length === 0) return r;
  checkParams(params);
  const rs = src.map((w) => recordedScore(item, w));
  const frac = [r, ...rs].map((x, i) => (x > 0 && x < 1 ? i : -1)).filter((i) => i >= 0);
  let total = 0;
  for (let mask = 0; mask < 1 << frac.length; mask++) {
    const outcome = [r, ...rs].map((x) => x >= 1);
    let weight = 1;
    frac.forEach((idx, b) => {
      const on = (mask >> b) & 1;
      outcome[idx] = on === 1;
      const x = idx === 0 ? r : rs[idx - 1]!;
      weight *= on ? x : 1 - x;
    });
    const f = outcome.slice(1).filter(Boolean).length / src.length;
    total += weight * stepProbability(params, outcome[0]!, f);
  }
  return total;
}

export type ReplayWorkflowResult = {
  steps: Array<ReplayStepResult & { key: string; sources: string[] }>;
  /** the last step's outcome */
  correct: boolean;
};

/** Every step of a workflow on one item, in order, each with its sources (`sourcesOf`) and key. */
/**
 * A worker's parameters for a step reading `sources` distinct other workers (a config's `sources`
 * overrides apply by that count: resolveWorkerParams(config, worker, { sources })).
 */
export type StepParams = (worker: string, sources: number) => ReplayParams;

export function replayWorkflow(input: { params: StepParams; item: ReplayItem; steps: readonly ReplayWorkflowStep[]; seed: number | string }): ReplayWorkflowResult {
  const { item, steps, seed } = input;
  if (steps.length === 0) throw new InputError('a workflow needs at least one step', { field: 'steps' });
  const sources = sourcesOf(steps);
  const out = steps.map((st, i) => replayStep({ params: input.params(st.worker, normalizeSources(st.worker, sources[i]!).length), item, worker: st.worker, sources: sources[i]!, seed }));
  return { steps: out, correct: out[out.length - 1]!.correct };
}

/** The last step's P(correct) in expectation over every draw (`expectedStepCorrect`): what a workflow scores on the item on average over seeds. */
export function expectedWorkflowCorrect(input: { params: StepParams; item: ReplayItem; steps: readonly ReplayWorkflowStep[] }): number {
  const { steps } = input;
  if (steps.length === 0) throw new InputError('a workflow needs at least one step', { field: 'steps' });
  const last = steps[steps.length - 1]!;
  const sources = sourcesOf(steps)[steps.length - 1]!;
  return expectedStepCorrect(input.params(last.worker, normalizeSources(last.worker, sources).length), input.item, last.worker, sources);
}

// ---- the replay answer text ------------------------------------------------------------------

/**
 * The text a replay step answers with, in the spirit of the replay provider's
 * `[replay:<worker>] recorded score 1`: it says the step's outcome, so the final answer can be
 * scored from the text alone. `[replay:<worker>] simulated score 1 (rule adopt, p 0.6000)`;
 * for an independent step `[replay:<worker>] recorded score 0.5 (rule recorded, outcome 1)`.
 */
export function replayAnswerText(worker: string, r: Pick<ReplayStepResult, 'correct' | 'p' | 'rule'>): string {
  const outcome = r.correct ? 1 : 0;
  if (r.rule === 'recorded') return `[replay:${worker}] recorded score ${r.p} (rule recorded, outcome ${outcome})`;
  return `[replay:${worker}] simulated score ${outcome} (rule ${r.rule}, p ${r.p.toFixed(4)})`;
}

const ANSWER_RE = /^\[replay:(.+)\] (recorded|simulated) score (\d+(?:\.\d+)?(?:e-?\d+)?) \(rule (recorded|keep|misled|adopt|fix|mixed), (?:outcome ([01])|p (\d+(?:\.\d+)?))\)$/;

/** Reads a replay answer text back: worker, outcome and rule; undefined for any other text. */
export function parseReplayAnswer(text: string): { worker: string; correct: boolean; rule: ReplayRule; p: number } | undefined {
  const m = ANSWER_RE.exec(text.trim());
  if (!m) return undefined;
  const [, worker, kind, score, rule, outcome, p] = m;
  if ((kind === 'recorded') !== (rule === 'recorded')) return undefined;
  if (kind === 'recorded') return outcome === undefined ? undefined : { worker: worker!, correct: outcome === '1', rule: 'recorded', p: Number(score) };
  return p === undefined || (score !== '0' && score !== '1') ? undefined : { worker: worker!, correct: score === '1', rule: rule as ReplayRule, p: Number(p) };
}

/**
 * The provider metadata of a replayed step's answer, in the shape the datasets verifier reads
 * for replayed answers (`providerMetadata.replay.score`): the step's outcome as 0 or 1.
 */
export function replayProviderMetadata(itemId: string, r: Pick<ReplayStepResult, 'correct' | 'rule' | 'p'>): { replay: { itemId: string; score: number; rule: ReplayRule; p: number } } {
  return { replay: { itemId, score: r.correct ? 1 : 0, rule: r.rule, p: r.p } };
}
