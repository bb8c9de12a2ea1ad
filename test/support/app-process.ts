// An app process (`node apps/<app>/src/<main>.ts`, the container's command) started by a test:
// its stderr kept, its exit awaited, and the 'ready' message it sends its parent over IPC
// (port, id) awaited; a start that fails rejects with the last of its stderr.
import { fork, type ChildProcess } from 'node:child_process';

export type Exit = { code: number | null; signal: NodeJS.Signals | null };
export type ReadyMessage = { type: 'ready'; port?: number; id?: string };

export type AppProcess = {
  child: ChildProcess;
  ready: ReadyMessage;
  exited: Promise<Exit>;
  stderr(): string;
  /** SIGKILL (unless it has exited), then its exit */
  kill9(): Promise<void>;
  /** SIGTERM (unless it has exited): its exit */
  term(): Promise<Exit>;
};

/** Watches a child started with an IPC channel (fork, or spawn with 'ipc' in stdio); resolves once it is ready. */
export async function watchApp(child: ChildProcess, what: string): Promise<AppProcess> {
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const ready = await new Promise<ReadyMessage>((resolve, reject) => {
    child.on('message', (m: Partial<ReadyMessage> | undefined) => {
      if (m?.type === 'ready') resolve(m as ReadyMessage);
    });
    void exited.then(({ code, signal }) => reject(new Error(`${what} exited during start (${signal ?? code}): ${stderr.slice(-2000)}`)));
  });
  const alive = (): boolean => child.exitCode === null && child.signalCode === null;
  return {
    child,
    ready,
    exited,
    stderr: () => stderr,
    kill9: async () => {
      if (alive()) child.kill('SIGKILL');
      await exited;
    },
    term: async () => {
      if (alive()) child.kill('SIGTERM');
      return exited;
    },
  };
}

const gatewayMain = new URL('../../apps/gateway/src/main.ts', import.meta.url).pathname;

/** The gateway as deployed (`node apps/gateway/src/main.ts`) with this environment, ready, and its base URL. */
export async function forkGateway(env: Record<string, string | undefined>): Promise<{ url: string; app: AppProcess }> {
  const child = fork(gatewayMain, [], { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  const app = await watchApp(child, 'gateway');
  return { url: `http://127.0.0.1:${app.ready.port}/v1`, app };
}
