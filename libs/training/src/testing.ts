// Test helpers (`@fugu/training/testing`): an evaluation run with given per-(item, worker) rewards
// written straight to Postgres (no queue, no provider workers), and router checkpoints for it.
import { randomBytes } from 'node:crypto';
import { rng, type DatasetItem } from '@fugu/core';
import { createRun, listItemKeys, recordCalls, saveCheckpoint, saveDataset, savePool, setRunStatus, type CallRecord, type CheckpointRecord, type Db } from '@fugu/db';
import { thetaLayout, thetaSize, unpackTheta, useLiteHeadDims, USE_LITE_BACKBONE } from '@fugu/router-model';

export const SYNTHETIC_WORKERS = ['alpha', 'beta', 'gamma'] as const;

/**
 * n items over 3 tasks with seeded 0/1 (and some fractional) scores for alpha, beta, gamma, as
 * test/support/eval-env.ts `syntheticItems`: alpha is good at math, beta at qa, gamma middling.
 */
export function syntheticRewards(n: number, seed = 7): { items: DatasetItem[]; scores: number[][] } {
  const r = rng('synthetic', seed);
  const tasks = ['math', 'qa', 'code'];
  const items: DatasetItem[] = [];
  const scores: number[][] = [];
  for (let i = 0; i < n; i++) {
    const task = tasks[i % 3]!;
    const skill: Record<string, number> = { alpha: task === 'math' ? 0.8 : 0.3, beta: task === 'qa' ? 0.9 : 0.4, gamma: 0.5 };
    scores.push(SYNTHETIC_WORKERS.map((w) => (i % 11 === 0 ? Math.round(r.next() * 100) / 100 : r.next() < skill[w]! ? 1 : 0)));
    items.push({ id: `q${i}`, task, prompt: `Question ${i} about ${task}: what is ${i} + ${i}?`, groundTruth: String(2 * i) });
  }
  return { items, scores };
}

/**
 * A completed evaluation run with one recorded call per (item, worker) whose reward is
 * scores[i][j] (workers in order). Returns the run id.
 */
export async function saveRewardRun(db: Db, opts: { items: readonly DatasetItem[]; workers: readonly string[]; scores: readonly (readonly number[])[]; runId?: string }): Promise<string> {
  const tag = randomBytes(4).toString('hex');
  const runId = opts.runId ?? `run-${tag}`;
  const { id: datasetId } = await saveDataset(db, { name: `synthetic-${tag}`, source: 'test', contentHash: `ds-${tag}`, items: opts.items });
  const pool = {
    name: `pool-${tag}`,
    workers: opts.workers.map((w, j) => ({ name: w, provider: 'replay' as const, model: `model-${w}`, settings: {}, prices: { inputPerMTok: `0.${j + 1}`, outputPerMTok: `0.${j + 2}` } })),
  };
  const { poolId, workers } = await savePool(db, pool, `pool-${tag}`);
  await createRun(db, {
    id: runId, datasetId, poolId, repetitions: 1, sampleSize: null, seed: 0, itemCount: opts.items.length,
    totalCalls: opts.items.length * workers.length, spendCap: null, options: {},
  });
  await setRunStatus(db, runId, 'running');
  const keys = await listItemKeys(db, datasetId);
  const dbId = new Map(keys.map((k) => [k.extId, k.dbId]));
  const calls: CallRecord[] = [];
  opts.items.forEach((it, i) => workers.forEach((w, j) => calls.push({
    runId, itemId: dbId.get(it.id)!, workerId: w.id, repetition: 0, requestHash: `${tag}-${i}-${j}`, status: 'ok', response: null,
    tokensIn: 10, tokensOut: 10, cost: '0', latencyMs: 1, attempts: 1, cached: false, errorKind: null, error: null,
    score: opts.scores[i]![j]!, verifier: 'recorded',
  })));
  for (let i = 0; i < calls.length; i += 2000) await recordCalls(db, calls.slice(i, i + 2000));
  await setRunStatus(db, runId, 'completed');
  return runId;
}

/**
 * A router checkpoint for `workers` on the USE-lite backbone `backboneId`, trained (nominally) on
 * `run`: theta given, or z = 1, W_h = 0 and b_h = `bias` (default all 0: pi uniform).
 */
export async function saveTestCheckpoint(db: Db, opts: { backboneId: string; workers: readonly string[]; run: string; splitSeed?: number; theta?: Float32Array; bias?: readonly number[]; id?: string; stage?: CheckpointRecord['stage'] }): Promise<CheckpointRecord> {
  const dims = useLiteHeadDims(opts.workers.length);
  const theta = opts.theta ?? new Float32Array(thetaSize(dims));
  if (!opts.theta) {
    const parts = unpackTheta(theta, dims);
    parts.z.fill(1);
    if (opts.bias) parts.b_h.set(opts.bias);
  }
  const ckpt: CheckpointRecord = {
    id: opts.id ?? `ckpt-test-${randomBytes(4).toString('hex')}`,
    stage: opts.stage ?? 'sft',
    backboneId: opts.backboneId,
    backbone: { ...USE_LITE_BACKBONE, dims },
    workers: opts.workers.map((name) => ({ name, inputPerMTok: '0', outputPerMTok: '0' })),
    theta,
    thetaLayout: thetaLayout(dims).map(({ name, offset, shape }) => ({ name, offset, shape })),
    tau: 0.1,
    training: { run: opts.run, splitSeed: opts.splitSeed ?? 0 },
    metrics: {},
    parentId: null,
  };
  await saveCheckpoint(db, ckpt);
  return ckpt;
}
