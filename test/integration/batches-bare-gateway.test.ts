// A batch on a bare gateway (issue 28, section 4): `fugu gateway` alone prints "a batch of such
// requests: npx fugu batch submit FILE --wait", and with no provider worker running a batch's
// lines waited on a queue nobody consumed, the batch `in_progress` forever with nothing said. The
// gateway as deployed (`node apps/gateway/src/main.ts`) on a pool of scripted workers, no provider
// worker anywhere: a batch of 40 lines through the real `openai` client says its lines wait for a
// worker (the queue, how to start one), then the gateway starts a provider worker of its own and
// the batch finishes, every line answered once, its object saying the gateway's own worker ran it;
// the worker stops with the gateway. With FUGU_BATCH_LOCAL_WORKERS=0 the lines wait, and
// `fugu batch status` says so and how to start a worker; a worker started then answers them.
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { Queue } from 'bullmq';
import { sql } from 'kysely';
import { loadConfig, serviceEnv, type FuguConfig } from '@fugu/config';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { writeWorkerPool } from '@fugu/datasets';
import { instantScriptedWorkers } from '../support/scripted-pool.ts';
import { createRedis, providerCallQueue } from '@fugu/queue';
import { forkGateway, type AppProcess } from '../support/app-process.ts';
import { batchEnded, fileLines, jsonl, uploadBatchFile } from '../support/batch-stack.ts';
import { startWorkerProcess, waitFor } from '../support/eval-env.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

let database: TestDatabase;
let home: string;
let config: FuguConfig;
let poolFile: string;
const procs: AppProcess[] = [];

beforeAll(async () => {
  home = await mkdtemp(path.join(tmpdir(), 'fugu-bare-batch-'));
  database = await createTestDatabase('fugu_bare_batch');
  config = loadConfig({ FUGU_REDIS_URL: process.env.FUGU_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', FUGU_DATABASE_URL: database.url, FUGU_QUEUE_PREFIX: `fugubb${randomBytes(4).toString('hex')}`, FUGU_HOME: home });
  // the shipped scripted pool without its delays and failures
  const workers = await instantScriptedWorkers();
  poolFile = path.join(home, 'scripted-fast.yaml');
  await writeWorkerPool(poolFile, { name: 'scripted-fast', workers });
}, 60_000);

afterAll(async () => {
  for (const p of procs) await p.kill9().catch(() => {});
  await database?.drop();
  await rm(home, { recursive: true, force: true });
});

const gatewayEnv = (extra: Record<string, string> = {}) => ({ ...serviceEnv(config), FUGU_LOG_LEVEL: 'warn', FUGU_GATEWAY_POOL: poolFile, FUGU_GATEWAY_PORT: '0', FUGU_GATEWAY_AUTH: 'none', ...extra });

const lines = (n: number, tag: string) =>
  Array.from({ length: n }, (_, i) => ({ custom_id: `${tag}-${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: i % 2 === 0 ? 'sim-small' : 'fugu', messages: [{ role: 'user', content: `question ${i}: what is a heat pump?` }] } }));

async function workersOnQueue(): Promise<number> {
  const redis = createRedis(config.redisUrl, 'producer');
  const q = new Queue(providerCallQueue('scripted'), { connection: redis, prefix: config.queuePrefix });
  try {
    return await q.getWorkersCount();
  } finally {
    await q.close();
    redis.disconnect();
  }
}

describe('a batch on a gateway with no provider worker', () => {
  it('finishes: the batch says its lines wait for a worker, the gateway starts its own, every line is answered once; the worker stops with the gateway', { timeout: 180_000 }, async () => {
    expect(await workersOnQueue()).toBe(0);
    const g = await forkGateway(gatewayEnv());
    procs.push(g.app);
    const client = new OpenAI({ apiKey: 'none', baseURL: g.url, maxRetries: 0 });
    const input = lines(40, 'bare');
    const file = await uploadBatchFile(client, jsonl(input));
    const created = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    // what the batch object says while it runs
    const seen: Json[] = [];
    const end = await waitFor('the batch to end', async () => {
      const b: Json = await client.batches.retrieve(created.id);
      if (b.fugu) seen.push(b.fugu);
      return ['completed', 'failed', 'cancelled', 'expired'].includes(b.status) && b;
    }, 120_000, 200);
    expect(end).toMatchObject({ status: 'completed', request_counts: { total: 40, completed: 40, failed: 0 }, error_file_id: null });
    // it said its lines waited, on which queue, and how to start a worker
    const waiting = seen.find((f) => f.waiting_for_worker);
    expect(waiting).toMatchObject({ waiting_queues: ['{provider-call.scripted}'], waiting_since: expect.any(Number) });
    expect(waiting.message).toMatch(/lines wait on queue \{provider-call\.scripted\}, which no provider worker consumes/);
    expect(waiting.message).toMatch(/FUGU_WORKER_PROVIDERS=scripted node apps\/provider-worker\/src\/main\.ts/);
    // and that the gateway's own worker ran them (said on the finished batch too)
    expect(end.fugu).toMatchObject({ waiting_for_worker: false, local_workers: { count: 1, providers: ['scripted'], started_at: expect.any(Number) } });
    expect(end.fugu.message).toMatch(/this gateway runs the batch's lines with 1 provider worker process of its own for scripted/);
    // every line answered once, by a scripted worker
    const out = await fileLines(client, end.output_file_id);
    expect(out.map((o) => o.custom_id).sort()).toEqual(input.map((l) => l.custom_id).sort());
    expect(out.every((o) => o.response.status_code === 200 && /\[scripted sim-/.test(o.response.body.choices[0].message.content))).toBe(true);
    const perLine = (await sql<{ n: string; distinct: string }>`select count(*) as n, count(distinct key) as distinct from chat_calls where key like ${`${created.id}.%`}`.execute(database.db)).rows[0]!;
    expect([Number(perLine.n), Number(perLine.distinct)]).toEqual([40, 40]);
    // the same object through the list (the openai client's page type reads it)
    const listed = (await client.batches.list({ limit: 5 })).data.find((b) => b.id === created.id) as Json;
    expect(listed.fugu.local_workers.providers).toEqual(['scripted']);
    // the gateway's worker goes with it
    expect(await workersOnQueue()).toBe(1);
    await g.app.term();
    await waitFor('the local provider worker to stop', async () => (await workersOnQueue()) === 0, 30_000, 200);
  });

  it('FUGU_BATCH_LOCAL_WORKERS=0: the lines wait, the batch object and `fugu batch status` say so and how to start a worker; one started answers them', { timeout: 180_000 }, async () => {
    const g = await forkGateway(gatewayEnv({ FUGU_BATCH_LOCAL_WORKERS: '0' }));
    procs.push(g.app);
    const client = new OpenAI({ apiKey: 'none', baseURL: g.url, maxRetries: 0 });
    const input = lines(10, 'off');
    const file = await uploadBatchFile(client, jsonl(input));
    const created = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const waiting: Json = await waitFor('the batch to say its lines wait', async () => {
      const b: Json = await client.batches.retrieve(created.id);
      return b.fugu?.waiting_for_worker === true && b;
    }, 30_000, 200);
    expect(waiting.status).toBe('in_progress');
    expect(waiting.fugu.local_workers).toBeNull();
    expect(waiting.fugu.message).toMatch(/start one: FUGU_WORKER_PROVIDERS=scripted node apps\/provider-worker\/src\/main\.ts .*or let the gateway start its own \(FUGU_BATCH_LOCAL_WORKERS=1\)/);
    // the CLI's status says it
    const cli = new URL('../../apps/cli/src/main.ts', import.meta.url).pathname;
    const { stdout } = await promisify(execFile)(process.execPath, [cli, 'batch', 'status', created.id, '--url', g.url], { env: { ...process.env, ...serviceEnv(config) }, timeout: 60_000 });
    expect(stdout).toMatch(new RegExp(`${created.id}\\s+in_progress .*\\n  workers: lines wait on queue \\{provider-call\\.scripted\\}, which no provider worker consumes`));
    // a worker started as the message says answers them, and the batch says nothing waits
    procs.push(await startWorkerProcess(config, { FUGU_WORKER_PROVIDERS: 'scripted' }));
    const end: Json = await batchEnded(client, created.id, 60_000);
    expect(end).toMatchObject({ status: 'completed', request_counts: { total: 10, completed: 10, failed: 0 } });
    expect(end.fugu).toMatchObject({ waiting_for_worker: false, local_workers: null });
  });
});
