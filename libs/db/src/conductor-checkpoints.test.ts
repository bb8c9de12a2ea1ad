import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './testing.ts';
import { getConductorCheckpoint, listConductorCheckpoints, saveConductorCheckpoint, type ConductorCheckpointRecord } from './conductor-checkpoints.ts';

let t: TestDatabase;
beforeAll(async () => { t = await createTestDatabase(); });
afterAll(async () => { await t?.drop(); });

const ckpt = (id: string, parentId: string | null): ConductorCheckpointRecord => ({
  id, workers: ['a', 'b', 'c'], backboneId: 'use-lite-abc', featureDim: 4,
  config: { maxSteps: 5, kinds: ['solve', 'plan'], templateVersion: 'policy-v1' },
  theta: Float32Array.from([1, -2.5, 3.25, Math.PI, -0, 1e-30]), thetaLayout: [{ name: 'stop.W', offset: 0, shape: [2, 2] }, { name: 'stop.b', offset: 4, shape: [2] }],
  training: { init: { seed: 3 } }, metrics: { meanReward: 0.5 }, parentId,
});

describe('conductor checkpoints', () => {
  it('stores and reads them back exactly, with their lineage', async () => {
    await saveConductorCheckpoint(t.db, ckpt('p0', null));
    await saveConductorCheckpoint(t.db, ckpt('p1', 'p0'));
    const p1 = await getConductorCheckpoint(t.db, 'p1');
    const { createdAt, ...rest } = p1!;
    expect(rest).toEqual(ckpt('p1', 'p0'));
    expect(createdAt).toBeInstanceOf(Date);
    expect(await getConductorCheckpoint(t.db, 'nope')).toBeUndefined();
    const list = await listConductorCheckpoints(t.db);
    expect(list.map((c) => c.id).sort()).toEqual(['p0', 'p1']);
    expect(list[0]).not.toHaveProperty('theta');
    expect(list.find((c) => c.id === 'p1')).toMatchObject({ workers: ['a', 'b', 'c'], featureDim: 4, parentId: 'p0', backboneId: 'use-lite-abc' });
  });

  it('refuses a duplicate id, a missing parent and a non-positive feature dimension, storing nothing', async () => {
    await expect(saveConductorCheckpoint(t.db, ckpt('p0', null))).rejects.toThrow();
    await expect(saveConductorCheckpoint(t.db, ckpt('p2', 'missing'))).rejects.toThrow();
    await expect(saveConductorCheckpoint(t.db, { ...ckpt('p3', null), featureDim: 0 })).rejects.toThrow();
    expect((await listConductorCheckpoints(t.db)).map((c) => c.id).sort()).toEqual(['p0', 'p1']);
  });
});
