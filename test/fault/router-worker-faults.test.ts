// Fault injection in pool mode, as a client sees it: the real `openai` client against the
// gateway (routing through the `route` queue to two router-worker processes, a stub provider
// behind). A router worker killed with SIGKILL under load (2,000 requests, 32 at a time): its
// jobs come back after the short lock and the other worker decides them, so every request is
// answered, by the right worker. With no router worker alive, requests fail fast with a 503.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, QueueEvents } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import OpenAI, { APIError } from 'openai';
import { startOpenAIStub, type OpenAIStub } from '@fugu/providers/testing';
import { createRedis, routeQueue } from '@fugu/queue';
import { loadRouterModel, publishRouter, QueueRouteClient } from '@fugu/serving';
import { saveAnchorCheckpoint } from '@fugu/serving/testing';
import { createLogger } from '@fugu/telemetry';
import { buildGateway } from '../../apps/gateway/src/server.ts';
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
let stub: OpenAIStub;
let gateway: FastifyInstance;
let openai: OpenAI;

beforeAll(async () => {
  // requests may wait out a killed worker's lock (3 s) and the stalled-job check (1 s)
  env = await createEvalEnv({ env: { FUGU_ROUTER_TIMEOUT_MS: '30000', FUGU_GATEWAY_AUTH: 'none', FUGU_GATEWAY_MODE: 'pool' } });
  const model = await loadRouterModel(env.dir, 2);
  await saveAnchorCheckpoint(env.ctx.db, { model, anchors: { math: ['Solve 2x + 3 = 7 for x.', 'What is 12 squared?'], history: ['When did the Roman Empire fall?', 'Who was the first president of the United States?'] }, id: 'ck' });
  await model.release();
  await publishRouter(env.ctx.db, undefined, { queuePrefix: env.config.queuePrefix, deployment: 'fugu', checkpointId: 'ck' });
  workers.push(...(await Promise.all([startRouterWorkerProcess(env.config), startRouterWorkerProcess(env.config)])));
  client = await QueueRouteClient.create({ config: env.config });
  await waitFor('router workers ready', () => client.ready(), 60_000);
  stub = await startOpenAIStub({ defaultReply: { type: 'text', text: 'ok' } });
  const worker = (name: string) => ({ name, provider: 'openai-compatible' as const, model: name, baseUrl: stub.baseURL, settings: {}, prices: { inputPerMTok: '0', outputPerMTok: '0' } });
  gateway = await buildGateway({ config: env.config, pool: { name: 'fault', workers: [worker('math'), worker('history')] }, routeClient: client, routerWorkers: ['math', 'history'], env: {}, log: createLogger({ name: 'gateway', level: 'silent' }) });
  await gateway.listen({ port: 0, host: '127.0.0.1' });
  openai = new OpenAI({ apiKey: 'unused', baseURL: `http://127.0.0.1:${(gateway.server.address() as { port: number }).port}/v1`, maxRetries: 0, timeout: 60_000 });
});
afterAll(async () => {
  await gateway?.close();
  await stub?.close();
  await client?.close();
  for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) await w.term().catch(() => {});
  await env?.cleanup();
});

describe('router worker faults', () => {
  it('kill -9 of one of two router workers under load: every client request is answered by the right worker', async () => {
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
          const r = await openai.chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: text }] });
          if (r.model !== want) wrong.push(`${i}: ${r.model}`);
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
      // freeze the worker (SIGSTOP) so the jobs it holds cannot finish between looking and killing
      const victim = workers[0]!;
      while (!killed && done < TOTAL) {
        victim.child.kill('SIGSTOP');
        const held = (await queue.getActive()).filter((j) => j.processedBy === victim.id).length;
        if (held >= 1) {
          killed = true;
          await victim.kill9();
        } else {
          victim.child.kill('SIGCONT');
          await new Promise((r) => setTimeout(r, 5));
        }
      }
    };
    await Promise.all([...Array.from({ length: CONCURRENCY }, runner), killer()]);
    await queue.close();
    await events.close();
    process.stderr.write(`router worker kill -9: ${done} requests, ${errors.length} errors, ${wrong.length} wrong workers, ${stalled} stalled route jobs decided again\n`);
    expect(killed).toBe(true);
    expect(stalled).toBeGreaterThan(0);
    expect(errors.map((e) => e.message)).toEqual([]);
    expect(wrong).toEqual([]);
    expect(done).toBe(TOTAL);
    expect(workers[0]!.child.signalCode).toBe('SIGKILL');
  });

  it('with no router worker alive, requests fail fast with a 503 in OpenAI format', async () => {
    await workers[1]!.kill9();
    // a killed worker's heartbeat ages out within 3 s
    await waitFor('no live router worker', async () => !(await client.ready()), 10_000);
    const results = await Promise.allSettled(Array.from({ length: 20 }, () => openai.chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: TEXTS[0]![0] }] })));
    for (const r of results) {
      expect(r.status).toBe('rejected');
      const e = (r as PromiseRejectedResult).reason as APIError;
      expect(e).toBeInstanceOf(APIError);
      expect(e.status).toBe(503);
      expect(e.message).toMatch(/no router worker is alive/);
    }
  });
});
