// What every command needs: validated configuration, Postgres (migrated) and, when asked, Redis
// queues. Unreachable services fail with one line naming what to set.
import { Queue } from 'bullmq';
import { loadConfig, type FuguConfig } from '@fugu/config';
import { connectDb, migrate, type Db } from '@fugu/db';
import { assertRedis, createRedis, type RedisClient } from '@fugu/queue';
import { bullTelemetry } from '@fugu/telemetry';

export type Context = {
  config: FuguConfig;
  db: Db;
  redis: RedisClient | undefined;
  queue(name: string): Queue;
  close(): Promise<void>;
};

export async function openContext(opts: { redis: boolean; config?: FuguConfig }): Promise<Context> {
  const config = opts.config ?? loadConfig();
  if (opts.redis) await assertRedis(config.redisUrl);
  const db = await connectDb(config.databaseUrl, { applicationName: 'fugu-cli' });
  await migrate(db);
  const redis = opts.redis ? createRedis(config.redisUrl, 'producer') : undefined;
  const queues = new Map<string, Queue>();
  return {
    config,
    db,
    redis,
    queue(name: string): Queue {
      if (!redis) throw new Error('this command was opened without Redis');
      let q = queues.get(name);
      if (!q) queues.set(name, (q = new Queue(name, { connection: redis, prefix: config.queuePrefix, ...bullTelemetry() })));
      return q;
    },
    async close() {
      await Promise.all([...queues.values()].map((q) => q.close().catch(() => {})));
      redis?.disconnect();
      await db.destroy();
    },
  };
}
