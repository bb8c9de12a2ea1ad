// The GRPO driver of the staged loop (@fugu/training runStagedLoop; contract in
// libs/training/src/coordinator/README.md), and the in-process loop for replay experiments.
//
//   load:    grpo_runs (the iteration it asks, its sampling policy) -> the iteration's rollouts
//            (plan.ts); their workflows rows inserted (key grpo.<run>.<i>.<rollout key>; a key
//            already stored keeps its row), conductor `policy:<sampling checkpoint>`
//   flow:    children = conduct jobs {v, workflowId} (job id wf<id>.<dispatch>), parent = a fan-in
//            job on `grpo-fanin`; the conductor processes execute them like any workflow
//   results: the iteration's workflows rows, done or failed; the first execution's final write wins
//            (a workflow is finished once), so a re-dispatched straggler changes nothing
//   fan-in:  grpoFanIn (update.ts); commit: one transaction (session.ts)
import { countFinishedWorkflows, getWorkflows, insertWorkflows, type Db } from '@fugu/db';
import { CONDUCT_JOB, conductJobSchema, conductQueue, grpoFaninJobId, grpoFaninJobSchema, grpoFaninQueue, grpoRolloutJobId, parseJob } from '@fugu/queue';
import type { LoopJob, StagedDriver } from '@fugu/training';
import { localReplayModels, localRollout } from './local.ts';
import { itemsById, type GrpoIterationPlan, type GrpoSession } from './session.ts';
import { rolloutResult, type GrpoUpdate, type RolloutResult } from './update.ts';

export type GrpoClusterIteration = GrpoIterationPlan & { ids: Map<string, number> };

export const grpoWorkflowKey = (runId: string, iteration: number, key: string): string => `grpo.${runId}.${iteration}.${key}`;

export class GrpoDriver implements StagedDriver<GrpoClusterIteration, RolloutResult, GrpoUpdate> {
  readonly evalQueue = conductQueue;
  readonly faninQueue = grpoFaninQueue;
  readonly attempts: number;
  readonly deadlineMs: number;
  private readonly db: Db;
  private readonly session: GrpoSession;

  constructor(db: Db, session: GrpoSession) {
    this.db = db;
    this.session = session;
    this.attempts = session.cfg.attempts;
    this.deadlineMs = session.cfg.deadlineMs;
  }

  async load(): Promise<GrpoClusterIteration | null> {
    const it = await this.session.load();
    if (!it) return null;
    const { runId } = this.session;
    const ids = await insertWorkflows(this.db, it.rollouts.map((r) => ({
      key: grpoWorkflowKey(runId, it.index, r.key), itemId: r.item.dbId, poolId: this.session.run.poolId, question: r.item.prompt,
      conductor: `policy:${it.policyCheckpointId}`, seed: r.seed, repeat: 0, options: r.options as unknown as Record<string, unknown>,
    })));
    return { ...it, ids: new Map(it.rollouts.map((r, i) => [r.key, ids[i]!])) };
  }

  flow(it: GrpoClusterIteration, keys: readonly string[], dispatch: string): { parent: LoopJob; children: LoopJob[] } {
    const children = keys.map((key): LoopJob => {
      const workflowId = it.ids.get(key)!;
      return { name: CONDUCT_JOB, data: parseJob(conductJobSchema, { v: 1, workflowId }, conductQueue), jobId: grpoRolloutJobId(workflowId, dispatch) };
    });
    const parent = parseJob(grpoFaninJobSchema, { v: 1, runId: this.session.runId, iteration: it.index, dispatch }, grpoFaninQueue);
    return { parent: { name: 'fanin', data: parent, jobId: grpoFaninJobId(this.session.runId, it.index, dispatch) }, children };
  }

  fannedIn(data: unknown): { index: number; dispatch: string } | null {
    const j = parseJob(grpoFaninJobSchema, data, grpoFaninQueue);
    return j.runId === this.session.runId ? { index: j.iteration, dispatch: j.dispatch } : null;
  }

  countResults(it: GrpoClusterIteration): Promise<number> {
    return countFinishedWorkflows(this.db, [...it.ids.values()]);
  }

  async results(it: GrpoClusterIteration): Promise<Map<string, RolloutResult>> {
    return this.finished(it);
  }

  private async finished(it: GrpoClusterIteration): Promise<Map<string, RolloutResult>> {
    const rows = await getWorkflows(this.db, [...it.ids.values()]);
    const byId = new Map(rows.filter((r) => r.status === 'done' || r.status === 'failed').map((r) => [r.id, r]));
    const out = new Map<string, RolloutResult>();
    for (const [key, id] of it.ids) {
      const r = byId.get(id);
      if (r) out.set(key, rolloutResult(r, r.id));
    }
    return out;
  }

  fanIn(it: GrpoClusterIteration, results: ReadonlyMap<string, RolloutResult>, info: { dispatches: number; wallMs: number }): Promise<GrpoUpdate> {
    return this.session.fanIn(it, results, info);
  }

  commit(it: GrpoClusterIteration, u: GrpoUpdate): Promise<void> {
    return this.session.commit(it, u);
  }

  finish(status: 'completed' | 'failed', reason?: string): Promise<void> {
    return this.session.finish(status, reason);
  }
}

/** The in-process loop: every iteration's rollouts through localRollout, then the same fan-in and commit. */
export async function runGrpoInProcess(session: GrpoSession, o: { signal?: AbortSignal; onIteration?: (index: number, u: GrpoUpdate, wallMs: number) => void; onProgress?: (index: number, done: number, total: number) => void } = {}): Promise<'completed' | 'interrupted'> {
  const models = localReplayModels(session.workers, itemsById(session.items));
  for (;;) {
    if (o.signal?.aborted) return 'interrupted';
    const started = performance.now();
    const it = await session.load();
    if (!it) {
      await session.finish('completed');
      return 'completed';
    }
    await session.prepareFeatures(it.rollouts);
    const results = new Map<string, RolloutResult>();
    for (const r of it.rollouts) {
      results.set(r.key, await localRollout({
        policy: it.policy, spec: `policy:${it.policyCheckpointId}`, features: session.features(r.item.prompt), workers: session.workers, models,
        item: r.item, seed: r.seed, options: r.options, poolId: session.run.poolId,
      }));
      if (results.size % 64 === 0) o.onProgress?.(it.index, results.size, it.rollouts.length);
      if (o.signal?.aborted) return 'interrupted';
    }
    const wallMs = Math.round(performance.now() - started);
    const u = await session.fanIn(it, results, { dispatches: 0, wallMs });
    await session.commit(it, u);
    o.onIteration?.(it.index, u, wallMs);
  }
}
