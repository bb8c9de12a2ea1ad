// Routing data for training and evaluating the router: per item of an evaluation run, the mean
// reward and mean cost of each worker (items that every worker answered), with the prompts; the
// seeded split by unique prompt; and the check that a checkpoint fits the data. Shared by SFT and
// evaluation (sft/) and the ES fitness tasks.
import { InputError } from '@fugu/core';
import { getItems, getPoolWorkers, getRun, itemWorkerMeans, type CheckpointRecord, type Db } from '@fugu/db';
import { assignSplit, PROMPT_SPLIT_FRACTIONS, type SplitSpec } from '@fugu/datasets';

export type RoutingItem = { id: string; task: string; prompt: string; sourceSplit?: string };

export type RoutingData = {
  runId: string;
  workers: Array<{ name: string; inputPerMTok: string; outputPerMTok: string }>;
  items: RoutingItem[];
  /** N x K mean reward over repetitions, K in `workers` order */
  rewards: Float32Array[];
  /** N x K mean USD per call */
  costs: Float32Array[];
};

export async function routingDataFromRun(db: Db, runId: string): Promise<RoutingData> {
  const run = await getRun(db, runId);
  if (!run) throw new InputError(`no evaluation run "${runId}"`, { field: '--run' });
  const chosen = run.options.workers as string[] | undefined;
  const workers = (await getPoolWorkers(db, run.poolId)).filter((w) => !chosen || chosen.includes(w.name));
  const col = new Map(workers.map((w, j) => [w.id, j]));
  const K = workers.length;
  const byItem = new Map<number, { extId: string; task: string; split: string | null; r: Float32Array; c: Float32Array; seen: number }>();
  for (const m of await itemWorkerMeans(db, runId)) {
    const j = col.get(m.workerId);
    if (j === undefined) continue;
    let e = byItem.get(m.itemId);
    if (!e) byItem.set(m.itemId, (e = { extId: m.extId, task: m.task, split: m.sourceSplit, r: new Float32Array(K), c: new Float32Array(K), seen: 0 }));
    e.r[j] = m.mean;
    e.c[j] = m.meanCost;
    e.seen++;
  }
  const complete = [...byItem.entries()].filter(([, e]) => e.seen === K);
  if (complete.length === 0) throw new InputError(`run ${runId} has no item with a reward from every worker`, { field: '--run' });
  const prompts = new Map<number, string>();
  const ids = complete.map(([id]) => id);
  for (let i = 0; i < ids.length; i += 5_000) for (const it of await getItems(db, ids.slice(i, i + 5_000))) prompts.set(it.dbId, it.prompt);
  return {
    runId,
    workers: workers.map((w) => ({ name: w.name, inputPerMTok: w.prices.inputPerMTok, outputPerMTok: w.prices.outputPerMTok })),
    items: complete.map(([id, e]) => ({ id: e.extId, task: e.task, prompt: prompts.get(id)!, ...(e.split !== null && { sourceSplit: e.split }) })),
    rewards: complete.map(([, e]) => e.r),
    costs: complete.map(([, e]) => e.c),
  };
}

/** The router's split fractions (train / val / test, by unique prompt): PROMPT_SPLIT_FRACTIONS. */
export const SPLIT_FRACTIONS = PROMPT_SPLIT_FRACTIONS;

export type SplitName = 'train' | 'val' | 'test';

/**
 * Item indices per split name under a split (`assignSplit`, @fugu/datasets): a number is the seed
 * of the split by unique prompt (the default scheme), a SplitSpec names the scheme
 * (`--split-by prompt | dataset`).
 */
export function splitIndices(data: Pick<RoutingData, 'items'>, split: number | SplitSpec): Record<SplitName, number[]> {
  const bySplit = assignSplit(data.items, typeof split === 'number' ? { by: 'prompt', seed: split } : split);
  const out = { train: [] as number[], val: [] as number[], test: [] as number[] };
  data.items.forEach((it, i) => out[bySplit.get(it.id)!].push(i));
  return out;
}

/** Throws unless the checkpoint scores exactly the run's workers, in the same order. */
export function checkWorkers(ckpt: Pick<CheckpointRecord, 'id' | 'workers'>, data: Pick<RoutingData, 'runId' | 'workers'>): void {
  const a = ckpt.workers.map((w) => w.name);
  const b = data.workers.map((w) => w.name);
  if (a.length !== b.length || a.some((n, i) => n !== b[i])) {
    throw new InputError(`checkpoint ${ckpt.id} scores workers [${a.join(', ')}] but run ${data.runId} has [${b.join(', ')}]`, { field: 'checkpoint' });
  }
}

/** The checkpoint must score exactly the run's workers, in the same order, with the same backbone. */
export function checkCompatible(ckpt: CheckpointRecord, data: RoutingData, backboneId: string): void {
  checkWorkers(ckpt, data);
  if (ckpt.backboneId !== backboneId) {
    throw new InputError(`checkpoint ${ckpt.id} was trained on backbone ${ckpt.backboneId}, not ${backboneId} (the one loaded)`, { field: 'checkpoint' });
  }
}
