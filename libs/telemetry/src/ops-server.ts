// A small HTTP server every long-running process exposes: /healthz (alive), /readyz (ready to
// take work), /metrics (Prometheus text format).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export type OpsServer = { port: number; close(): Promise<void> };

export async function startOpsServer(opts: {
  port: number;
  host?: string;
  registry: Registry;
  ready?: () => boolean | Promise<boolean>;
  details?: () => Record<string, unknown> | Promise<Record<string, unknown>>;
}): Promise<OpsServer> {
  const server = http.createServer(async (req, res) => {
    try {
      const url = (req.url ?? '/').split('?')[0];
      if (url === '/healthz') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ status: 'ok', ...(opts.details ? await opts.details() : {}) }));
      } else if (url === '/readyz') {
        const ready = opts.ready ? await opts.ready() : true;
        res.writeHead(ready ? 200 : 503, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ ready }));
      } else if (url === '/metrics') {
        res.writeHead(200, { 'content-type': opts.registry.contentType });
        res.end(await opts.registry.metrics());
      } else {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: 'not found' }));
      }
    } catch (e) {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: (e as Error).message }));
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host ?? '0.0.0.0', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
