// CallWriter on a real Postgres: the rows of many jobs go in one statement; a row that breaks a
// constraint fails its own job only, its batch-mates' rows are written and counted once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { createRun, existingCallKeys, getDatasetItems, getRun, saveDataset, savePool, setRunStatus, type CallRecord, type RunProgress } from '@fugu/db';
import { CallWriter } from './call-writer.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase('fugu_callwriter');
});
afterAll(async () => {
  await t?.drop();
});

describe('CallWriter', () => {
  it("writes a failed statement's rows again one at a time: only the row that breaks a constraint fails", async () => {
    const ds = await saveDataset(t.db, {
      name: 'd', source: 'test', contentHash: 'cw',
      items: [1, 2, 3, 4].map((i) => ({ id: `i${i}`, task: 'qa', prompt: `q${i}`, groundTruth: 'a' })),
    });
    const items = await getDatasetItems(t.db, ds.id);
    const { poolId, workers } = await savePool(t.db, { name: 'p', workers: [{ name: 'w', provider: 'replay', model: 'm', settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '1' } }] }, 'cw');
    await createRun(t.db, { id: 'cw1', datasetId: ds.id, poolId, repetitions: 1, sampleSize: null, seed: 1, itemCount: 4, totalCalls: 4, spendCap: null, options: {} });
    await setRunStatus(t.db, 'cw1', 'running');
    const progress: RunProgress[] = [];
    const writer = new CallWriter(t.db, { maxBatch: 16, onProgress: (runs) => void progress.push(...runs) });
    const row = (i: number, score: number): CallRecord => ({
      runId: 'cw1', itemId: items[i]!.dbId, workerId: workers[0]!.id, repetition: 0, requestHash: `h${i}`, status: 'ok', response: { text: 'a' },
      tokensIn: 1, tokensOut: 1, cost: '0.000002', latencyMs: 1, attempts: 1, cached: false, errorKind: null, error: null, score, verifier: 'exact',
    });
    // written in one turn: one statement, which the score 1.5 (rewards' check) fails
    const got = await Promise.allSettled([row(0, 1), row(1, 1.5), row(2, 0), row(3, 1)].map((r) => writer.write(r)));
    expect(got.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect(((got[1] as PromiseRejectedResult).reason as Error).message).toMatch(/rewards_score_check|check constraint/);
    expect([...(await existingCallKeys(t.db, 'cw1'))].sort()).toEqual([0, 2, 3].map((i) => `${items[i]!.dbId}:${workers[0]!.id}:0`).sort());
    expect(await getRun(t.db, 'cw1')).toMatchObject({ doneCalls: 3, failedCalls: 0, spent: '0.000006000000' });
    expect(progress.at(-1)).toMatchObject({ id: 'cw1', doneCalls: 3 });
  });
});
