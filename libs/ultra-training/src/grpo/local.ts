// In-process rollouts for the replay environment: the engine's own runWorkflow (writer, parse,
// schedule, step requests, the reward) with each step answered by the replay provider in this
// process instead of a chat-call job. No queue, no step rows, no workflows row: a laptop runs
// many seeds fast, and `local.test.ts` shows that the rewards equal the cluster path's.
import { InputError, tokenCost, type ChatModel } from '@fugu/core';
import { answerReplayRequest, policyConductor, type ConductorPolicy } from '@fugu/conductor';
import type { StoredItem, StoredWorker, WorkflowRow } from '@fugu/db';
import { createChatModel } from '@fugu/providers';
import { type WorkflowOptions, conductorInput, runWorkflow, type StepOutcome, type WorkflowEnv } from '@fugu/ultra';
import { rolloutResult, type RolloutResult } from './update.ts';

/** Replay models of the pool's workers, answering from the given items (by db id), as the provider worker does. */
export function localReplayModels(workers: readonly StoredWorker[], items: ReadonlyMap<number, StoredItem>): (w: StoredWorker) => ChatModel {
  const models = new Map<number, ChatModel>();
  for (const w of workers) {
    if (w.provider !== 'replay') throw new InputError(`in-process rollouts run replay workers only; ${w.name} is ${w.provider} (use the cluster path)`, { field: '--rollouts' });
    models.set(w.id, createChatModel(w, {}, {
      replayStore: (name) => ({
        lookup: (prompt, itemId, metadata) => {
          const it = itemId !== undefined ? items.get(Number(itemId)) : undefined;
          const a = it && answerReplayRequest(name, it, prompt, metadata);
          return a && { itemId: String(it.dbId), ...a };
        },
      }),
    }));
  }
  return (w) => models.get(w.id)!;
}

/**
 * One rollout in this process: the policy writes for the item with the given features (as the
 * conductor process's policy writer does), and runWorkflow runs the steps on the replay models.
 */
export async function localRollout(o: {
  policy: ConductorPolicy;
  spec: string;
  features: Float32Array;
  workers: readonly StoredWorker[];
  models: (w: StoredWorker) => ChatModel;
  item: StoredItem;
  seed: number;
  options: WorkflowOptions;
  poolId: number;
}): Promise<RolloutResult> {
  const conductor = policyConductor(o.policy, o.spec);
  const env: WorkflowEnv = {
    write: (row, options, workers, pool, item) => conductor.write({ ...conductorInput(row, options, workers, pool, item), features: o.features }),
    runSteps: (calls) =>
      calls.map(async (c): Promise<StepOutcome> => {
        const result = await o.models(c.worker).generate(c.request);
        return { ok: true, result, cost: tokenCost(result.usage.inputTokens, result.usage.outputTokens, c.worker.prices), ms: 0 };
      }),
    saveSteps: async () => undefined,
  };
  const row = { id: 0, question: o.item.prompt, seed: o.seed, conductor: o.spec, itemId: o.item.dbId, poolId: o.poolId } as WorkflowRow;
  return rolloutResult(await runWorkflow(env, row, o.options, o.workers, o.item), null);
}
