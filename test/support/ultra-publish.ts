// A deployment of fugu-ultra as the tests publish it: the row straight into Postgres
// (publishUltraDeployment, without `fugu ultra publish`'s checks, so a test may store what the
// command refuses), then the Redis message the command sends, so that every gateway drops the
// deployment it reuses (gateway.ultraCacheMs) and serves this one from its next request.
import type { FuguConfig } from '@fugu/config';
import { publishUltraDeployment, type Db, type UltraDeployment } from '@fugu/db';
import { createRedis } from '@fugu/queue';
import { announceUltraPublished } from '@fugu/ultra';

export async function publishUltraAndTell(config: Pick<FuguConfig, 'redisUrl' | 'queuePrefix'>, db: Db, d: Omit<UltraDeployment, 'publishedAt'>): Promise<UltraDeployment> {
  const stored = await publishUltraDeployment(db, d);
  const redis = createRedis(config.redisUrl, 'producer');
  try {
    if (!(await announceUltraPublished(redis, config.queuePrefix, d.name))) throw new Error(`could not tell the gateways of the deployment "${d.name}" (Redis at ${config.redisUrl})`);
  } finally {
    redis.disconnect();
  }
  return stored;
}
