// The checkpoint criterion (issue 29, GRPO as a user, item 2): its arithmetic, its exactness on a
// replay pool (the engine's cost, the replay model's expectation), and a case where the two old
// criteria (a run's sampled validation reward with mu x $; `fugu ultra analyse`'s exact accuracy
// without cost) disagree while the one criterion gives one answer.
import { describe, expect, it } from 'vitest';
import { expectedWorkflowCorrect, fixedConductor, parseConductorSpec, replayItemOf, type ConductorInput, type FixedConductorSpec } from '@fugu/conductor';
import type { DatasetItem } from '@fugu/core';
import type { StoredItem, StoredWorker } from '@fugu/db';
import { conductorInput, runWorkflow, workerReplayParams, type WorkflowEnv, type WorkflowOptions } from '@fugu/ultra';
import { tokenCost } from '@fugu/core';
import type { WorkflowRow } from '@fugu/db';
import { checkpointCriterion, criterionBetter, criterionSeed, replayCriterion, rolloutCriterion } from './criterion.ts';
import { localReplayModels } from './local.ts';
import { rolloutResult, type RolloutResult } from './update.ts';

// two replay workers: alpha cheap, beta ten times the price; recorded tokens, so the cost is exact
const workers: StoredWorker[] = [
  { id: 1, poolId: 1, name: 'alpha', provider: 'replay', model: 'alpha-7b', settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' }, size: '7B' },
  { id: 2, poolId: 1, name: 'beta', provider: 'replay', model: 'beta-70b', settings: {}, prices: { inputPerMTok: '10', outputPerMTok: '20' }, size: '70B' },
];
const scores: Array<[number, number]> = [[1, 1], [0, 1], [1, 0], [0.5, 1], [0, 0], [1, 1], [0.25, 0.75], [1, 1]];
const items: StoredItem[] = scores.map(([a, b], i) => ({
  id: `q${i}`, dbId: 100 + i, idx: i, task: 'math', prompt: `What is ${i} + ${i}?`, groundTruth: String(2 * i),
  recorded: { alpha: { score: a, tokensIn: 100, tokensOut: 50 }, beta: { score: b, tokensIn: 100, tokensOut: 50 } },
} as DatasetItem & { dbId: number; idx: number }));
const usdOf = (w: StoredWorker, tin = 100, tout = 50) => (tin * Number(w.prices.inputPerMTok) + tout * Number(w.prices.outputPerMTok)) / 1e6;

const fixed = (spec: string) => {
  const c = fixedConductor(parseConductorSpec(spec) as FixedConductorSpec);
  return (input: ConductorInput) => c.write(input);
};
const models = localReplayModels(workers, new Map(items.map((it) => [it.dbId, it])));
/** One sampled rollout of a fixed topology in this process (as localRollout runs a policy's): the draw of `seed`. */
async function sampled(spec: string, item: StoredItem, seed: number, o: WorkflowOptions): Promise<RolloutResult> {
  const c = fixedConductor(parseConductorSpec(spec) as FixedConductorSpec);
  const env: WorkflowEnv = {
    write: (row, options, ws, pool, it) => c.write(conductorInput(row, options, ws, pool, it)),
    runSteps: (calls) => calls.map(async (call) => {
      const result = await models(call.worker).generate(call.request);
      return { ok: true as const, result, cost: tokenCost(result.usage.inputTokens, result.usage.outputTokens, call.worker.prices), ms: 0 };
    }),
    saveSteps: async () => undefined,
  };
  return rolloutResult(await runWorkflow(env, { id: 0, question: item.prompt, seed, conductor: spec, itemId: item.dbId, poolId: 1 } as WorkflowRow, o, workers, item), null);
}
const options = (mu: number): WorkflowOptions => ({ maxSteps: 5, ranking: ['alpha', 'beta'], argmax: true, ...(mu > 0 && { reward: { costPerUsd: mu } }) });

describe('checkpointCriterion', () => {
  it('is the mean expected reward: mean(base) - mu x mean($), with the expected accuracy and $ beside it', () => {
    const c = checkpointCriterion([{ base: 1, correct: 1, usd: 0.01 }, { base: 0.75, correct: 0.5, usd: 0.03 }], 10, true);
    expect(c.value).toBeCloseTo(0.875 - 10 * 0.02, 12);
    expect(c).toMatchObject({ accuracy: 0.75, items: 2, mu: 10, exact: true });
    expect(c.usd).toBeCloseTo(0.02, 15);
    expect(checkpointCriterion([], 0, true)).toMatchObject({ value: 0, items: 0 });
    // strictly better only: a tie keeps the earlier checkpoint
    expect(criterionBetter(0.5, null)).toBe(true);
    expect(criterionBetter(0.5, 0.5)).toBe(false);
    expect(criterionBetter(0.51, 0.5)).toBe(true);
  });

  it('on rollouts (a live pool): the sampled reward with its cost term, one outcome per item', () => {
    const r = (reward: number | null, outcome: string | null, cost: string) => ({ reward, outcome, cost } as RolloutResult);
    const c = rolloutCriterion([r(1 - 10 * 0.001, 'correct', '0.001'), r(0.5 - 10 * 0.003, 'incorrect', '0.003'), r(null, null, '0')], { costPerUsd: 10 });
    // the same as the mean of the rewards (a rollout without one counts 0)
    expect(c.value).toBeCloseTo((0.99 + 0.47 + 0) / 3, 12);
    expect(c).toMatchObject({ accuracy: 1 / 3, exact: false, mu: 10 });
  });
});

describe('replayCriterion (exact, on a replay pool)', () => {
  it('one worker alone: the recorded scores in expectation (0.5 + 0.5 s), its recorded tokens at its prices', async () => {
    for (const [w, k] of [[workers[0]!, 0], [workers[1]!, 1]] as const) {
      const c = await replayCriterion({ items, workers, options: options(100), write: fixed(`fixed:single:${w.name}`) });
      const acc = scores.reduce((a, s) => a + s[k], 0) / scores.length;
      expect(c.accuracy).toBeCloseTo(acc, 12);
      expect(c.usd).toBeCloseTo(usdOf(w), 15);
      expect(c.value).toBeCloseTo(0.5 + 0.5 * acc - 100 * usdOf(w), 12);
      expect(c).toMatchObject({ items: scores.length, mu: 100, exact: true });
    }
  });

  it('a two-step workflow: P(correct) the replay model\'s exact expectation (the mean over many seeds of the sampled rollouts tends to it); its cost the same under every seed', async () => {
    const write = fixed('fixed:chain');
    const perItem: number[] = [];
    const c = await replayCriterion({ items, workers, options: options(0), write, perItem: (_, x) => perItem.push(x.correct) });
    const params = (w: string, sources: number) => workerReplayParams(undefined, workers.find((x) => x.name === w)!, sources);
    items.forEach((it, i) => expect(perItem[i]).toBeCloseTo(expectedWorkflowCorrect({ params, item: replayItemOf(it), steps: [{ worker: 'alpha', sees: [] }, { worker: 'beta', sees: [0] }] }), 12));
    // sampled: 200 seeds per item through the same engine
    let correct = 0;
    const costs = new Set<string>();
    for (const it of items) {
      for (let seed = 0; seed < 200; seed++) {
        const r = await sampled('fixed:chain', it, seed, options(0));
        if (r.outcome === 'correct') correct++;
        if (it.id === 'q1') costs.add(r.cost);
      }
    }
    expect(Math.abs(correct / (200 * items.length) - c.accuracy)).toBeLessThan(0.03);
    // the recorded tokens fix the cost: every draw pays the same (the seen answer's 50 tokens added to beta's input)
    expect([...costs]).toHaveLength(1);
    expect(c.usd).toBeCloseTo(usdOf(workers[0]!) + usdOf(workers[1]!, 150), 15);
    // deterministic: the same value again
    expect((await replayCriterion({ items, workers, options: options(0), write })).value).toBe(c.value);
  });

  it('a workflow that does not parse: base 0 in every draw', async () => {
    const c = await replayCriterion({ items, workers, options: options(0), write: async () => ({ text: 'not a workflow' }) });
    expect(c).toMatchObject({ value: 0, accuracy: 0, usd: 0 });
  });

  it('where the old criteria disagree, it gives one answer (issue 29): a run ranked by sampled reward with mu x $, analyse by exact accuracy without cost', async () => {
    // "checkpoint" A: alpha alone (cheap, less accurate); B: beta alone (accurate, ten times the price)
    const mu = 100;
    const a = await replayCriterion({ items, workers, options: options(mu), write: fixed('fixed:single:alpha') });
    const b = await replayCriterion({ items, workers, options: options(mu), write: fixed('fixed:single:beta') });
    // the old analyse criterion: exact expected accuracy, no cost -> B
    expect(b.accuracy).toBeGreaterThan(a.accuracy);
    // the old run criterion: one sampled rollout per item (the run's validation draws), reward with mu x $ -> A
    const old = async (spec: string, seed: number) => {
      const out: RolloutResult[] = [];
      for (const it of items) out.push(await sampled(spec, it, seed, options(mu)));
      return rolloutCriterion(out, { costPerUsd: mu });
    };
    expect((await old('fixed:single:alpha', 0)).value).toBeGreaterThan((await old('fixed:single:beta', 0)).value);
    // the one criterion: the exact expected reward, mu x $ included; the same number wherever it is computed
    expect(a.value).toBeCloseTo(0.5 + 0.5 * a.accuracy - mu * usdOf(workers[0]!), 12);
    expect(b.value).toBeCloseTo(0.5 + 0.5 * b.accuracy - mu * usdOf(workers[1]!), 12);
    expect(a.value > b.value ? 'A' : 'B').toBe('A');
    // and mu = 0 ranks as the exact accuracy does
    const a0 = await replayCriterion({ items, workers, options: options(0), write: fixed('fixed:single:alpha') });
    const b0 = await replayCriterion({ items, workers, options: options(0), write: fixed('fixed:single:beta') });
    expect(b0.value > a0.value).toBe(b0.accuracy > a0.accuracy);
  });

  it('the seed of an item is its id\'s', () => {
    expect(criterionSeed('q1')).toBe(criterionSeed('q1'));
    expect(criterionSeed('q1')).not.toBe(criterionSeed('q2'));
  });
});
