// The fugu command as a user meets it: one clear line and a non-zero exit for services that do
// not answer, bad flags, unknown commands and bad files.
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { testServerUrl } from '@fugu/db/testing';
import { testRedisUrl } from '../support/eval-env.ts';

const main = fileURLToPath(new URL('../../apps/cli/src/main.ts', import.meta.url));

function fugu(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [main, ...args], { env: { PATH: process.env.PATH, FUGU_HOME: tmpdir(), ...env }, timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

const reachable = { FUGU_REDIS_URL: testRedisUrl(), FUGU_DATABASE_URL: testServerUrl() };

describe('fugu CLI errors', () => {
  it('an unreachable Redis is one line naming FUGU_REDIS_URL', async () => {
    const r = await fugu(['status', 'some-run'], { ...reachable, FUGU_REDIS_URL: 'redis://127.0.0.1:1' });
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^fugu: cannot reach Redis at redis:\/\/127\.0\.0\.1:1 .*set FUGU_REDIS_URL/);
  });

  it('an unreachable Postgres is one line naming FUGU_DATABASE_URL, password hidden', async () => {
    const r = await fugu(['migrate'], { ...reachable, FUGU_DATABASE_URL: 'postgres://fugu:hunter2@127.0.0.1:1/fugu' });
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/cannot reach Postgres .*set FUGU_DATABASE_URL/);
    expect(r.stderr).not.toContain('hunter2');
  });

  it('a bad configuration value names the variable', async () => {
    const r = await fugu(['status'], { ...reachable, FUGU_WORKER_CONCURRENCY: 'lots' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/FUGU_WORKER_CONCURRENCY/);
  });

  it('unknown commands and flags are usage errors (exit 2)', async () => {
    expect((await fugu(['frobnicate'], reachable)).stderr).toMatch(/unknown command "frobnicate"/);
    const r = await fugu(['eval', '--datasett', 'x'], reachable);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--datasett/);
    const help = await fugu(['help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('eval [options]');
  });

  it('a malformed dataset file stops eval with the file and line (exit 2)', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'fugu-cli-'));
    const file = path.join(dir, 'bad.jsonl');
    await writeFile(file, `${JSON.stringify({ id: 'a', task: 't', prompt: 'p' })}\nnot json\n`);
    const r = await fugu(['eval', '--dataset', file, '--pool', 'llmrouter', '--local-workers', '0'], reachable);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${file}:2`);
  });
});
