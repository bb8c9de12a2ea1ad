import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './testing.ts';
import { bytesToFloats, floatsToBytes, getCheckpoint, getFeatures, listCheckpoints, putFeatures, saveCheckpoint, type CheckpointRecord } from './router-repositories.ts';

let t: TestDatabase;
beforeAll(async () => { t = await createTestDatabase(); });
afterAll(async () => { await t?.drop(); });

const ckpt = (id: string, parentId: string | null): CheckpointRecord => ({
  id, stage: parentId ? 'sft' : 'init', backboneId: 'use-lite-abc', backbone: { kind: 'use-lite', adapted: ['tanh_layer_0'] },
  workers: [{ name: 'a', inputPerMTok: '0.1', outputPerMTok: '0.2' }, { name: 'b', inputPerMTok: '1', outputPerMTok: '2' }],
  theta: Float32Array.from([1, -2.5, 3.25, Math.PI]), thetaLayout: [{ name: 'z', offset: 0, shape: [2] }, { name: 'head.b', offset: 2, shape: [2] }],
  tau: 0.1, training: { run: 'run1', splitSeed: 3 }, metrics: { valLoss: 0.5 }, parentId,
});

describe('router checkpoints and features', () => {
  it('round-trips float32 bytes, aligned or not', () => {
    const a = Float32Array.from([0, 1.5, -3, 1e-30]);
    const b = floatsToBytes(a);
    const unaligned = Buffer.concat([Buffer.from([7]), b]).subarray(1);
    expect(bytesToFloats(unaligned)).toEqual(a);
  });

  it('stores checkpoints with their lineage', async () => {
    await saveCheckpoint(t.db, ckpt('c0', null));
    await saveCheckpoint(t.db, ckpt('c1', 'c0'));
    const c1 = await getCheckpoint(t.db, 'c1');
    expect(c1).toMatchObject({ id: 'c1', stage: 'sft', parentId: 'c0', tau: 0.1, training: { run: 'run1', splitSeed: 3 } });
    expect(c1!.theta).toEqual(Float32Array.from([1, -2.5, 3.25, Math.PI]));
    expect((await listCheckpoints(t.db)).map((c) => c.id).sort()).toEqual(['c0', 'c1']);
    await expect(saveCheckpoint(t.db, ckpt('c2', 'missing'))).rejects.toThrow();
    expect(await getCheckpoint(t.db, 'nope')).toBeUndefined();
  });

  it('caches features per backbone and text hash', async () => {
    await putFeatures(t.db, 'bb1', [{ textHash: 'h1', data: Float32Array.from([1, 2]) }, { textHash: 'h2', data: Float32Array.from([3, 4]) }]);
    await putFeatures(t.db, 'bb1', [{ textHash: 'h1', data: Float32Array.from([9, 9]) }]);
    const got = await getFeatures(t.db, 'bb1', ['h1', 'h2', 'h3']);
    expect([...got.keys()].sort()).toEqual(['h1', 'h2']);
    expect(got.get('h1')).toEqual(Float32Array.from([1, 2]));
    expect((await getFeatures(t.db, 'bb2', ['h1'])).size).toBe(0);
  });
});
