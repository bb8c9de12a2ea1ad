// The router end to end on real Postgres and the real USE-lite backbone: an evaluation run of
// replay workers with task-dependent skills, SFT on its rewards, evaluation against the
// baselines; and the checks that refuse a checkpoint that does not fit the data.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { InputError } from '@fugu/core';
import { createLogger, Registry } from '@fugu/telemetry';
import { startProviderWorker, type ProviderWorkerHandle } from '../../apps/provider-worker/src/worker.ts';
import { runEval } from '@fugu/evaluation';
import { getCheckpoint } from '@fugu/db';
import { evaluateRouter, formatRouterEval, routingDataFromRun, splitIndices, trainRouter } from '@fugu/training';
import { createEvalEnv, replayPool, syntheticItems, writeFixtures, type EvalEnv } from '../support/eval-env.ts';

let env: EvalEnv;
let worker: ProviderWorkerHandle;
const quiet = () => {};

beforeAll(async () => {
  env = await createEvalEnv();
  worker = await startProviderWorker({ config: env.config, db: env.ctx.db, log: createLogger({ name: 't', level: 'silent' }), registry: new Registry() });
  const run = async (runId: string, workers: string[]) => {
    const files = await writeFixtures(`${env.dir}/${runId}`, syntheticItems(600, 5), replayPool(workers));
    await runEval(env.ctx, { dataset: files.dataset, pool: files.pool, repetitions: 1, sample: null, seed: 0, spendCap: null, localWorkers: 0, keyCheck: true, wait: true, runId, log: quiet });
  };
  await run('skills', ['alpha', 'beta', 'gamma']);
  await run('two', ['alpha', 'beta']);
});
afterAll(async () => {
  await worker?.close();
  await env?.cleanup();
});

const train = (over: Partial<Parameters<typeof trainRouter>[1]> = {}) =>
  trainRouter(env.ctx.db, {
    run: 'skills', tau: 1, seed: 0, splitSeed: 0, epochs: 40, batchSize: 64, lr: 0.01, patience: 10, headOnly: false, weightDecay: 0,
    selectBy: 'reward', home: env.dir, log: quiet, ...over,
  });

describe('router SFT and evaluation', () => {
  it('learns which worker is good at which task, beats the best single worker, and is seeded', async () => {
    const a = await train();
    expect(a.split.train + a.split.val + a.split.test).toBe(600);
    const r = await evaluateRouter(env.ctx.db, { checkpoint: a.checkpointId, split: 'test', k: 10, home: env.dir, log: quiet });
    const by = Object.fromEntries(r.methods.map((m) => [m.name, m.meanReward]));
    // alpha is the math worker, beta the qa worker (test/support/eval-env.ts): the router finds it
    expect(r.routing.math!.alpha).toBeGreaterThan(0.5);
    expect(r.routing.qa!.beta).toBeGreaterThan(0.5);
    expect(by.router).toBeGreaterThan(by['best single']!);
    expect(by.oracle).toBeGreaterThanOrEqual(by.router!);
    expect(r.strongWeak.apgr).toBeGreaterThan(0);
    expect(r.sweep.hull.length).toBeGreaterThan(0);
    expect(r.training?.length).toBeGreaterThan(0);

    const b = await train();
    const thetas = await sql<{ id: string; theta: Buffer }>`select id, theta from router_checkpoints where id in (${a.checkpointId}, ${b.checkpointId})`.execute(env.ctx.db);
    expect(thetas.rows[0]!.theta.equals(thetas.rows[1]!.theta)).toBe(true);
  });

  it('head-only training keeps z at 1', async () => {
    const h = await train({ headOnly: true, epochs: 5 });
    const row = await sql<{ theta: Buffer }>`select theta from router_checkpoints where id = ${h.checkpointId}`.execute(env.ctx.db);
    const theta = new Float32Array(new Uint8Array(row.rows[0]!.theta).buffer);
    expect(theta.subarray(0, 512).every((z) => z === 1)).toBe(true);
  });

  // issue 29 (GRPO as a user, item 1): the dataset's own split, chosen by --split-by and kept by the checkpoint
  it("--split-by dataset: the dataset's test items are the test split; the checkpoint keeps its scheme and another is refused", async () => {
    // syntheticItems: every fifth item is in the source's test split (120 of 600)
    const sourceTest = syntheticItems(600, 5).filter((it) => it.sourceSplit === 'test').map((it) => it.id);
    const d = await train({ splitBy: 'dataset', epochs: 3 });
    expect(d.split.test).toBe(sourceTest.length);
    expect(d.split.train + d.split.val).toBe(600 - sourceTest.length);
    const ckpt = (await getCheckpoint(env.ctx.db, d.checkpointId))!;
    expect(ckpt.training).toMatchObject({ splitBy: 'dataset', splitSeed: 0 });
    // evaluated on its own scheme by default: the source's test items
    const r = await evaluateRouter(env.ctx.db, { checkpoint: d.checkpointId, split: 'test', k: 10, home: env.dir, log: quiet });
    expect(r.data).toMatchObject({ splitBy: 'dataset', items: sourceTest.length });
    expect(formatRouterEval(r)).toMatch(/test split \(the dataset's own split/);
    // another scheme's test split would hold questions it was trained on: refused, naming the flag
    const e = await evaluateRouter(env.ctx.db, { checkpoint: d.checkpointId, split: 'test', splitBy: 'prompt', k: 10, home: env.dir, log: quiet }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(InputError);
    expect(e).toMatchObject({ field: '--split-by' });
    expect((e as Error).message).toMatch(/was made with the split of the dataset's own \(--split-by dataset\), not --split-by prompt/);
    // by prompt, the default: the checkpoint says so, and the split is the one it always was (60 of 600)
    const p = await train({ epochs: 2 });
    expect(p.split.test).toBe(splitIndices({ items: (await routingDataFromRun(env.ctx.db, 'skills')).items }, 0).test.length);
    expect((await getCheckpoint(env.ctx.db, p.checkpointId))!.training).toMatchObject({ splitBy: 'prompt', splitSeed: 0 });
    await expect(evaluateRouter(env.ctx.db, { checkpoint: p.checkpointId, split: 'test', splitBy: 'dataset', k: 10, home: env.dir, log: quiet })).rejects.toMatchObject({ field: '--split-by' });
    // so is another split seed (was: scored on another seed's test split, questions it trained on among them)
    const s = await evaluateRouter(env.ctx.db, { checkpoint: p.checkpointId, split: 'test', splitSeed: 1, k: 10, home: env.dir, log: quiet }).catch((x: unknown) => x);
    expect(s).toMatchObject({ field: '--split-seed' });
    expect((s as Error).message).toMatch(/was trained on the train part of split seed 0: the test split of seed 1 would hold questions it was trained on/);
    expect((await evaluateRouter(env.ctx.db, { checkpoint: p.checkpointId, split: 'test', splitSeed: 0, k: 10, home: env.dir, log: quiet })).data).toMatchObject({ splitBy: 'prompt' });
  });

  it('refuses a checkpoint whose workers or backbone do not match', async () => {
    const a = await train({ epochs: 2 });
    const e = await evaluateRouter(env.ctx.db, { checkpoint: a.checkpointId, run: 'two', split: 'test', k: 10, home: env.dir, log: quiet }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(InputError);
    expect((e as Error).message).toMatch(/scores workers \[alpha, beta, gamma\] but run two has \[alpha, beta\]/);
    await sql`update router_checkpoints set backbone_id = 'other-backbone' where id = ${a.checkpointId}`.execute(env.ctx.db);
    const e2 = await evaluateRouter(env.ctx.db, { checkpoint: a.checkpointId, split: 'test', k: 10, home: env.dir, log: quiet }).catch((x: unknown) => x);
    expect((e2 as Error).message).toMatch(/trained on backbone other-backbone/);
    await expect(evaluateRouter(env.ctx.db, { checkpoint: 'nope', split: 'test', k: 10, home: env.dir, log: quiet })).rejects.toThrow(/no router checkpoint "nope"/);
    await expect(train({ tau: 0 })).rejects.toThrow(/tau must be > 0/);
  });
});

describe('router checkpoint files', () => {
  it('exports and imports a checkpoint, and names what is wrong with a bad file', async () => {
    const { exportCheckpoint, importCheckpoint } = await import('@fugu/training');
    const { getCheckpoint } = await import('@fugu/db');
    const { writeFile, readFile } = await import('node:fs/promises');
    const a = await train({ epochs: 2 });
    const file = `${env.dir}/ckpt.json`;
    await exportCheckpoint(env.ctx.db, a.checkpointId, file);
    const id = await importCheckpoint(env.ctx.db, file);
    expect(id).not.toBe(a.checkpointId); // the id was taken
    const [orig, copy] = await Promise.all([getCheckpoint(env.ctx.db, a.checkpointId), getCheckpoint(env.ctx.db, id)]);
    expect(copy!.theta).toEqual(orig!.theta);
    expect(copy!.workers).toEqual(orig!.workers);
    const bad = JSON.parse(await readFile(file, 'utf8'));
    bad.theta = Buffer.from(new Float32Array(3).buffer).toString('base64');
    await writeFile(file, JSON.stringify(bad));
    await expect(importCheckpoint(env.ctx.db, file)).rejects.toThrow(/field theta: theta has 3 values/);
    delete bad.workers;
    await writeFile(file, JSON.stringify(bad));
    await expect(importCheckpoint(env.ctx.db, file)).rejects.toThrow(/field workers/);
  });
});

describe('router decisions', () => {
  it('routes texts within an allowed pool, cost-aware, and samples reproducibly from pi', async () => {
    const { routeTexts } = await import('../../apps/cli/src/commands/route.ts');
    const a = await train({ epochs: 10 });
    const texts = ['Question 3 about math: what is 3 + 3?', 'Question 4 about qa: what is 4 + 4?'];
    const base = { checkpoint: a.checkpointId, texts, lambda: 0, sample: false, seed: 0, home: env.dir };
    const only = await routeTexts(env.ctx.db, { ...base, allowed: ['gamma'] });
    expect(only.decisions.map((d) => d.worker)).toEqual(['gamma', 'gamma']);
    // prices in replayPool rise alpha < beta < gamma: a large lambda picks the cheapest
    const cheap = await routeTexts(env.ctx.db, { ...base, lambda: 100 });
    expect(cheap.decisions.map((d) => d.worker)).toEqual(['alpha', 'alpha']);
    const s1 = await routeTexts(env.ctx.db, { ...base, texts: Array(20).fill(texts[0]), sample: true, seed: 7 });
    const s2 = await routeTexts(env.ctx.db, { ...base, texts: Array(20).fill(texts[0]), sample: true, seed: 7 });
    expect(s1.decisions.map((d) => d.worker)).toEqual(s2.decisions.map((d) => d.worker));
    await expect(routeTexts(env.ctx.db, { ...base, texts: [''] })).rejects.toThrow(/empty/);
  });
});

describe('router training from a label file', () => {
  it('trains from `fugu labels` output, and names a label file whose workers differ from the pool', async () => {
    const { collectRunSummary, runPrompts, writeSoftLabels } = await import('@fugu/evaluation');
    const { writeFile, readFile } = await import('node:fs/promises');
    const s = await collectRunSummary(env.ctx.db, 'skills');
    const file = `${env.dir}/skills-labels.jsonl`;
    await writeSoftLabels(s, 0.5, file, await runPrompts(env.ctx.db, s));
    const out = await train({ run: undefined, labels: { file, pool: replayPool() }, epochs: 3 });
    expect(out.items).toBe(600);
    await expect(train({ run: undefined, labels: { file, pool: replayPool(['alpha', 'gamma', 'beta']) } })).rejects.toThrow(
      /skills-labels.jsonl:1, field workers: the label file's workers \[alpha, beta, gamma\] differ from the pool's \[alpha, gamma, beta\]/,
    );
    const lines = (await readFile(file, 'utf8')).split('\n');
    lines[4] = lines[4]!.replace(/"prompt":"[^"]*"/, '"prompt":""');
    await writeFile(file, lines.join('\n'));
    await expect(train({ run: undefined, labels: { file, pool: replayPool() } })).rejects.toThrow(/skills-labels.jsonl:5, field prompt: prompt must not be empty/);
    await expect(train({ run: 'skills', labels: { file, pool: replayPool() } })).rejects.toThrow(/either an evaluation run/);
  });
});
