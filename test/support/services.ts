// Throwaway Redis and Postgres servers for fault tests that kill and restart them: each on a
// free port with its own temporary folder, never the shared servers and never `fugu up`'s.
// The start/stop code is @fugu/local-services'; this only adds ports, folders and
// cleanup. Call stop() in afterAll/afterEach; as a last resort, servers still running when
// the test process exits are killed and their folders removed.
import { rmSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  freeClusterPorts,
  kill9RedisClusterNode,
  redisClusterNodes,
  redisClusterUrl,
  startRedisCluster,
  startRedisClusterNode,
  stopRedisCluster,
  waitForFailover,
  type ClusterNodeInfo,
  type RedisClusterSpec,
  freePort,
  kill9Postgres,
  kill9Redis,
  postgresUrlFor,
  redisUrlFor,
  runningPostgresPid,
  runningRedisPid,
  startPostgres,
  startRedis,
  stopPostgres,
  stopRedis,
  type PostgresSpec,
  type RedisSpec,
} from '@fugu/local-services';

export interface RedisInstance {
  url: string;
  port: number;
  dir: string;
  /** SIGKILL, as in a crash (nothing flushed). */
  kill9(): Promise<void>;
  /** Graceful shutdown if running, then start again on the same port and folder; waits until ready. */
  restart(): Promise<void>;
  /** Graceful shutdown and removal of the folder. Idempotent. */
  stop(): Promise<void>;
}

export interface PostgresInstance {
  /** the `fugu` database as the `fugu` role */
  url: string;
  /** the `postgres` database as superuser `postgres` */
  adminUrl: string;
  port: number;
  dir: string;
  kill9(): Promise<void>;
  restart(): Promise<void>;
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 60_000;
const quiet = (): void => undefined;

// Last-resort cleanup, synchronous because it runs in 'exit'.
const leftovers = new Map<string, () => number | undefined>();
process.once('exit', () => {
  for (const [dir, pidOf] of leftovers) {
    const pid = pidOf();
    if (pid !== undefined) {
      try {
        process.kill(pid, 'SIGKILL'); // a postmaster's backends exit on their own when it dies
      } catch {
        // already gone
      }
    }
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // files still being written by a dying server; /tmp is cleaned eventually
    }
  }
});

async function tempDir(kind: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), `fugu-${kind}-`));
  // As root, Postgres runs as the `postgres` user, which must be able to reach the folder.
  await chmod(dir, 0o755);
  return dir;
}

/** Starts on a free port; retries on another port if one is taken in the meantime. */
async function startOnFreePort<S extends { port: number }>(spec: S, start: (s: S) => Promise<boolean>): Promise<void> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    spec.port = await freePort();
    try {
      await start(spec);
      return;
    } catch (e) {
      lastError = e;
    }
  }
  throw lastError;
}

export async function startRedisInstance(opts: { aof?: boolean } = {}): Promise<RedisInstance> {
  const dir = await tempDir('redis');
  const spec: RedisSpec = { port: 0, dir, aof: opts.aof ?? true, log: quiet, install: false, readyTimeoutMs: READY_TIMEOUT_MS };
  leftovers.set(dir, () => runningRedisPid(spec));
  try {
    await startOnFreePort(spec, startRedis);
  } catch (e) {
    await rm(dir, { recursive: true, force: true });
    leftovers.delete(dir);
    throw e;
  }
  let stopped = false;
  return {
    url: redisUrlFor(spec.port),
    port: spec.port,
    dir,
    async kill9() {
      await kill9Redis(spec);
    },
    async restart() {
      await stopRedis(spec);
      await startRedis(spec);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await stopRedis(spec).catch(() => kill9Redis(spec));
      await rm(dir, { recursive: true, force: true });
      leftovers.delete(dir);
    },
  };
}

export async function startPostgresInstance(): Promise<PostgresInstance> {
  const dir = await tempDir('pg');
  const spec: PostgresSpec = { port: 0, dir, log: quiet, install: false, readyTimeoutMs: READY_TIMEOUT_MS };
  leftovers.set(dir, () => runningPostgresPid(spec));
  try {
    await startOnFreePort(spec, startPostgres);
  } catch (e) {
    await kill9Postgres(spec).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
    leftovers.delete(dir);
    throw e;
  }
  let stopped = false;
  return {
    url: postgresUrlFor(spec.port),
    adminUrl: postgresUrlFor(spec.port, 'postgres', 'postgres'),
    port: spec.port,
    dir,
    async kill9() {
      await kill9Postgres(spec);
    },
    async restart() {
      await stopPostgres(spec);
      await startPostgres(spec);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await stopPostgres(spec).catch(() => kill9Postgres(spec));
      await rm(dir, { recursive: true, force: true });
      leftovers.delete(dir);
    },
  };
}

export interface RedisClusterInstance {
  /** redis+cluster://127.0.0.1:p1,...: every node a seed */
  url: string;
  spec: RedisClusterSpec;
  /** the nodes as the cluster sees them (roles, slots) */
  nodes(): Promise<ClusterNodeInfo[]>;
  /** SIGKILL to the node on `port` (a master: its replica takes over after the node timeout) */
  kill9(port: number): Promise<void>;
  /** after kill9 of a master: its replica serves its slots and every other node every slot */
  waitForFailover(port: number): Promise<ClusterNodeInfo[]>;
  /** starts a killed node again (it rejoins, a replaced master as a replica) */
  restartNode(port: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A Redis Cluster of `masters` x (1 + `replicas`) redis-server processes on free ports in a
 * temporary folder: the code of `fugu up --redis-cluster` (startRedisCluster), on other ports.
 */
export async function startRedisClusterInstance(opts: { masters?: number; replicas?: number; nodeTimeoutMs?: number } = {}): Promise<RedisClusterInstance> {
  const dir = await tempDir('redis-cluster');
  const masters = opts.masters ?? 3;
  const replicas = opts.replicas ?? 1;
  const spec: RedisClusterSpec = {
    dir, masters, replicas, ports: [], aof: true, nodeTimeoutMs: opts.nodeTimeoutMs ?? 2_000, log: quiet, install: false, readyTimeoutMs: READY_TIMEOUT_MS,
  };
  leftovers.set(dir, () => {
    // every node of the folder (the exit hook kills one pid per entry: kill the rest here)
    const pids = spec.ports.map((port) => runningRedisPid({ port, dir: path.join(dir, `node-${port}`) })).filter((p): p is number => p !== undefined);
    for (const pid of pids.slice(1)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    return pids[0];
  });
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    spec.ports = await freeClusterPorts(masters * (1 + replicas));
    try {
      await startRedisCluster(spec);
      lastError = undefined;
      break;
    } catch (e) {
      lastError = e;
      await stopRedisCluster(spec).catch(() => undefined);
      // afresh: no node's nodes.conf may remember the ports of the failed try
      await rm(dir, { recursive: true, force: true });
      await mkdir(dir, { mode: 0o755 });
    }
  }
  if (lastError) {
    leftovers.delete(dir);
    await rm(dir, { recursive: true, force: true });
    throw lastError;
  }
  let stopped = false;
  return {
    url: redisClusterUrl(spec),
    spec,
    nodes: async () => (await redisClusterNodes(spec)) ?? [],
    async kill9(port) {
      await kill9RedisClusterNode(spec, port);
    },
    waitForFailover: (port) => waitForFailover(spec, port),
    restartNode: (port) => startRedisClusterNode(spec, port),
    async stop() {
      if (stopped) return;
      stopped = true;
      await stopRedisCluster(spec).catch(() => undefined);
      for (const port of spec.ports) await kill9RedisClusterNode(spec, port).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
      leftovers.delete(dir);
    },
  };
}
