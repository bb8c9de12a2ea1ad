// fugu-ultra's deployment reused between publishes (apps/gateway/src/ultra.ts deploymentCache):
// the real `openai` client against two gateways (buildGateway with the fugu-ultra model, real
// Postgres and Redis) over the scripted provider's workers (in process, answering at once). The deployment is
// reused for FUGU_GATEWAY_ULTRA_CACHE_MS, set to an hour here so that nothing but `fugu ultra
// publish`'s Redis message can make a gateway read it again within the test: what is asserted is
// which Conductor answered and how many times each gateway read the row (its reader counts), never
// a time.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import OpenAI from 'openai';
import type { FastifyInstance } from 'fastify';
import type { WorkerPool } from '@fugu/core';
import { loadConfig, type FuguConfig } from '@fugu/config';
import { writeWorkerPool } from '@fugu/datasets';
import { createApiKey, getUltraDeployment, publishUltraDeployment, savePool, type Db, type StoredWorker } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { poolContentHash } from '@fugu/evaluation';
import { createLogger } from '@fugu/telemetry';
import { cmdUltraPublish, ULTRA_PUBLISH_DEFAULTS } from '../../apps/cli/src/commands/ultra-publish.ts';
import { startUltraGateway } from '../support/ultra-gateway.ts';
import { publishUltraAndTell } from '../support/ultra-publish.ts';
import { testRedisUrl } from '../support/eval-env.ts';

const WORKERS = ['alpha', 'beta', 'gamma'] as const;
const HOUR_MS = 3_600_000;

let database: TestDatabase;
let home: string;
let config: FuguConfig;
let pool: WorkerPool;
let poolFile: string;
let stored: { poolId: number; workers: StoredWorker[] };
let apiKey: string;
const gateways: FastifyInstance[] = [];
/** each gateway's URL and the reads of the deployment it made */
const gw: Array<{ url: string; reads: number }> = [];
const quiet = createLogger({ name: 'ultra-deployment-cache-test', level: 'silent' });

/** The worker that answered (fixed:single:<w>: the Conductor's one step), by the header and the `fugu` object's step. */
async function answeredBy(url: string): Promise<string> {
  const client = new OpenAI({ apiKey, baseURL: url, maxRetries: 0, timeout: 30_000 });
  const { data, response } = await client.chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: 'Who answers?' }] }).withResponse();
  const worker = response.headers.get('x-fugu-worker')!;
  expect((data as unknown as { fugu: { steps: Array<{ worker: string }> } }).fugu.steps.map((st) => st.worker)).toEqual([worker]);
  return worker;
}

/** `fugu ultra publish --pool <file> --conductor <spec>` as the CLI runs it: Postgres, then the message to the gateways. */
const publish = (conductor: string): Promise<string> => cmdUltraPublish(config, { ...ULTRA_PUBLISH_DEFAULTS, conductor, pool: poolFile });

beforeAll(async () => {
  database = await createTestDatabase();
  home = await mkdtemp(path.join(tmpdir(), 'fugu-ultra-cache-'));
  config = loadConfig({
    FUGU_REDIS_URL: testRedisUrl(), FUGU_DATABASE_URL: database.url, FUGU_QUEUE_PREFIX: `fuguuc${randomBytes(4).toString('hex')}`, FUGU_HOME: home, FUGU_LOG_LEVEL: 'silent',
    FUGU_GATEWAY_ULTRA_CACHE_MS: String(HOUR_MS),
  });
  pool = {
    name: 'ultra-cache-test',
    workers: WORKERS.map((w, i) => ({ name: w, provider: 'scripted', model: w, settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' }, script: { seed: i + 1, latencyMs: 0 } })),
  };
  poolFile = path.join(home, 'pool.yaml');
  await writeWorkerPool(poolFile, pool);
  stored = await savePool(database.db, pool, poolContentHash(pool));
  apiKey = (await createApiKey(database.db, { name: 'cache' })).key;
  for (let i = 0; i < 2; i++) {
    const counted = { url: '', reads: 0 };
    const read = (db: Db, name: string) => {
      counted.reads += 1;
      return getUltraDeployment(db, name);
    };
    const { app, url } = await startUltraGateway({ config, db: database.db, pool, stored, secret: randomBytes(32), log: quiet, ultra: { read, cacheMs: config.gateway.ultraCacheMs } });
    gateways.push(app);
    counted.url = url;
    gw.push(counted);
  }
});

afterAll(async () => {
  for (const g of gateways) await g.close().catch(() => {});
  await database?.drop();
  if (home) await rm(home, { recursive: true, force: true });
});

describe('fugu-ultra: the deployment reused between publishes', () => {
  it('is reused for FUGU_GATEWAY_ULTRA_CACHE_MS, 1 s by default', () => {
    expect(loadConfig({}).gateway.ultraCacheMs).toBe(1_000);
    expect(config.gateway.ultraCacheMs).toBe(HOUR_MS);
  });

  it('back-to-back requests read the deployment once; a row changed without the publish message is not seen while it is reused', async () => {
    const [a] = gw;
    expect(await publish('fixed:single:alpha')).toBe(`fugu-ultra: fixed:single:alpha on pool ${pool.name}`);
    expect(await answeredBy(a!.url)).toBe('alpha');
    expect(a!.reads).toBe(1);
    expect(await answeredBy(a!.url)).toBe('alpha');
    expect(a!.reads).toBe(1);
    // concurrent requests share the one read too
    expect(await Promise.all([answeredBy(a!.url), answeredBy(a!.url), answeredBy(a!.url)])).toEqual(['alpha', 'alpha', 'alpha']);
    expect(a!.reads).toBe(1);

    // the row changed behind the gateway's back (no `fugu ultra publish`, so no message): the reused deployment is still served
    await publishUltraDeployment(database.db, { name: 'fugu-ultra', conductor: 'fixed:single:beta', pool: pool.name, options: {} });
    expect(await answeredBy(a!.url)).toBe('alpha');
    expect(a!.reads).toBe(1);
  });

  it('`fugu ultra publish` tells every gateway: its next request reads the new deployment (once) and runs the new Conductor', async () => {
    const [a, b] = gw;
    // the second gateway reuses what it read too
    expect(await answeredBy(b!.url)).toBe('beta');
    expect(await answeredBy(b!.url)).toBe('beta');
    expect(b!.reads).toBe(1);
    const before = { a: a!.reads, b: b!.reads };

    expect(await publish('fixed:single:gamma')).toBe(`fugu-ultra: fixed:single:beta -> fixed:single:gamma on pool ${pool.name}`);
    // the message reaches each gateway a moment after the publish returns (on a loaded machine a
    // request may come first and get the deployment it had: what the cache time bounds)
    for (const g of [a!, b!]) {
      await expect.poll(() => answeredBy(g.url), { interval: 20, timeout: 5_000 }).toBe('gamma');
      expect(await answeredBy(g.url)).toBe('gamma');
    }
    expect({ a: a!.reads, b: b!.reads }).toEqual({ a: before.a + 1, b: before.b + 1 });

    // and back: every publish is heard, not only the first
    await publish('fixed:single:alpha');
    await expect.poll(() => answeredBy(a!.url), { interval: 20, timeout: 5_000 }).toBe('alpha');
    await expect.poll(() => answeredBy(b!.url), { interval: 20, timeout: 5_000 }).toBe('alpha');
    expect({ a: a!.reads, b: b!.reads }).toEqual({ a: before.a + 2, b: before.b + 2 });
  });

  it('a deployment published for another pool: the default Conductor serves, said in the fugu object, until a publish for this pool (was a 503, issue 28)', async () => {
    const [a] = gw;
    const client = new OpenAI({ apiKey, baseURL: a!.url, maxRetries: 0, timeout: 30_000 });
    const conductorOf = async () => {
      const c = await client.chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: 'Who answers?' }] });
      const x = (c as unknown as { fugu: { conductor: string; conductor_default?: string } }).fugu;
      return `${x.conductor}${x.conductor_default === undefined ? '' : ` (default: ${x.conductor_default})`}`;
    };
    // the row names another pool (written straight into Postgres: the CLI refuses such a row), then the publish's message
    await publishUltraAndTell(config, database.db, { name: 'fugu-ultra', conductor: 'fixed:single:beta', pool: 'another-pool', options: {} });
    // (the message reaches the gateway a moment after it is sent)
    await expect.poll(conductorOf, { interval: 20, timeout: 5_000 }).toMatch(/^fixed:moa:2 \(default: "fugu-ultra" is published for the pool "another-pool", not this gateway's "[^"]+": `fugu ultra publish --conductor <spec> --pool [^`]+` publishes one\)$/);
    await publish('fixed:single:alpha');
    await expect.poll(() => answeredBy(a!.url), { interval: 20, timeout: 5_000 }).toBe('alpha');
    expect(await conductorOf()).toBe('fixed:single:alpha');
  });
});
