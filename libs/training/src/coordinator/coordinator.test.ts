// The coordinator and evaluators on real Redis and Postgres, with a tiny synthetic fitness (a
// sphere around a target) in place of the router tasks so that the coordination itself is what is
// tested: flows, fan-in, failing children, re-dispatch, duplicates, resume.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { esEvaluations, getCheckpoint, getEsRun, getEsState, listEsGenerations, saveCheckpoint } from '@fugu/db';
import { createRedis, type RedisClient } from '@fugu/queue';
import type { FitnessTask, FitnessTaskOptions } from '../tasks/types.ts';
import { startEvaluator, type EvaluatorHandle } from '../evaluator/evaluator.ts';
import { createEsRunFromCheckpoint, checkEsResume } from './create-run.ts';
import { runCoordinator, type DispatchEvent } from './coordinator.ts';
import type { EsRunConfig } from './run-config.ts';

const redisUrl = process.env.FUGU_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const N = 12;
const target = Array.from({ length: N }, (_, i) => Math.sin(i + 1));

let t: TestDatabase;
let producer: RedisClient;
const conns: RedisClient[] = [];
const prefix = `fugut${randomBytes(4).toString('hex')}`;

/** fitness = -||theta - target||^2 (+ a replica-dependent offset) */
function sphereTask(): (o: FitnessTaskOptions) => Promise<FitnessTask> {
  return async (o) => ({
    spec: o.spec,
    workers: ['a', 'b'],
    theta0: new Float32Array(N),
    async evaluate(thetas, ctx) {
      return thetas.map((th) => {
        let s = 0;
        for (let i = 0; i < N; i++) s += (th[i]! - target[i]!) ** 2;
        return { fitness: -s + 0.001 * ctx.replica, summary: { replica: ctx.replica } };
      });
    },
    async release() {},
  });
}

function failingTask(failures: Map<string, number>): (o: FitnessTaskOptions) => Promise<FitnessTask> {
  const base = sphereTask();
  return async (o) => {
    const t0 = await base(o);
    return {
      ...t0,
      async evaluate(thetas, ctx) {
        // a batch fails while any (generation, replica) has failures left
        const key = `${ctx.generation}.${ctx.replica}`;
        const left = failures.get(key) ?? 0;
        if (left > 0) {
          failures.set(key, left - 1);
          throw new Error(`synthetic failure of generation ${ctx.generation} replica ${ctx.replica}`);
        }
        return t0.evaluate(thetas, ctx);
      },
    };
  };
}

const worker = (): RedisClient => {
  const c = createRedis(redisUrl, 'worker');
  conns.push(c);
  return c;
};

async function evaluators(n: number, createTask: (o: FitnessTaskOptions) => Promise<FitnessTask>): Promise<EvaluatorHandle[]> {
  return Promise.all(Array.from({ length: n }, () => startEvaluator({ db: t.db, connection: worker(), prefix, home: '/tmp', concurrency: 4, lockDurationMs: 2_000, createTask })));
}

const config = (over: Partial<EsRunConfig> = {}): EsRunConfig => ({
  task: { kind: 'single-step', batchSize: 8 }, lambda: 6, sigma0: 0.3, replicas: 2, generations: 4, seed: 11, deadlineMs: 60_000, attempts: 1, stepSize: 'csa', ...over,
});

async function newRun(id: string, over: Partial<EsRunConfig> = {}): Promise<void> {
  await createEsRunFromCheckpoint({ db: t.db, home: '/tmp', checkpointId: 'sft', config: config(over), runId: id, createTask: sphereTask() });
}

const coordinate = (runId: string, extra: Partial<Parameters<typeof runCoordinator>[0]> = {}) =>
  runCoordinator({ db: t.db, connection: producer, workerConnection: worker(), prefix, runId, pollMs: 50, ...extra });

beforeAll(async () => {
  t = await createTestDatabase();
  producer = createRedis(redisUrl, 'producer');
  await saveCheckpoint(t.db, {
    id: 'sft', stage: 'sft', backboneId: 'bb', backbone: {}, workers: [{ name: 'a', inputPerMTok: '1', outputPerMTok: '1' }, { name: 'b', inputPerMTok: '1', outputPerMTok: '1' }],
    theta: new Float32Array(N), thetaLayout: [{ name: 'z', offset: 0, shape: [N] }], tau: null, training: { run: 'x' }, metrics: {}, parentId: null,
  });
});
afterAll(async () => {
  const keys = await producer.keys(`${prefix}:*`);
  if (keys.length) await producer.del(...keys);
  producer?.disconnect();
  for (const c of conns) c.disconnect();
  await t?.drop();
});

describe('ES coordinator and evaluators', () => {
  let evs: EvaluatorHandle[] = [];
  afterAll(async () => { for (const e of evs) await e.close(); });

  it('runs generations through flows, records every evaluation once, commits state, record and best checkpoint', async () => {
    evs = await evaluators(2, sphereTask());
    const dispatches: DispatchEvent[] = [];
    await newRun('plain');
    const r = await coordinate('plain', { onDispatch: (d) => dispatches.push(d) });
    expect(r.status).toBe('completed');
    const run = (await getEsRun(t.db, 'plain'))!;
    expect(run).toMatchObject({ status: 'completed', generation: 4 });
    const gens = await listEsGenerations(t.db, 'plain');
    expect(gens.map((g) => g.generation)).toEqual([0, 1, 2, 3]);
    expect(gens.every((g) => g.evaluations === 12 && g.dispatches === 1)).toBe(true);
    // improves on a sphere
    expect(gens[3]!.bestSoFar).toBeGreaterThan(gens[0]!.meanFitness);
    const evals = await esEvaluations(t.db, 'plain');
    expect(evals).toHaveLength(4 * 12);
    // payloads carry indices and a hash, not vectors
    expect(dispatches.every((d) => d.bytesPerJob < 200 && d.reason === 'start')).toBe(true);
    // the best candidate as an 'es' checkpoint under the SFT one, with the fitness the state says
    const best = (await getCheckpoint(t.db, run.bestCheckpointId!))!;
    expect(best).toMatchObject({ stage: 'es', parentId: 'sft' });
    const state = (await getEsState(t.db, 'plain'))!.state as { best: { x: number[]; fitness: number } };
    expect(Array.from(best.theta)).toEqual(Array.from(Float32Array.from(state.best.x)));
    expect(best.metrics.fitness).toBe(state.best.fitness);
  });

  it('is exact across an interruption and resume, and refuses a resume with another config or code', async () => {
    await newRun('whole');
    await coordinate('whole');
    await newRun('parts');
    const ac = new AbortController();
    const r1 = await coordinate('parts', { signal: ac.signal, onGeneration: (g) => { if (g.generation === 1) ac.abort(); } });
    expect(r1.status).toBe('interrupted');
    expect((await getEsRun(t.db, 'parts'))!.generation).toBe(2);
    await expect(checkEsResume(t.db, 'parts', { lambda: 8 })).rejects.toThrow(/field --lambda: run parts was created with lambda = 6, got 8/);
    await expect(checkEsResume(t.db, 'parts', { task: { kind: 'single-step', batchSize: 9 } })).rejects.toThrow(/field --batch/);
    await expect(checkEsResume(t.db, 'parts', { lambda: 6, seed: 11 })).resolves.toMatchObject({ id: 'parts' });
    const r2 = await coordinate('parts');
    expect(r2.status).toBe('completed');
    const [a, b] = await Promise.all([getEsState(t.db, 'whole'), getEsState(t.db, 'parts')]);
    expect(b!.state).toEqual(a!.state);
    const [ca, cb] = await Promise.all([getEsRun(t.db, 'whole'), getEsRun(t.db, 'parts')]);
    expect((await getCheckpoint(t.db, cb!.bestCheckpointId!))!.theta).toEqual((await getCheckpoint(t.db, ca!.bestCheckpointId!))!.theta);
    await t.db.updateTable('es_runs').set({ code_version: 'other' }).where('id', '=', 'parts').execute();
    await expect(checkEsResume(t.db, 'parts', {})).rejects.toThrow(/field code_version/);
    await expect(coordinate('parts')).rejects.toThrow(/code version other/);
  });

  it('releases the fan-in when children fail for good and re-dispatches the missing evaluations', async () => {
    for (const e of evs) await e.close();
    // generation 1 replica 0 fails on its first two batches: with attempts 1, those children are dropped
    const failures = new Map([['1.0', 2]]);
    evs = await evaluators(1, failingTask(failures));
    await newRun('flaky');
    const dispatches: DispatchEvent[] = [];
    const r = await coordinate('flaky', { onDispatch: (d) => dispatches.push(d) });
    expect(r.status).toBe('completed');
    const g1 = dispatches.filter((d) => d.generation === 1);
    expect(g1.length).toBeGreaterThan(1);
    expect(g1.slice(1).every((d) => d.reason === 'failed-children' && d.jobs <= 6)).toBe(true);
    // the same numbers as a run without failures
    await newRun('steady');
    for (const e of evs) await e.close();
    evs = await evaluators(1, sphereTask());
    await coordinate('steady');
    const [a, b] = await Promise.all([getEsState(t.db, 'flaky'), getEsState(t.db, 'steady')]);
    expect(a!.state).toEqual(b!.state);
  });

  it('re-dispatches stragglers after the deadline; the first result wins', async () => {
    for (const e of evs) await e.close();
    evs = [];
    await newRun('late', { deadlineMs: 1_000, generations: 1 });
    const dispatches: DispatchEvent[] = [];
    let redispatched!: () => void;
    const deadlinePassed = new Promise<void>((r) => (redispatched = r));
    const done = coordinate('late', { onDispatch: (d) => { dispatches.push(d); if (d.reason === 'deadline') redispatched(); } });
    // no evaluator until the deadline has passed and the generation was dispatched again
    await deadlinePassed;
    evs = await evaluators(1, sphereTask());
    expect((await done).status).toBe('completed');
    expect(dispatches.map((d) => d.reason).slice(0, 2)).toEqual(['start', 'deadline']);
    // both dispatches' jobs ran or were skipped; one row each
    expect(await esEvaluations(t.db, 'late', 0)).toHaveLength(12);
  });

  it('names the bad field of a new run', async () => {
    await expect(newRun('bad1', { lambda: 1 })).rejects.toThrow(/field --lambda/);
    await expect(newRun('bad2', { sigma0: 0 })).rejects.toThrow(/field --sigma0/);
    await expect(newRun('bad3', { sigma0: -1 })).rejects.toThrow(/field --sigma0/);
    await expect(newRun('bad4', { replicas: 0 })).rejects.toThrow(/field --replicas/);
    await expect(createEsRunFromCheckpoint({ db: t.db, home: '/tmp', checkpointId: 'nope', config: config(), createTask: sphereTask() })).rejects.toThrow(/field --from: no router checkpoint "nope"/);
  });
});
