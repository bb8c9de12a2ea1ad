// GRPO on the LLMRouter replay pool, both rollout paths: the in-process engine and the cluster
// (conduct jobs in one flow per iteration, a conductor process and a provider worker). The same
// seed gives the same rollouts (rewards, costs, decisions), the same iteration records and the
// same policy bit for bit; the update moves the policy where the group's rewards differ; every
// rollout has its row with the sampling policy's per-decision log-probabilities.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { estimateTokens, InputError } from '@fugu/core';
import { getConductorCheckpoint, getDatasetItems, getGrpoRun, getPoolWorkers, listGrpoIterations, listGrpoRollouts } from '@fugu/db';
import { loadLlmRouter, loadLlmRouterPool } from '@fugu/datasets';
import { saveAnchorCheckpoint } from '@fugu/serving/testing';
import { loadPolicy, routerChoices, splitItems, trainSplitRanking, workerReplayParams } from '@fugu/ultra';
import { analyseScores, analysisInputs, backboneFeatures, criterionSettings, formatScores, GrpoSession, runGrpo, startGrpoRun, type GrpoStartOptions } from '@fugu/ultra-training';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { conductorPool, expectedWorkflowCorrect, REPLAY_STEP_OUTPUT_TOKENS, replayItemOf, visibleSteps } from '@fugu/conductor';
import { createEvalEnv, replayPool, startWorkerProcess, syntheticItems, writeFixtures, type EvalEnv, type WorkerProcess } from '../support/eval-env.ts';
import { startConductorProcess, type ConductorProcess } from '../support/conductor.ts';

let env: EvalEnv;
let features: Awaited<ReturnType<typeof backboneFeatures>>;

const small: GrpoStartOptions = { dataset: 'llmrouter', pool: 'llmrouter', q: 4, g: 4, iterations: 2, seed: 11, valEvery: 1, valSize: 6, lr: 0.1, epochs: 2 };

beforeAll(async () => {
  env = await createEvalEnv({ overrides: { 'worker.concurrency': 32, 'conductor.pollMs': 20 } });
  features = await backboneFeatures(env.ctx.db, env.config.home);
});

afterAll(async () => {
  await features?.release();
  await env?.cleanup();
});

const runRows = async (runId: string) => ({
  run: (await getGrpoRun(env.ctx.db, runId))!,
  iterations: await listGrpoIterations(env.ctx.db, runId),
  rollouts: await listGrpoRollouts(env.ctx.db, runId),
});
const comparable = (rows: Awaited<ReturnType<typeof runRows>>['rollouts']) =>
  rows.map(({ workflowId: _w, ...r }) => r);
const recordOf = (r: Record<string, unknown>) => {
  const { wallMs: _w, dispatches: _d, ...rest } = r;
  return rest;
};

describe('fugu train grpo', () => {
  let local: string;

  it('in process: iterations committed with their rollouts; the policy moves; the same seed gives the same run', async () => {
    local = await startGrpoRun(env.ctx, { ...small, runId: 'grpo-local' }, features);
    const events: number[] = [];
    const r = await runGrpo(env.ctx, { runId: local, rollouts: 'local', features, onIteration: (e) => events.push(e.index) });
    expect(r.status).toBe('completed');
    expect(events).toEqual([0, 1]);
    const { run, iterations, rollouts } = await runRows(local);
    expect(run).toMatchObject({ status: 'completed', iteration: 2, policyCheckpointId: 'grpo-local-i2', adam: { step: expect.any(Number) } });
    expect(iterations.map((i) => [i.iteration, i.policyCheckpointId, i.nextCheckpointId])).toEqual([[0, 'grpo-local-start', 'grpo-local-i1'], [1, 'grpo-local-i1', 'grpo-local-i2']]);
    // 4 x 4 train rollouts and 6 validation ones per iteration, each with its row
    expect(rollouts.filter((x) => x.split === 'train')).toHaveLength(2 * 16);
    expect(rollouts.filter((x) => x.split === 'val')).toHaveLength(2 * 6);
    for (const x of rollouts) {
      expect([0, 0.5, 1]).toContain(x.reward);
      expect(x.parseOk).toBe(true);
      const lps = x.logprobs as number[] | null;
      if (x.split === 'train') {
        // the sampled decisions and their log-probabilities under the sampling policy
        expect((x.decisions as { steps: unknown[] }).steps.length).toBe(x.nSteps);
        expect(lps!.every((v) => v <= 0)).toBe(true);
        expect(typeof x.advantage).toBe('number');
      }
    }
    // a group's advantages sum to 0; a group with equal rewards has zero group advantages and is
    // counted, and only the step tie-break's terms (-0.05 per step above the group's mean steps)
    const rec0 = iterations[0]!.record as { zeroAdvantageGroups: number; tiebreakGroups: number; groups: number; meanReward: number; approxKl: number; epochs: unknown[]; val: { items: number } };
    let zero = 0;
    let tiebroken = 0;
    for (const q of [0, 1, 2, 3]) {
      const g = rollouts.filter((x) => x.iteration === 0 && x.split === 'train' && x.question === q);
      // a group is tie-broken when rollouts of one reward differ in their steps
      if ([...new Set(g.map((x) => x.reward))].some((r) => new Set(g.filter((x) => x.reward === r).map((x) => x.nSteps)).size > 1)) tiebroken++;
      expect(g.reduce((a, x) => a + x.advantage!, 0)).toBeCloseTo(0, 9);
      if (new Set(g.map((x) => x.reward)).size === 1) {
        zero++;
        const m = g.reduce((a, x) => a + x.nSteps!, 0) / g.length;
        for (const x of g) expect(x.advantage).toBeCloseTo(-0.05 * (x.nSteps! - m), 12);
      }
    }
    expect(rec0.zeroAdvantageGroups).toBe(zero);
    expect(rec0.tiebreakGroups).toBe(tiebroken);
    expect(rec0.groups).toBe(4);
    expect(rec0.val.items).toBe(6);
    // the update moved the policy when some group had different rewards
    const start = (await getConductorCheckpoint(env.ctx.db, 'grpo-local-start'))!;
    const next = (await getConductorCheckpoint(env.ctx.db, 'grpo-local-i1'))!;
    const moved = start.theta.some((v, i) => v !== next.theta[i]);
    expect(moved).toBe(rollouts.some((x) => x.iteration === 0 && x.split === 'train' && x.advantage !== 0));
    if (moved) expect(rec0.approxKl).not.toBe(0);
    // the best validation policy is a checkpoint whose parent is the starting one
    expect(run.bestCheckpointId).toMatch(/^grpo-local-best-i[01]$/);
    expect((await getConductorCheckpoint(env.ctx.db, run.bestCheckpointId!))!.parentId).toBe('grpo-local-start');

    // the same seed again: the same rollouts, records and final policy, bit for bit
    const again = await startGrpoRun(env.ctx, { ...small, runId: 'grpo-local-again', from: 'grpo-local-start' }, features);
    await runGrpo(env.ctx, { runId: again, rollouts: 'local', features });
    const b = await runRows(again);
    expect(comparable(b.rollouts)).toEqual(comparable(rollouts));
    expect(b.iterations.map((i) => recordOf(i.record))).toEqual(iterations.map((i) => recordOf(i.record)));
    expect(Array.from((await getConductorCheckpoint(env.ctx.db, 'grpo-local-again-i2'))!.theta)).toEqual(Array.from((await getConductorCheckpoint(env.ctx.db, 'grpo-local-i2'))!.theta));
  });

  it('on the cluster (conduct jobs, a conductor process, a provider worker): the same rollouts and the same policy as in process', async () => {
    let worker: WorkerProcess | undefined;
    let conductor: ConductorProcess | undefined;
    try {
      [worker, conductor] = await Promise.all([startWorkerProcess(env.config), startConductorProcess(env.config, { FUGU_CONDUCTOR_POLL_MS: '20' })]);
      const cluster = await startGrpoRun(env.ctx, { ...small, runId: 'grpo-cluster', from: 'grpo-local-start' }, features);
      const r = await runGrpo(env.ctx, { runId: cluster, rollouts: 'cluster', features, pollMs: 50 });
      expect(r.status).toBe('completed');
      const a = await runRows(local);
      const b = await runRows(cluster);
      expect(b.rollouts.every((x) => x.workflowId !== null)).toBe(true);
      expect(comparable(b.rollouts)).toEqual(comparable(a.rollouts));
      expect(b.iterations.map((i) => recordOf(i.record))).toEqual(a.iterations.map((i) => recordOf(i.record)));
      expect(Array.from((await getConductorCheckpoint(env.ctx.db, 'grpo-cluster-i2'))!.theta)).toEqual(Array.from((await getConductorCheckpoint(env.ctx.db, 'grpo-local-i2'))!.theta));

      // randomised pools (--pool-k 3): each question's group runs on its own 3 of the 9 workers,
      // the policy's choice masked to them; the two paths agree here too (the mask enters the
      // sampling, the recomputed log-probabilities and the gradient alike)
      const k = { ...small, poolK: 3, from: 'grpo-local-start' };
      const kLocal = await startGrpoRun(env.ctx, { ...k, runId: 'grpo-k3-local' }, features);
      await runGrpo(env.ctx, { runId: kLocal, rollouts: 'local', features });
      const kCluster = await startGrpoRun(env.ctx, { ...k, runId: 'grpo-k3-cluster' }, features);
      expect((await runGrpo(env.ctx, { runId: kCluster, rollouts: 'cluster', features, pollMs: 50 })).status).toBe('completed');
      const kl = await runRows(kLocal);
      const kc = await runRows(kCluster);
      expect(comparable(kc.rollouts)).toEqual(comparable(kl.rollouts));
      expect(Array.from((await getConductorCheckpoint(env.ctx.db, 'grpo-k3-cluster-i2'))!.theta)).toEqual(Array.from((await getConductorCheckpoint(env.ctx.db, 'grpo-k3-local-i2'))!.theta));
      // every train rollout's steps use only its question's pool, the one its workflow row was given
      const { rows: wfs } = await sql<{ id: number; options: { workers?: string[] } }>`select id, options from workflows where id = any(${kc.rollouts.map((x) => x.workflowId!)})`.execute(env.ctx.db);
      const optionsOf = new Map(wfs.map((w) => [w.id, w.options]));
      const names = (await getPoolWorkers(env.ctx.db, kc.run.poolId)).map((w) => w.name);
      // each group's pools, rollout by rollout
      const pools = new Map<string, string[]>();
      for (const x of kc.rollouts) {
        const allowed = optionsOf.get(x.workflowId!)!.workers;
        if (x.split === 'val') {
          expect(allowed).toBeUndefined();
          continue;
        }
        expect(allowed).toHaveLength(3);
        const used = (x.decisions as { steps: Array<{ worker: number }> }).steps.map((st) => names[st.worker]!);
        for (const w of used) expect(allowed).toContain(w);
        const group = `${x.iteration}.${x.question}`;
        pools.set(group, [...(pools.get(group) ?? []), allowed!.join()]);
      }
      // Q groups per iteration, each of its G rollouts on one and the same pool
      expect([...pools.keys()].sort()).toEqual(['0.0', '0.1', '0.2', '0.3', '1.0', '1.1', '1.2', '1.3']);
      for (const [group, seen] of pools) {
        expect(seen, `group ${group}`).toHaveLength(small.g!);
        expect(new Set(seen).size, `group ${group}: one pool for its ${small.g} rollouts`).toBe(1);
      }
      expect(new Set([...pools.values()].map((seen) => seen[0])).size, 'questions get different pools').toBeGreaterThan(1);
    } finally {
      await conductor?.term();
      await worker?.term();
    }
  });

  it('a warm start (--start router:<checkpoint>): the first-step worker choice fitted to the router\'s picks on the train questions', async () => {
    // an anchor router over the llmrouter pool: each worker's anchor is one train question
    const pool = await loadLlmRouterPool(env.config.llmrouterDir);
    const ds = await loadLlmRouter(env.config.llmrouterDir);
    const anchors = Object.fromEntries(pool.workers.map((w, i) => [w.name, ds.items[i * 7]!.prompt]));
    const router = await saveAnchorCheckpoint(env.ctx.db, { home: env.config.home, anchors, id: 'anchor-llmrouter-9' });
    const warm = await startGrpoRun(env.ctx, { ...small, runId: 'grpo-warm', start: `router:${router.id}`, warmStartQuestions: 300 }, features);
    const run = (await getGrpoRun(env.ctx.db, warm))!;
    const start = (await getConductorCheckpoint(env.ctx.db, run.startCheckpointId))!;
    expect(start.training).toMatchObject({ stage: 'warm-start', router: router.id });
    expect(start.training.agreement as number).toBeGreaterThan(0.9);
    // checked here on questions of the train split, against the router's own picks
    const names = pool.workers.map((w) => w.name);
    const stored = await getDatasetItems(env.ctx.db, (await getGrpoRun(env.ctx.db, warm))!.datasetId);
    // held out: other train questions than the 300 it was fitted on (mostly)
    const qs = splitItems(stored, 'train', 0).slice(-300).map((i) => stored[i]!.prompt);
    const picks = await routerChoices(env.ctx.db, env.config.home, router.id, qs, names);
    const x = await features.features(qs);
    const { policy } = await loadPolicy(env.ctx.db, start.id, { workers: names });
    const agree = qs.filter((_, i) => policy.decide(x[i]!, { argmax: true, maxSteps: 1 }).decisions.steps[0]!.worker === picks[i]).length / qs.length;
    // the documented initialisation picks its rank-0 worker for every question
    const rank0 = names.indexOf(trainSplitRanking(names, stored, 0)[0]!);
    const initAgree = picks.filter((p) => p === rank0).length / picks.length;
    expect(new Set(picks).size).toBeGreaterThan(1);
    expect(agree).toBeGreaterThan(initAgree + 0.2);
    // a router of another pool is refused naming the flag
    await expect(startGrpoRun(env.ctx, { ...small, runId: 'grpo-warm-bad', start: 'router:no-such-router', warmStartQuestions: 10 }, features)).rejects.toMatchObject({ field: '--start' });
  });

  /** A run's test split and pool, and a checkpoint's argmax workflow for each of its items. */
  const testSplitOf = async (run: { datasetId: number; poolId: number }) => {
    const stored = await getDatasetItems(env.ctx.db, run.datasetId);
    const test = splitItems(stored, 'test', 0).map((i) => stored[i]!);
    const workers = await getPoolWorkers(env.ctx.db, run.poolId);
    const names = workers.map((w) => w.name);
    const x = await features.features(test.map((t) => t.prompt));
    const pool = conductorPool(workers.map((w) => ({ name: w.name, description: w.model })));
    const argmax = async (ckpt: string) => {
      const { policy } = await loadPolicy(env.ctx.db, ckpt, { workers: names });
      return test.map((it, i) => policy.write({ features: x[i]!, question: it.prompt, pool, argmax: true }).workflow);
    };
    return { test, workers, names, argmax };
  };

  it('any dataset with recorded scores and its pool file: on a synthetic one where each task has its own best worker, GRPO learns to choose per question', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'fugu-grpo-'));
    const files = await writeFixtures(dir, syntheticItems(600), replayPool());
    const id = await startGrpoRun(env.ctx, { dataset: files.dataset, pool: files.pool, runId: 'grpo-synthetic', q: 32, g: 8, iterations: 40, lr: 0.01, seed: 3, valEvery: 0 }, features);
    expect((await runGrpo(env.ctx, { runId: id, rollouts: 'local', features })).status).toBe('completed');
    // exact expected accuracy of the argmax workflows on the test split, before and after
    const run = (await getGrpoRun(env.ctx.db, id))!;
    const { test, workers, names, argmax } = await testSplitOf(run);
    const acc = async (ckpt: string): Promise<number> =>
      (await argmax(ckpt)).reduce((a, wf, i) => {
        const steps = wf.steps.map((st, j) => ({ worker: names[st.worker]!, sees: visibleSteps(wf, j) }));
        return a + expectedWorkflowCorrect({ params: (w) => workerReplayParams(undefined, workers.find((k) => k.name === w)!), item: replayItemOf(test[i]!), steps });
      }, 0) / test.length;
    const before = await acc(run.startCheckpointId);
    const after = await acc(run.policyCheckpointId);
    console.log(`synthetic dataset, test split, exact expected accuracy of the argmax workflows: start ${before.toFixed(4)}, after 40 iterations ${after.toFixed(4)}`);
    expect(after).toBeGreaterThan(before + 0.05);
    await rm(dir, { recursive: true, force: true });
  });

  // issue 29 (GRPO as a user, item 4): a policy must not move without signal, and a step that adds
  // no information must not be a free direction to drift in
  const argmaxSteps = async (run: { datasetId: number; poolId: number }, ckpts: readonly string[]): Promise<number[]> => {
    const { test, argmax } = await testSplitOf(run);
    const out: number[] = [];
    for (const id of ckpts) out.push((await argmax(id)).reduce((a, wf) => a + wf.steps.length, 0) / test.length);
    return out;
  };
  const withScores = (score: number) => syntheticItems(600).map((it) => ({ ...it, recorded: Object.fromEntries(Object.keys(it.recorded!).map((w) => [w, { score }])) }));

  it('no signal, no move (issue 29): every worker always right, so every group has equal rewards: the policy and Adam\'s state stay exactly as they were', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'fugu-grpo-'));
    const files = await writeFixtures(dir, withScores(1), replayPool());
    // keep = 1: a step that sees only right answers of a worker that is right stays right (the presets' 0.95 and 0.8 would flip some)
    const base = { dataset: files.dataset, pool: files.pool, q: 16, g: 8, iterations: 4, lr: 0.01, seed: 3, valEvery: 0, replay: { presets: { large: { keep: 1 }, small: { keep: 1 } } } };
    // without the step tie-break: nothing at all to learn
    const still = await startGrpoRun(env.ctx, { ...base, runId: 'grpo-allright', stepTiebreak: 0 }, features);
    expect((await runGrpo(env.ctx, { runId: still, rollouts: 'local', features })).status).toBe('completed');
    const { run, iterations } = await runRows(still);
    expect(iterations.map((i) => (i.record as { zeroAdvantageGroups: number }).zeroAdvantageGroups)).toEqual([16, 16, 16, 16]);
    expect(iterations.map((i) => (i.record as { approxKl: number }).approxKl)).toEqual([0, 0, 0, 0]);
    expect(run.adam.step).toBe(0);
    const start = (await getConductorCheckpoint(env.ctx.db, run.startCheckpointId))!;
    for (let i = 1; i <= 4; i++) expect(Array.from((await getConductorCheckpoint(env.ctx.db, `grpo-allright-i${i}`))!.theta)).toEqual(Array.from(start.theta));
    // with it (the default): rollouts that tie prefer fewer steps, so the argmax never gets longer
    const tie = await startGrpoRun(env.ctx, { ...base, runId: 'grpo-allright-tie' }, features);
    expect((await runGrpo(env.ctx, { runId: tie, rollouts: 'local', features })).status).toBe('completed');
    const t = await runRows(tie);
    const steps = await argmaxSteps(t.run, [t.run.startCheckpointId, ...[1, 2, 3, 4].map((i) => `grpo-allright-tie-i${i}`)]);
    expect(steps.every((s) => s <= steps[0]!), `argmax steps ${steps.join(', ')}`).toBe(true);
    // the sampled workflows get shorter: the tie-break's only direction
    const sampled = t.iterations.map((i) => (i.record as { meanSteps: number }).meanSteps);
    expect(sampled.at(-1)!, `sampled steps ${sampled.join(', ')}`).toBeLessThan(sampled[0]!);
    await rm(dir, { recursive: true, force: true });
  });

  it('no drift without signal (issue 29): mu = 0 and noise-only rewards (every worker a coin flip on every item): the argmax workflows do not grow longer', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'fugu-grpo-'));
    const files = await writeFixtures(dir, withScores(0.5), replayPool());
    const id = await startGrpoRun(env.ctx, { dataset: files.dataset, pool: files.pool, runId: 'grpo-noise', q: 32, g: 8, iterations: 30, lr: 0.01, seed: 3, valEvery: 0 }, features);
    expect((await runGrpo(env.ctx, { runId: id, rollouts: 'local', features })).status).toBe('completed');
    const { run } = await runRows(id);
    const steps = await argmaxSteps(run, [run.startCheckpointId, ...Array.from({ length: 30 }, (_, i) => `grpo-noise-i${i + 1}`)]);
    console.log(`noise-only rewards, mu = 0: argmax mean steps on the test split at iterations 0..30: ${steps.map((s) => s.toFixed(2)).join(' ')}`);
    // before the step tie-break (dfca551): 1.58 from iteration 4, up to 1.98, 1.75 at the end
    expect(steps[0]).toBe(1);
    expect(Math.max(...steps), `argmax steps ${steps.join(', ')}`).toBeLessThanOrEqual(1.1);
    expect(steps.at(-1), `argmax steps ${steps.join(', ')}`).toBe(1);
    await rm(dir, { recursive: true, force: true });
  });

  // issue 29 (GRPO as a user, item 2): one checkpoint criterion, the run's and `fugu ultra analyse score`'s
  it("the checkpoint criterion: the run's best on validation is fugu ultra analyse score's best over the checkpoints it validated, value for value", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'fugu-grpo-'));
    const files = await writeFixtures(dir, syntheticItems(600), replayPool());
    // mu 2000: a worker's call (about $0.00005 here) costs a tenth of a point of reward, so cost and accuracy pull apart
    const iterations = 8;
    const id = await startGrpoRun(env.ctx, { dataset: files.dataset, pool: files.pool, runId: 'grpo-criterion', q: 16, g: 8, iterations, lr: 0.03, seed: 3, valEvery: 1, valSize: 20, reward: { costPerUsd: 2000 } }, features);
    expect((await runGrpo(env.ctx, { runId: id, rollouts: 'local', features })).status).toBe('completed');
    const { run, iterations: its } = await runRows(id);
    type Crit = { value: number; accuracy: number; usd: number; items: number; exact: boolean; mu: number };
    const records = its.map((i) => i.record as { criterion: Crit; finalCriterion?: Crit; val: { meanReward: number; items: number } });
    // exact, on the whole val split (not the 20 sampled validation items)
    const session = await GrpoSession.open(env.ctx.db, id, features);
    for (const r of records) expect(r.criterion).toMatchObject({ exact: true, items: session.items.val.length, mu: 2000 });
    expect(records[0]!.val.items).toBe(20);
    expect(its.map((i) => i.valReward)).toEqual(records.map((r) => r.criterion.value));
    // the checkpoints it validated: the sampling policy of each iteration, and the final policy (it samples none)
    const validated = [run.startCheckpointId, ...Array.from({ length: iterations }, (_, i) => `${id}-i${i + 1}`)];
    expect(records.slice(0, -1).every((r) => r.finalCriterion === undefined)).toBe(true);
    const judged = [...records.map((r) => r.criterion.value), records.at(-1)!.finalCriterion!.value];
    const inputs = await analysisInputs(env.config, { dataset: files.dataset, pool: files.pool });
    const criterion = await criterionSettings(env.ctx.db, validated, { configs: [{ name: 'presets', config: {} }] });
    expect(criterion).toMatchObject({ reward: { costPerUsd: 2000 }, maxSteps: 5, runs: [id] });
    const a = await analyseScores({ db: env.ctx.db, home: env.config.home }, inputs, { specs: validated, split: 'val', configs: [{ name: 'presets', config: {} }], criterion });
    // the same number for every checkpoint, and so the same best
    expect(a.rows.map((r) => r.criterion!.value)).toEqual(judged);
    const best = (await getConductorCheckpoint(env.ctx.db, run.bestCheckpointId!))!;
    expect(a.best!.spec).toBe(best.training.iteration === 0 ? run.startCheckpointId : `${id}-i${String(best.training.iteration)}`);
    expect(best.metrics).toMatchObject({ valReward: a.best!.value, criterion: { value: a.best!.value } });
    expect(formatScores(a)).toMatch(/best policy by the checkpoint criterion \(mu = 2000\): /);
    // the two old criteria on this run: the sampled validation reward (with mu x $) and the exact accuracy (without)
    const argmax = (xs: number[]) => xs.reduce((b, x, i) => (x > xs[b]! ? i : b), 0);
    const oldRun = argmax(records.map((r) => r.val.meanReward));
    const oldAnalyse = argmax(a.rows.slice(0, iterations).map((r) => r.accuracy.presets!));
    const now = argmax(records.map((r) => r.criterion.value));
    console.log(`checkpoint criterion, synthetic run (mu 2000, ${iterations} validated checkpoints): old run criterion (sampled val reward) picks ${validated[oldRun]}, old analyse criterion (exact accuracy) picks ${validated[oldAnalyse]}, the one criterion picks ${validated[now]} (values ${records.map((r) => r.criterion.value.toFixed(4)).join(' ')})`);
    // the old criteria disagree here (the run's would have kept i1, `fugu ultra analyse score`'s named the untrained start, the issue's picture); now both name i1
    expect(validated[oldAnalyse]).toBe(run.startCheckpointId);
    expect(validated[oldRun]).toBe(`${id}-i1`);
    expect(a.best!.spec).toBe(`${id}-i1`);
    await rm(dir, { recursive: true, force: true });
  });

  it('the final policy is judged too: on a replay pool its criterion is computed at the last commit, and it is the run\'s best when it beats every validated one (was: never validated)', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'fugu-grpo-'));
    const files = await writeFixtures(dir, syntheticItems(600), replayPool());
    const id = await startGrpoRun(env.ctx, { dataset: files.dataset, pool: files.pool, runId: 'grpo-final', q: 32, g: 8, iterations: 2, lr: 0.01, seed: 3, valEvery: 1, valSize: 20 }, features);
    expect((await runGrpo(env.ctx, { runId: id, rollouts: 'local', features })).status).toBe('completed');
    const { run, iterations: its } = await runRows(id);
    type Crit = { value: number };
    const records = its.map((i) => i.record as { criterion: Crit; finalCriterion?: Crit });
    const final = records.at(-1)!.finalCriterion!;
    console.log(`final policy judged: validated ${records.map((r) => r.criterion.value.toFixed(4)).join(' ')}, final ${final.value.toFixed(4)}`);
    // the same number fugu ultra analyse score gives the final checkpoint
    const inputs = await analysisInputs(env.config, { dataset: files.dataset, pool: files.pool });
    const specs = [`${id}-i2`];
    const criterion = await criterionSettings(env.ctx.db, specs, { configs: [{ name: 'presets', config: {} }] });
    const a = await analyseScores({ db: env.ctx.db, home: env.config.home }, inputs, { specs, split: 'val', configs: [{ name: 'presets', config: {} }], criterion });
    expect(a.rows[0]!.criterion!.value).toBe(final.value);
    // here the last update is the best of the run: its checkpoint is the run's best
    expect(final.value).toBeGreaterThan(Math.max(...records.map((r) => r.criterion.value)));
    expect(run.bestCheckpointId).toBe(`${id}-best-i2`);
    expect(run.bestValReward).toBe(final.value);
    await rm(dir, { recursive: true, force: true });
  });

  // issue 29 (GRPO as a user, item 3): a cost preference whose unit carries across pools
  it('--cost-weight: mu is the weight over the best single worker\'s $ per train item; every price x 1000 leaves the run unchanged, where the same --mu does not', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'fugu-grpo-'));
    const items = syntheticItems(600);
    const cheap = replayPool();
    // the same workers at 1000 times the prices (LLMRouter's against GPT-4's, and more)
    const dear = { ...cheap, workers: cheap.workers.map((w) => ({ ...w, prices: { inputPerMTok: String(Number(w.prices.inputPerMTok) * 1000), outputPerMTok: String(Number(w.prices.outputPerMTok) * 1000) } })) };
    const a = await writeFixtures(dir, items, cheap);
    await mkdir(path.join(dir, 'dear'));
    const b = await writeFixtures(path.join(dir, 'dear'), items, dear);
    const o = { dataset: a.dataset, q: 16, g: 8, iterations: 4, lr: 0.03, seed: 3, valEvery: 0 };
    const cw = await startGrpoRun(env.ctx, { ...o, pool: a.pool, runId: 'grpo-cw-cheap', costWeight: 0.5 }, features);
    const cwDear = await startGrpoRun(env.ctx, { ...o, pool: b.pool, runId: 'grpo-cw-dear', costWeight: 0.5 }, features);
    for (const id of [cw, cwDear]) expect((await runGrpo(env.ctx, { runId: id, rollouts: 'local', features })).status).toBe('completed');
    const [x, y] = [await runRows(cw), await runRows(cwDear)];
    // the reference: the best worker by train mean, its recorded-token cost over the train items only
    const ranking = trainSplitRanking(cheap.workers.map((w) => w.name), items, { by: 'prompt', seed: 0 });
    const ref = (x.run.config as { costReference: { worker: string; usdPerItem: number; items: number } }).costReference;
    const train = splitItems(items, 'train', 0).map((i) => items[i]!);
    const w0 = cheap.workers.find((w) => w.name === ranking[0])!;
    const usd = train.reduce((s, it) => s + (estimateTokens(it.prompt) * Number(w0.prices.inputPerMTok) + REPLAY_STEP_OUTPUT_TOKENS * Number(w0.prices.outputPerMTok)) / 1e6, 0) / train.length;
    expect(ref).toMatchObject({ worker: ranking[0], items: train.length });
    expect(ref.usdPerItem).toBeCloseTo(usd, 12);
    expect((x.run.config as { reward: { costPerUsd: number } }).reward.costPerUsd).toBeCloseTo(0.5 / usd, 6);
    // the dear pool: a reference 1000 times larger, so the same rewards, workflows and policy
    expect((y.run.config as { costReference: { usdPerItem: number } }).costReference.usdPerItem / ref.usdPerItem).toBeCloseTo(1000, 9);
    expect(y.rollouts.map((r) => r.decisions)).toEqual(x.rollouts.map((r) => r.decisions));
    y.rollouts.forEach((r, i) => expect(r.reward!).toBeCloseTo(x.rollouts[i]!.reward!, 9));
    // the cost term is in those rewards: below the no-cost 1 / 0.5 / 0
    expect(x.rollouts.some((r) => r.reward !== null && ![0, 0.5, 1].includes(r.reward))).toBe(true);
    // the same mu on both pools: the dear pool's rewards are other rewards (the defect)
    const mu = (x.run.config as { reward: { costPerUsd: number } }).reward.costPerUsd;
    const m = await startGrpoRun(env.ctx, { ...o, pool: b.pool, runId: 'grpo-mu-dear', iterations: 1, reward: { costPerUsd: mu } }, features);
    expect((await runGrpo(env.ctx, { runId: m, rollouts: 'local', features })).status).toBe('completed');
    const z = await runRows(m);
    expect(Math.max(...z.rollouts.map((r, i) => Math.abs(r.reward! - x.rollouts[i]!.reward!)))).toBeGreaterThan(0.1);
    // not both; not negative
    await expect(startGrpoRun(env.ctx, { ...o, pool: a.pool, runId: 'grpo-cw-both', costWeight: 0.1, reward: { costPerUsd: 10 } }, features)).rejects.toMatchObject({ field: '--cost-weight' });
    await expect(startGrpoRun(env.ctx, { ...o, pool: a.pool, runId: 'grpo-cw-neg', costWeight: -1 }, features)).rejects.toMatchObject({ field: '--cost-weight' });
    await rm(dir, { recursive: true, force: true });
  });

  // issue 29 (GRPO as a user, item 1): --split-by dataset, stored with the run; a start of another scheme refused
  it("--split-by dataset: the run trains on the dataset's train part and validates on a val part carved from it; the scheme is stored, and a start or resume of another is refused", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'fugu-grpo-'));
    const items = syntheticItems(600);
    const files = await writeFixtures(dir, items, replayPool());
    const o: GrpoStartOptions = { dataset: files.dataset, pool: files.pool, q: 4, g: 2, iterations: 1, seed: 3, valEvery: 0 };
    const id = await startGrpoRun(env.ctx, { ...o, runId: 'grpo-by-dataset', splitBy: 'dataset' }, features);
    const run = (await getGrpoRun(env.ctx.db, id))!;
    expect(run.config).toMatchObject({ splitBy: 'dataset', splitSeed: 0 });
    expect((await getConductorCheckpoint(env.ctx.db, run.startCheckpointId))!.training).toMatchObject({ rankedBy: { splitBy: 'dataset' } });
    // the session's items: none of the source's test items (120 of 600); val a ninth of the rest
    const session = await GrpoSession.open(env.ctx.db, id, features);
    const sourceTest = new Set(items.filter((it) => it.sourceSplit === 'test').map((it) => it.id));
    expect(sourceTest.size).toBe(120);
    expect([...session.items.train, ...session.items.val].some((it) => sourceTest.has(it.id))).toBe(false);
    expect(session.items.train.length + session.items.val.length).toBe(480);
    expect(Math.abs(session.items.val.length - 480 / 9)).toBeLessThanOrEqual(1);
    // a resume with another scheme, and a start from a policy of another scheme, are refused naming the flag
    await expect(startGrpoRun(env.ctx, { resume: id, splitBy: 'prompt' }, features)).rejects.toMatchObject({ field: '--split-by' });
    await expect(startGrpoRun(env.ctx, { ...o, runId: 'grpo-by-dataset-from', from: run.startCheckpointId, splitBy: 'prompt' }, features)).rejects.toMatchObject({ field: '--split-by' });
    // from it without --split-by: its scheme
    const from = await startGrpoRun(env.ctx, { ...o, runId: 'grpo-by-dataset-from', from: run.startCheckpointId }, features);
    expect((await getGrpoRun(env.ctx.db, from))!.config).toMatchObject({ splitBy: 'dataset' });
    // a run stored before the scheme existed (no splitBy in its config) reads as by prompt, and resumes with it
    await sql`update grpo_runs set config = config - 'splitBy' where id = ${from}`.execute(env.ctx.db);
    expect((await GrpoSession.open(env.ctx.db, from, features)).cfg.splitBy).toBe('prompt');
    await expect(startGrpoRun(env.ctx, { resume: from, splitBy: 'prompt' }, features)).resolves.toBe(from);
    await rm(dir, { recursive: true, force: true });
  });

  it('bad input names the flag: G < 2, Q x G past one flow, Q past the train split, a checkpoint of another pool, a resume with changed settings', async () => {
    const field = async (o: GrpoStartOptions): Promise<string | undefined> => {
      try {
        await startGrpoRun(env.ctx, o, features);
      } catch (e) {
        expect(e).toBeInstanceOf(InputError);
        return (e as InputError).field;
      }
      return undefined;
    };
    expect(await field({ ...small, g: 1 })).toBe('--g');
    expect(await field({ ...small, q: 400, g: 16 })).toBe('--q');
    expect(await field({ ...small, q: 100_000 })).toBe('--q');
    expect(await field({ ...small, pool: 'llmrouter', from: 'no-such-checkpoint' })).toBe('--from');
    expect(await field({ resume: local, g: 8 })).toBe('--g');
    expect(await field({ resume: 'no-such-run' })).toBe('--resume');
    expect(await field({ ...small, runId: 'has.a.dot' })).toBe('--run-id');
    expect(await field({ ...small, stepTiebreak: -0.1 })).toBe('--step-tiebreak');
    expect(await field({ ...small, poolK: 1 })).toBe('--pool-k');
    expect(await field({ ...small, poolK: 10 })).toBe('--pool-k');
    expect(await field({ ...small, poolHoldout: [['gemma-2-9b-it', 'qwen2.5-7b-instruct']] })).toBe('--pool-holdout');
    expect(await field({ ...small, poolK: 3, poolHoldout: [['gemma-2-9b-it', 'qwen2.5-7b-instruct']] })).toBe('--pool-holdout');
    expect(await field({ ...small, poolK: 2, poolHoldout: [['gemma-2-9b-it', 'nobody']] })).toBe('--pool-holdout');
  });
});
