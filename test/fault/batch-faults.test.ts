// Fault injection on a running evaluation batch: a provider worker killed with SIGKILL mid-batch,
// and Redis (AOF on, its own instance) restarted mid-batch. The batch must complete with exactly
// one row per (run, item, worker, repetition), and a killed worker's re-executions are bounded
// by the jobs it had in flight.
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { getRun } from '@fugu/db';
import { runEval, type EvalOptions } from '@fugu/evaluation';
import { providerCallCounterKey } from '../../apps/provider-worker/src/worker.ts';
import { createEvalEnv, replayPool, startWorkerProcess, syntheticItems, waitFor, writeFixtures, type EvalEnv, type WorkerProcess } from '../support/eval-env.ts';
import { startRedisInstance, type RedisInstance } from '../support/services.ts';

const CONCURRENCY = 32;
const quiet = () => {};
const options = (files: { dataset: string; pool: string }, runId: string): EvalOptions => ({
  dataset: files.dataset, pool: files.pool, repetitions: 2, sample: null, seed: 3, spendCap: null, runId,
  localWorkers: 0, keyCheck: true, wait: true, stallSeconds: 10, log: quiet,
});

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => {});
});
let redis: RedisInstance | undefined;
afterAll(async () => {
  await redis?.stop();
});

async function rowCounts(env: EvalEnv, runId: string): Promise<{ total: number; distinct: number }> {
  const r = await sql<{ total: number; distinct: number }>`
    select count(*)::int as total, count(distinct (item_id, worker_id, repetition))::int as distinct from calls where run_id = ${runId}`.execute(env.ctx.db);
  return r.rows[0]!;
}

async function worker(env: EvalEnv): Promise<WorkerProcess> {
  const w = await startWorkerProcess(env.config, { FUGU_WORKER_CONCURRENCY: String(CONCURRENCY), FUGU_WORKER_LOCK_MS: '2000' });
  cleanups.push(async () => { if (w.child.exitCode === null && w.child.signalCode === null) await w.term(); });
  return w;
}

describe('fault injection', () => {
  it('kill -9 of a provider worker mid-batch: a new worker finishes it, nothing lost, nothing doubled', async () => {
    const env = await createEvalEnv({ overrides: { 'worker.lockDurationMs': 2000 } });
    cleanups.push(() => env.cleanup());
    const files = await writeFixtures(env.dir, syntheticItems(2000, 11), replayPool());
    const total = 2000 * 3 * 2;
    const first = await worker(env);
    const running = runEval(env.ctx, options(files, 'killed'));
    const doneAtKill = await waitFor('a part of the batch', async () => {
      const r = await getRun(env.ctx.db, 'killed');
      return r && r.doneCalls > 1500 ? r.doneCalls : undefined;
    }, 60_000, 10);
    await first.kill9();
    expect(doneAtKill).toBeLessThan(total);
    await worker(env);
    const out = await running;
    expect(out.run.status).toBe('completed');
    expect(await rowCounts(env, 'killed')).toEqual({ total, distinct: total });
    expect(out.run.doneCalls).toBe(total);
    // every call was made once, plus at most the jobs the killed worker had in hand
    const calls = Number(await env.ctx.redis!.hget(providerCallCounterKey(env.config.queuePrefix), 'replay'));
    const reexecuted = calls - total;
    process.stdout.write(`kill -9 at ${doneAtKill}/${total} calls: ${reexecuted} re-executed (concurrency ${CONCURRENCY})\n`);
    expect(reexecuted).toBeGreaterThanOrEqual(0);
    expect(reexecuted).toBeLessThanOrEqual(CONCURRENCY);
  });

  it('a Redis restart (AOF on) mid-batch: the batch completes with one row per call', async () => {
    redis = await startRedisInstance({ aof: true });
    const env = await createEvalEnv({ redisUrl: redis.url, overrides: { 'worker.lockDurationMs': 2000 } });
    cleanups.push(() => env.cleanup());
    const files = await writeFixtures(env.dir, syntheticItems(1500, 12), replayPool());
    const total = 1500 * 3 * 2;
    await worker(env);
    const running = runEval(env.ctx, options(files, 'redis-restart'));
    await waitFor('a part of the batch', async () => ((await getRun(env.ctx.db, 'redis-restart'))?.doneCalls ?? 0) > 1000, 60_000, 10);
    await redis.restart();
    const afterRestart = (await getRun(env.ctx.db, 'redis-restart'))!;
    expect(afterRestart.doneCalls).toBeLessThan(total);
    const out = await running;
    expect(out.run.status).toBe('completed');
    expect(await rowCounts(env, 'redis-restart')).toEqual({ total, distinct: total });
  });
});
