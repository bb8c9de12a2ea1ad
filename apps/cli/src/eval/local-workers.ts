// Provider workers started by `fugu eval` itself for the embedded default (no cluster): the same
// command as the provider-worker container, supervised by startLocalProcesses.
import { fileURLToPath } from 'node:url';
import { serviceEnv, type FuguConfig } from '@fugu/config';
import { startLocalProcesses, type LocalProcesses } from '../local-processes.ts';

export const providerWorkerMain = fileURLToPath(new URL('../../../provider-worker/src/main.ts', import.meta.url));

export type LocalWorkers = LocalProcesses;

export function startLocalWorkers(
  config: FuguConfig,
  opts: { count: number; providers: string[]; env?: Record<string, string | undefined>; onEvent?: (msg: string) => void },
): Promise<LocalWorkers> {
  return startLocalProcesses({
    main: providerWorkerMain,
    name: 'provider-worker',
    count: opts.count,
    home: config.home,
    env: {
      ...process.env,
      ...opts.env,
      ...serviceEnv(config),
      FUGU_WORKER_PROVIDERS: opts.providers.join(','),
      FUGU_WORKER_CONCURRENCY: String(config.worker.concurrency),
      FUGU_WORKER_LOCK_MS: String(config.worker.lockDurationMs),
      FUGU_WORKER_PORT: '0',
    },
    ...(opts.onEvent && { onEvent: opts.onEvent }),
  });
}
