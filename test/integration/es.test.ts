// The ES stage end to end on real Redis, Postgres and the real single-step / episode fitness
// tasks: `fugu train es` coordinating evaluator processes (apps/trainer) started with their
// container command, `fugu status` and `fugu report` on the run, and the bad-input errors.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { esEvaluations, getCheckpoint, getEsRun, listEsGenerations } from '@fugu/db';
import { esEvalQueue } from '@fugu/queue';
import { createEsEnv, runCli, startTrainerProcess, type EsEnv, type TrainerProcess } from '../support/es-env.ts';

let env: EsEnv;
const evaluators: TrainerProcess[] = [];

beforeAll(async () => {
  env = await createEsEnv({ otherPool: true });
});
afterAll(async () => {
  for (const e of evaluators) await e.kill9().catch(() => {});
  await env?.cleanup();
});

describe('fugu train es', () => {
  it('runs a small single-step ES run with two evaluator processes; status and report show it', async () => {
    evaluators.push(await startTrainerProcess('evaluator', env.config), await startTrainerProcess('evaluator', env.config));
    const r = await runCli(env.config, [
      'train', 'es', '--from', env.checkpointId, '--lambda', '6', '--replicas', '2', '--generations', '3', '--task', 'single-step', '--batch', '32',
      '--seed', '3', '--sigma0', '0.05', '--run-id', 'e2e', '--local-evaluators', 'auto',
    ]);
    expect(r.stderr).toMatch(/2 ES evaluator\(s\) connected; starting none here/);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.match(/^generation \d\/3: mean/gm)).toHaveLength(3);
    expect(r.stdout).toMatch(/run e2e completed: 3 generations; search mean: checkpoint e2e-mean; best candidate: e2e-best-g\d/);
    expect(r.stderr).toMatch(/generation 0: 12 evaluation jobs of \d+ bytes each/);

    const run = (await getEsRun(env.ctx.db, 'e2e'))!;
    expect(run).toMatchObject({ status: 'completed', generation: 3, checkpointId: env.checkpointId });
    const gens = await listEsGenerations(env.ctx.db, 'e2e');
    expect(gens.map((g) => g.evaluations)).toEqual([12, 12, 12]);
    const evals = await esEvaluations(env.ctx.db, 'e2e');
    expect(evals).toHaveLength(36);
    expect(evals.every((e) => e.fitness >= 0 && e.fitness <= 1)).toBe(true);
    // replicas of a generation see different minibatches; candidates of one replica the same (common random numbers)
    expect(new Set(evals.filter((e) => e.generation === 0).map((e) => e.seed)).size).toBe(2);
    const best = (await getCheckpoint(env.ctx.db, run.bestCheckpointId!))!;
    const sft = (await getCheckpoint(env.ctx.db, env.checkpointId))!;
    expect(best).toMatchObject({ stage: 'es', parentId: env.checkpointId, backboneId: sft.backboneId, workers: sft.workers });
    expect(best.theta).toHaveLength(sft.theta.length);
    expect(best.theta).not.toEqual(sft.theta);
    // the final search mean is a checkpoint too, committed with the last generation
    const mean = (await getCheckpoint(env.ctx.db, 'e2e-mean'))!;
    expect(mean).toMatchObject({ stage: 'es', parentId: env.checkpointId, metrics: { generation: 2, kind: 'mean' } });
    expect(mean.theta).not.toEqual(sft.theta);

    // the held-out comparison: both checkpoints beside the baselines, on the same episodes
    const cmp = await runCli(env.config, ['train', 'compare', '--checkpoints', `${env.checkpointId},e2e-mean`, '--episodes', '20', '--questions', '2', '--turn-budget', '3', '--seeds', '0,1']);
    expect(cmp.code, cmp.stderr).toBe(0);
    expect(cmp.stdout).toMatch(/20 episodes of 2 questions, turn budget 3, seeds 0, 1/);
    for (const row of [`${env.checkpointId} (sft)`, 'e2e-mean (es)', 'best single worker', 'random', 'oracle']) expect(cmp.stdout).toContain(`| ${row}`);

    const status = await runCli(env.config, ['status', 'e2e']);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/ES run e2e: completed/);
    expect(status.stdout).toMatch(/generation 3 of 3; lambda 6 x 2 replica\(s\)/);
    expect(status.stdout).toContain(`queue ${esEvalQueue}: `);
    expect(status.stdout).toMatch(/evaluators connected 2/);

    const out = path.join(env.dir, 'e2e.html');
    const report = await runCli(env.config, ['report', 'e2e', '--out', out]);
    expect(report.code, report.stderr).toBe(0);
    const html = await readFile(out, 'utf8');
    expect(html).toContain('<svg');
    expect(html).toMatch(/Fitness curve/);
    expect(html).toMatch(/best so far/);
    expect(html).toMatch(/sigma/);

    // a resume under another configuration is refused, naming the flag
    const again = await runCli(env.config, ['train', 'es', '--resume', 'e2e', '--lambda', '8']);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/field --lambda: run e2e was created with lambda = 6, got 8/);
    const done = await runCli(env.config, ['train', 'es', '--resume', 'e2e']);
    expect(done.code).toBe(0);
    expect(done.stdout).toMatch(/already completed/);
  });

  it('runs the episode task with local evaluators it starts itself', async () => {
    for (const e of evaluators.splice(0)) await e.term();
    const r = await runCli(env.config, [
      'train', 'es', '--from', env.checkpointId, '--lambda', '4', '--generations', '2', '--task', 'episodes', '--episodes', '4', '--questions', '2',
      '--turn-budget', '3', '--seed', '1', '--run-id', 'epi', '--local-evaluators', '1',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/started 1 local ES evaluator/);
    const evals = await esEvaluations(env.ctx.db, 'epi');
    expect(evals).toHaveLength(8);
    expect(evals.every((e) => Object.keys(e.summary).length > 0)).toBe(true);
  });

  it('names the bad input', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['--from', 'nope'], /field --from: no router checkpoint "nope"/],
      [['--from', env.checkpointId, '--sigma0', '0'], /field --sigma0: must be a number in \(0, 10\]/],
      [['--from', env.checkpointId, '--sigma0', '50'], /field --sigma0/],
      [['--from', env.checkpointId, '--lambda', '1'], /field --lambda: must be a whole number in \[2,/],
      [['--from', env.checkpointId, '--lambda', 'many'], /field --lambda: must be a whole number/],
      [['--from', env.checkpointId, '--task', 'chess'], /field --task/],
      [['--resume', 'missing-run'], /field --resume: no ES run "missing-run"/],
    ];
    for (const [args, re] of cases) {
      const r = await runCli(env.config, ['train', 'es', ...args, '--local-evaluators', '0']);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(re);
    }
    // a checkpoint whose workers are not the evaluation run's pool: both lists named
    const r = await runCli(env.config, ['train', 'es', '--from', env.checkpointId, '--eval-run', 'two', '--local-evaluators', '0']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/field checkpoint: checkpoint \S+ scores workers \[alpha, beta, gamma\] but run two has \[alpha, beta\]/);
    expect(await getEsRun(env.ctx.db, 'nope')).toBeUndefined();
  });
});
