// The project's own single Redis (a daemon on 127.0.0.1:<port>, files in its folder): start,
// stop, kill -9, and the pid of the one running from a folder. A Redis Cluster's nodes are started
// with this too (redis-cluster.ts). test/support/services.ts uses it for throwaway instances in
// fault tests; keep one copy of it.
import fs from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, ServiceUnavailableError } from '@fugu/core';
import { aptInstall, canApt } from './apt.ts';
import { DEFAULT_READY_TIMEOUT_MS, redisUrlFor, STOP_TIMEOUT_MS, stderrLog, type Log } from './defaults.ts';
import { isPortOpen } from './ports.ts';
import { commandLine, findExecutable, isAlive, readPidFile, run, signal, tail, waitUntil } from './processes.ts';
import { isReachable } from './reachability.ts';

export interface RedisSpec {
  port: number;
  /** holds redis.pid, redis.log and data/ */
  dir: string;
  /** append-only file (appendfsync everysec); default true */
  aof?: boolean;
  readyTimeoutMs?: number;
  log?: Log;
  install?: boolean;
  /** further redis-server arguments (a cluster node's --cluster-enabled ...) */
  extraArgs?: string[];
}

export function redisPaths(dir: string): { pidFile: string; logFile: string; dataDir: string } {
  return { pidFile: path.join(dir, 'redis.pid'), logFile: path.join(dir, 'redis.log'), dataDir: path.join(dir, 'data') };
}

/** Pid of the Redis started from `spec.dir`, when it is running (a stale pid file gives undefined). */
export function runningRedisPid(spec: Pick<RedisSpec, 'dir' | 'port'>): number | undefined {
  const pid = readPidFile(redisPaths(spec.dir).pidFile);
  if (pid === undefined || !isAlive(pid)) return undefined;
  // The pid may have been reused by another program after a crash: Redis titles itself
  // "redis-server 127.0.0.1:<port>".
  const cmd = commandLine(pid);
  if (cmd !== undefined && !(cmd.includes('redis-server') && new RegExp(`:${spec.port}(\\s|$)`).test(cmd))) return undefined;
  return pid;
}

export async function findRedisServer(log: Log, install: boolean): Promise<string> {
  const extra = ['/usr/bin', '/usr/sbin', '/usr/local/bin', '/usr/local/sbin'];
  const found = findExecutable('redis-server', extra);
  if (found) return found;
  if (install && canApt() && (await aptInstall(['redis-server'], log))) {
    const installed = findExecutable('redis-server', extra);
    if (installed) return installed;
  }
  throw new ConfigError(
    'redis-server is not installed: install it (sudo apt-get install redis-server) or set FUGU_REDIS_URL to a Redis you run',
    'FUGU_REDIS_URL',
  );
}

/**
 * Starts Redis on 127.0.0.1:port with its files in spec.dir, unless it already runs from there,
 * and waits until it answers PING. Returns true when it started a process.
 */
export async function startRedis(spec: RedisSpec): Promise<boolean> {
  const log = spec.log ?? stderrLog;
  const { pidFile, logFile, dataDir } = redisPaths(spec.dir);
  const url = redisUrlFor(spec.port);
  const timeoutMs = spec.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS;
  let started = false;
  if (runningRedisPid(spec) === undefined) {
    await fs.rm(pidFile, { force: true }); // stale after a crash
    if (await isPortOpen(spec.port)) {
      throw new ServiceUnavailableError('redis', `cannot start Redis: 127.0.0.1:${spec.port} is taken by another program (not a Redis answering PING); stop it or point FUGU_REDIS_URL at a Redis you run`);
    }
    const bin = await findRedisServer(log, spec.install ?? true);
    await fs.mkdir(dataDir, { recursive: true });
    const aof = spec.aof ?? true;
    const args = [
      '--port', String(spec.port),
      '--bind', '127.0.0.1',
      '--protected-mode', 'yes',
      '--daemonize', 'yes',
      '--supervised', 'no',
      '--pidfile', pidFile,
      '--logfile', logFile,
      '--dir', dataDir,
      '--appendonly', aof ? 'yes' : 'no',
      '--appendfsync', 'everysec',
      // The AOF is the durable copy; no RDB snapshots on top of it.
      '--save', '',
      // BullMQ needs every key kept: a full Redis must refuse writes, never drop jobs.
      '--maxmemory-policy', 'noeviction',
      '--always-show-logo', 'no',
      ...(spec.extraArgs ?? []),
    ];
    const res = await run(bin, args, { cwd: spec.dir });
    if (res.code !== 0) {
      throw new ServiceUnavailableError('redis', `redis-server failed to start (exit ${res.code}): ${(res.stdout + res.stderr).trim() || (await tail(logFile))}`);
    }
    started = true;
  }
  let died = false;
  const ready = await waitUntil(async () => {
    if (await isReachable(url, 1_000)) return true;
    // The daemon wrote its pid file and then exited: no point waiting for the timeout.
    const pid = readPidFile(pidFile);
    if (pid !== undefined && !isAlive(pid)) died = true;
    return died;
  }, timeoutMs);
  if (!ready || died) {
    throw new ServiceUnavailableError('redis', `Redis on 127.0.0.1:${spec.port} did not become ready${died ? ' (it exited)' : ` within ${timeoutMs / 1000} s`}; last lines of ${logFile}:\n${await tail(logFile)}`);
  }
  return started;
}

/** Graceful stop (SIGTERM: Redis flushes the AOF and exits). Returns true when one was running. */
export async function stopRedis(spec: Pick<RedisSpec, 'dir' | 'port'>, timeoutMs = STOP_TIMEOUT_MS): Promise<boolean> {
  const { pidFile, logFile } = redisPaths(spec.dir);
  const pid = runningRedisPid(spec);
  if (pid === undefined) {
    await fs.rm(pidFile, { force: true });
    return false;
  }
  signal(pid, 'SIGTERM');
  if (!(await waitUntil(() => !isAlive(pid), timeoutMs))) {
    throw new ServiceUnavailableError('redis', `Redis (pid ${pid}) did not stop within ${timeoutMs / 1000} s; see ${logFile}`);
  }
  await fs.rm(pidFile, { force: true });
  return true;
}

/** SIGKILL, as in a crash: nothing is flushed and the pid file stays behind. */
export async function kill9Redis(spec: Pick<RedisSpec, 'dir' | 'port'>): Promise<boolean> {
  const pid = runningRedisPid(spec);
  if (pid === undefined) return false;
  signal(pid, 'SIGKILL');
  await waitUntil(() => !isAlive(pid), 10_000, 20);
  return true;
}
