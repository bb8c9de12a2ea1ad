// Conductor processes for tests: `node apps/conductor/src/main.ts` (the container's command)
// against an env's config, with its IPC 'ready' message awaited.
import { fork } from 'node:child_process';
import { serviceEnv, type FuguConfig } from '@fugu/config';
import { conductorMain } from '@fugu/local-services';
import { watchApp, type AppProcess } from './app-process.ts';

export type ConductorProcess = AppProcess & { port: number };

export async function startConductorProcess(config: FuguConfig, env: Record<string, string> = {}): Promise<ConductorProcess> {
  const child = fork(conductorMain, [], {
    env: {
      PATH: process.env.PATH,
      ...serviceEnv(config),
      FUGU_CONDUCTOR_PORT: '0',
      FUGU_LOG_LEVEL: 'warn',
      ...(config.conductor.endpoints.length > 0 && { FUGU_CONDUCTOR_ENDPOINTS: JSON.stringify(config.conductor.endpoints) }),
      ...env,
    },
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  const p = await watchApp(child, 'conductor');
  return { ...p, port: p.ready.port! };
}
