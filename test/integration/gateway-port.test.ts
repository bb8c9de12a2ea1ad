// A gateway started on a port that is taken says so at once, naming the port and how to pick
// another, before it loads anything heavy (Redis, Postgres, the pool, the router checkpoint):
// here Redis and Postgres do not even answer, so an exit that names them would mean it got past
// the check.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';

const gatewayMain = fileURLToPath(new URL('../../apps/gateway/src/main.ts', import.meta.url));
const cliMain = fileURLToPath(new URL('../../apps/cli/src/main.ts', import.meta.url));

function run(args: string[], env: Record<string, string>): Promise<{ code: number; stderr: string; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    execFile(process.execPath, args, { env: { PATH: process.env.PATH, FUGU_HOME: tmpdir(), ...env }, timeout: 60_000 }, (err, _stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr, ms: performance.now() - t0 });
    });
  });
}

// nothing answers on either: the gateway must not get as far as them
const unreachable = { FUGU_REDIS_URL: 'redis://127.0.0.1:1', FUGU_DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none', FUGU_GATEWAY_HOST: '127.0.0.1' };

describe('the gateway on a port that is taken', () => {
  let taken: Server;
  let port: number;
  beforeAll(async () => {
    taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    port = (taken.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((r) => taken.close(() => r())));

  it('node apps/gateway/src/main.ts exits at once with one line naming the port, --port and FUGU_GATEWAY_PORT', async () => {
    const r = await run([gatewayMain], { ...unreachable, FUGU_GATEWAY_PORT: String(port) });
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n'), r.stderr).toHaveLength(1);
    expect(r.stderr).toMatch(new RegExp(`^gateway: port ${port} on 127\\.0\\.0\\.1 is in use`));
    expect(r.stderr).toContain('--port');
    expect(r.stderr).toContain('FUGU_GATEWAY_PORT');
    expect(r.stderr).not.toMatch(/redis|postgres|checkpoint/i);
    expect(r.ms).toBeLessThan(20_000); // a process start; the checkpoint is never read
  });

  it('fugu gateway --port <taken> says the same and exits 1', async () => {
    const r = await run([cliMain, 'gateway', '--port', String(port), '--host', '127.0.0.1'], unreachable);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`gateway: port ${port} on 127\\.0\\.0\\.1 is in use.*--port.*FUGU_GATEWAY_PORT`));
    expect(r.stderr).not.toMatch(/redis|postgres/i);
  });
});
