// `fugu ultra publish`: names the Conductor a deployment (default `fugu-ultra`) serves on a pool,
// with its options. Everything is checked before anything is stored: the spec against the pool
// (a fixed topology's workers, an llm: worker or endpoint, a policy checkpoint that chooses among
// exactly this pool's workers, a router checkpoint must exist), the options field by field, the
// ranking's names. Then, given Redis, the gateways are told on `<prefix>:ultra:published` so they
// drop the deployment they reuse (gateway.ultraCacheMs) and read the new one at their next request.
import { InputError, type WorkerPool } from '@fugu/core';
import { getUltraDeployment, publishUltraDeployment, type Db, type UltraDeployment } from '@fugu/db';
import { checkSpecCheckpoints, checkSpecs } from '../flags.ts';
import { validateInteractiveOptions } from './options.ts';

export type PublishUltraOptions = {
  /** the model name clients ask for (default fugu-ultra) */
  name?: string;
  conductor: string;
  pool: WorkerPool;
  /** InteractiveOptions as given (defaults filled in at use) */
  options: Record<string, unknown>;
  /** names of the configured llm: endpoints */
  endpoints?: readonly string[];
  /**
   * where to tell the gateways (announceUltraPublished) once it is stored; absent: they read it
   * again within their gateway.ultraCacheMs
   */
  announce?: { redis: UltraPublisher; queuePrefix: string };
};

/**
 * The Conductor of a pool no Conductor is published for (the gateway's fugu-ultra, `fugu ultra
 * run`): two proposers and an aggregator (`fixed:moa:2`, the pool's first two workers) or, on a
 * one-worker pool, that worker alone.
 */
export function defaultConductor(workers: ReadonlyArray<{ name: string }>): string {
  return workers.length >= 2 ? 'fixed:moa:2' : `fixed:single:${workers[0]!.name}`;
}

/** The channel on which gateways hear of a publish (`{ name }` as JSON): they drop that deployment at once. */
export const ultraPublishedChannel = (prefix: string): string => `${prefix}:ultra:published`;

export type UltraPublishedMessage = { name: string };

/** What sending the message needs of a Redis client (ioredis's `publish`). */
export type UltraPublisher = { publish(channel: string, message: string): Promise<unknown> };

/**
 * Tells the gateways sharing this Redis that the deployment `name` changed, so they drop what they
 * reuse of it. false: the message could not be sent (they read it again within their
 * gateway.ultraCacheMs).
 */
export function announceUltraPublished(redis: UltraPublisher, queuePrefix: string, name: string): Promise<boolean> {
  const message = JSON.stringify({ name } satisfies UltraPublishedMessage);
  return redis.publish(ultraPublishedChannel(queuePrefix), message).then(
    () => true,
    () => false,
  );
}

/**
 * Stores the deployment, then tells the gateways when `announce` is given; returns it, the one it
 * replaced, and whether the gateways were told (`told`: false without `announce`, or when the
 * message could not be sent).
 */
export async function publishUltra(db: Db, o: PublishUltraOptions): Promise<{ deployment: UltraDeployment; previous?: UltraDeployment; told: boolean }> {
  const name = o.name ?? 'fugu-ultra';
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/.test(name)) throw new InputError(`a deployment name is 1 to 64 letters, digits, _ . -, got ${JSON.stringify(name)}`, { field: '--name' });
  const workers = o.pool.workers.map((w) => w.name);
  if (workers.includes(name)) throw new InputError(`the pool "${o.pool.name}" has a worker named "${name}": the deployment would hide it`, { field: '--name' });
  const options = validateInteractiveOptions(o.options, 'options');
  const specs = checkSpecs(o.conductor, workers, options.workflow.maxSteps, o.endpoints ?? []);
  if (specs.length !== 1) throw new InputError(`a deployment serves one Conductor, got ${specs.length} specs`, { field: '--conductor' });
  const spec = specs[0]!;
  // a policy checkpoint must choose among exactly this pool's workers; a router checkpoint must exist
  await checkSpecCheckpoints(db, specs, workers);
  const unknown = (options.workflow.ranking ?? []).filter((w) => !workers.includes(w));
  if (unknown.length > 0) throw new InputError(`the ranking names ${unknown.join(', ')}, not in the pool "${o.pool.name}"`, { field: '--ranking' });
  const previous = await getUltraDeployment(db, name);
  const deployment = await publishUltraDeployment(db, { name, conductor: spec.spec, pool: o.pool.name, options: o.options });
  const told = o.announce ? await announceUltraPublished(o.announce.redis, o.announce.queuePrefix, deployment.name) : false;
  return { deployment, ...(previous && { previous }), told };
}
