// An isolated evaluation environment for integration and fault tests: a fresh Postgres
// database, a queue prefix of its own on the given Redis, a configuration pointing at both,
// a small seeded dataset with recorded scores, and provider-worker processes started with the
// same command as their container.
import { fork } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { rng, type DatasetItem, type WorkerPool } from '@fugu/core';
import { loadConfig, serviceEnv, type FuguConfig } from '@fugu/config';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { writeDatasetJsonl, writeWorkerPool } from '@fugu/datasets';
import { openContext, type Context } from '@fugu/evaluation';
import { providerWorkerMain } from '@fugu/local-services';
import { deleteKeys } from '@fugu/queue';
import { watchApp, type AppProcess } from './app-process.ts';

export const testRedisUrl = (): string => process.env.FUGU_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

export type EvalEnv = {
  config: FuguConfig;
  database: TestDatabase;
  ctx: Context;
  dir: string;
  cleanup(): Promise<void>;
};

export async function createEvalEnv(opts: { redisUrl?: string; overrides?: Record<string, unknown>; env?: Record<string, string> } = {}): Promise<EvalEnv> {
  const database = await createTestDatabase();
  const dir = await mkdtemp(path.join(tmpdir(), 'fugu-eval-'));
  const prefix = `fugut${randomBytes(4).toString('hex')}`;
  const config = loadConfig(
    { ...opts.env, FUGU_REDIS_URL: opts.redisUrl ?? testRedisUrl(), FUGU_DATABASE_URL: database.url, FUGU_QUEUE_PREFIX: prefix, FUGU_HOME: dir, FUGU_LOG_LEVEL: 'warn' },
    opts.overrides,
  );
  const ctx = await openContext({ redis: true, config });
  return {
    config,
    database,
    ctx,
    dir,
    async cleanup() {
      // every master's keys of this prefix (one Redis, or each node of a cluster)
      if (ctx.redis) await deleteKeys(ctx.redis, `${prefix}:*`).catch(() => {});
      await ctx.close().catch(() => {});
      await database.drop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export const REPLAY_WORKERS = ['alpha', 'beta', 'gamma'] as const;

/** n items over 3 tasks with seeded 0/1 (and some fractional) recorded scores for alpha, beta, gamma. */
export function syntheticItems(n: number, seed = 7): DatasetItem[] {
  const r = rng('synthetic', seed);
  const tasks = ['math', 'qa', 'code'];
  return Array.from({ length: n }, (_, i) => {
    const task = tasks[i % 3]!;
    const skill: Record<string, number> = { alpha: task === 'math' ? 0.8 : 0.3, beta: task === 'qa' ? 0.9 : 0.4, gamma: 0.5 };
    const recorded = Object.fromEntries(
      REPLAY_WORKERS.map((w) => [w, { score: i % 11 === 0 ? Math.round(r.next() * 100) / 100 : r.next() < skill[w]! ? 1 : 0 }]),
    );
    return { id: `q${i}`, task, prompt: `Question ${i} about ${task}: what is ${i} + ${i}?`, groundTruth: String(2 * i), sourceSplit: i % 5 === 0 ? 'test' : 'train', recorded };
  });
}

export const replayPool = (workers: readonly string[] = REPLAY_WORKERS): WorkerPool => ({
  name: 'synthetic',
  workers: workers.map((w, j) => ({ name: w, provider: 'replay', model: `model-${w}`, settings: {}, prices: { inputPerMTok: `0.${j + 1}`, outputPerMTok: `0.${j + 2}` } })),
});

export async function writeFixtures(dir: string, items: DatasetItem[], pool: WorkerPool): Promise<{ dataset: string; pool: string }> {
  const dataset = path.join(dir, 'dataset.jsonl');
  const poolFile = path.join(dir, 'pool.yaml');
  await writeDatasetJsonl(dataset, items);
  await writeWorkerPool(poolFile, pool);
  return { dataset, pool: poolFile };
}

export type WorkerProcess = AppProcess & { port: number };

/** Starts `node apps/provider-worker/src/main.ts` (the container's command) against the env's config. */
export async function startWorkerProcess(config: FuguConfig, env: Record<string, string> = {}, node: { execArgv?: string[]; stdout?: 'pipe' | 'ignore' } = {}): Promise<WorkerProcess> {
  const child = fork(providerWorkerMain, [], {
    env: {
      PATH: process.env.PATH,
      ...serviceEnv(config),
      FUGU_WORKER_PORT: '0',
      FUGU_LOG_LEVEL: 'warn',
      ...env,
    },
    ...(node.execArgv && { execArgv: [...process.execArgv, ...node.execArgv] }),
    stdio: ['ignore', node.stdout ?? 'ignore', 'pipe', 'ipc'],
  });
  const p = await watchApp(child, 'provider worker');
  return { ...p, port: p.ready.port! };
}

export async function waitFor<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 60_000, everyMs = 100): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
