// The fugu command as a user meets it: one clear line and a non-zero exit for services that do
// not answer, bad flags, unknown commands and bad files.
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { insertBatch, insertBatchLines, setBatchLineAnswer } from '@fugu/db';
import { createTestDatabase, testServerUrl } from '@fugu/db/testing';
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

describe('fugu status <batch>', () => {
  it("prints the per-worker table in aligned columns, however long a worker's name or a cost", async () => {
    const t = await createTestDatabase();
    try {
      await insertBatch(t.db, { id: 'batch_cols', apiKeyId: null, endpoint: '/v1/chat/completions', inputFileId: 'file_x', completionWindow: '24h', metadata: null, allowed: null, total: 7, expiresAt: new Date(Date.now() + 86_400_000) });
      const workers = ['replay:llama-3.3-nemotron-super-49b-v1', 'gpt-4o-mini', 'fugu-ultra'];
      const lines = [0, 1, 2, 3, 4, 5].map((line) => ({ line, customId: `c${line}`, model: 'fugu', worker: workers[line % 3]!, callId: null, error: null, local: true }));
      await insertBatchLines(t.db, 'batch_cols', [...lines, { line: 6, customId: 'c6', model: 'fugu', worker: null, callId: null, error: { code: 'bad', message: 'bad line' }, local: false }]);
      for (const l of lines) await setBatchLineAnswer(t.db, 'batch_cols', l.line, { statusCode: l.line === 4 ? 500 : 200, body: {}, cost: BigInt(l.line === 2 ? 123_456_789_000_000 : 1_500_000_000) });
      const r = await fugu(['status', 'batch_cols'], { ...reachable, FUGU_DATABASE_URL: t.url });
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const table = r.stdout.split('\n').slice(3).filter((l) => l.trim() !== '');
      expect(table).toHaveLength(5); // a header and four workers (one: the lines not run)
      expect(table[0]).toMatch(/worker\s+lines\s+answered\s+failed\s+cost/);
      // every column ends (numbers, right-aligned) or starts (names, left-aligned) at the same place in each row
      const cells = (l: string) => [...l.matchAll(/\S+(?: \S+)*/g)].map((m) => ({ start: m.index, end: m.index + m[0].length }));
      const rows = table.map(cells);
      for (const row of rows) expect(row).toHaveLength(5);
      for (const row of rows) expect(row[0]!.start).toBe(rows[0]![0]!.start);
      for (let c = 1; c < 5; c++) for (const row of rows) expect(row[c]!.end, `column ${c} of ${JSON.stringify(table)}`).toBe(rows[0]![c]!.end);
    } finally {
      await t.drop();
    }
  });
});

describe('fugu gateway --help', () => {
  it('says what the gateway serves: fugu (the router), fugu-ultra (the Conductor) and the workers by name', async () => {
    const r = await fugu(['gateway', '--help']);
    expect(r.code).toBe(0);
    const text = r.stdout.replace(/\s+/g, ' ');
    expect(text).toMatch(/"fugu" \(the router/);
    expect(text).toMatch(/"fugu-ultra" \(the Conductor/);
    expect(text).toMatch(/worker by its name/);
    expect(text).toContain('FUGU_GATEWAY_PORT');
  });
});
