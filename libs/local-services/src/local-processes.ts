// Worker processes the CLI starts itself for the embedded default (no cluster): children running
// the same command as their container, each logging to FUGU_HOME/logs/<name>-<slot>.log, ready when
// they send {type: 'ready'}, restarted if one crashes, stopped gracefully (SIGTERM) at the end.
// `fugu eval` starts provider workers with it, `fugu train es` ES evaluators.
import { fork, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';

export type LocalProcesses = { count: number; logDir: string; readonly restarts: number; stop(): Promise<void> };

export async function startLocalProcesses(opts: {
  /** the entry point (a container's command) */
  main: string;
  /** what the logs and messages call one of them, e.g. "provider-worker" */
  name: string;
  count: number;
  home: string;
  env: Record<string, string | undefined>;
  onEvent?: (msg: string) => void;
}): Promise<LocalProcesses> {
  const logDir = path.join(opts.home, 'logs');
  mkdirSync(logDir, { recursive: true });
  let stopping = false;
  let restarts = 0;
  const children = new Map<number, ChildProcess>();

  const spawnOne = (slot: number): Promise<void> =>
    new Promise((resolve, reject) => {
      const log = path.join(logDir, `${opts.name}-${slot}.log`);
      const fd = openSync(log, 'a');
      const child = fork(opts.main, [], { env: opts.env, stdio: ['ignore', fd, fd, 'ipc'] });
      closeSync(fd);
      children.set(slot, child);
      let ready = false;
      child.on('message', (m: { type?: string }) => {
        if (m?.type === 'ready' && !ready) {
          ready = true;
          resolve();
        }
      });
      child.on('exit', (code, signal) => {
        children.delete(slot);
        if (!ready) {
          reject(new Error(`local ${opts.name} ${slot} exited during start (code ${code}); see ${log}`));
          return;
        }
        // one that drained on a signal (Ctrl-C reaches the whole process group) or exited
        // cleanly is not restarted; a crash is
        const crashed = code !== 0 && signal !== 'SIGINT' && signal !== 'SIGTERM';
        if (!stopping && crashed) {
          restarts++;
          opts.onEvent?.(`local ${opts.name} ${slot} exited (${signal ?? `code ${code}`}); restarting it`);
          spawnOne(slot).catch((e: Error) => opts.onEvent?.(e.message));
        }
      });
    });

  await Promise.all(Array.from({ length: opts.count }, (_, i) => spawnOne(i)));
  return {
    count: opts.count,
    logDir,
    get restarts() {
      return restarts;
    },
    async stop() {
      stopping = true;
      await Promise.all(
        [...children.values()].map(
          (c) =>
            new Promise<void>((resolve) => {
              if (c.exitCode !== null || c.signalCode !== null) return resolve();
              c.once('exit', () => resolve());
              c.kill('SIGTERM');
            }),
        ),
      );
    },
  };
}
