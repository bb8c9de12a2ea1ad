import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError, rng, type DatasetItem } from '@fugu/core';
import { conductorPool, policyFromCheckpoint } from '@fugu/conductor';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { exportPolicyCheckpoint, getPolicyCheckpoint, importPolicyCheckpoint, initPolicyCheckpoint, loadPolicy, trainingRanking } from './policy-store.ts';

let t: TestDatabase;
let dir: string;
beforeAll(async () => {
  t = await createTestDatabase();
  dir = await mkdtemp(path.join(tmpdir(), 'fugu-policy-'));
});
afterAll(async () => { await t?.drop(); });

const workers = ['a', 'b', 'c'];
const features = (s: number): Float32Array => {
  const r = rng('store-features', s);
  return Float32Array.from({ length: 8 }, () => r.normal());
};

async function rejectsField(p: Promise<unknown>, field: string): Promise<string> {
  const e = await p.then(() => undefined, (x: unknown) => x);
  expect(e).toBeInstanceOf(InputError);
  expect((e as InputError).field).toBe(field);
  return (e as InputError).message;
}

describe('policy checkpoints in Postgres and files', () => {
  it('init stores the documented initialisation; loadPolicy gives the same policy back and refuses another pool', async () => {
    const c = await initPolicyCheckpoint(t.db, { workers, backboneId: 'bb-1', featureDim: 8, seed: 4, ranking: ['c', 'a'], id: 'pol-init', maxSteps: 4 });
    expect(c).toMatchObject({ id: 'pol-init', workers, featureDim: 8, parentId: null, config: { maxSteps: 4 }, training: { stage: 'init', seed: 4, ranking: ['c', 'a'] } });
    const { policy } = await loadPolicy(t.db, 'pol-init', { workers });
    expect(policy.decide(features(1), { argmax: true }).decisions.steps).toEqual([{ worker: 2, kind: 'solve', access: 'none' }]);
    expect(policy.theta).toEqual(c.theta);
    const msg = await rejectsField(loadPolicy(t.db, 'pol-init', { workers: ['b', 'a', 'c'] }), 'pool');
    expect(msg).toMatch(/"pol-init" was made for the pool a, b, c .*the pool given has b, a, c/);
    await rejectsField(getPolicyCheckpoint(t.db, 'nope'), 'checkpoint');
    await rejectsField(initPolicyCheckpoint(t.db, { workers, backboneId: 'bb-1', featureDim: 8, seed: 4, id: 'pol-init' }), 'id');
  });

  it('export then import round-trips (a taken id gets a new one); a bad file stores nothing', async () => {
    const file = path.join(dir, 'pol.json');
    await exportPolicyCheckpoint(t.db, 'pol-init', file);
    const json = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
    expect(json.format).toBe('fugu-conductor-policy/1');
    const id = await importPolicyCheckpoint(t.db, file, { now: new Date(0) });
    expect(id).toBe('pol-init_import_0');
    const a = await getPolicyCheckpoint(t.db, 'pol-init');
    const b = await getPolicyCheckpoint(t.db, id);
    expect(b.theta).toEqual(a.theta);
    expect(b.training).toMatchObject({ originalId: 'pol-init', importedFrom: file });
    const pool = conductorPool(workers.map((name) => ({ name, description: name })));
    expect(policyFromCheckpoint(b, { workers }).write({ features: features(2), question: 'q?', pool, seed: 3 }))
      .toEqual(policyFromCheckpoint(a, { workers }).write({ features: features(2), question: 'q?', pool, seed: 3 }));

    const bad = async (name: string, edit: (j: Record<string, unknown>) => void, field: string): Promise<void> => {
      const f = path.join(dir, name);
      const j = structuredClone(json);
      edit(j);
      await writeFile(f, JSON.stringify(j));
      const msg = await rejectsField(importPolicyCheckpoint(t.db, f), field);
      expect(msg).toContain(f);
    };
    await bad('short.json', (j) => (j.theta = Buffer.from(new Float32Array(3).buffer).toString('base64')), 'checkpoint');
    await bad('version.json', (j) => (j.config = { ...(j.config as object), templateVersion: 'policy-v0' }), 'checkpoint');
    await bad('format.json', (j) => (j.format = 'fugu-router-checkpoint/1'), 'format');
    await bad('workers.json', (j) => (j.workers = []), 'workers');
    await writeFile(path.join(dir, 'junk.json'), 'not json');
    await expect(importPolicyCheckpoint(t.db, path.join(dir, 'junk.json'))).rejects.toMatchObject({ name: 'InputError', file: path.join(dir, 'junk.json') });
    const rows = await t.db.selectFrom('conductor_checkpoints').select('id').execute();
    expect(rows.map((r) => r.id).sort()).toEqual(['pol-init', 'pol-init_import_0']);
  });
});

describe('trainingRanking', () => {
  const item = (id: string, split: string | undefined, scores: Record<string, number>): DatasetItem => ({
    id, task: 't', prompt: `question ${id}`, ...(split !== undefined && { sourceSplit: split }),
    recorded: Object.fromEntries(Object.entries(scores).map(([w, score]) => [w, { score }])),
  } as DatasetItem);

  it('ranks by the training-split mean (test items ignored), unscored workers last in pool order', () => {
    const items = [item('1', 'train', { a: 0, b: 1 }), item('2', 'train', { a: 1, b: 1 }), item('3', 'test', { a: 1, b: 0, c: 1 })];
    const r = trainingRanking(items, ['c', 'a', 'b', 'd']);
    expect(r.ranking).toEqual(['b', 'a', 'c', 'd']);
    expect(r.means).toEqual([{ worker: 'b', mean: 1, items: 2 }, { worker: 'a', mean: 0.5, items: 2 }]);
    expect(r.split).toBe('source');
    expect(() => trainingRanking(items, ['c', 'd'], { datasetName: 'x' })).toThrow(/dataset "x" has no recorded scores/);
  });

  it('without source splits uses the train part of a split by prompt', () => {
    const items = Array.from({ length: 50 }, (_, i) => item(String(i), undefined, { a: i % 2, b: 1 }));
    const r = trainingRanking(items, ['a', 'b']);
    expect(r.split).toBe('by-prompt');
    expect(r.ranking).toEqual(['b', 'a']);
    expect(r.means[0]!.items).toBeLessThan(50);
  });
});
