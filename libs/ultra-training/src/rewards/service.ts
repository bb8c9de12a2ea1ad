// The reward service behind POST /v1/rewards: a batch of completions (read by protocol.ts), each
// a workflow of the `given` conductor (engine/given.ts) on its question, submitted to the conduct
// queue with the engine's own submitWorkflows and waited for in Postgres (waitForWorkflows), as
// `fugu ultra eval` does; the reward of a finished workflow is its row's, counted as the eval
// summary counts it (a failed workflow or a missing reward is 0), so a completion gets the reward
// `fugu ultra eval` gives the same workflow on the same item and seed. A workflow not finished by
// the request's deadline is unscored (null), never 0; it keeps running, and the same request
// again waits for the same workflow (keys are content hashes), so a retry never pays twice.
//
// What is stored: one `workflows` row per distinct (caller's key id, pool, item, seed, maxSteps,
// workers, completion), its completion in `options.completion`; a conduct job carries only the
// workflow id. An inline question (question + ground truth) becomes a one-item dataset of its own
// (`rewards-inline`, content-addressed), stored only after the whole request was read and checked.
import { createHash } from 'node:crypto';
import type { Queue } from 'bullmq';
import { InputError, parseUsd, type DatasetItem } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import { getDatasetItems, getWorkflows, listItemKeys, saveDataset, savePool, type Db, type StoredItem, type StoredWorker, type WorkflowRow } from '@fugu/db';
import { poolContentHash, resolveDataset, resolveWorkerPool } from '@fugu/evaluation';
import type { Logger } from '@fugu/telemetry';
import { GIVEN_CONDUCTOR, submitWorkflows, waitForWorkflows, type NewWorkflow } from '@fugu/ultra';
import type { RewardEntry, RewardsRequest } from './protocol.ts';

export type RewardsServiceOptions = {
  db: Db;
  /** queues by name (kept open by the caller): the conduct queue */
  queue: (name: string) => Queue;
  config: Pick<FuguConfig, 'llmrouterDir' | 'conductor'>;
  /** the pool the workflows run on (gateway.pool): `llmrouter[:<dir>]` or a pool file, resolved as `fugu ultra eval --pool` does */
  pool: string;
  /** the dataset question ids name (FUGU_REWARDS_DATASET): `llmrouter[:<dir>]` or a JSONL file; absent: inline questions only */
  dataset?: string;
  /** how often Postgres is asked for finished workflows (default 100 ms) */
  pollMs?: number;
  log?: Logger;
};

/** Who asks: their key's id (workflows are their own) and, for a key restricted to some workers, those (pool order). */
export type RewardsCaller = { keyId: string | null; workers?: readonly string[] };

export type RewardResult = {
  index: number;
  /** null: unscored (the workflow had not finished by the deadline) */
  reward: number | null;
  workflow_id: number;
  status: WorkflowRow['status'];
  /** correct | incorrect | unparsed | unanswered, or null */
  outcome: string | null;
  finish_reason: string | null;
  parse_error: WorkflowRow['parseError'];
  steps: number | null;
};

export type RewardsResponse = {
  object: 'fugu.rewards';
  /** one per completion, in order; null = unscored */
  rewards: Array<number | null>;
  /** the same as rewards (OpenRLHF reads `scores` for dynamic filtering) */
  scores: Array<number | null>;
  /** indices of the unscored completions */
  unscored: number[];
  /** per-sample numbers OpenRLHF logs (never null): correct, parsed, scored, steps, usd */
  extra_logs: { correct: number[]; parsed: number[]; scored: number[]; steps: number[]; usd: number[] };
  results: RewardResult[];
  deadline_s: number;
  elapsed_ms: number;
};

export type RewardsOutcome = {
  response: RewardsResponse;
  /** picodollars of the workflows that finished while this request waited for them (charged to the key) */
  costPico: bigint;
};

export type RewardsService = {
  score(req: RewardsRequest, caller: RewardsCaller, signal?: AbortSignal): Promise<RewardsOutcome>;
  /** the pool (stored once) the workflows run on */
  pool(): Promise<{ poolId: number; workers: StoredWorker[] }>;
};

const INLINE_DATASET = 'rewards-inline';

export function createRewardsService(o: RewardsServiceOptions): RewardsService {
  const { db } = o;
  const once = <T>(f: () => Promise<T>): (() => Promise<T>) => {
    let p: Promise<T> | undefined;
    return () => {
      p ??= f();
      p.catch(() => (p = undefined));
      return p;
    };
  };
  const pool = once(async () => {
    const p = await resolveWorkerPool(o.pool, o.config.llmrouterDir);
    return savePool(db, p, poolContentHash(p));
  });
  const dataset = once(async () => {
    if (o.dataset === undefined) return undefined;
    const ds = await resolveDataset(o.dataset, o.config.llmrouterDir);
    const saved = await saveDataset(db, { name: ds.name, source: ds.source, contentHash: ds.contentHash, items: ds.items });
    const items = await getDatasetItems(db, saved.id);
    return { name: ds.name, byId: new Map(items.map((it) => [it.id, it])) };
  });
  // inline questions already stored, by content hash
  const inline = new Map<string, StoredItem>();

  async function inlineItem(t: Extract<RewardEntry['target'], { kind: 'inline' }>): Promise<StoredItem> {
    const canon = JSON.stringify([t.question, t.groundTruth, t.metric, t.choices ?? null]);
    const hash = createHash('sha256').update(canon).digest('hex');
    const known = inline.get(hash);
    if (known) return known;
    const item: DatasetItem = { id: `inline-${hash.slice(0, 16)}`, task: 'inline', prompt: t.question, groundTruth: t.groundTruth, metric: t.metric, ...(t.choices && { choices: t.choices }) };
    const saved = await saveDataset(db, { name: INLINE_DATASET, source: 'POST /v1/rewards', contentHash: `${INLINE_DATASET}:${hash}`, items: [item] });
    const [key] = await listItemKeys(db, saved.id);
    if (!key) throw new Error(`inline dataset ${saved.id} has no item`);
    const stored: StoredItem = { ...item, dbId: key.dbId, idx: key.idx };
    if (inline.size > 100_000) inline.clear();
    inline.set(hash, stored);
    return stored;
  }

  async function score(req: RewardsRequest, caller: RewardsCaller, signal?: AbortSignal): Promise<RewardsOutcome> {
    const t0 = Date.now();
    const { poolId, workers } = await pool();
    const names = workers.map((w) => w.name);
    const restricted = caller.workers !== undefined && caller.workers.length < names.length ? names.filter((n) => caller.workers!.includes(n)) : undefined;

    // ---- every question resolved and checked before anything is stored
    const needsIds = req.entries.some((e) => e.target.kind === 'id');
    const ds = needsIds ? await dataset() : undefined;
    const replayOnly = workers.every((w) => w.provider === 'replay');
    for (const e of req.entries) {
      if (e.target.kind === 'id') {
        if (!ds) throw new InputError(`${e.field}: question id ${JSON.stringify(e.target.id)}, but no reward dataset is configured (FUGU_REWARDS_DATASET); give {"question", "ground_truth"} instead`, { field: e.field });
        if (!ds.byId.has(e.target.id)) throw new InputError(`${e.field}: unknown question id ${JSON.stringify(e.target.id)} (dataset "${ds.name}" has ${ds.byId.size} items)`, { field: e.field });
      } else if (replayOnly) {
        throw new InputError(`${e.field}: the pool's workers are replay workers, which answer only the questions of their dataset: give a question id`, { field: e.field });
      }
    }

    // ---- one workflow per distinct (key, pool, item, seed, maxSteps, workers, completion)
    const rows = new Map<string, NewWorkflow>();
    const keyOf: string[] = [];
    for (const e of req.entries) {
      const item = e.target.kind === 'id' ? ds!.byId.get(e.target.id)! : await inlineItem(e.target);
      const key = `rw.${createHash('sha256').update(JSON.stringify([caller.keyId ?? '', poolId, item.dbId, e.seed, req.maxSteps, restricted ?? null, e.completion])).digest('hex').slice(0, 40)}`;
      keyOf.push(key);
      if (!rows.has(key)) {
        rows.set(key, {
          key, itemId: item.dbId, poolId, question: item.prompt, conductor: GIVEN_CONDUCTOR, seed: e.seed,
          options: { maxSteps: req.maxSteps, completion: e.completion, ...(restricted && { workers: restricted }) },
        });
      }
    }
    const list = [...rows.values()];
    const { ids } = await submitWorkflows({ db, queue: o.queue, endpoints: o.config.conductor.endpoints.map((x) => x.name) }, list);
    const idOf = new Map(list.map((r, i) => [r.key, ids[i]!]));

    // ---- wait until the deadline (or the client leaves) for what is not finished yet
    const finished = new Map<number, WorkflowRow>();
    const isDone = (w: WorkflowRow): boolean => w.status === 'done' || w.status === 'failed';
    const open = new Set<number>();
    for (const w of await getWorkflows(db, ids)) {
      if (isDone(w)) finished.set(w.id, w);
      else open.add(w.id);
    }
    const waited = new Set<number>();
    const left = req.deadlineMs - (Date.now() - t0);
    if (open.size > 0 && left > 0) {
      const stop = AbortSignal.any([AbortSignal.timeout(left), ...(signal ? [signal] : [])]);
      try {
        await waitForWorkflows(db, [...open], {
          pollMs: o.pollMs ?? 100,
          signal: stop,
          onProgress: (got) => {
            for (const w of got) {
              finished.set(w.id, w);
              waited.add(w.id);
            }
          },
        });
      } catch (e) {
        if (!stop.aborted) throw e;
      }
    }

    // ---- the response, in request order
    let costPico = 0n;
    for (const id of waited) {
      const w = finished.get(id)!;
      costPico += parseUsd(w.conductorCost) + parseUsd(w.workerCost);
    }
    const results: RewardResult[] = req.entries.map((e, i) => {
      const id = idOf.get(keyOf[i]!)!;
      const w = finished.get(id);
      // finished: the row's reward as the eval summary counts it (failed or missing: 0)
      const reward = w ? (w.reward ?? 0) : null;
      return {
        index: e.index, reward, workflow_id: id, status: w?.status ?? 'running', outcome: w ? (w.outcome ?? (w.status === 'failed' ? 'failed' : null)) : null,
        finish_reason: w?.finishReason ?? null, parse_error: w?.parseError ?? null, steps: w?.nSteps ?? null,
      };
    });
    const rewards = results.map((r) => r.reward);
    const usdOf = (id: number): number => {
      const w = finished.get(id);
      return w ? Number(w.conductorCost) + Number(w.workerCost) : 0;
    };
    const response: RewardsResponse = {
      object: 'fugu.rewards',
      rewards,
      scores: [...rewards],
      unscored: results.flatMap((r) => (r.reward === null ? [r.index] : [])),
      extra_logs: {
        correct: results.map((r) => (r.outcome === 'correct' ? 1 : 0)),
        parsed: results.map((r) => (finished.get(r.workflow_id)?.parseOk ? 1 : 0)),
        scored: results.map((r) => (r.reward === null ? 0 : 1)),
        steps: results.map((r) => r.steps ?? 0),
        usd: results.map((r) => usdOf(r.workflow_id)),
      },
      results,
      deadline_s: req.deadlineMs / 1000,
      elapsed_ms: Date.now() - t0,
    };
    o.log?.info({ completions: req.entries.length, workflows: list.length, unscored: response.unscored.length, ms: response.elapsed_ms }, 'rewards');
    return { response, costPico };
  }

  return { score, pool };
}
