// The "waiting for a worker" status of a batch (issue 28, section 4): the driver on real Postgres
// and Redis, its lines' chat-call jobs on a provider queue that no worker consumes: the batch row
// (and the batch object's `fugu` extension) says they wait, on which queue, since when and how to
// start a worker; a BullMQ worker connecting to the queue ends the wait; a driver with a way to
// start workers starts them (once, for the missing providers) after its wait and says so. The
// messages, the object's shape for an OpenAI client, and the idle stop of the gateway's workers.
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, Worker } from 'bullmq';
import type { WorkerSpec } from '@fugu/core';
import { getBatchRow, savePool, type BatchRow, type StoredWorker } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { createRedis, providerCallQueue, type RedisClient } from '@fugu/queue';
import { createLogger } from '@fugu/telemetry';
import { batchObject, createBatch } from './api.ts';
import { BatchDriver, type BatchCodec, type BatchDriverOptions } from './driver.ts';
import { FILE_LIMITS, storeUpload } from './files.ts';
import { LocalWorkerSupply, workerNote, type LocalProviderWorkers } from './workers.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const log = createLogger({ name: 'batch-workers-test', level: 'silent' });
const redisUrl = process.env.FUGU_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = `fugubw${randomBytes(4).toString('hex')}`;
const QUEUE = providerCallQueue('openai');

let t: TestDatabase;
let redis: RedisClient;
let worker: StoredWorker;
const queues = new Map<string, Queue>();
const queue = (name: string): Queue => queues.get(name) ?? queues.set(name, new Queue(name, { connection: redis, prefix })).get(name)!;
const spec: WorkerSpec = { name: 'w1', provider: 'openai', model: 'm', apiKeyEnv: 'UNUSED', settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' } };

// every line to the one worker; nothing answers here (the test looks at what the batch says while its lines wait)
const codec: BatchCodec = {
  resolve: async (_b, lines) => lines.map((l) => ({ line: l.line, ok: true as const, model: 'w1', worker, request: { messages: [{ role: 'user' as const, content: String((l.body.messages as Json)[0].content) }] } })),
  answer: () => ({ statusCode: 200, body: {} }),
};

const driver = (workers: BatchDriverOptions['workers']) =>
  new BatchDriver({ db: t.db, calls: { db: t.db, queue, jobOptions: { attempts: 1, backoffMs: 100 } as Json, shards: 1 }, codec, log, pollMs: 50, stallMs: 600_000, leaseMs: 5_000, ...(workers && { workers }) });

/** A BullMQ worker on the provider queue that answers nothing (it only connects). */
const consumer = () => new Worker(QUEUE, async () => {}, { connection: createRedis(redisUrl, 'worker'), prefix });

async function until<T>(what: string, f: () => Promise<T | undefined | false>, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
const row = async (id: string): Promise<BatchRow> => (await getBatchRow(t.db, id))!;

beforeAll(async () => {
  t = await createTestDatabase('fugu_batch_workers');
  redis = createRedis(redisUrl, 'producer');
  worker = (await savePool(t.db, { name: 'p', workers: [spec] }, `p-${prefix}`)).workers[0]!;
});

afterAll(async () => {
  await Promise.all([...queues.values()].map((q) => q.obliterate({ force: true }).then(() => q.close())));
  redis?.disconnect();
  await t?.drop();
});

describe('a batch whose lines wait for a provider worker', () => {
  it('says so (queue, since, how to start one), stops saying so while a worker is connected, and a driver that may starts its own after its wait', { timeout: 60_000 }, async () => {
    const text = Array.from({ length: 5 }, (_, i) => JSON.stringify({ custom_id: `c${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'w1', messages: [{ role: 'user', content: `q${i}` }] } })).join('\n');
    const file = await storeUpload(t.db, Readable.from([Buffer.from(text)]), { apiKeyId: null, purpose: 'batch', filename: 'in.jsonl' }, FILE_LIMITS);
    const b = await createBatch(t.db, null, null, { input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    // before a driver has looked: no extension (the object is OpenAI's)
    expect(batchObject(b)).not.toHaveProperty('fugu');

    // a driver that starts no worker of its own (FUGU_BATCH_LOCAL_WORKERS=0)
    const a = driver({ localWorkers: 0, waitMs: 0, idleMs: 1_000, checkMs: 100 });
    a.start();
    const waiting = await until('the batch to say its lines wait', async () => (await row(b.id)).workerNote?.waiting && (await row(b.id)));
    expect(waiting.workerNote).toMatchObject({ waiting: true, queues: [QUEUE], since: expect.any(String), local: null });
    expect(waiting.workerNote!.message).toBe(
      `lines wait on queue ${QUEUE}, which no provider worker consumes (none connected since ${waiting.workerNote!.since}): start one: ` +
        'FUGU_WORKER_PROVIDERS=openai node apps/provider-worker/src/main.ts (or scale up the provider-worker deployment), or let the gateway start its own (FUGU_BATCH_LOCAL_WORKERS=1)',
    );
    const o = batchObject(waiting) as Json;
    expect(o).toMatchObject({ object: 'batch', status: 'in_progress', request_counts: { total: 5, completed: 0, failed: 0 } });
    expect(o.fugu).toEqual({ waiting_for_worker: true, waiting_queues: [QUEUE], waiting_since: Math.floor(Date.parse(waiting.workerNote!.since!) / 1000), local_workers: null, message: waiting.workerNote!.message });

    // a worker connects: nothing waits
    const w = consumer();
    await until('the wait to end', async () => (await row(b.id)).workerNote?.waiting === false);
    expect((batchObject(await row(b.id)) as Json).fugu).toMatchObject({ waiting_for_worker: false, waiting_queues: [], waiting_since: null, local_workers: null });
    // it goes: the lines wait again
    await w.close();
    await until('the batch to wait again', async () => (await row(b.id)).workerNote?.waiting === true);
    await a.stop();

    // a driver that may start workers (FUGU_BATCH_LOCAL_WORKERS=1) takes the batch over: after its wait, it starts one for the queue's provider
    const started: Array<{ count: number; providers: string[] }> = [];
    const stopped: string[] = [];
    const start = async (x: { count: number; providers: string[] }): Promise<LocalProviderWorkers> => {
      started.push(x);
      const own = consumer();
      await own.waitUntilReady();
      return { count: x.count, logDir: '/tmp', stop: async () => void (stopped.push(x.providers.join()), await own.close()) };
    };
    const d = driver({ localWorkers: 1, waitMs: 300, idleMs: 60_000, checkMs: 100, start });
    d.start();
    const own = await until('the gateway\'s own worker to run the lines', async () => {
      const r = await row(b.id);
      return r.workerNote?.waiting === false && r.workerNote.local !== null && r;
    });
    expect(started).toEqual([{ count: 1, providers: ['openai'] }]);
    expect(own.workerNote!.local).toEqual({ workers: 1, providers: ['openai'], startedAt: expect.any(String) });
    expect(own.workerNote!.message).toMatch(/^this gateway runs the batch's lines with 1 provider worker process of its own for openai \(started .*; FUGU_BATCH_LOCAL_WORKERS=0 turns this off\)$/);
    expect((batchObject(own) as Json).fugu).toMatchObject({ waiting_for_worker: false, local_workers: { count: 1, providers: ['openai'], started_at: expect.any(Number) } });
    // stopping the driver (the gateway) stops its workers
    await d.stop();
    expect(stopped).toEqual(['openai']);
  });
});

describe('what the batch says', () => {
  const since = new Date('2025-01-02T03:04:05Z');
  it('before the gateway starts its own workers, and when it could not', () => {
    const n = workerNote({ queues: ['{provider-call.replay}'], providers: ['replay'], since, local: null, localWorkers: 2, waitMs: 5_000 });
    expect(n.message).toBe(
      'lines wait on queue {provider-call.replay}, which no provider worker consumes (none connected since 2025-01-02T03:04:05.000Z); this gateway starts 2 provider worker processes ' +
        'of its own for them after 5 s (FUGU_BATCH_LOCAL_WORKERS, FUGU_BATCH_WORKER_WAIT_MS), or start one: FUGU_WORKER_PROVIDERS=replay node apps/provider-worker/src/main.ts (or scale up the provider-worker deployment)',
    );
    const failed = workerNote({ queues: ['{provider-call.replay}'], providers: ['replay'], since, local: null, localWorkers: 1, waitMs: 5_000, startError: 'local provider-worker 0 exited during start (code 1)' });
    expect(failed.message).toMatch(/could not start provider workers of its own \(local provider-worker 0 exited during start \(code 1\)\); start one: FUGU_WORKER_PROVIDERS=replay/);
  });

  it('an ended batch waits for nothing; a batch nothing was said of has no extension', async () => {
    const note = workerNote({ queues: ['{provider-call.replay}'], providers: ['replay'], since, local: null, localWorkers: 0, waitMs: 0 });
    const base = { id: 'batch_x', status: 'cancelled', workerNote: note, createdAt: since, expiresAt: since, total: 1, completed: 0, failed: 0, errors: null, ...Object.fromEntries(['inProgressAt', 'finalizingAt', 'completedAt', 'failedAt', 'expiredAt', 'cancellingAt', 'cancelledAt'].map((k) => [k, null])) } as unknown as BatchRow;
    expect((batchObject(base) as Json).fugu).toMatchObject({ waiting_for_worker: false, waiting_queues: [], waiting_since: null });
    expect(batchObject({ ...base, workerNote: null })).not.toHaveProperty('fugu');
  });
});

describe('the gateway\'s own workers', () => {
  it('are started once per provider, and stopped once no batch has needed them for idleMs', async () => {
    const calls: string[] = [];
    const supply = new LocalWorkerSupply({
      localWorkers: 1, waitMs: 0, idleMs: 1_000,
      start: async (o) => (calls.push(`start ${o.providers.join()}`), { count: o.count, logDir: '/tmp', stop: async () => void calls.push(`stop ${o.providers.join()}`) }),
    }, log);
    await supply.ensure(['replay'], 'test');
    await supply.ensure(['replay'], 'test');
    await supply.ensure(['replay', 'scripted'], 'test');
    expect(calls).toEqual(['start replay', 'start scripted']);
    expect(supply.local(['replay'])).toMatchObject({ workers: 1, providers: ['replay'] });
    supply.touch(['scripted']);
    await supply.stopIdle(Date.now() + 500);
    expect(calls).toEqual(['start replay', 'start scripted']);
    await supply.stopIdle(Date.now() + 1_000);
    expect(calls.slice(2).sort()).toEqual(['stop replay', 'stop scripted']);
    expect(supply.local(['replay', 'scripted'])).toBeNull();
    await supply.stop();
  });
});
