// `fugu ultra calibrate`: the replay step model's parameters measured on a live pool (design A of
// the calibration protocol, libs/conductor/src/replay/README.md "Calibration"). On N sampled items
// and ordered pairs (A, B) of pool workers:
//
//   1. every worker's solo answer: `fixed:single:<W>`, key `calib.<id>.<item>.<W>`;
//   2. for each pair, `fixed:chain` with ranking [A, B], key `calib.<id>.<item>.<A>.<B>`: step 0
//      is A's solo answer (the same worker prompt as A's single step, so the response cache
//      answers it without a provider call once step 1 has run), step 1 is B seeing A's answer
//      (verify and correct);
//   3. every step's answer graded with the item's verifier (@fugu/datasets `verify`; the engine
//      grades only the final answer);
//   4. one observation per chain {worker: B, s: B's solo correctness, f: A's step correctness,
//      correct: B's step correctness} -> estimateReplayParamsByWorker -> a ReplayConfig.
//
// Workflows go through the engine (submitWorkflows/waitForWorkflows, conduct jobs, chat calls), so
// a re-run with the same id submits the same keys and pays for nothing already answered.
import { createHash } from 'node:crypto';
import { InputError, type DatasetItem, type ProviderKind } from '@fugu/core';
import {
  estimateReplayParamsByWorker, REPLAY_PARAM_NAMES, rewardConfig,
  type CalibrationObservation, type CornerName, type ReplayConfig, type ReplayEstimate, type ReplayParams,
} from '@fugu/conductor';
import { getChatCallResults } from '@fugu/calls';
import { verifierFor, verify } from '@fugu/datasets';
import { getDatasetItems, getWorkflowSteps, saveDataset, savePool, type WorkflowRow } from '@fugu/db';
import {
  checkPoolAgainstDataset, poolContentHash, resolveDataset, resolveWorkerPool, sampleIndices, selectWorkers, type Context, type LocalWorkers,
} from '@fugu/evaluation';
import { submitWorkflows, waitForWorkflows, type NewWorkflow, type WorkflowOptions } from '@fugu/ultra';
import { startLocals } from './locals.ts';

export type CalibrationOptions = {
  /** llmrouter | llmrouter:<dir> | <file.jsonl>: items with a verifier that grades live answers */
  dataset: string;
  /** a pool file of live workers (no replay workers) */
  pool: string;
  /** only these pool workers (default: all) */
  workers?: string[];
  /** a seeded sample of this many items (default: all verifiable items) */
  sample?: number | null;
  /** seed of the item sample and of the pair sample */
  seed: number;
  /** at most this many ordered pairs (A, B), a seeded sample (default: all K(K-1)) */
  pairs?: number | null;
  /** the calibration id in the workflow keys (default: from the dataset's and pool's content hashes) */
  id?: string;
  /** pseudo-observations shrinking each worker's corners toward the pool's (default 20) */
  priorStrength?: number;
  maxTokensPerStep?: number;
  /** check the hosted workers' API keys here (default true) */
  keyCheck?: boolean;
  localWorkers?: number | 'auto';
  localConductors?: number | 'auto';
  startLocalWorkers?: (opts: { count: number; providers: string[]; onEvent: (msg: string) => void }) => Promise<LocalWorkers>;
  startLocalConductors?: (opts: { count: number; onEvent: (msg: string) => void }) => Promise<LocalWorkers>;
  /** how long to wait for each phase's workflows (default: no limit) */
  timeoutMs?: number;
  signal?: AbortSignal;
  log?: (line: string) => void;
  /** progress of a phase: finished workflows of its total */
  progress?: (phase: { name: 'solo' | 'pairs'; total: number }) => { update(done: number, failed: number): void; stop(): void };
};

/** One graded chain: B's step after seeing A's. */
export type CalibrationRecord = CalibrationObservation & { worker: string; proposer: string; item: string };

export type SoloSummary = {
  /** items whose solo step was answered and graded */
  n: number;
  correct: number;
  /** agreement with the dataset's recorded 0/1 outcome of a worker of the same name (drift), when it has some */
  recorded?: { n: number; agree: number };
};

export type CalibrationResult = {
  id: string;
  dataset: string;
  pool: string;
  workers: string[];
  items: number;
  pairs: Array<[string, string]>;
  workflows: { solo: number; chains: number; failed: number };
  /** chain steps 0 answered from the response cache (the proposer's solo answer, not paid again) */
  cachedProposerSteps: number;
  /** steps that ran but could not be graded (verifier error), or chains whose steps did not all answer */
  dropped: number;
  solo: Record<string, SoloSummary>;
  observations: CalibrationRecord[];
  estimates: { pool: ReplayEstimate; workers: Record<string, ReplayEstimate> };
  /** the ReplayConfig to hand `fugu ultra eval --replay` (validates with validateReplayConfig) */
  config: ReplayConfig;
};

const ID_RE = /^[A-Za-z0-9_-]{1,64}$/;

/** A worker name as a key segment: letters, digits, _ and - kept, anything else `:<hex>` (injective, no dots). */
export function keySegment(name: string): string {
  return [...name].map((c) => (/[A-Za-z0-9_-]/.test(c) ? c : `:${c.codePointAt(0)!.toString(16)}`)).join('');
}

export const soloKey = (id: string, item: number, w: string): string => `calib.${id}.${item}.${keySegment(w)}`;
export const chainKey = (id: string, item: number, a: string, b: string): string => `calib.${id}.${item}.${keySegment(a)}.${keySegment(b)}`;

/** Items a verifier can grade from a live answer: a ground truth and a verifier other than `recorded`. */
export function liveVerifiable(item: Pick<DatasetItem, 'metric' | 'groundTruth'>): boolean {
  return item.groundTruth !== undefined && verifierFor(item) !== 'recorded';
}

/** The ordered pairs (A, B), A != B, in pool order; a seeded sample of `limit` of them when given. */
export function calibrationPairs(workers: readonly string[], limit: number | null | undefined, seed: number): Array<[string, string]> {
  const all: Array<[string, string]> = [];
  for (const a of workers) for (const b of workers) if (a !== b) all.push([a, b]);
  if (limit === null || limit === undefined || limit >= all.length) return all;
  return sampleIndices(all.length, limit, seed).map((i) => all[i]!);
}

/**
 * The ReplayConfig of an estimate: for each worker, the corners estimated from data (its own
 * cells, or the pool's through the prior when it has none there); `herd` only when identified.
 * Parameters without data are left out, so the worker's size-class preset still applies to them.
 */
export function calibrationConfig(est: { pool: ReplayEstimate; workers: Record<string, ReplayEstimate> }): ReplayConfig {
  const workers: NonNullable<ReplayConfig['workers']> = {};
  for (const [w, e] of Object.entries(est.workers)) {
    const params: Partial<ReplayParams> = {};
    for (const c of ['keep', 'misled', 'adopt', 'fix'] as CornerName[]) {
      const cell = e.cells[c];
      if (cell.source === 'data' || (cell.source === 'prior' && est.pool.cells[c].source === 'data')) params[c] = round(cell.estimate);
    }
    if (e.herd.source === 'data' && e.herd.identified) params.herd = round(e.herd.estimate);
    if (Object.keys(params).length > 0) workers[w] = { params: Object.fromEntries(REPLAY_PARAM_NAMES.filter((n) => params[n] !== undefined).map((n) => [n, params[n]])) };
  }
  return { workers };
}

const round = (x: number): number => Math.round(x * 1e6) / 1e6;

export async function runCalibration(ctx: Context, opts: CalibrationOptions): Promise<CalibrationResult> {
  const log = opts.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const { config, db } = ctx;
  if (opts.sample !== undefined && opts.sample !== null && !(Number.isInteger(opts.sample) && opts.sample >= 1)) throw new InputError(`must be a whole number >= 1, got ${opts.sample}`, { field: '--sample' });
  if (opts.pairs !== undefined && opts.pairs !== null && !(Number.isInteger(opts.pairs) && opts.pairs >= 1)) throw new InputError(`must be a whole number >= 1, got ${opts.pairs}`, { field: '--pairs' });
  const priorStrength = opts.priorStrength ?? 20;
  if (!(Number.isFinite(priorStrength) && priorStrength >= 0)) throw new InputError(`must be a number >= 0, got ${priorStrength}`, { field: '--prior-strength' });
  if (opts.id !== undefined && !ID_RE.test(opts.id)) throw new InputError(`1 to 64 letters, digits, _ or -, got ${JSON.stringify(opts.id)}`, { field: '--id' });

  // ---- inputs
  const pool = selectWorkers(await resolveWorkerPool(opts.pool, config.llmrouterDir), opts.workers);
  const replay = pool.workers.filter((w) => w.provider === 'replay').map((w) => w.name);
  if (replay.length > 0) {
    throw new InputError(
      `calibration needs live workers, and ${replay.map((n) => JSON.stringify(n)).join(', ')} ${replay.length === 1 ? 'is a replay worker' : 'are replay workers'} (replay answers come from the model being calibrated): give a pool of hosted or OpenAI-compatible workers`,
      { field: '--pool' },
    );
  }
  if (pool.workers.length < 2) throw new InputError(`calibration needs at least 2 workers (a proposer and a step worker), pool "${pool.name}" has ${pool.workers.length}`, { field: '--pool' });
  const dataset = await resolveDataset(opts.dataset, config.llmrouterDir);
  checkPoolAgainstDataset(pool, dataset, opts.keyCheck === false ? null : process.env);
  if (!dataset.items.some(liveVerifiable)) {
    throw new InputError(`dataset "${dataset.name}" has no item a verifier can grade from a live answer (each needs a ground_truth and a metric other than code_eval, commongen_coverage or recorded)`, { field: '--dataset' });
  }
  const ds = await saveDataset(db, { name: dataset.name, source: dataset.source, contentHash: dataset.contentHash, items: dataset.items });
  const saved = await savePool(db, pool, poolContentHash(pool));
  const names = saved.workers.map((w) => w.name);
  const verifiable = (await getDatasetItems(db, ds.id)).filter(liveVerifiable);
  const items = opts.sample ? sampleIndices(verifiable.length, opts.sample, opts.seed).map((i) => verifiable[i]!) : verifiable;
  const pairs = calibrationPairs(names, opts.pairs, opts.seed);
  const id = opts.id ?? createHash('sha256').update(`${dataset.contentHash}\n${poolContentHash(pool)}\n${opts.maxTokensPerStep ?? ''}`).digest('hex').slice(0, 12);
  const options: WorkflowOptions = { maxSteps: 2, ...(opts.maxTokensPerStep !== undefined && { maxTokensPerStep: opts.maxTokensPerStep }) };
  const roles = names.filter((w) => pairs.some(([a, b]) => a === w || b === w));
  log(`calibration ${id}: ${dataset.name} (${items.length} items) x ${pairs.length} ordered pairs of ${roles.length} workers = ${items.length * roles.length} solo + ${items.length * pairs.length} two-step workflows`);

  const soloRows: NewWorkflow[] = items.flatMap((it) => roles.map((w) => ({
    key: soloKey(id, it.dbId, w), itemId: it.dbId, poolId: saved.poolId, question: it.prompt, conductor: `fixed:single:${w}`, seed: opts.seed, options,
  })));
  const chainMeta = items.flatMap((item) => pairs.map(([a, b]) => ({ item, a, b })));
  const chainRows: NewWorkflow[] = chainMeta.map(({ item: it, a, b }) => ({
    key: chainKey(id, it.dbId, a, b), itemId: it.dbId, poolId: saved.poolId, question: it.prompt, conductor: 'fixed:chain', seed: opts.seed, options: { ...options, ranking: [a, b] },
  }));

  // ---- run: the solo answers first (they fill the response cache), then the chains
  const providers = [...new Set(saved.workers.map((w) => w.provider))] as ProviderKind[];
  const locals = await startLocals(ctx, { ...opts, localConductors: opts.localConductors ?? 'auto', localWorkers: opts.localWorkers ?? 'auto', providers, log });
  let soloDone: WorkflowRow[];
  let chainDone: WorkflowRow[];
  try {
    const deps = { db, queue: (n: string) => ctx.queue(n) };
    const phase = async (name: 'solo' | 'pairs', rows: NewWorkflow[]): Promise<WorkflowRow[]> => {
      const { ids } = await submitWorkflows(deps, rows);
      const bar = opts.progress?.({ name, total: ids.length });
      try {
        return await waitForWorkflows(db, ids, {
          ...(opts.timeoutMs !== undefined && { timeoutMs: opts.timeoutMs }),
          ...(opts.signal && { signal: opts.signal }),
          onProgress: bar && ((_f, done) => bar.update(done, 0)),
        });
      } finally {
        bar?.stop();
      }
    };
    soloDone = await phase('solo', soloRows);
    chainDone = await phase('pairs', chainRows);
  } finally {
    for (const l of locals.reverse()) await l.stop();
  }

  // ---- grade every step
  const byDbId = new Map(items.map((it) => [it.dbId, it]));
  const correctAt = rewardConfig().correctAt;
  let dropped = 0;
  const grade = async (rows: WorkflowRow[]): Promise<Array<{ grades: Array<boolean | undefined>; cached: boolean[] }>> => {
    const steps = await Promise.all(rows.map((r) => getWorkflowSteps(db, r.id)));
    const results = await getChatCallResults(db, steps.flat().filter((s) => s.status === 'ok').map((s) => s.chatCallId));
    return rows.map((r, i) => {
      const item = byDbId.get(r.itemId!)!;
      const grades = steps[i]!.map((s) => {
        const res = results.get(s.chatCallId);
        if (s.status !== 'ok' || res?.status !== 'ok') return undefined;
        try {
          return verify(item, res.result.text, res.result.providerMetadata).score >= correctAt;
        } catch (e) {
          if (!(e instanceof InputError)) throw e;
          return undefined; // an answer this item's verifier cannot grade
        }
      });
      return { grades, cached: steps[i]!.map((s) => s.cached) };
    });
  };
  const soloGrades = await grade(soloDone);
  const chainGrades = await grade(chainDone);
  const soloOf = new Map<string, boolean | undefined>();
  soloRows.forEach((r, i) => soloOf.set(r.key, soloGrades[i]!.grades[0]));

  const solo: Record<string, SoloSummary> = {};
  for (const w of roles) {
    const s: SoloSummary = { n: 0, correct: 0 };
    for (const it of items) {
      const g = soloOf.get(soloKey(id, it.dbId, w));
      if (g === undefined) continue;
      s.n++;
      if (g) s.correct++;
      const rec = it.recorded?.[w]?.score;
      if (rec === 0 || rec === 1) {
        s.recorded ??= { n: 0, agree: 0 };
        s.recorded.n++;
        if ((rec === 1) === g) s.recorded.agree++;
      }
    }
    solo[w] = s;
  }
  dropped += [...soloOf.values()].filter((g) => g === undefined).length;

  const observations: CalibrationRecord[] = [];
  chainMeta.forEach(({ item, a, b }, i) => {
    const g = chainGrades[i]!.grades;
    const s = soloOf.get(soloKey(id, item.dbId, b));
    if (g[0] === undefined || g[1] === undefined || s === undefined) {
      dropped++;
      return;
    }
    observations.push({ worker: b, proposer: a, item: item.id, cluster: item.id, s, f: g[0] ? 1 : 0, correct: g[1] });
  });
  const cachedProposerSteps = chainGrades.filter((c) => c.cached[0] === true).length;
  const failed = [...soloDone, ...chainDone].filter((r) => r.status !== 'done' || r.finishReason !== 'answered').length;

  // the intervals: the items resampled (a seeded bootstrap, the same estimator as `fugu multistep fit`)
  const estimates = estimateReplayParamsByWorker(observations, { priorStrength, bootstrap: { samples: 500, seed: opts.seed } });
  return {
    id, dataset: dataset.name, pool: pool.name, workers: roles, items: items.length, pairs,
    workflows: { solo: soloDone.length, chains: chainDone.length, failed }, cachedProposerSteps, dropped, solo, observations, estimates,
    config: calibrationConfig(estimates),
  };
}

/** The local conductor processes and provider workers asked for ('auto': 2 of a kind when none is connected to its queue). */
