// A local Redis Cluster from Debian's redis-server (`fugu up --redis-cluster N`, and the tests):
// N masters and R replicas of each on 127.0.0.1, one redis-server per port, formed with
// `redis-cli --cluster create`. A master killed is replaced by its replica after the node timeout
// (cluster-node-timeout, 3 s here; cluster-replica-validity-factor 0: a replica always may).
//
// Layout under its folder (FUGU_HOME/redis-cluster for `fugu up`):
//   cluster.json            masters, replicas and ports (what `down` and `services` read)
//   node-<port>/            one node: redis.pid, redis.log, data/ (AOF, nodes.conf)
// A node started again finds its nodes.conf and rejoins; the cluster is created only once.
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { ConfigError, InputError, ServiceUnavailableError } from '@fugu/core';
import { clusterUrlFor } from '@fugu/config';
import type { Log } from './defaults.ts';
import { findExecutable, run, waitUntil } from './processes.ts';
import { kill9Redis, runningRedisPid, startRedis, stopRedis, type RedisSpec } from './redis.ts';
import { clusterInfo, redisCall } from './resp.ts';

/** The first port of `fugu up --redis-cluster`'s nodes (the single Redis is on 6390). */
export const DEFAULT_REDIS_CLUSTER_PORT = 6391;
/** cluster-node-timeout: how long a master may be silent before its replica takes over. */
export const DEFAULT_CLUSTER_NODE_TIMEOUT_MS = 3_000;
const HOST = '127.0.0.1';

export interface RedisClusterSpec {
  /** holds cluster.json and a folder per node */
  dir: string;
  /** at least 3 (Redis Cluster's minimum) */
  masters: number;
  /** replicas of each master (0: none; then a master lost is its slots lost) */
  replicas: number;
  /** one per node: masters x (1 + replicas); the first `masters` become the masters */
  ports: number[];
  nodeTimeoutMs?: number;
  /** append-only file on each node; default true */
  aof?: boolean;
  readyTimeoutMs?: number;
  log?: Log;
  install?: boolean;
}

export interface ClusterNodeInfo {
  id: string;
  host: string;
  port: number;
  role: 'master' | 'replica';
  /** a replica's master */
  masterId: string | undefined;
  /** marked failed by the cluster (or this node's own view says it is unreachable) */
  failed: boolean;
  /** slot ranges a master serves, inclusive */
  slots: Array<[number, number]>;
  /** pid of the node's redis-server when started from this folder and running */
  pid: number | undefined;
}

type SavedState = { masters: number; replicas: number; ports: number[] };

const stateFile = (dir: string): string => path.join(dir, 'cluster.json');

/** What cluster.json in `dir` says (masters, replicas, ports), when there is one. */
export function readRedisClusterState(dir: string): SavedState | undefined {
  try {
    const s = JSON.parse(readFileSync(stateFile(dir), 'utf8')) as SavedState;
    if (Number.isInteger(s.masters) && Number.isInteger(s.replicas) && Array.isArray(s.ports)) return s;
  } catch {
    // none yet
  }
  return undefined;
}

const canBind = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, HOST, () => server.close(() => resolve(true)));
  });

/**
 * `n` consecutive ports that were free a moment ago, each with its cluster bus port (+10000) free
 * too (tests: a cluster beside whatever else runs here).
 */
export async function freeClusterPorts(n: number): Promise<number[]> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 24_000);
    const ports = Array.from({ length: n }, (_, i) => base + i);
    let free = true;
    for (const p of ports) if (!(await canBind(p)) || !(await canBind(p + 10_000))) free = false;
    if (free) return ports;
  }
  throw new Error(`found no ${n} free consecutive ports (with their bus ports) for a Redis Cluster`);
}

/** Ports for masters x (1 + replicas) nodes from basePort on. */
export function clusterPorts(basePort: number, masters: number, replicas: number): number[] {
  return Array.from({ length: masters * (1 + replicas) }, (_, i) => basePort + i);
}

export function checkClusterShape(masters: number, replicas: number, ports?: number[]): void {
  if (!Number.isInteger(masters) || masters < 3) throw new InputError(`a Redis Cluster needs at least 3 masters, not ${masters}`, { field: '--redis-cluster' });
  if (!Number.isInteger(replicas) || replicas < 0 || replicas > 5) throw new InputError(`replicas per master must be 0 to 5, not ${replicas}`, { field: '--cluster-replicas' });
  if (ports) {
    if (ports.length !== masters * (1 + replicas)) throw new InputError(`${masters} masters with ${replicas} replicas each need ${masters * (1 + replicas)} ports, not ${ports.length}`, { field: 'ports' });
    for (const p of ports) if (!Number.isInteger(p) || p < 1 || p > 55535) throw new InputError(`not a port for a cluster node (its bus is port + 10000): ${p}`, { field: 'ports' });
  }
}

/** The FUGU_REDIS_URL of the cluster (every node a seed). */
export const redisClusterUrl = (spec: Pick<RedisClusterSpec, 'ports'>): string => clusterUrlFor(spec.ports.map((port) => ({ host: HOST, port })));

function nodeSpec(spec: RedisClusterSpec, port: number): RedisSpec {
  return {
    port,
    dir: path.join(spec.dir, `node-${port}`),
    aof: spec.aof ?? true,
    readyTimeoutMs: spec.readyTimeoutMs ?? 60_000,
    log: spec.log ?? (() => undefined),
    install: spec.install ?? true,
    extraArgs: [
      '--cluster-enabled', 'yes',
      '--cluster-config-file', 'nodes.conf',
      '--cluster-node-timeout', String(spec.nodeTimeoutMs ?? DEFAULT_CLUSTER_NODE_TIMEOUT_MS),
      // a replica takes over however long it was cut off from its master (a local cluster
      // prefers staying up; what Redis lost, fugu sends again from Postgres)
      '--cluster-replica-validity-factor', '0',
    ],
  };
}

/** Parses CLUSTER NODES. */
function parseNodes(text: string, spec?: RedisClusterSpec): ClusterNodeInfo[] {
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((line) => {
      const [id, addr, flags, master, , , , , ...slots] = line.trim().split(' ');
      const hostPort = addr!.split('@')[0]!;
      const port = Number(hostPort.slice(hostPort.lastIndexOf(':') + 1));
      const f = flags!.split(',');
      return {
        id: id!,
        host: hostPort.slice(0, hostPort.lastIndexOf(':')) || HOST,
        port,
        role: f.includes('master') ? 'master' : 'replica',
        masterId: master === '-' ? undefined : master,
        failed: f.includes('fail') || f.includes('fail?') || f.includes('noaddr'),
        slots: slots.filter((s) => /^\d+(-\d+)?$/.test(s)).map((s) => {
          const [a, b] = s.split('-').map(Number);
          return [a!, b ?? a!] as [number, number];
        }),
        pid: spec ? runningRedisPid(nodeSpec(spec, port)) : undefined,
      } satisfies ClusterNodeInfo;
    })
    .sort((a, b) => a.port - b.port);
}

/** The cluster's nodes as one of its running nodes sees them (skipping `exclude`); undefined when none answers. */
export async function redisClusterNodes(spec: RedisClusterSpec, exclude: readonly number[] = []): Promise<ClusterNodeInfo[] | undefined> {
  for (const port of spec.ports) {
    if (exclude.includes(port)) continue;
    const text = await redisCall({ host: HOST, port }, ['CLUSTER', 'NODES'], 2_000).catch(() => undefined);
    if (typeof text === 'string') return parseNodes(text, spec);
  }
  return undefined;
}

/** True when every running node (but `exclude`) says cluster_state:ok and knows every node. */
async function clusterOk(spec: RedisClusterSpec, exclude: readonly number[] = []): Promise<boolean> {
  for (const port of spec.ports) {
    if (exclude.includes(port)) continue;
    const info = await clusterInfo({ host: HOST, port }, 2_000);
    if (info?.cluster_state !== 'ok' || Number(info.cluster_known_nodes) !== spec.ports.length) return false;
  }
  return true;
}

/** Waits until every node (but `exclude`) serves every slot; throws naming the nodes' logs. */
export async function waitForRedisCluster(spec: RedisClusterSpec, opts: { exclude?: readonly number[]; timeoutMs?: number } = {}): Promise<void> {
  const timeoutMs = opts.timeoutMs ?? spec.readyTimeoutMs ?? 60_000;
  if (!(await waitUntil(() => clusterOk(spec, opts.exclude), timeoutMs, 200))) {
    throw new ServiceUnavailableError('redis', `the Redis Cluster on ${HOST}:${spec.ports.join(',')} did not reach cluster_state:ok within ${timeoutMs / 1000} s; see ${spec.dir}/node-*/redis.log`);
  }
}

/**
 * Starts the nodes that do not run (each as startRedis does, with cluster mode on), creates the
 * cluster when its nodes have never met (`redis-cli --cluster create`), writes cluster.json and
 * waits until every slot is served. Idempotent. Returns the URL and the ports it started.
 */
export async function startRedisCluster(spec: RedisClusterSpec): Promise<{ url: string; started: number[]; created: boolean }> {
  checkClusterShape(spec.masters, spec.replicas, spec.ports);
  const saved = readRedisClusterState(spec.dir);
  if (saved && (saved.masters !== spec.masters || saved.replicas !== spec.replicas || saved.ports.join(',') !== spec.ports.join(','))) {
    throw new InputError(
      `${spec.dir} holds a cluster of ${saved.masters} masters x ${saved.replicas} replicas on ports ${saved.ports.join(',')}; stop it (fugu down) and remove the folder to make another`,
      { field: '--redis-cluster' },
    );
  }
  await fs.mkdir(spec.dir, { recursive: true });
  const started: number[] = [];
  await Promise.all(
    spec.ports.map(async (port) => {
      const running = runningRedisPid(nodeSpec(spec, port)) !== undefined;
      await startRedis(nodeSpec(spec, port));
      if (!running) started.push(port);
    }),
  );
  started.sort((a, b) => a - b);
  let created = false;
  const infos = await Promise.all(spec.ports.map((port) => clusterInfo({ host: HOST, port })));
  if (infos.every((i) => i !== undefined && Number(i.cluster_slots_assigned) === 0 && Number(i.cluster_known_nodes) === 1)) {
    const cli = findExecutable('redis-cli', ['/usr/bin', '/usr/local/bin']);
    if (!cli) throw new ConfigError('redis-cli is not installed (Debian: apt-get install redis-tools): it creates the cluster', 'FUGU_REDIS_URL');
    (spec.log ?? (() => undefined))(`fugu: creating a Redis Cluster of ${spec.masters} masters x ${spec.replicas} replicas on ${HOST}:${spec.ports.join(',')}`);
    const res = await run(cli, ['--cluster', 'create', ...spec.ports.map((p) => `${HOST}:${p}`), '--cluster-replicas', String(spec.replicas), '--cluster-yes']);
    if (res.code !== 0) throw new ServiceUnavailableError('redis', `redis-cli --cluster create failed (exit ${res.code}): ${(res.stderr || res.stdout).trim().split('\n').slice(-5).join(' | ')}`);
    created = true;
  } else if (infos.some((i) => i === undefined)) {
    throw new ServiceUnavailableError('redis', `a node of the Redis Cluster in ${spec.dir} does not answer CLUSTER INFO (was it started without cluster mode?)`);
  }
  await fs.writeFile(stateFile(spec.dir), `${JSON.stringify({ masters: spec.masters, replicas: spec.replicas, ports: spec.ports } satisfies SavedState)}\n`);
  await waitForRedisCluster(spec);
  // replicas attach a moment after the slots are served
  if (spec.replicas > 0) {
    const attached = async () => {
      const nodes = await redisClusterNodes(spec);
      return nodes !== undefined && nodes.filter((n) => n.role === 'replica' && !n.failed).length === spec.masters * spec.replicas;
    };
    await waitUntil(attached, spec.readyTimeoutMs ?? 60_000, 200);
  }
  return { url: redisClusterUrl(spec), started, created };
}

/** Stops every node started from spec.dir (SIGTERM: AOF flushed, nodes.conf kept). Returns the ports stopped. */
export async function stopRedisCluster(spec: Pick<RedisClusterSpec, 'dir' | 'ports'>): Promise<number[]> {
  const stopped: number[] = [];
  await Promise.all(
    spec.ports.map(async (port) => {
      if (await stopRedis({ port, dir: path.join(spec.dir, `node-${port}`) })) stopped.push(port);
    }),
  );
  return stopped.sort((a, b) => a - b);
}

/** SIGKILL to one node, as in a crash. */
export function kill9RedisClusterNode(spec: Pick<RedisClusterSpec, 'dir'>, port: number): Promise<boolean> {
  return kill9Redis({ port, dir: path.join(spec.dir, `node-${port}`) });
}

/** Starts one node again (it rejoins from its nodes.conf; a master that was replaced comes back as a replica). */
export async function startRedisClusterNode(spec: RedisClusterSpec, port: number): Promise<void> {
  await startRedis(nodeSpec(spec, port));
}

/**
 * After `port` (a master) was killed: waits until the cluster has marked it failed, a replica
 * has taken its slots and every other node serves every slot again. Returns the nodes then.
 */
export async function waitForFailover(spec: RedisClusterSpec, port: number, timeoutMs = 60_000): Promise<ClusterNodeInfo[]> {
  let seen: ClusterNodeInfo[] = [];
  const done = async (): Promise<boolean> => {
    const nodes = await redisClusterNodes(spec, [port]);
    const dead = nodes?.find((n) => n.port === port);
    if (!nodes || !dead?.failed) return false;
    if (dead.role === 'master' && dead.slots.length > 0) return false;
    if (!(await clusterOk(spec, [port]))) return false;
    seen = nodes;
    return true;
  };
  if (!(await waitUntil(done, timeoutMs, 200))) {
    throw new ServiceUnavailableError('redis', `no replica took over from the Redis Cluster master on ${HOST}:${port} within ${timeoutMs / 1000} s`);
  }
  return seen;
}
