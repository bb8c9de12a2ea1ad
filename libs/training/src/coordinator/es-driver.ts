// The ES driver of the staged loop (loop.ts): a sep-CMA-ES generation as an iteration.
//
//   load:    es_runs.state (asks generation g) -> SepCmaEs.fromState; its stateVersion
//   jobs:    (candidate k, replica r) for every k < lambda, r < replicas, replica-major (jobs taken
//            together by one evaluator share a replica's minibatch); key `k.r`
//   flow:    children {v, runId, generation, candidate, replica, stateVersion} on `es-eval`,
//            parent {v, runId, generation, stateVersion, dispatch} on `es-fanin`
//   results: es_evaluations rows of (run, g), keyed `k.r`
//   fan-in:  fitness_k = mean over replicas (summed in replica order); tell(); the generation
//            record; the best candidate so far as a checkpoint when this generation found it; at
//            the last generation the search mean as a checkpoint too
//   commit:  commitEsGeneration (ONE transaction: the new state, the record, the checkpoints)
import { SepCmaEs, type SepCmaEsState } from '@fugu/es';
import {
  commitEsGeneration,
  countEsEvaluations,
  esGenerationFitness,
  getEsState,
  setEsRunStatus,
  type CheckpointRecord,
  type Db,
  type EsGenerationRecord,
} from '@fugu/db';
import { esEvalJobId, esEvalJobSchema, esEvalQueue, esFaninJobId, esFaninJobSchema, esFaninQueue, parseJob } from '@fugu/queue';
import type { LoopIteration, LoopJob, StagedDriver } from './loop.ts';
import { stateVersion, type EsRunConfig } from './run-config.ts';

export type EsIteration = LoopIteration & { es: SepCmaEs; version: string };
export type EsUpdate = {
  record: Omit<EsGenerationRecord, 'generation' | 'committedAt'>;
  stateAfter: Record<string, unknown>;
  checkpoint?: CheckpointRecord;
  meanCheckpoint?: CheckpointRecord;
  completed: boolean;
};
type Fitness = { candidate: number; replica: number; fitness: number };

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

export class EsDriver implements StagedDriver<EsIteration, Fitness, EsUpdate> {
  readonly evalQueue = esEvalQueue;
  readonly faninQueue = esFaninQueue;
  readonly attempts: number;
  readonly deadlineMs: number;
  /** the best-so-far checkpoint (updated at each commit that makes one) */
  bestCheckpointId: string | null;
  /** the generation the committed state asks (as of the last load) */
  position: number;
  private readonly db: Db;
  private readonly runId: string;
  private readonly cfg: EsRunConfig;
  private readonly sft: CheckpointRecord;
  private readonly keys: string[] = [];

  constructor(o: { db: Db; runId: string; cfg: EsRunConfig; sft: CheckpointRecord; bestCheckpointId: string | null }) {
    this.db = o.db;
    this.runId = o.runId;
    this.cfg = o.cfg;
    this.sft = o.sft;
    this.bestCheckpointId = o.bestCheckpointId;
    this.position = 0;
    this.attempts = o.cfg.attempts;
    this.deadlineMs = o.cfg.deadlineMs;
    for (let r = 0; r < o.cfg.replicas; r++) for (let k = 0; k < o.cfg.lambda; k++) this.keys.push(`${k}.${r}`);
  }

  async load(): Promise<EsIteration | null> {
    const cur = (await getEsState(this.db, this.runId))!;
    const g = cur.generation;
    this.position = g;
    if (g >= this.cfg.generations) return null;
    const version = stateVersion(cur.state);
    const es = SepCmaEs.fromState(cur.state as unknown as SepCmaEsState);
    if (es.generation !== g) throw new Error(`ES run ${this.runId}: es_runs.generation ${g} but the state asks generation ${es.generation}`);
    return { index: g, keys: this.keys, es, version };
  }

  flow(it: EsIteration, keys: readonly string[], dispatch: string): { parent: LoopJob; children: LoopJob[] } {
    const children = keys.map((key): LoopJob => {
      const [k, r] = key.split('.').map(Number) as [number, number];
      const data = parseJob(esEvalJobSchema, { v: 1, runId: this.runId, generation: it.index, candidate: k, replica: r, stateVersion: it.version }, esEvalQueue);
      return { name: 'eval', data, jobId: esEvalJobId(this.runId, it.index, k, r, dispatch) };
    });
    const parent = parseJob(esFaninJobSchema, { v: 1, runId: this.runId, generation: it.index, stateVersion: it.version, dispatch }, esFaninQueue);
    return { parent: { name: 'fanin', data: parent, jobId: esFaninJobId(this.runId, it.index, dispatch) }, children };
  }

  fannedIn(data: unknown): { index: number; dispatch: string } | null {
    const j = parseJob(esFaninJobSchema, data, esFaninQueue);
    return j.runId === this.runId ? { index: j.generation, dispatch: j.dispatch } : null;
  }

  countResults(it: EsIteration): Promise<number> {
    return countEsEvaluations(this.db, this.runId, it.index);
  }

  async results(it: EsIteration): Promise<Map<string, Fitness>> {
    const rows = await esGenerationFitness(this.db, this.runId, it.index);
    return new Map(rows.map((r) => [`${r.candidate}.${r.replica}`, r]));
  }

  fanIn(it: EsIteration, results: ReadonlyMap<string, Fitness>, info: { dispatches: number; wallMs: number }): EsUpdate {
    const { cfg, runId, sft } = this;
    const g = it.index;
    const es = it.es;
    // mean fitness per candidate over its replicas (summed in replica order)
    const sums = new Array<number>(cfg.lambda).fill(0);
    for (const key of this.keys) {
      const row = results.get(key)!;
      sums[row.candidate]! += row.fitness;
    }
    const fitness = sums.map((s) => s / cfg.replicas);
    const sigma = es.sigma;
    es.tell(fitness);
    const best = es.best();
    const checkpoint = best && best.generation === g ? esCheckpoint(sft, runId, g, best, cfg) : undefined;
    const record = {
      meanFitness: fitness.reduce((a, b) => a + b, 0) / fitness.length,
      bestFitness: Math.max(...fitness),
      medianFitness: median(fitness),
      bestSoFar: best?.fitness ?? Math.max(...fitness),
      sigma,
      sigmaAfter: es.sigma,
      evaluations: results.size,
      dispatches: info.dispatches,
      wallMs: info.wallMs,
    };
    const completed = g + 1 >= cfg.generations;
    // the last generation also stores the search mean: the best candidate so far was scored on
    // its own generation's episodes only, so with noisy fitness the mean is the steadier result
    const meanCheckpoint = completed ? esCheckpoint(sft, runId, g, { x: es.mean(), fitness: null }, cfg, 'mean') : undefined;
    return { record, stateAfter: es.state() as unknown as Record<string, unknown>, completed, ...(checkpoint && { checkpoint }), ...(meanCheckpoint && { meanCheckpoint }) };
  }

  async commit(it: EsIteration, u: EsUpdate): Promise<void> {
    await commitEsGeneration(this.db, {
      runId: this.runId, generation: it.index, stateAfter: u.stateAfter, record: u.record, completed: u.completed,
      ...(u.checkpoint && { checkpoint: u.checkpoint }), ...(u.meanCheckpoint && { meanCheckpoint: u.meanCheckpoint }),
    });
    if (u.checkpoint) this.bestCheckpointId = u.checkpoint.id;
    this.position = it.index + 1;
  }

  async finish(status: 'completed' | 'failed', reason?: string): Promise<void> {
    await setEsRunStatus(this.db, this.runId, status, reason ?? null);
  }
}

/** The checkpoint id of a completed run's final search mean. */
export const esMeanCheckpointId = (runId: string): string => `${runId}-mean`;

/**
 * A point of the search as a router checkpoint, the SFT checkpoint with theta replaced: the best
 * candidate so far (`<run>-best-g<g>`), or the final search mean (`<run>-mean`, fitness null).
 */
export function esCheckpoint(
  sft: CheckpointRecord,
  runId: string,
  generation: number,
  best: { x: Float64Array; fitness: number | null },
  cfg: EsRunConfig,
  kind: 'best' | 'mean' = 'best',
): CheckpointRecord {
  return {
    id: kind === 'best' ? `${runId}-best-g${generation}` : esMeanCheckpointId(runId),
    stage: 'es',
    backboneId: sft.backboneId,
    backbone: sft.backbone,
    workers: sft.workers,
    theta: Float32Array.from(best.x),
    thetaLayout: sft.thetaLayout,
    tau: sft.tau,
    training: { ...sft.training, esRun: runId, generation, task: cfg.task, lambda: cfg.lambda, sigma0: cfg.sigma0, replicas: cfg.replicas, seed: cfg.seed },
    metrics: { fitness: best.fitness, generation, kind },
    parentId: sft.id,
  };
}
