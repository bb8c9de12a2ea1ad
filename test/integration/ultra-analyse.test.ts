// `fugu ultra analyse` on any dataset with recorded scores and its replay pool (issue 29, "GRPO as a
// user", item 1: the analyses the docs pick checkpoints and test robustness with, as commands that
// take --dataset and --pool), and the exact expectations and the planner's pieces it is made of.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { execFile } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReplayConfig } from '@fugu/conductor';
import { serviceEnv } from '@fugu/config';
import { writeWorkerPool } from '@fugu/datasets';
import { analysisInputs, exactScore, fitRegressions, planWorkflow, predictAll, singlesAndPairs } from '@fugu/ultra-training';
import { createEvalEnv, replayPool, syntheticItems, writeFixtures, type EvalEnv } from '../support/eval-env.ts';

const main = fileURLToPath(new URL('../../apps/cli/src/main.ts', import.meta.url));
const params = (p: { keep: number; misled: number; adopt: number; fix: number; herd?: number }): ReplayConfig => ({ presets: { large: { herd: 1, ...p }, small: { herd: 1, ...p } } });

describe('fugu ultra analyse', () => {
  let env: EvalEnv;
  let dir: string;
  let files: { dataset: string; pool: string };
  const items = syntheticItems(300);

  beforeAll(async () => {
    env = await createEvalEnv();
    dir = await mkdtemp(path.join(tmpdir(), 'fugu-analyse-'));
    files = await writeFixtures(dir, items, replayPool());
  });
  afterAll(async () => {
    await env?.cleanup();
    await rm(dir, { recursive: true, force: true });
  });

  function fugu(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      execFile(process.execPath, [main, ...args], { env: { PATH: process.env.PATH, ...serviceEnv(env.config), FUGU_HOME: env.dir }, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
  }

  it('score: single workers on a split of any dataset, under each step model given, as JSON; a one-step workflow is the same under every step model', { timeout: 120_000 }, async () => {
    const a = path.join(dir, 'reads-fix.json');
    await writeFile(a, JSON.stringify(params({ keep: 1, misled: 0, adopt: 1, fix: 0 })));
    const r = await fugu(['ultra', 'analyse', 'score', 'best,single:gamma', '--dataset', files.dataset, '--pool', files.pool, '--split', 'test', '--replay', a, '--perturbations', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    const inputs = await analysisInputs({ llmrouterDir: '' }, files);
    const test = inputs.split('test');
    expect(out).toMatchObject({ split: 'test', items: test.length, configs: ['reads-fix', 'presets', 'misled +0.1', 'fix -0.05', 'keep -0.05', 'herd halved'] });
    const gamma = test.reduce((s, it) => s + it.recorded!.gamma!.score, 0) / test.length;
    const row = out.rows.find((x: { spec: string }) => x.spec === 'single:gamma');
    for (const c of out.configs) expect(row.accuracy[c]).toBeCloseTo(gamma, 12);
    expect(out.rows[0].spec).toBe(`best single (${inputs.ranking[0]})`);
    // the checkpoint criterion per row (issue 29, item 2): 0.5 + 0.5 x accuracy with mu = 0 (no policy, no run: mu 0, the first step model given), the --mu given otherwise
    expect(out.criterion).toMatchObject({ mu: 0, runs: [], replay: { name: 'reads-fix' } });
    expect(row.criterion.value).toBeCloseTo(0.5 + 0.5 * gamma, 12);
    expect(row.criterion.usd).toBeGreaterThan(0);
    const mu = await fugu(['ultra', 'analyse', 'score', 'single:gamma', '--dataset', files.dataset, '--pool', files.pool, '--split', 'test', '--mu', '1000']);
    expect(mu.code, mu.stderr).toBe(0);
    expect(mu.stdout).toMatch(/checkpoint criterion: the expected reward of the argmax workflows, 1 correct \/ 0.5 wrong minus mu = 1000 x \$ per item/);
    expect(mu.stdout).toContain(`| single:gamma | 1.00 | ${gamma.toFixed(4)} | ${(0.5 + 0.5 * gamma - 1000 * row.criterion.usd).toFixed(4)} | ${row.criterion.usd.toFixed(6)} |`);
    expect(mu.stdout).toMatch(/test split \(by unique prompt \(seed 0\)\)/);
  });

  it('bad input names the flag: a live worker in the pool, a step model that is not a ReplayConfig', { timeout: 120_000 }, async () => {
    const live = path.join(dir, 'live.yaml');
    const pool = replayPool();
    await writeWorkerPool(live, { ...pool, workers: pool.workers.map((w) => (w.name === 'alpha' ? { ...w, provider: 'openai', model: 'gpt-4o-mini' } : w)) });
    const r = await fugu(['ultra', 'analyse', 'score', 'best', '--dataset', files.dataset, '--pool', live]);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/--pool.*alpha is not a replay worker/);
    const bad = path.join(dir, 'bad.json');
    await writeFile(bad, JSON.stringify({ presets: { large: { keep: 2 } } }));
    const b = await fugu(['ultra', 'analyse', 'score', 'best', '--dataset', files.dataset, '--pool', files.pool, '--replay', bad]);
    expect(b.code).toBe(2);
    expect(b.stderr).toMatch(/--replay.*bad: .*keep/);
    // the measured step models by name (data/multistep/replay); an unknown one lists them
    const m = await fugu(['ultra', 'analyse', 'score', 'single:alpha', '--dataset', files.dataset, '--pool', files.pool, '--replay', 'measured:dylan-math-cot.pessimistic', '--json']);
    expect(m.code, m.stderr).toBe(0);
    expect(JSON.parse(m.stdout).configs).toEqual(['dylan-math-cot.pessimistic']);
    const u = await fugu(['ultra', 'analyse', 'score', 'single:alpha', '--dataset', files.dataset, '--pool', files.pool, '--replay', 'measured:dylan-math-cot.middle']);
    expect(u.code).toBe(2);
    expect(u.stderr).toMatch(/--replay.*no measured step model "dylan-math-cot.middle" \(there are: .*dylan-math-cot\.optimistic/);
  });

  it('exact expectations follow the step model: B reading A is "either right" when reading only helps, A\'s outcome when B always takes A\'s answer', async () => {
    const inputs = await analysisInputs({ llmrouterDir: '' }, files);
    const test = inputs.split('test').filter((it) => Number.isInteger(it.recorded!.alpha!.score) && Number.isInteger(it.recorded!.beta!.score));
    const pair = { id: 'pair', draws: 1, workflows: test.map(() => [{ worker: 'alpha', sees: [] }, { worker: 'beta', sees: [0] }]) };
    const either = exactScore(inputs.params(params({ keep: 1, misled: 0, adopt: 1, fix: 0 })), test, pair);
    expect(either.accuracy).toBeCloseTo(test.reduce((s, it) => s + Math.max(it.recorded!.alpha!.score, it.recorded!.beta!.score), 0) / test.length, 12);
    const follows = exactScore(inputs.params(params({ keep: 1, misled: 1, adopt: 1, fix: 0 })), test, pair);
    expect(follows.accuracy).toBeCloseTo(test.reduce((s, it) => s + it.recorded!.alpha!.score, 0) / test.length, 12);
    expect(either.steps).toBe(2);
  });

  it('the planner: regressions that separate the tasks, and a pair chosen only where reading pays under the step model it plans with', async () => {
    // one feature per task: alpha is right on task 0, beta on task 1
    const x = Array.from({ length: 200 }, (_, i) => Float32Array.from([i % 2 === 0 ? 1 : 0, i % 2 === 1 ? 1 : 0]));
    const models = fitRegressions(x, [x.map((v) => v[0]!), x.map((v) => v[1]!)], { l2: 0, iterations: 300 });
    const [pa, pb] = predictAll(models, Float32Array.from([1, 0]));
    expect(pa).toBeGreaterThan(0.9);
    expect(pb).toBeLessThan(0.1);
    const names = ['alpha', 'beta'];
    const inputs = await analysisInputs({ llmrouterDir: '' }, files);
    const uncertain = { id: 'v', recorded: { alpha: 0.6, beta: 0.6, gamma: 0 } };
    const candidates = singlesAndPairs(names);
    expect(planWorkflow(inputs.params(params({ keep: 1, misled: 0, adopt: 1, fix: 0 })), uncertain, candidates)).toHaveLength(2);
    // reading a peer's answer misleads as often as it fixes: one worker alone
    expect(planWorkflow(inputs.params(params({ keep: 0.5, misled: 0.5, adopt: 0.5, fix: 0.5 })), uncertain, candidates)).toHaveLength(1);
  });
});
