// The gateway's port, checked before anything heavy loads (Redis, Postgres, the pool, the router
// checkpoint: seconds): a port another process holds is one clear line at once, not a
// `listen EADDRINUSE` after the checkpoint loaded.
import { createServer } from 'node:net';

/** Resolves when `host:port` can be listened on now (port 0: any); rejects naming the port and how to pick another. */
export async function assertPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  const probe = createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'EADDRINUSE') reject(new Error(portInUse(host, port)));
      else if (e.code === 'EACCES') reject(new Error(`port ${port} on ${host} needs privileges this process does not have: pick another with --port <n> (fugu gateway) or FUGU_GATEWAY_PORT`));
      else reject(e);
    });
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
  });
}

export const portInUse = (host: string, port: number): string =>
  `port ${port} on ${host} is in use (another gateway, or another program): stop it, or pick another port with --port <n> (fugu gateway) or FUGU_GATEWAY_PORT`;
