// Router worker processes for integration and fault tests, started with the same command as
// their container (`node apps/router-worker/src/main.ts`), configured by environment.
import { fork } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { serviceEnv, type FuguConfig } from '@fugu/config';
import { watchApp, type AppProcess } from './app-process.ts';

export const routerWorkerMain = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../apps/router-worker/src/main.ts');

export type RouterWorkerProcess = AppProcess & { port: number; id: string };

export async function startRouterWorkerProcess(config: FuguConfig, env: Record<string, string> = {}): Promise<RouterWorkerProcess> {
  const child = fork(routerWorkerMain, [], {
    env: {
      PATH: process.env.PATH,
      ...serviceEnv(config),
      FUGU_ROUTER_PORT: '0',
      FUGU_ROUTER_EXECUTION_PROVIDER: 'cpu',
      FUGU_LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  const p = await watchApp(child, 'router worker');
  return { ...p, port: p.ready.port!, id: p.ready.id! };
}
