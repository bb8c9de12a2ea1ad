// ES evaluator processes started by `fugu train es --local-evaluators N` (no cluster): children
// running the same command as the evaluator container, logging to files, restarted if one dies,
// stopped gracefully (SIGTERM) when the run is over.
import { fork, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FuguConfig } from '@fugu/config';

export const evaluatorMain = fileURLToPath(new URL('../../../trainer/src/evaluator-main.ts', import.meta.url));
export const coordinatorMain = fileURLToPath(new URL('../../../trainer/src/coordinator-main.ts', import.meta.url));

export type LocalEvaluators = { count: number; logDir: string; restarts: number; stop(): Promise<void> };

export async function startLocalEvaluators(
  config: FuguConfig,
  opts: { count: number; env?: Record<string, string | undefined>; onEvent?: (msg: string) => void },
): Promise<LocalEvaluators> {
  const logDir = path.join(config.home, 'logs');
  mkdirSync(logDir, { recursive: true });
  const env: Record<string, string | undefined> = {
    ...process.env,
    FUGU_REDIS_URL: config.redisUrl,
    FUGU_DATABASE_URL: config.databaseUrl,
    FUGU_QUEUE_PREFIX: config.queuePrefix,
    FUGU_HOME: config.home,
    FUGU_ES_EVALUATOR_PORT: '0',
    ...opts.env,
  };
  let stopping = false;
  let restarts = 0;
  const children = new Map<number, ChildProcess>();
  const spawnOne = (slot: number): Promise<void> =>
    new Promise((resolve, reject) => {
      const log = path.join(logDir, `es-evaluator-${slot}.log`);
      const fd = openSync(log, 'a');
      const child = fork(evaluatorMain, [], { env, stdio: ['ignore', fd, fd, 'ipc'] });
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
        if (!ready) return reject(new Error(`local ES evaluator ${slot} exited during start (code ${code}); see ${log}`));
        const crashed = code !== 0 && signal !== 'SIGINT' && signal !== 'SIGTERM';
        if (!stopping && crashed) {
          restarts++;
          opts.onEvent?.(`local ES evaluator ${slot} exited (${signal ?? `code ${code}`}); restarting it`);
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
