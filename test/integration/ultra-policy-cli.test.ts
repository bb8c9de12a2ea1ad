// `fugu ultra policy` as a user runs it: init (ranking from a dataset's recorded scores), list,
// show, export, import, and the bad inputs (exit 2 naming the flag or field).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DatasetItem } from '@fugu/core';
import { policyFromCheckpoint } from '@fugu/conductor';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { writeDatasetJsonl, writeWorkerPool } from '@fugu/datasets';
import { loadUseLite } from '@fugu/router-model';
import { getPolicyCheckpoint } from '@fugu/ultra';
import { replayPool, testRedisUrl } from '../support/eval-env.ts';

const main = fileURLToPath(new URL('../../apps/cli/src/main.ts', import.meta.url));
let t: TestDatabase;
let dir: string;
let poolFile: string;
let datasetFile: string;
const workers = ['w0', 'w1', 'w2'];

function fugu(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [main, ...args],
      { env: { PATH: process.env.PATH, FUGU_HOME: dir, FUGU_REDIS_URL: testRedisUrl(), FUGU_DATABASE_URL: t.url }, timeout: 60_000, cwd: dir },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

beforeAll(async () => {
  t = await createTestDatabase();
  dir = await mkdtemp(path.join(tmpdir(), 'fugu-ultra-policy-'));
  poolFile = path.join(dir, 'pool.yaml');
  await writeWorkerPool(poolFile, replayPool(workers));
  datasetFile = path.join(dir, 'data.jsonl');
  // w2 best, then w0, then w1 on every item (so on the train split by prompt too)
  const score = { train: { w0: 0.5, w1: 0.2, w2: 0.9 }, test: { w0: 0.5, w1: 0.2, w2: 0.9 } } as const;
  const items: DatasetItem[] = Array.from({ length: 12 }, (_, i) => {
    const split = i < 8 ? 'train' : 'test';
    return { id: `q${i}`, task: 't', prompt: `question ${i}`, sourceSplit: split, recorded: Object.fromEntries(workers.map((w) => [w, { score: score[split][w as 'w0'] }])) } as DatasetItem;
  });
  await writeDatasetJsonl(datasetFile, items);
});
afterAll(async () => {
  await t?.drop();
});

describe('fugu ultra policy', () => {
  it('init, list, show, export and import round trip', async () => {
    const init = await fugu(['ultra', 'policy', 'init', '--pool', poolFile, '--dataset', datasetFile, '--seed', '3', '--max-steps', '4', '--id', 'pol-a']);
    expect(init.stderr).toContain('ranked w2 > w0 > w1');
    expect(init.code).toBe(0);
    expect(init.stdout).toBe('pol-a\n');
    const c = await getPolicyCheckpoint(t.db, 'pol-a');
    expect(c).toMatchObject({ workers, featureDim: 512, backboneId: (await loadUseLite()).backboneId, config: { maxSteps: 4 }, training: { stage: 'init', seed: 3, ranking: ['w2', 'w0', 'w1'] } });
    const policy = policyFromCheckpoint(c, { workers });
    expect(policy.decide(new Float32Array(512).fill(0.3), { argmax: true }).decisions.steps).toEqual([{ worker: 2, kind: 'solve', access: 'none' }]);

    const plain = await fugu(['ultra', 'policy', 'init', '--pool', poolFile]);
    expect(plain.code).toBe(0);
    const plainId = plain.stdout.trim();
    expect((await getPolicyCheckpoint(t.db, plainId)).training).toMatchObject({ ranking: workers });

    const list = await fugu(['ultra', 'policy', 'list', '--json']);
    expect(list.code).toBe(0);
    expect((JSON.parse(list.stdout) as Array<{ id: string }>).map((r) => r.id).sort()).toEqual(['pol-a', plainId].sort());
    expect((await fugu(['ultra', 'policy', 'list'])).stdout).toMatch(/^pol-a\s+parent -\s+3 workers\s+max 4 steps/m);

    const show = await fugu(['ultra', 'policy', 'show', 'pol-a', '--json']);
    expect(JSON.parse(show.stdout)).toMatchObject({ id: 'pol-a', workers, thetaSize: c.theta.length });
    expect((await fugu(['ultra', 'policy', 'show', 'pol-a'])).stdout).toContain('workers (ordinal ids): 0 w0, 1 w1, 2 w2');

    const file = path.join(dir, 'pol-a.json');
    const exp = await fugu(['ultra', 'policy', 'export', 'pol-a', '--out', file]);
    expect(exp.code).toBe(0);
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ format: 'fugu-conductor-policy/1', id: 'pol-a' });
    const imp = await fugu(['ultra', 'policy', 'import', file]);
    expect(imp.code).toBe(0);
    const importedId = imp.stdout.trim();
    expect(importedId).toMatch(/^pol-a_import_/);
    expect((await getPolicyCheckpoint(t.db, importedId)).theta).toEqual(c.theta);
  });

  it('bad input is exit 2 naming the flag or field', async () => {
    const noPool = await fugu(['ultra', 'policy', 'init']);
    expect(noPool.code).toBe(2);
    expect(noPool.stderr).toMatch(/--pool/);
    const steps = await fugu(['ultra', 'policy', 'init', '--pool', poolFile, '--max-steps', '11']);
    expect(steps.code).toBe(2);
    expect(steps.stderr).toMatch(/field --max-steps: maxSteps must be an integer from 1 to 10/);
    const missing = await fugu(['ultra', 'policy', 'show', 'nope']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/no policy checkpoint "nope"/);
    const junk = path.join(dir, 'junk.json');
    await import('node:fs/promises').then((fs) => fs.writeFile(junk, '{"format": "other"}'));
    const imp = await fugu(['ultra', 'policy', 'import', junk]);
    expect(imp.code).toBe(2);
    expect(imp.stderr).toContain(junk);
  });
});
