// Fault injection in pool mode: a router worker killed with SIGKILL under load (2,000 requests,
// 32 at a time): its jobs come back after the short lock and another worker decides them, so
// every request gets a decision. With no router worker alive, requests fail fast with
// RouterUnavailableError (the gateway's 503 or fallback worker).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, QueueEvents } from 'bullmq';
import { createRedis, routeQueue } from '@fugu/queue';
import { loadRouterModel, publishRouter, QueueRouteClient, RouterUnavailableError } from '@fugu/serving';
import { saveAnchorCheckpoint } from '@fugu/serving/testing';
import { createEvalEnv, waitFor, type EvalEnv } from '../support/eval-env.ts';
import { startRouterWorkerProcess, type RouterWorkerProcess } from '../support/router-workers.ts';

const TEXTS: Array<[string, string]> = [
  ['Compute the derivative of sin(x) times x', 'math'],
  ['Which king ruled France in 1700?', 'history'],
  ['What is 17 times 23?', 'math'],
  ['Name the year the Berlin wall fell.', 'history'],
];
const TOTAL = 2_000;
const CONCURRENCY = 32;

let env: EvalEnv;
const workers: RouterWorkerProcess[] = [];
let client: QueueRouteClient;

beforeAll(async () => {
  // requests may wait out a killed worker's lock (3 s) and the stalled-job check (1 s)
  env = await createEvalEnv({ env: { FUGU_ROUTER_TIMEOUT_MS: '30000' } });
  const model = await loadRouterModel(env.dir, 2);
  await saveAnchorCheckpoint(env.ctx.db, { model, anchors: { math: ['Solve 2x + 3 = 7 for x.', 'What is 12 squared?'], history: ['When did the Roman Empire fall?', 'Who was the first president of the United States?'] }, id: 'ck' });
  await model.release();
  await publishRouter(env.ctx.db, undefined, { queuePrefix: env.config.queuePrefix, deployment: 'fugu', checkpointId: 'ck' });
  workers.push(...(await Promise.all([startRouterWorkerProcess(env.config), startRouterWorkerProcess(env.config)])));
  client = await QueueRouteClient.create({ config: env.config });
  await waitFor('router workers ready', () => client.ready(), 60_000);
}, 180_000);
afterAll(async () => {
  await client?.close();
  for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) await w.term().catch(() => {});
  await env?.cleanup();
});

describe('router worker faults', () => {
  it('kill -9 of one of two router workers under load: every request resolves with a decision', async () => {
    let next = 0;
    let done = 0;
    const errors: Error[] = [];
    const wrong: string[] = [];
    let killed = false;
    // jobs the killed worker held come back as stalled and are decided by the other
    const events = new QueueEvents(routeQueue, { connection: createRedis(env.config.redisUrl, 'worker'), prefix: env.config.queuePrefix });
    let stalled = 0;
    events.on('stalled', () => stalled++);
    await events.waitUntilReady();
    const runner = async () => {
      while (next < TOTAL) {
        const i = next++;
        const [text, want] = TEXTS[i % TEXTS.length]!;
        try {
          const d = await client.route({ text });
          if (d.worker !== want) wrong.push(`${i}: ${d.worker}`);
        } catch (e) {
          errors.push(e as Error);
        }
        done++;
      }
    };
    // a quarter of the way in, kill worker 0 while it holds jobs
    const queue = new Queue(routeQueue, { connection: env.ctx.redis!, prefix: env.config.queuePrefix });
    const killer = async () => {
      while (done < TOTAL / 4) await new Promise((r) => setTimeout(r, 5));
      while (!killed && done < TOTAL) {
        const held = (await queue.getActive()).filter((j) => j.processedBy === workers[0]!.id).length;
        if (held >= 3) {
          killed = true;
          await workers[0]!.kill9();
        }
      }
    };
    await Promise.all([...Array.from({ length: CONCURRENCY }, runner), killer()]);
    await queue.close();
    await events.close();
    expect(killed).toBe(true);
    expect(stalled).toBeGreaterThan(0);
    expect(errors.map((e) => e.message)).toEqual([]);
    expect(wrong).toEqual([]);
    expect(done).toBe(TOTAL);
    expect(workers[0]!.child.signalCode).toBe('SIGKILL');
  });

  it('with no router worker alive, requests fail fast with RouterUnavailableError', async () => {
    await workers[1]!.kill9();
    // a killed worker's heartbeat ages out within 3 s
    await waitFor('no live router worker', async () => !(await client.ready()), 10_000);
    const results = await Promise.allSettled(Array.from({ length: 20 }, () => client.route({ text: TEXTS[0]![0] })));
    for (const r of results) {
      expect(r.status).toBe('rejected');
      expect((r as PromiseRejectedResult).reason).toBeInstanceOf(RouterUnavailableError);
      expect(((r as PromiseRejectedResult).reason as Error).message).toMatch(/no router worker is alive/);
    }
  });
});
