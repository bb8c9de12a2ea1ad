// Router worker processes for integration and fault tests, started with the same command as
// their container (`node apps/router-worker/src/main.ts`), configured by environment.
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { serviceEnv, type FuguConfig } from '@fugu/config';

export const routerWorkerMain = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../apps/router-worker/src/main.ts');

export type RouterWorkerProcess = {
  child: ChildProcess;
  port: number;
  id: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr(): string;
  kill9(): Promise<void>;
  term(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
};

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
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const ready = await new Promise<{ port: number; id: string }>((resolve, reject) => {
    child.on('message', (m: { type?: string; port?: number; id?: string }) => {
      if (m?.type === 'ready') resolve({ port: m.port!, id: m.id! });
    });
    void exited.then(({ code }) => reject(new Error(`router worker exited during start (code ${code}): ${stderr.slice(-2000)}`)));
  });
  return {
    child,
    ...ready,
    exited,
    stderr: () => stderr,
    kill9: async () => {
      child.kill('SIGKILL');
      await exited;
    },
    term: async () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
}
