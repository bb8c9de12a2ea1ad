// The checkpoint criterion (issue 29, GRPO as a user, item 2): the one number a GRPO run's "best on
// validation" and `fugu ultra analyse score` both rank checkpoints by. It is the run's own
// objective on the validation items, without sampling noise where the environment allows:
//
//   criterion = mean over the items of E[reward of the argmax workflow]
//             = mean(E[base]) - mu x mean($ per item)
//
// base is the reward before the cost term (1 correct, 0.5 wrong, 0 unparsed or unanswered, as the
// run's reward config says) and mu its cost preference (`--mu`, reward units per dollar). With mu = 0
// it orders checkpoints exactly as the expected accuracy does (base = 0.5 + 0.5 x P(correct)).
//
// - Replay pools (`replayCriterion`): exact. Each item's argmax workflow is written and run once
//   through the engine in this process (the replay provider answering each step, as `localRollout`
//   does), which gives its cost and whether it parsed and answered; its P(correct) is the replay
//   model's exact expectation over every draw (`expectedWorkflowCorrect`), not the one draw the run
//   made. The cost of a replay workflow is the recorded (or estimated) tokens times the prices, the
//   same in every draw except where a step reads an earlier replayed answer on a dataset that
//   records no input tokens: then the answer's text, whose length differs by a few characters
//   between outcomes, enters the estimate (a token or two). The run is made with one fixed
//   environment seed per item (`criterionSeed`, from the item's id), so that remainder is the same
//   for every checkpoint and in every process: the criterion is a deterministic function of the
//   policy and the items.
// - Live pools (`rolloutCriterion`): the run's validation rollouts (one sampled outcome per item,
//   their measured cost), as before; nothing better is known without paying again.
import { parseUsd, rng, tokenCost } from '@fugu/core';
import { expectedWorkflowCorrect, picoToUsd, replayItemOf, rewardConfig, visibleSteps, type ConductorInput, type ConductorOutput, type RewardConfig, type Workflow } from '@fugu/conductor';
import type { StoredItem, StoredWorker, WorkflowRow } from '@fugu/db';
import { conductorInput, runWorkflow, workerReplayParams, type StepOutcome, type WorkflowEnv, type WorkflowOptions } from '@fugu/ultra';
import { localReplayModels } from './local.ts';
import type { RolloutResult } from './update.ts';

/** One validation item: the expected reward before the cost term, P(correct), and dollars. */
export type CriterionItem = { base: number; correct: number; usd: number };

/** The criterion's value on a set of items, with its parts. */
export type CheckpointCriterion = {
  /** mean expected reward: mean(base) - mu x usd */
  value: number;
  /** mean P(correct) (exact: the expected accuracy) */
  accuracy: number;
  /** mean dollars per item */
  usd: number;
  items: number;
  /** the cost preference it was computed with (reward units per dollar) */
  mu: number;
  /** exact expectation (replay) or one sampled rollout per item (live) */
  exact: boolean;
};

/** THE criterion: the mean expected reward of the items (mean base - mu x mean dollars). */
export function checkpointCriterion(items: readonly CriterionItem[], mu: number, exact: boolean): CheckpointCriterion {
  const n = items.length;
  const mean = (f: (x: CriterionItem) => number) => (n === 0 ? 0 : items.reduce((a, x) => a + f(x), 0) / n);
  const base = mean((x) => x.base);
  const usd = mean((x) => x.usd);
  return { value: base - mu * usd, accuracy: mean((x) => x.correct), usd, items: n, mu, exact };
}

/** Which of two criterion values is better: strictly higher (a tie keeps the earlier one). */
export const criterionBetter = (value: number, than: number | null): boolean => than === null || value > than;

/** A live pool's criterion items from validation rollouts: the sampled outcome and its measured cost (no reward: base 0). */
export function rolloutCriterion(results: readonly RolloutResult[], reward: Partial<RewardConfig> | undefined): CheckpointCriterion {
  const mu = rewardConfig(reward).costPerUsd;
  return checkpointCriterion(results.map((r) => {
    const usd = Number(r.cost);
    return { base: r.reward === null ? 0 : r.reward + mu * usd, correct: r.outcome === 'correct' ? 1 : 0, usd };
  }), mu, false);
}

/** The environment seed of an item's criterion run: one per item id, the same for every checkpoint and process. */
export function criterionSeed(itemId: string): number {
  return rng('checkpoint-criterion', itemId).int(2 ** 31 - 1);
}

/**
 * The criterion on a replay pool, exactly: each item's workflow (written by `write`: the policy's
 * argmax, a fixed topology) run once through the engine in this process for its cost and finish,
 * its P(correct) by the replay model's exact expectation. `options`: the workflow options the run
 * executes with (maxSteps, ranking, reward, replay, a restricted pool). Every worker must be a
 * replay worker (InputError from localReplayModels otherwise).
 */
export async function replayCriterion(o: {
  items: readonly StoredItem[];
  workers: readonly StoredWorker[];
  options: WorkflowOptions;
  write: (input: ConductorInput, item: StoredItem, index: number) => Promise<ConductorOutput>;
  /** the per-item values too */
  perItem?: (i: number, x: CriterionItem) => void;
}): Promise<CheckpointCriterion> {
  const reward = rewardConfig(o.options.reward);
  const mu = reward.costPerUsd;
  const models = localReplayModels(o.workers, new Map(o.items.map((it) => [it.dbId, it])));
  const specs = new Map(o.workers.map((w) => [w.name, w]));
  // each step's parameters as the executor resolves them: the worker's, by the number of sources it reads
  const memo = new Map<string, ReturnType<typeof workerReplayParams>>();
  const params = (w: string, sources: number) => {
    const key = `${w}/${sources}`;
    let p = memo.get(key);
    if (!p) memo.set(key, (p = workerReplayParams(o.options.replay, specs.get(w)!, sources)));
    return p;
  };
  const out: CriterionItem[] = [];
  for (let i = 0; i < o.items.length; i++) {
    const item = o.items[i]!;
    const env: WorkflowEnv = {
      write: (row, options, workers, pool, it) => o.write(conductorInput(row, options, workers, pool, it), item, i),
      runSteps: (calls) => calls.map(async (c): Promise<StepOutcome> => {
        const result = await models(c.worker).generate(c.request);
        return { ok: true, result, cost: tokenCost(result.usage.inputTokens, result.usage.outputTokens, c.worker.prices), ms: 0 };
      }),
      saveSteps: async () => undefined,
    };
    const row = { id: 0, question: item.prompt, seed: criterionSeed(item.id), conductor: 'checkpoint-criterion', itemId: item.dbId, poolId: o.workers[0]?.poolId ?? 0 } as WorkflowRow;
    const f = await runWorkflow(env, row, o.options, o.workers, item);
    // dollars as a rollout's row has them (rolloutResult)
    const usd = picoToUsd(parseUsd(f.conductorCost ?? '0') + parseUsd(f.workerCost ?? '0'));
    let x: CriterionItem;
    if ((f.outcome === 'correct' || f.outcome === 'incorrect') && f.steps && f.steps.length > 0) {
      // answered: the outcome of this one draw is replaced by its exact expectation over every draw
      const wf = { steps: f.steps.map((s) => ({ worker: s.worker, subtask: s.subtask, access: s.access })) } as Workflow;
      const steps = f.steps.map((s, j) => ({ worker: s.name, sees: visibleSteps(wf, j) }));
      const p = expectedWorkflowCorrect({ params, item: replayItemOf(item), steps });
      x = { base: reward.incorrect + (reward.correct - reward.incorrect) * p, correct: p, usd };
    } else {
      // unparsed or unanswered: that is what it is in every draw (the replay answers every step it has a record for)
      x = { base: (f.reward ?? 0) + mu * usd, correct: 0, usd };
    }
    o.perItem?.(i, x);
    out.push(x);
  }
  return checkpointCriterion(out, mu, true);
}
