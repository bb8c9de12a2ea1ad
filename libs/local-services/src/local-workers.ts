// Worker processes the CLI (or a test) starts itself for the embedded default (no cluster): the
// same commands as their containers, supervised by startLocalProcesses. The entry points are the
// apps' mains, named here by path only (a lib never imports an app).
import { fileURLToPath } from 'node:url';
import { serviceEnv, type FuguConfig } from '@fugu/config';
import { startLocalProcesses, type LocalProcesses } from './local-processes.ts';

const appMain = (rel: string): string => fileURLToPath(new URL(`../../../apps/${rel}`, import.meta.url));

/** The container commands of the apps, as files to fork. */
export const providerWorkerMain = appMain('provider-worker/src/main.ts');
export const evaluatorMain = appMain('trainer/src/evaluator-main.ts');
export const coordinatorMain = appMain('trainer/src/coordinator-main.ts');
export const grpoCoordinatorMain = appMain('trainer/src/grpo-main.ts');
export const gatewayMain = appMain('gateway/src/main.ts');
export const routerWorkerMain = appMain('router-worker/src/main.ts');
export const conductorMain = appMain('conductor/src/main.ts');

export type LocalWorkers = LocalProcesses;
export type LocalEvaluators = LocalProcesses;

/** Provider-worker processes for the given provider queues (`fugu eval --local-workers N`). */
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

/** ES evaluator processes (`fugu train es --local-evaluators N`). */
export function startLocalEvaluators(
  config: FuguConfig,
  opts: { count: number; env?: Record<string, string | undefined>; onEvent?: (msg: string) => void },
): Promise<LocalEvaluators> {
  return startLocalProcesses({
    main: evaluatorMain,
    name: 'es-evaluator',
    count: opts.count,
    home: config.home,
    env: { ...process.env, ...serviceEnv(config), FUGU_ES_EVALUATOR_PORT: '0', ...opts.env },
    ...(opts.onEvent && { onEvent: opts.onEvent }),
  });
}

export type LocalConductors = LocalProcesses;

/** Conductor processes executing workflows from the conduct queue (`fugu ultra eval --local-conductors N`). */
export function startLocalConductors(
  config: FuguConfig,
  opts: { count: number; env?: Record<string, string | undefined>; onEvent?: (msg: string) => void },
): Promise<LocalConductors> {
  return startLocalProcesses({
    main: conductorMain,
    name: 'conductor',
    count: opts.count,
    home: config.home,
    env: {
      ...process.env,
      ...opts.env,
      ...serviceEnv(config),
      FUGU_CONDUCTOR_CONCURRENCY: String(config.conductor.concurrency),
      FUGU_CONDUCTOR_LOCK_MS: String(config.conductor.lockDurationMs),
      FUGU_CONDUCTOR_PORT: '0',
      ...(config.conductor.endpoints.length > 0 && { FUGU_CONDUCTOR_ENDPOINTS: JSON.stringify(config.conductor.endpoints) }),
    },
    ...(opts.onEvent && { onEvent: opts.onEvent }),
  });
}
