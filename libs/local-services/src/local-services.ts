// The project's own Redis and Postgres for a developer machine (`fugu up` / `fugu down`).
//
// They run on their own ports (Redis 6390, Postgres 5440) with their data under FUGU_HOME
// (default <repo>/.fugu), so they never touch a Redis or Postgres the machine already runs.
// Both are started as daemons in their own session: they outlive the command that started them
// and a Ctrl-C in that terminal does not reach them; `down` stops them through their pid files.
//
// Layout under FUGU_HOME:
//   redis/redis.pid, redis/redis.log, redis/data/ (AOF)
//   pg/postgres.log, pg/data/ (the cluster; postmaster.pid inside)
//
// This module is `up` / `down` / `services`; the pieces are in their own modules: redis.ts,
// redis-cluster.ts, postgres.ts (lifecycles), postgres-binaries.ts, apt.ts, processes.ts,
// ports.ts, reachability.ts, resp.ts, defaults.ts.
import path from 'node:path';
import { InputError } from '@fugu/core';
import { DEFAULT_PG_PORT, DEFAULT_READY_TIMEOUT_MS, DEFAULT_REDIS_PORT, postgresUrlFor, redisUrlFor, stderrLog, type Log } from './defaults.ts';
import { runningPostgresPid, startPostgres, stopPostgres, type PostgresSpec } from './postgres.ts';
import { isReachable } from './reachability.ts';
import { runningRedisPid, startRedis, stopRedis, type RedisSpec } from './redis.ts';
import {
  checkClusterShape, clusterPorts, DEFAULT_REDIS_CLUSTER_PORT, readRedisClusterState, redisClusterNodes, redisClusterUrl, startRedisCluster, stopRedisCluster,
  type ClusterNodeInfo, type RedisClusterSpec,
} from './redis-cluster.ts';

const REPO_ROOT = path.resolve(import.meta.dirname, '../../..');

export type ServiceName = 'redis' | 'postgres' | 'redis-cluster';

export interface ServicesOptions {
  /** data folder; default FUGU_HOME, else <repo>/.fugu */
  home?: string;
  redisPort?: number;
  pgPort?: number;
  /** progress and notices, one line each; default: stderr */
  log?: Log;
  /** which services to act on; default both */
  only?: ServiceName[];
  /** bound on waiting for a service to accept connections; default 60 s */
  readyTimeoutMs?: number;
  /** allow `apt-get install` of missing server packages when running as root; default true */
  install?: boolean;
  /**
   * a local Redis Cluster instead of the single Redis (`fugu up --redis-cluster N`): N masters,
   * `replicas` each (default 1), nodes on ports from `basePort` (default 6391) in FUGU_HOME/redis-cluster
   */
  redisCluster?: { masters: number; replicas?: number; basePort?: number; nodeTimeoutMs?: number };
}

export interface UpResult {
  redisUrl: string;
  databaseUrl: string;
  /** services this call started (empty when they were already running) */
  started: ServiceName[];
}

export interface ServiceStatus {
  name: ServiceName;
  url: string;
  dir: string;
  /** pid of the server started from this folder, if it is running */
  pid: number | undefined;
  reachable: boolean;
  /** a Redis Cluster's nodes, as one of them sees them */
  nodes?: ClusterNodeInfo[];
}

// ---------------------------------------------------------------------------------------------
// Options, paths, URLs

interface Resolved {
  home: string;
  redisPort: number;
  pgPort: number;
  log: Log;
  only: ServiceName[];
  readyTimeoutMs: number;
  install: boolean;
  redisCluster: ServicesOptions['redisCluster'];
}

function resolveOptions(opts: ServicesOptions = {}): Resolved {
  const home = path.resolve(opts.home ?? (process.env.FUGU_HOME || path.join(REPO_ROOT, '.fugu')));
  const redisPort = opts.redisPort ?? DEFAULT_REDIS_PORT;
  const pgPort = opts.pgPort ?? DEFAULT_PG_PORT;
  for (const [field, port] of [['redisPort', redisPort], ['pgPort', pgPort]] as const) {
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new InputError(`not a TCP port: ${port}`, { field });
  }
  return {
    home,
    redisPort,
    pgPort,
    log: opts.log ?? stderrLog,
    only: opts.only ?? ['redis', 'postgres'],
    readyTimeoutMs: opts.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS,
    install: opts.install ?? true,
    redisCluster: opts.redisCluster,
  };
}

/** URLs of the project's own services (whether or not they run). */
export function localServiceUrls(opts: Pick<ServicesOptions, 'redisPort' | 'pgPort'> = {}): { redisUrl: string; databaseUrl: string } {
  return { redisUrl: redisUrlFor(opts.redisPort ?? DEFAULT_REDIS_PORT), databaseUrl: postgresUrlFor(opts.pgPort ?? DEFAULT_PG_PORT) };
}

// ---------------------------------------------------------------------------------------------
// up / down / status

const redisSpec = (o: Resolved): RedisSpec => ({ port: o.redisPort, dir: path.join(o.home, 'redis'), log: o.log, readyTimeoutMs: o.readyTimeoutMs, install: o.install });
/** The local cluster's spec: the saved one in FUGU_HOME/redis-cluster, else the one asked for. */
function clusterSpec(o: Resolved): RedisClusterSpec | undefined {
  const dir = path.join(o.home, 'redis-cluster');
  const saved = readRedisClusterState(dir);
  const asked = o.redisCluster;
  if (!asked && !saved) return undefined;
  const masters = asked?.masters ?? saved!.masters;
  const replicas = asked?.replicas ?? saved?.replicas ?? 1;
  checkClusterShape(masters, replicas);
  const ports = asked?.basePort !== undefined || !saved ? clusterPorts(asked?.basePort ?? DEFAULT_REDIS_CLUSTER_PORT, masters, replicas) : saved.ports;
  return { dir, masters, replicas, ports, log: o.log, readyTimeoutMs: o.readyTimeoutMs, install: o.install, ...(asked?.nodeTimeoutMs !== undefined && { nodeTimeoutMs: asked.nodeTimeoutMs }) };
}

const postgresSpec = (o: Resolved): PostgresSpec => ({ port: o.pgPort, dir: path.join(o.home, 'pg'), log: o.log, readyTimeoutMs: o.readyTimeoutMs, install: o.install });

/**
 * Starts whichever of the project's own Redis and Postgres is not reachable, waits until both
 * are ready and returns their URLs. Idempotent.
 */
export async function up(opts: ServicesOptions = {}): Promise<UpResult> {
  const o = resolveOptions(opts);
  const { redisUrl, databaseUrl } = localServiceUrls(o);
  const tasks: Promise<ServiceName | undefined>[] = [];
  const cluster = o.redisCluster ? clusterSpec(o) : undefined;
  if (cluster && o.only.includes('redis')) {
    tasks.push(
      (async () => {
        o.log(`fugu: starting a Redis Cluster of ${cluster.masters} masters x ${cluster.replicas} replicas on 127.0.0.1:${cluster.ports.join(',')} (files in ${cluster.dir})`);
        const r = await startRedisCluster(cluster);
        return r.started.length > 0 ? 'redis-cluster' : undefined;
      })(),
    );
  } else if (o.only.includes('redis')) {
    tasks.push(
      (async () => {
        if (await isReachable(redisUrl)) return undefined;
        const spec = redisSpec(o);
        o.log(`fugu: starting Redis on 127.0.0.1:${o.redisPort} (files in ${spec.dir})`);
        return (await startRedis(spec)) ? 'redis' : undefined;
      })(),
    );
  }
  if (o.only.includes('postgres')) {
    tasks.push(
      (async () => {
        if (await isReachable(databaseUrl)) return undefined;
        const spec = postgresSpec(o);
        o.log(`fugu: starting Postgres on 127.0.0.1:${o.pgPort} (files in ${spec.dir})`);
        return (await startPostgres(spec)) ? 'postgres' : undefined;
      })(),
    );
  }
  const results = await Promise.allSettled(tasks);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  const started = results.flatMap((r) => (r.status === 'fulfilled' && r.value ? [r.value] : []));
  return { redisUrl: cluster ? redisClusterUrl(cluster) : redisUrl, databaseUrl, started };
}

/** Stops the services `up` started from this home (through their pid files). No-op when none runs. */
export async function down(opts: ServicesOptions = {}): Promise<{ stopped: ServiceName[] }> {
  const o = resolveOptions(opts);
  const stopped: ServiceName[] = [];
  if (o.only.includes('redis') && (await stopRedis(redisSpec(o)))) {
    o.log(`fugu: stopped Redis on 127.0.0.1:${o.redisPort}`);
    stopped.push('redis');
  }
  const cluster = o.only.includes('redis') ? clusterSpec({ ...o, redisCluster: undefined }) : undefined;
  if (cluster) {
    const ports = await stopRedisCluster(cluster);
    if (ports.length > 0) {
      o.log(`fugu: stopped the Redis Cluster's nodes on 127.0.0.1:${ports.join(',')}`);
      stopped.push('redis-cluster');
    }
  }
  if (o.only.includes('postgres') && (await stopPostgres(postgresSpec(o)))) {
    o.log(`fugu: stopped Postgres on 127.0.0.1:${o.pgPort}`);
    stopped.push('postgres');
  }
  return { stopped };
}

/** For each service: its URL, folder, pid (when started from this home and running) and reachability. */
export async function servicesStatus(opts: ServicesOptions = {}): Promise<ServiceStatus[]> {
  const o = resolveOptions(opts);
  const { redisUrl, databaseUrl } = localServiceUrls(o);
  const out: ServiceStatus[] = [];
  if (o.only.includes('redis')) {
    const spec = redisSpec(o);
    out.push({ name: 'redis', url: redisUrl, dir: spec.dir, pid: runningRedisPid(spec), reachable: await isReachable(redisUrl) });
    const cluster = clusterSpec({ ...o, redisCluster: undefined });
    if (cluster) {
      const url = redisClusterUrl(cluster);
      const nodes = await redisClusterNodes(cluster);
      out.push({ name: 'redis-cluster', url, dir: cluster.dir, pid: nodes?.find((n) => n.pid !== undefined)?.pid, reachable: await isReachable(url), ...(nodes && { nodes }) });
    }
  }
  if (o.only.includes('postgres')) {
    const spec = postgresSpec(o);
    out.push({ name: 'postgres', url: databaseUrl, dir: spec.dir, pid: runningPostgresPid(spec), reachable: await isReachable(databaseUrl) });
  }
  return out;
}
