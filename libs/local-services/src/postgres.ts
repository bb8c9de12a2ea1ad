// The project's own Postgres (a cluster in its folder, served on 127.0.0.1:<port>): start (initdb
// on the first start, the `fugu` role and database), stop, kill -9, and the pid of the one running
// from a folder. test/support/services.ts uses it for throwaway instances in fault tests; keep one
// copy of it.
import { type SpawnOptions } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, openSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { ServiceUnavailableError } from '@fugu/core';
import { DEFAULT_READY_TIMEOUT_MS, PG_APP_NAME, PG_SUPERUSER, postgresUrlFor, STOP_TIMEOUT_MS, stderrLog, type Log } from './defaults.ts';
import { isPortOpen } from './ports.ts';
import { canAccess, findPostgresBinaries, postgresServiceUser, type ServiceUser } from './postgres-binaries.ts';
import { childrenOf, commandLine, isAlive, readPidFile, run, signal, tail, waitUntil } from './processes.ts';
import { isReachable } from './reachability.ts';

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
