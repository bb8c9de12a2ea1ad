// Pool mode end to end: two router worker processes (the container's command) behind the
// `route` queue; QueueRouteClient routes through them, they swap to a newly published checkpoint,
// and they serve /healthz, /readyz and /metrics.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { execFile } from 'node:child_process';
import { liveRouterWorkers, loadRouterModel, publishRouter, QueueRouteClient, type RouteJobResult, type RouterModel } from '@fugu/serving';
import { createRedis, routeQueue } from '@fugu/queue';
import { Queue, QueueEvents } from 'bullmq';
import { saveAnchorCheckpoint } from '@fugu/serving/testing';
import { createEvalEnv, waitFor, type EvalEnv } from '../support/eval-env.ts';
import { startRouterWorkerProcess, type RouterWorkerProcess } from '../support/router-workers.ts';

const ANCHORS = {
  math: ['Solve 2x + 3 = 7 for x.', 'What is the integral of x squared?'],
  history: ['When did the Roman Empire fall?', 'Who was the first president of the United States?'],
  code: ['Write a Python function that reverses a string.', 'Fix the bug in this JavaScript loop.'],
};
const CASES: Array<[string, string]> = [
  ['Compute the derivative of sin(x) times x', 'math'],
  ['Which king ruled France in 1700?', 'history'],
  ['Implement quicksort in JavaScript', 'code'],
  ['What is 17 times 23?', 'math'],
  ['Name the year the Berlin wall fell.', 'history'],
  ['Write a SQL query that counts rows per day.', 'code'],
];

let env: EvalEnv;

function fugu(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['apps/cli/src/main.ts', ...args],
      { env: { PATH: process.env.PATH, FUGU_HOME: env.dir, FUGU_REDIS_URL: env.config.redisUrl, FUGU_DATABASE_URL: env.config.databaseUrl, FUGU_QUEUE_PREFIX: env.config.queuePrefix }, timeout: 30_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}
let model: RouterModel;
let workers: RouterWorkerProcess[] = [];
let client: QueueRouteClient;

beforeAll(async () => {
  env = await createEvalEnv({ env: { FUGU_ROUTER_TIMEOUT_MS: '20000' } });
  model = await loadRouterModel(env.dir, 3);
  await saveAnchorCheckpoint(env.ctx.db, { model, anchors: ANCHORS, id: 'ck-1' });
  await publishRouter(env.ctx.db, undefined, { queuePrefix: env.config.queuePrefix, deployment: 'fugu', checkpointId: 'ck-1' });
  workers = await Promise.all([startRouterWorkerProcess(env.config, { FUGU_ROUTER_POLL_MS: '600000' }), startRouterWorkerProcess(env.config, { FUGU_ROUTER_POLL_MS: '600000' })]);
  client = await QueueRouteClient.create({ config: env.config });
  await waitFor('router workers ready', () => client.ready(), 60_000);
});
afterAll(async () => {
  await client?.close();
  await Promise.all(workers.map((w) => w.term().catch(() => {})));
  await model?.release();
  await env?.cleanup();
});

describe('router workers behind the route queue', () => {
  it('route N requests correctly through two processes, and name a bad request', async () => {
    const reqs = Array.from({ length: 120 }, (_, i) => CASES[i % CASES.length]!);
    const ds = await Promise.all(reqs.map(([text]) => client.route({ text })));
    ds.forEach((d, i) => {
      expect(d.worker).toBe(reqs[i]![1]);
      expect(d.checkpointId).toBe('ck-1');
      expect(d.workers).toEqual(['math', 'history', 'code']);
      expect(d.routingMs).toBeGreaterThan(0);
    });
    expect((await client.route({ text: CASES[0]![0], allowed: ['code', 'history'] })).worker).not.toBe('math');
    await expect(client.route({ text: CASES[0]![0], allowed: ['nobody'] })).rejects.toBeInstanceOf(InputError);
    // both processes took jobs
    const metrics = await Promise.all(workers.map(async (w) => (await fetch(`http://127.0.0.1:${w.port}/metrics`)).text()));
    for (const m of metrics) {
      expect(m).toMatch(/fugu_router_decisions_total\{worker="(math|history|code)"\} [1-9]/);
      expect(m).toMatch(/fugu_router_batch_size_count [1-9]/);
      expect(m).toContain('fugu_router_inference_ms_bucket');
      expect(m).toContain('fugu_router_queue_wait_ms_bucket');
    }
    for (const w of workers) {
      expect((await fetch(`http://127.0.0.1:${w.port}/readyz`)).status).toBe(200);
      const health = (await (await fetch(`http://127.0.0.1:${w.port}/healthz`)).json()) as { checkpointId: string; executionProvider: string };
      expect(health).toMatchObject({ checkpointId: 'ck-1', executionProvider: 'cpu' });
    }
  });

  it('drops a job past its deadline instead of routing it', async () => {
    const events = new QueueEvents(routeQueue, { connection: createRedis(env.config.redisUrl, 'worker'), prefix: env.config.queuePrefix });
    const queue = new Queue(routeQueue, { connection: env.ctx.redis!, prefix: env.config.queuePrefix });
    try {
      await events.waitUntilReady();
      const job = await queue.add('route', { v: 1, text: CASES[0]![0], deadline: Date.now() - 1 });
      const result = (await job.waitUntilFinished(events, 20_000)) as RouteJobResult;
      expect(result).toMatchObject({ ok: false, error: { name: 'RouterUnavailableError', message: expect.stringMatching(/past its deadline/) } });
      const metrics = await Promise.all(workers.map(async (w) => (await fetch(`http://127.0.0.1:${w.port}/metrics`)).text()));
      expect(metrics.some((m) => /fugu_router_dropped_total 1/.test(m))).toBe(true);
    } finally {
      await queue.close();
      await events.close();
    }
  });

  it('picks up a published checkpoint', async () => {
    await saveAnchorCheckpoint(env.ctx.db, { model, anchors: { math: ANCHORS.code, history: ANCHORS.history, code: ANCHORS.math }, id: 'ck-2' });
    // with the CLI, as a user does
    const out = await fugu(['router', 'publish', 'ck-2']);
    expect(out).toMatchObject({ code: 0 });
    expect(out.stdout).toContain('router deployment fugu: ck-1 -> ck-2');
    expect((await fugu(['router', 'publish', 'nope'])).stderr).toMatch(/no router checkpoint "nope"/);
    // both workers swap (each health check reports its own checkpoint)
    await waitFor('both workers on ck-2', async () => {
      const ids = await Promise.all(workers.map(async (w) => ((await (await fetch(`http://127.0.0.1:${w.port}/healthz`)).json()) as { checkpointId: string }).checkpointId));
      return ids.every((id) => id === 'ck-2');
    }, 30_000);
    const ds = await Promise.all(CASES.map(([text]) => client.route({ text })));
    const flip: Record<string, string> = { math: 'code', code: 'math', history: 'history' };
    ds.forEach((d, i) => {
      expect(d.checkpointId).toBe('ck-2');
      expect(d.worker).toBe(flip[CASES[i]![1]]);
    });
  });

  it('drains on SIGTERM: requests in flight get their decision, the process exits 0 and leaves the heartbeat set', async () => {
    const inflight = Promise.all(Array.from({ length: 40 }, (_, i) => client.route({ text: CASES[i % CASES.length]![0] })));
    const exit = await workers[0]!.term();
    expect(exit.code).toBe(0);
    expect((await inflight).length).toBe(40);
    const live = await liveRouterWorkers(env.ctx.redis!, env.config.queuePrefix);
    expect(live).not.toContain(workers[0]!.id);
  });
});
