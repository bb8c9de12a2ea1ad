// fugu on a Redis Cluster: a local cluster of 3 masters with a replica each, started on free ports
// by the code of `fugu up --redis-cluster 3` (test/support/services.ts), beside the one test
// Redis. The same work on both, in one Postgres database: an evaluation batch (with the provider
// queues split into 3 shards on the cluster), an ES generation (the es-fanin / es-eval flow) and
// a Conductor batch (conduct jobs whose steps are chat-call jobs) give the same rows. Then a
// master is killed mid evaluation batch: its replica takes over, and the batch completes with one
// call row per call (Postgres is the truth; what Redis lost is enqueued again by the run's stall
// check, and a job run twice finds its row).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import { sql } from 'kysely';
import type { Cluster } from 'ioredis';
import { loadConfig, serviceEnv, type FuguConfig } from '@fugu/config';
import { type DatasetItem } from '@fugu/core';
import { loadLlmRouter, loadLlmRouterPool } from '@fugu/datasets';
import { esEvaluations, getRun, listItemKeys, saveDataset, savePool } from '@fugu/db';
import { openContext, runEval, type Context, type EvalOptions } from '@fugu/evaluation';
import { allQueueNames, deleteKeys, isCluster, keySlot, providerCallQueues } from '@fugu/queue';
import { createLogger, Registry } from '@fugu/telemetry';
import { redisHolds, submitWorkflows, waitForWorkflows, type NewWorkflow } from '@fugu/ultra';
import { startProviderWorker, type ProviderWorkerHandle } from '../../apps/provider-worker/src/worker.ts';
import { startConductorProcess } from '../support/conductor.ts';
import { createEsEnv, runCli, type EsEnv } from '../support/es-env.ts';
import { replayPool, startWorkerProcess, syntheticItems, waitFor, writeFixtures } from '../support/eval-env.ts';
import { startRedisClusterInstance, type RedisClusterInstance } from '../support/services.ts';

const quiet = () => {};
let env: EsEnv;
let cluster: RedisClusterInstance;
/** the same deployment (database, prefix) on the one Redis and on the cluster */
const on: Record<'one' | 'cluster', { config: FuguConfig; ctx: Context }> = {} as never;

function configFor(redisUrl: string, extra: Record<string, string> = {}): FuguConfig {
  return loadConfig({
    ...serviceEnv(env.config),
    FUGU_REDIS_URL: redisUrl,
    FUGU_LOG_LEVEL: 'warn',
    // the second run must call as the first did (no answers from the first run's cache)
    FUGU_RESPONSE_CACHE: 'false',
    FUGU_WORKER_CONCURRENCY: '8',
    ...extra,
  });
}

beforeAll(async () => {
  [env, cluster] = await Promise.all([createEsEnv({ items: 120 }), startRedisClusterInstance({ masters: 3, replicas: 1 })]);
  for (const [name, url, extra] of [['one', env.config.redisUrl, {}], ['cluster', cluster.url, { FUGU_PROVIDER_QUEUE_SHARDS: '3', FUGU_WORKER_LOCK_MS: '4000' }]] as const) {
    const config = configFor(url, extra);
    on[name] = { config, ctx: await openContext({ redis: true, config }) };
  }
}, 300_000);

afterAll(async () => {
  const c = on.cluster?.ctx;
  if (c?.redis) await deleteKeys(c.redis, `${env.config.queuePrefix}:*`).catch(() => {});
  await c?.close();
  await on.one?.ctx.close();
  await cluster?.stop();
  await env?.cleanup();
});

const evalOptions = (files: { dataset: string; pool: string }, runId: string, over: Partial<EvalOptions> = {}): EvalOptions => ({
  dataset: files.dataset, pool: files.pool, repetitions: 2, sample: null, seed: 1, spendCap: null, localWorkers: 0, keyCheck: true, wait: true, log: quiet, runId, ...over,
});

const startWorker = (which: 'one' | 'cluster'): Promise<ProviderWorkerHandle> =>
  startProviderWorker({ config: on[which].config, db: on[which].ctx.db, log: createLogger({ name: 'test', level: 'silent' }), registry: new Registry() });

/** A run's calls by (item index, worker, repetition): what was answered, its reward and cost. */
async function callsOf(runId: string): Promise<string[]> {
  const r = await sql<{ k: string }>`
    select concat_ws(' ', it.idx, w.name, c.repetition, c.status, c.tokens_in, c.tokens_out, c.cost::text, r.score) as k
    from calls c join items it on it.id = c.item_id join workers w on w.id = c.worker_id
    left join rewards r on r.call_id = c.id
    where c.run_id = ${runId} order by it.idx, w.name, c.repetition`.execute(env.ctx.db);
  return r.rows.map((x) => x.k);
}

async function callRows(runId: string): Promise<{ total: number; distinct: number }> {
  const r = await sql<{ total: number; distinct: number }>`
    select count(*)::int as total, count(distinct (item_id, worker_id, repetition))::int as distinct from calls where run_id = ${runId}`.execute(env.ctx.db);
  return r.rows[0]!;
}

describe('queues on a Redis Cluster', () => {
  it("hashes every queue's keys to one slot as the cluster does, and spreads a provider's shards over the masters", async () => {
    const redis = on.cluster.ctx.redis!;
    expect(isCluster(redis)).toBe(true);
    const prefix = on.cluster.config.queuePrefix;
    const nodes = await cluster.nodes();
    const masters = nodes.filter((n) => n.role === 'master');
    expect(masters).toHaveLength(3);
    expect(nodes.filter((n) => n.role === 'replica')).toHaveLength(3);
    const masterOf = (slot: number) => masters.find((m) => m.slots.some(([a, b]) => slot >= a && slot <= b))!.port;
    const table: string[] = [];
    for (const q of allQueueNames(3)) {
      const key = `${prefix}:${q}:wait`;
      const slot = keySlot(key);
      expect(Number(await (redis as Cluster).cluster('KEYSLOT', key))).toBe(slot);
      table.push(`${q.padEnd(36)} slot ${String(slot).padStart(5)}  master :${masterOf(slot)}`);
    }
    process.stdout.write(`queues' slots on the cluster:\n${table.join('\n')}\n`);
    const shardMasters = providerCallQueues('replay', 3).map((q) => masterOf(keySlot(`${prefix}:${q}:wait`)));
    expect(new Set(shardMasters).size).toBe(3);
  });

  it("fugu-ultra's holds on its workflows work on the cluster (a workflow's lease and info share a slot: one script over both)", async () => {
    const redis = on.cluster.ctx.redis!;
    const holds = redisHolds(redis, on.cluster.config.queuePrefix, { leaseMs: 10_000 });
    for (const id of [41, 42, 43]) {
      const a = await holds.take(id);
      if ('busyMs' in a) throw new Error(`workflow ${id} was held`);
      expect([a.takeover, a.version]).toEqual([false, undefined]);
      expect('busyMs' in (await holds.take(id))).toBe(true);
      await a.release({ saved: { workflowId: id, conversationId: 'c', apiKeyId: null, status: 'tools', version: 2, stateJson: '{"v":2}', deadlineAt: null } });
      const b = await holds.take(id);
      expect(b).toMatchObject({ takeover: false, version: 2 });
      if (!('busyMs' in b)) await b.release({ advanced: false });
    }
  });

  it('an evaluation batch gives the same calls, rewards and costs on the cluster (3 shards) as on one Redis', async () => {
    const files = await writeFixtures(path.join(env.dir, 'cmp'), syntheticItems(90, 11), replayPool());
    const results: Record<string, string[]> = {};
    for (const which of ['one', 'cluster'] as const) {
      const worker = await startWorker(which);
      try {
        const out = await runEval(on[which].ctx, evalOptions(files, `cmp-${which}`));
        expect(out.run.status).toBe('completed');
        expect(await callRows(`cmp-${which}`)).toEqual({ total: 540, distinct: 540 });
        results[which] = await callsOf(`cmp-${which}`);
      } finally {
        await worker.close();
      }
    }
    expect(results.cluster).toHaveLength(540);
    expect(results.cluster).toEqual(results.one);
    // the cluster's run went through all three shards, and left none of its jobs behind
    for (const q of providerCallQueues('replay', 3)) expect(await on.cluster.ctx.queue(q).getJobCounts('waiting', 'active', 'delayed', 'failed')).toEqual({ waiting: 0, active: 0, delayed: 0, failed: 0 });
  });

  it('an ES generation (a flow: fan-in parent on es-fanin, children on es-eval) gives the same fitness on the cluster', async () => {
    const fitness: Record<string, Array<[number, number, number, number]>> = {};
    for (const which of ['one', 'cluster'] as const) {
      const r = await runCli(on[which].config, [
        'train', 'es', '--from', env.checkpointId, '--lambda', '4', '--replicas', '2', '--generations', '2', '--task', 'single-step', '--batch', '16',
        '--seed', '3', '--sigma0', '0.05', '--run-id', `es-${which}`, '--local-evaluators', '2',
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`run es-${which} completed: 2 generations`));
      fitness[which] = (await esEvaluations(env.ctx.db, `es-${which}`)).map((e) => [e.generation, e.candidate, e.replica, e.fitness]);
    }
    expect(fitness.cluster).toHaveLength(16);
    expect(fitness.cluster).toEqual(fitness.one);
  });

  it('a Conductor batch (conduct jobs, steps as chat calls on the sharded provider queues) gives the same workflows on the cluster', async () => {
    const REPLAY = ['qwen2.5-7b-instruct', 'gemma-2-9b-it', 'llama3-chatqa-1.5-70b'];
    const ds = await loadLlmRouter(env.config.llmrouterDir);
    const chosen: DatasetItem[] = ds.items.filter((it) => it.sourceSplit === 'test' && REPLAY.every((w) => it.recorded?.[w] !== undefined)).slice(0, 6);
    const { id: datasetId } = await saveDataset(env.ctx.db, { name: 'llmrouter-cluster', source: 'test', contentHash: `cluster-${Date.now()}`, items: chosen });
    const keys = await listItemKeys(env.ctx.db, datasetId);
    const pool = await loadLlmRouterPool(env.config.llmrouterDir);
    const { poolId } = await savePool(env.ctx.db, { name: 'llmrouter-3', workers: REPLAY.map((n) => pool.workers.find((w) => w.name === n)!) }, 'cluster-replay-pool');
    const rows = (prefix: string, spec: string): NewWorkflow[] =>
      chosen.map((item) => ({ key: `${prefix}.${item.id}`, itemId: keys.find((k) => k.extId === item.id)!.dbId, poolId, question: item.prompt, conductor: spec, seed: 7, options: { maxSteps: 5, ranking: REPLAY } }));
    const outcome: Record<string, unknown[][]> = {};
    for (const which of ['one', 'cluster'] as const) {
      const { config, ctx } = on[which];
      const [worker, conductor] = await Promise.all([startWorkerProcess(config), startConductorProcess(config, { FUGU_CONDUCTOR_POLL_MS: '20' })]);
      try {
        const got = [];
        for (const spec of ['fixed:moa:3', 'fixed:chain']) {
          const { ids } = await submitWorkflows({ db: ctx.db, queue: (n) => ctx.queue(n) }, rows(`${which}-${spec}`, spec));
          got.push(...(await waitForWorkflows(ctx.db, ids, { timeoutMs: 120_000, pollMs: 50 })));
        }
        outcome[which] = got.map((r) => [r.status, r.finishReason, r.topology, r.nSteps, r.reward, r.finalAnswer, r.steps?.map((s) => s.name)]);
      } finally {
        await Promise.all([conductor.term(), worker.term()]);
      }
    }
    expect(outcome.cluster).toHaveLength(12);
    for (const o of outcome.cluster!) expect(o.slice(0, 2)).toEqual(['done', 'answered']);
    expect(outcome.cluster).toEqual(outcome.one);
  });

  it('a master killed mid evaluation batch: its replica takes over, the batch completes with one call row per call', async () => {
    const files = await writeFixtures(path.join(env.dir, 'failover'), syntheticItems(1200, 4), replayPool());
    const worker = await startWorker('cluster');
    try {
      const running = runEval(on.cluster.ctx, evalOptions(files, 'failover', { repetitions: 1, stallSeconds: 3 }));
      await waitFor('some progress', async () => ((await getRun(env.ctx.db, 'failover'))?.doneCalls ?? 0) > 300, 120_000, 20);
      // the master that serves the first replay shard
      const prefix = on.cluster.config.queuePrefix;
      const slot = keySlot(`${prefix}:${providerCallQueues('replay', 3)[0]!}:wait`);
      const victim = (await cluster.nodes()).find((n) => n.role === 'master' && n.slots.some(([a, b]) => slot >= a && slot <= b))!;
      const doneAtKill = (await getRun(env.ctx.db, 'failover'))!.doneCalls;
      await cluster.kill9(victim.port);
      const after = await cluster.waitForFailover(victim.port);
      expect(after.find((n) => n.port === victim.port)).toMatchObject({ failed: true });
      expect(after.filter((n) => n.role === 'master' && !n.failed)).toHaveLength(3);
      const out = await running;
      expect(doneAtKill).toBeLessThan(3600);
      expect(out.run.status).toBe('completed');
      expect(await callRows('failover')).toEqual({ total: 3600, distinct: 3600 });
      expect(out.run.doneCalls + out.run.failedCalls).toBe(3600);
    } finally {
      await worker.close();
    }
  });
});
