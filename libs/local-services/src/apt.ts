// Installing missing server packages with apt-get (as root on Debian/Ubuntu only).
import type { SpawnOptions } from 'node:child_process';
import type { Log } from './defaults.ts';
import { findExecutable, isRoot, run, type RunResult } from './processes.ts';

/** `apt-get install -y` (refreshing the package lists once if the first try fails), output on stderr. */
export async function aptInstall(packages: string[], log: Log): Promise<boolean> {
  log(`fugu: installing ${packages.join(' ')} with apt-get (running as root; needs the Debian/Ubuntu mirrors)`);
  const opts: SpawnOptions = { stdio: ['ignore', process.stderr, process.stderr], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } };
  const install = (): Promise<RunResult> => run('apt-get', ['install', '-y', '-q', '--no-install-recommends', ...packages], opts);
  if ((await install()).code === 0) return true;
  log('fugu: apt-get install failed; running apt-get update and trying again');
  await run('apt-get', ['update', '-q'], opts);
  return (await install()).code === 0;
}

export const canApt = (): boolean => isRoot() && findExecutable('apt-get', ['/usr/bin']) !== undefined;
