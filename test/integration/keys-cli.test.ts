// `fugu keys` as a user runs it: the key printed once on stdout, list, revoke, bad input.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { findApiKey } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { testRedisUrl } from '../support/eval-env.ts';

const main = fileURLToPath(new URL('../../apps/cli/src/main.ts', import.meta.url));
let t: TestDatabase;

function fugu(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [main, ...args],
      // a pool file that does not exist: worker names are then not checked against it
      { env: { PATH: process.env.PATH, FUGU_HOME: tmpdir(), FUGU_REDIS_URL: testRedisUrl(), FUGU_DATABASE_URL: t.url, FUGU_GATEWAY_POOL: '/nonexistent/pool.yaml' }, timeout: 30_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

describe('fugu keys', () => {
  it('creates a key (printed once, alone on stdout), lists it and revokes it', async () => {
    const c = await fugu(['keys', 'create', '--name', 'ci', '--workers', 'alpha,beta', '--spend-limit-usd', '2.50']);
    expect(c.code).toBe(0);
    const key = c.stdout.trim();
    expect(key).toMatch(/^fugu-sk-[A-Za-z0-9_-]{43}$/);
    expect(c.stderr).toMatch(/created API key "ci" .*workers: alpha, beta; spend limit: \$2\.500000/);
    expect(await findApiKey(t.db, key)).toMatchObject({ name: 'ci', allowedWorkers: ['alpha', 'beta'], spendLimit: 2_500_000_000_000n });

    const l = await fugu(['keys', 'list']);
    expect(l.stdout).toMatch(/^ci\s+key_\w+\s+fugu-sk-\S{4}\.\.\.\s+active\s+workers: alpha,beta\s+spent \$0\.000000 of \$2\.500000/m);
    expect(l.stdout).not.toContain(key);

    const r = await fugu(['keys', 'revoke', 'ci']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/revoked API key "ci"/);
    expect((await fugu(['keys', 'list'])).stdout).toMatch(/^ci\s+\S+\s+\S+\s+revoked /m);
  });

  it('bad input is a usage error naming the flag', async () => {
    const noName = await fugu(['keys', 'create']);
    expect(noName.code).toBe(2);
    expect(noName.stderr).toMatch(/--name/);
    const badLimit = await fugu(['keys', 'create', '--name', 'x', '--spend-limit-usd', 'lots']);
    expect(badLimit.code).toBe(2);
    expect(badLimit.stderr).toMatch(/field --spend-limit-usd/);
    const unknown = await fugu(['keys', 'revoke', 'nobody']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/no API key named "nobody"/);
    expect((await fugu(['keys', 'rotate'])).stderr).toMatch(/unknown keys command "rotate"/);
  });
});
