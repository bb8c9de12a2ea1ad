import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './testing.ts';
import { getCheckpoint, saveCheckpoint, type CheckpointRecord } from './router-repositories.ts';
import {
  commitEsGeneration,
  countEsEvaluations,
  createEsRun,
  esGenerationFitness,
  EsCommitConflictError,
  getEsRun,
  getEsState,
  getEsStateAsking,
  listEsGenerations,
  recordEsEvaluations,
} from './es-repositories.ts';

let t: TestDatabase;
beforeAll(async () => { t = await createTestDatabase(); });
afterAll(async () => { await t?.drop(); });

const ckpt = (id: string, parentId: string | null, stage: CheckpointRecord['stage'] = 'sft'): CheckpointRecord => ({
  id, stage, backboneId: 'bb', backbone: {}, workers: [{ name: 'a', inputPerMTok: '0.1', outputPerMTok: '0.2' }],
  theta: Float32Array.from([1, 2, 3]), thetaLayout: [{ name: 'z', offset: 0, shape: [3] }], tau: null, training: {}, metrics: {}, parentId,
});

const record = { meanFitness: 0.5, bestFitness: 0.9, medianFitness: 0.4, bestSoFar: 0.9, sigma: 0.1, sigmaAfter: 0.09, evaluations: 4, dispatches: 1, wallMs: 12 };

describe('ES runs, evaluations and generations', () => {
  it('keeps the first result of an evaluation, commits a generation atomically, and refuses a second commit', async () => {
    await saveCheckpoint(t.db, ckpt('sft1', null));
    const s0 = { version: 1, generation: 0, mean: [1, 2, 3], sigma: 0.1 };
    await createEsRun(t.db, { id: 'r1', config: { lambda: 2, replicas: 2 }, codeVersion: 'v1', checkpointId: 'sft1', initialState: s0 });
    expect(await getEsRun(t.db, 'r1')).toMatchObject({ id: 'r1', status: 'running', generation: 0, bestCheckpointId: null, codeVersion: 'v1' });

    const ev = (candidate: number, replica: number, fitness: number) => ({ runId: 'r1', generation: 0, candidate, replica, fitness, seed: '0/0', summary: { n: 1 } });
    expect(await recordEsEvaluations(t.db, [ev(0, 0, 0.25), ev(1, 0, 0.5)])).toBe(2);
    // a duplicate (re-dispatch, re-run) inserts nothing and does not overwrite
    expect(await recordEsEvaluations(t.db, [ev(0, 0, 0.99), ev(0, 1, 0.75)])).toBe(1);
    expect(await countEsEvaluations(t.db, 'r1', 0)).toBe(3);
    expect(await esGenerationFitness(t.db, 'r1', 0)).toEqual([
      { candidate: 0, replica: 0, fitness: 0.25 },
      { candidate: 0, replica: 1, fitness: 0.75 },
      { candidate: 1, replica: 0, fitness: 0.5 },
    ]);

    const s1 = { ...s0, generation: 1, mean: [1.5, 2, 0.1 + 0.2] };
    // a failing part (the checkpoint's parent does not exist) rolls the whole commit back
    await expect(commitEsGeneration(t.db, { runId: 'r1', generation: 0, stateAfter: s1, record, checkpoint: ckpt('best0', 'nope', 'es') })).rejects.toThrow();
    expect((await getEsState(t.db, 'r1'))!.generation).toBe(0);
    expect(await listEsGenerations(t.db, 'r1')).toEqual([]);

    await commitEsGeneration(t.db, { runId: 'r1', generation: 0, stateAfter: s1, record, checkpoint: ckpt('best0', 'sft1', 'es') });
    const cur = (await getEsState(t.db, 'r1'))!;
    expect(cur.generation).toBe(1);
    expect(cur.state).toEqual(s1); // numbers exact through jsonb
    expect(await getEsStateAsking(t.db, 'r1', 0)).toEqual(s0);
    expect(await getEsStateAsking(t.db, 'r1', 1)).toEqual(s1);
    expect((await getEsRun(t.db, 'r1'))!.bestCheckpointId).toBe('best0');
    expect((await getCheckpoint(t.db, 'best0'))!.parentId).toBe('sft1');
    expect(await listEsGenerations(t.db, 'r1')).toMatchObject([{ generation: 0, ...record }]);

    await expect(commitEsGeneration(t.db, { runId: 'r1', generation: 0, stateAfter: s1, record })).rejects.toBeInstanceOf(EsCommitConflictError);
    await commitEsGeneration(t.db, { runId: 'r1', generation: 1, stateAfter: { ...s1, generation: 2 }, record, completed: true });
    expect(await getEsRun(t.db, 'r1')).toMatchObject({ status: 'completed', generation: 2, bestCheckpointId: 'best0' });
  });
});
