// The fitness tasks on real Postgres with the real USE-lite backbone: a synthetic evaluation run
// (alpha good at math, beta at qa, gamma middling), a router checkpoint whose head points each
// task's wording at a worker, and perturbations of it as ES candidates.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError, rng } from '@fugu/core';
import { saveCheckpoint } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { initTheta, loadUseLite, ProjectedFeatures, unpackTheta, useLiteHeadDims, loadRouterModel } from '@fugu/router-model';
import { anchorCheckpoint } from '@fugu/router-model/testing';
import { saveRewardRun, saveTestCheckpoint, syntheticRewards, SYNTHETIC_WORKERS } from '../testing.ts';
import { compareOnEpisodes, formatComparison } from './compare.ts';
import { createFitnessTask } from './create.ts';
import { routingDataFromRun, splitIndices } from './routing-data.ts';
import { drawMinibatch } from './single-step.ts';
import { StateFeatures } from './theta-policy.ts';
import type { EvalContext, FitnessTaskSpec } from './types.ts';

let t: TestDatabase;
let home: string;
let run: string;
let twoRun: string;
let backboneId: string;
let anchorId: string;
let theta0: Float32Array;
const workers = [...SYNTHETIC_WORKERS];
const ctx: EvalContext = { seed: 11, generation: 2, replica: 1, split: 'test' };

beforeAll(async () => {
  t = await createTestDatabase();
  home = await mkdtemp(path.join(tmpdir(), 'fugu-tasks-'));
  const { items, scores } = syntheticRewards(300);
  run = await saveRewardRun(t.db, { items, workers, scores });
  const two = syntheticRewards(60, 9);
  twoRun = await saveRewardRun(t.db, { items: two.items, workers: ['alpha', 'beta'], scores: two.scores.map((s) => s.slice(0, 2)) });
  backboneId = (await loadUseLite()).backboneId;
  const anchor = await anchorCheckpoint({ anchors: { alpha: 'a question about math', beta: 'a question about qa', gamma: 'a question about code' }, home, scale: 20 });
  anchor.training = { run, splitSeed: 0 };
  anchor.stage = 'sft';
  await saveCheckpoint(t.db, anchor);
  anchorId = anchor.id;
  theta0 = anchor.theta;
}, 120_000);
afterAll(async () => {
  await t?.drop();
  if (home) await rm(home, { recursive: true, force: true });
});

/** theta0 plus seeded N(0, s^2) noise on every coordinate. */
const perturbed = (k: number, s = 0.3): Float32Array => {
  const r = rng('perturb', k);
  return Float32Array.from(theta0, (v) => v + s * r.normal());
};

/** A theta whose head always picks worker j (W_h = 0, b_h = 100 e_j). */
const always = (j: number): Float32Array => {
  const th = new Float32Array(theta0.length);
  const p = unpackTheta(th, useLiteHeadDims(3));
  p.z.fill(1);
  p.b_h[j] = 100;
  return th;
};

async function bestTrainWorker(): Promise<number> {
  const data = await routingDataFromRun(t.db, run);
  const split = splitIndices(data, 0);
  const sums = [0, 1, 2].map((j) => split.train.reduce((s, i) => s + data.rewards[i]![j]!, 0));
  return sums.indexOf(Math.max(...sums));
}

describe.each<FitnessTaskSpec>([
  { kind: 'single-step', batchSize: 24 },
  { kind: 'episodes', episodes: 10, questions: 3, turnBudget: 5 },
])('fitness task $kind', (spec) => {
  it('is deterministic, uses common random numbers, and scores a candidate the same alone or in a batch', async () => {
    const task = await createFitnessTask({ db: t.db, home, checkpointId: anchorId, spec });
    try {
      expect(task.workers).toEqual(workers);
      expect(task.theta0).toEqual(theta0);
      const thetas = [theta0, perturbed(1), perturbed(2), Float32Array.from(theta0), perturbed(3, 1)];
      const a = await task.evaluate(thetas, ctx);
      const b = await task.evaluate(thetas, ctx);
      expect(b).toEqual(a); // same ctx, same results
      expect(a[3]).toEqual(a[0]); // identical thetas, identical results
      expect((await task.evaluate([thetas[2]!], ctx))[0]).toEqual(a[2]);
      expect((await task.evaluate([thetas[4]!, thetas[1]!], ctx))).toEqual([a[4], a[1]]);
      for (const r of a) {
        expect(r.fitness).toBeGreaterThanOrEqual(0);
        expect(r.fitness).toBeLessThanOrEqual(1);
        expect(JSON.stringify(r.summary).length).toBeLessThan(1000);
      }
      // the perturbations change the outcome somewhere
      expect(new Set(a.map((r) => JSON.stringify(r))).size).toBeGreaterThan(1);
      // another generation is another minibatch / other episodes
      const other = await task.evaluate(thetas, { ...ctx, generation: 3 });
      expect(other).not.toEqual(a);
      expect(await task.evaluate([], ctx)).toEqual([]);
      await expect(task.evaluate([new Float32Array(5)], ctx)).rejects.toThrow(/field thetas: candidate 0/);
      await expect(task.evaluate([theta0], { ...ctx, split: 'dev' as 'test' })).rejects.toThrow(/ctx.split/);
    } finally {
      await task.release();
    }
  }, 120_000);
});

describe('exactness', () => {
  it('a state text gets the same features alone or with others, and a head row the same logits in any run', async () => {
    const model = await loadRouterModel(home, 3);
    try {
      const texts = Array.from({ length: 12 }, (_, i) => `Question ${i} about ${'things '.repeat(1 + 3 * i)}?\nfeedback: worker alpha failed`);
      const batch = await new StateFeatures(model.encoder, model.head).get(texts);
      const alone = new StateFeatures(model.encoder, model.head);
      for (const [i, text] of texts.entries()) expect((await alone.get([text]))[0]).toEqual(batch[i]);
      const y = new ProjectedFeatures(batch.reduce((acc, r, i) => (acc.set(r, i * r.length), acc), new Float32Array(12 * batch[0]!.length)), 12, batch[0]!.length);
      const thetas = Array.from({ length: 5 }, (_, k) => initTheta(model.head.dims, k, { headScale: 0.1 }));
      const all = (await model.head.candidateLogits(y, thetas)).data; // [5, 12, 3]
      const one = (await model.head.candidateLogits(y.rows(4, 7), [thetas[2]!])).data; // [1, 3, 3]
      expect(one).toEqual(all.slice((2 * 12 + 4) * 3, (2 * 12 + 7) * 3));
    } finally {
      await model.release();
    }
  }, 60_000);
});

describe('baselines', () => {
  it('a theta that always picks the best worker scores what the best-single-worker baseline scores', async () => {
    const best = await bestTrainWorker();
    const single = await createFitnessTask({ db: t.db, home, checkpointId: anchorId, spec: { kind: 'single-step', batchSize: 24 } });
    try {
      const [r] = await single.evaluate([always(best)], ctx);
      const data = await routingDataFromRun(t.db, run);
      const batch = drawMinibatch(splitIndices(data, 0).test, 24, ctx);
      expect(r!.fitness).toBeCloseTo(batch.reduce((s, i) => s + data.rewards[i]![best]!, 0) / batch.length, 12);
      expect(r!.summary.picks).toEqual(Object.fromEntries(workers.map((w, j) => [w, j === best ? 24 : 0])));
    } finally {
      await single.release();
    }

    const spec = { episodes: 30, questions: 3, turnBudget: 5 };
    const episodes = await createFitnessTask({ db: t.db, home, checkpointId: anchorId, spec: { kind: 'episodes', ...spec } });
    let fitness: number;
    try {
      fitness = (await episodes.evaluate([always(best)], { seed: 5, generation: 0, replica: 0, split: 'test' }))[0]!.fitness;
    } finally {
      await episodes.release();
    }
    const cmp = await compareOnEpisodes({ db: t.db, home, checkpoints: [anchorId], ...spec, seeds: [5, 6], modes: ['sample', 'argmax'] });
    const by = Object.fromEntries(cmp.rows.map((r) => [r.kind === 'checkpoint' ? `${r.kind}:${r.mode}` : r.kind, r]));
    expect(by['best single']!.worker).toBe(workers[best]);
    expect(by['best single']!.perSeed[0]).toBe(fitness);
    expect(by.oracle!.mean).toBeGreaterThanOrEqual(by['best single']!.mean);
    expect(by.oracle!.mean).toBeGreaterThanOrEqual(by.random!.mean);
    expect(by['checkpoint:sample']!.perSeed).toHaveLength(2);
    expect(by['checkpoint:argmax']).toBeDefined();
    expect(cmp.rows).toHaveLength(5);
    expect(formatComparison(cmp)).toMatch(/\| oracle \(best recorded mean per question\) \| \d\.\d{3} ± \d\.\d{3} \|/);
  }, 180_000);
});

describe('bad input', () => {
  it('refuses a checkpoint whose workers differ from the run, naming both lists', async () => {
    const e = await createFitnessTask({ db: t.db, home, checkpointId: anchorId, run: twoRun, spec: { kind: 'single-step', batchSize: 8 } }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(InputError);
    expect((e as Error).message).toMatch(new RegExp(`scores workers \\[alpha, beta, gamma\\] but run ${twoRun} has \\[alpha, beta\\]`));
    const twoCkpt = await saveTestCheckpoint(t.db, { backboneId, workers: ['alpha', 'beta'], run: twoRun });
    await expect(compareOnEpisodes({ db: t.db, home, checkpoints: [anchorId, twoCkpt.id], episodes: 2, questions: 2, turnBudget: 3, seeds: [0] }))
      .rejects.toThrow(/scores workers \[alpha, beta\] but run .* has \[alpha, beta, gamma\]/);
  }, 60_000);

  it('names the field of a bad spec, checkpoint or split size', async () => {
    const base = { db: t.db, home, checkpointId: anchorId };
    await expect(createFitnessTask({ ...base, spec: { kind: 'single-step', batchSize: 0 } })).rejects.toThrow(/field spec.batchSize/);
    await expect(createFitnessTask({ ...base, spec: { kind: 'episodes', episodes: 4, questions: 5, turnBudget: 3 } })).rejects.toThrow(/field spec.turnBudget/);
    await expect(createFitnessTask({ ...base, spec: { kind: 'bandit' } as unknown as FitnessTaskSpec })).rejects.toThrow(/field spec.kind/);
    await expect(createFitnessTask({ ...base, checkpointId: 'nope', spec: { kind: 'single-step', batchSize: 8 } })).rejects.toThrow(/no router checkpoint "nope"/);
    const task = await createFitnessTask({ ...base, spec: { kind: 'episodes', episodes: 1, questions: 200, turnBudget: 200 } });
    try {
      await expect(task.evaluate([theta0], ctx)).rejects.toThrow(/field spec.questions: an episode needs 200 distinct questions/);
    } finally {
      await task.release();
    }
  }, 60_000);
});
