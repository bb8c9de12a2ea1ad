// Provider workers started by `fugu eval` itself for the embedded default (no cluster): child
// processes running the same command as the provider-worker container, logging to files,
// restarted if one dies, stopped gracefully (SIGTERM, bounded drain) when the run is done.
import { fork, type ChildProcess } from 'node:child_process';
import { mkdirSync, openSync, closeSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { serviceEnv, type FuguConfig } from '@fugu/config';

export const providerWorkerMain = fileURLToPath(new URL('../../../provider-worker/src/main.ts', import.meta.url));

export type LocalWorkers = { count: number; logDir: string; restarts: number; stop(): Promise<void> };

export async function startLocalWorkers(
  config: FuguConfig,
  opts: { count: number; providers: string[]; env?: Record<string, string | undefined>; onEvent?: (msg: string) => void },
): Promise<LocalWorkers> {
  const logDir = path.join(config.home, 'logs');
  mkdirSync(logDir, { recursive: true });
  const env: Record<string, string | undefined> = {
    ...process.env,
    ...opts.env,
    ...serviceEnv(config),
    FUGU_WORKER_PROVIDERS: opts.providers.join(','),
    FUGU_WORKER_CONCURRENCY: String(config.worker.concurrency),
    FUGU_WORKER_LOCK_MS: String(config.worker.lockDurationMs),
    FUGU_WORKER_PORT: '0',
  };
  let stopping = false;
  let restarts = 0;
  const children = new Map<number, ChildProcess>();

  const spawnOne = (slot: number): Promise<void> =>
    new Promise((resolve, reject) => {
      const fd = openSync(path.join(logDir, `provider-worker-${slot}.log`), 'a');
      const child = fork(providerWorkerMain, [], { env, stdio: ['ignore', fd, fd, 'ipc'] });
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
          reject(new Error(`local provider worker ${slot} exited during start (code ${code}); see ${path.join(logDir, `provider-worker-${slot}.log`)}`));
          return;
        }
        // a worker that drained on a signal (Ctrl-C reaches the whole process group) or exited
        // cleanly is not restarted; a crash is
        const crashed = code !== 0 && signal !== 'SIGINT' && signal !== 'SIGTERM';
        if (!stopping && crashed) {
          restarts++;
          opts.onEvent?.(`local provider worker ${slot} exited (${signal ?? `code ${code}`}); restarting it`);
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
