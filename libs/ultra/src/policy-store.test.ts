import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError, rng, type DatasetItem } from '@fugu/core';
import { conductorPool, policyFromCheckpoint } from '@fugu/conductor';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { splitItems } from './split.ts';
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

  it('ranks by the mean on the train part of the router\'s split by prompt (other items ignored), unscored workers last in pool order', () => {
    // a scores 1 on every item, b only on the items outside the train split: b's train mean is 0
    const all = Array.from({ length: 50 }, (_, i) => item(String(i), undefined, { a: 1 }));
    const train = new Set(splitItems(all, 'train', 0).map((i) => all[i]!.id));
    const items = all.map((it) => item(it.id, undefined, { a: 0.5, b: train.has(it.id) ? 0 : 1 }));
    const r = trainingRanking(items, ['c', 'b', 'a', 'd']);
    expect(r.ranking).toEqual(['a', 'b', 'c', 'd']);
    expect(r.means).toEqual([{ worker: 'a', mean: 0.5, items: train.size }, { worker: 'b', mean: 0, items: train.size }]);
    expect(() => trainingRanking(items, ['c', 'd'], { datasetName: 'x' })).toThrow(/dataset "x" has no recorded scores/);
  });

});
