// InProcessRouteClient and the deployment watcher on real Postgres and Redis: not ready before a
// checkpoint is published, routes once one is, swaps at once on `publishRouter`.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type FuguConfig } from '@fugu/config';
import { InputError } from '@fugu/core';
import { getDeployment } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { createRedis } from '@fugu/queue';
import { publishRouter } from './deployment.ts';
import { RouterUnavailableError } from './errors.ts';
import { InProcessRouteClient } from './in-process-client.ts';
import { loadRouterModel, type RouterModel } from '@fugu/router-model';
import { saveAnchorCheckpoint } from './testing.ts';

const redisUrl = process.env.FUGU_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
let database: TestDatabase;
let home: string;
let config: FuguConfig;
let model: RouterModel;

beforeAll(async () => {
  database = await createTestDatabase();
  home = await mkdtemp(path.join(tmpdir(), 'fugu-serving-'));
  // a long poll: the swap below has to come from the publish message
  config = loadConfig({ FUGU_REDIS_URL: redisUrl, FUGU_DATABASE_URL: database.url, FUGU_QUEUE_PREFIX: `fugut${randomBytes(4).toString('hex')}`, FUGU_HOME: home, FUGU_ROUTER_POLL_MS: '600000', FUGU_ROUTER_EXECUTION_PROVIDER: 'cpu' });
  model = await loadRouterModel(home, 2);
}, 120_000);
afterAll(async () => {
  await model?.release();
  await database?.drop();
  await rm(home, { recursive: true, force: true });
});

describe('InProcessRouteClient', () => {
  it('is not ready before a publish, routes after one, and swaps at once on the next', async () => {
    const a = await saveAnchorCheckpoint(database.db, { model, anchors: { math: 'Solve 2x + 3 = 7 for x.', history: 'When did the Roman Empire fall?' }, id: 'ck-a' });
    const b = await saveAnchorCheckpoint(database.db, { model, anchors: { math: 'When did the Roman Empire fall?', history: 'Solve 2x + 3 = 7 for x.' }, id: 'ck-b' });
    const client = await InProcessRouteClient.create({ config, db: database.db });
    const redis = createRedis(redisUrl, 'producer');
    try {
      expect(await client.ready()).toBe(false);
      await expect(client.route({ text: 'What is 5 + 5?' })).rejects.toBeInstanceOf(RouterUnavailableError);

      await publishRouter(database.db, redis, { queuePrefix: config.queuePrefix, deployment: 'fugu', checkpointId: a.id });
      await until(() => client.ready());
      const d = await client.route({ text: 'Solve 5x - 1 = 9.' });
      expect(d).toMatchObject({ worker: 'math', workers: ['math', 'history'], checkpointId: 'ck-a' });
      expect(d.routingMs).toBeGreaterThan(0);
      expect((await client.route({ text: 'Solve 5x - 1 = 9.', allowed: ['history'] })).worker).toBe('history');

      await publishRouter(database.db, redis, { queuePrefix: config.queuePrefix, deployment: 'fugu', checkpointId: b.id });
      await until(async () => (await client.route({ text: 'Solve 5x - 1 = 9.' })).checkpointId === 'ck-b');
      expect((await client.route({ text: 'Solve 5x - 1 = 9.' })).worker).toBe('history');
      expect((await getDeployment(database.db, 'fugu'))?.checkpointId).toBe('ck-b');

      await expect(client.route({ text: '' })).rejects.toThrow(/field text/);
      await expect(client.route({ text: 'x', lambda: -1 })).rejects.toBeInstanceOf(InputError);
      await expect(publishRouter(database.db, redis, { queuePrefix: config.queuePrefix, deployment: 'fugu', checkpointId: 'nope' })).rejects.toThrow(/no router checkpoint "nope"/);
    } finally {
      redis.disconnect();
      await client.close();
    }
  });
});

async function until(cond: () => boolean | Promise<boolean>, limitMs = 20_000): Promise<void> {
  const end = Date.now() + limitMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
