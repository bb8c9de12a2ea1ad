import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './testing.ts';
import { getPoolWorkers, savePool } from './repositories.ts';
import { claimWorkflow, finishWorkflow, getWorkflowByKey, getWorkflows, getWorkflowSteps, insertWorkflows, saveWorkflowSteps, type WorkflowStepRow } from './workflows.ts';

let t: TestDatabase;
let poolId: number;
let workerId: number;
beforeAll(async () => {
  t = await createTestDatabase();
  const saved = await savePool(t.db, {
    name: 'p',
    workers: [
      { name: 'a', provider: 'replay', model: 'm-a', settings: {}, prices: { inputPerMTok: '0.1', outputPerMTok: '0.2' }, description: 'a 7B model', size: '7B' },
      { name: 'b', provider: 'replay', model: 'm-b', settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' } },
    ],
  }, 'wf-pool');
  poolId = saved.poolId;
  workerId = saved.workers[0]!.id;
});
afterAll(async () => {
  await t?.drop();
});

const step = (workflowId: number, idx: number, answer: string): WorkflowStepRow => ({
  workflowId, idx, workerId, worker: 'a', subtask: 'solve', access: 'none', sees: [], chatCallId: `wf${workflowId}.s${idx}`, status: 'ok', answer,
  tokensIn: 3, tokensOut: 4, cost: '0.000001', latencyMs: 5, cached: false, replay: { rule: 'recorded', p: 1, correct: true }, error: null,
});

describe('workers keep their description and size', () => {
  it('savePool and getPoolWorkers round-trip them (absent stays absent)', async () => {
    const ws = await getPoolWorkers(t.db, poolId);
    expect(ws[0]).toMatchObject({ name: 'a', description: 'a 7B model', size: '7B' });
    expect('description' in ws[1]!).toBe(false);
  });
});

describe('workflow rows', () => {
  it('inserts once per key and returns every id in order, existing or new', async () => {
    const row = (key: string) => ({ key, poolId, question: `q ${key}`, conductor: 'fixed:chain', seed: 1, options: { maxSteps: 5 } });
    const [a, b] = await insertWorkflows(t.db, [row('k1'), row('k2')]);
    const again = await insertWorkflows(t.db, [row('k2'), { ...row('k1'), question: 'changed' }, row('k3')]);
    expect(again.slice(0, 2)).toEqual([b, a]);
    expect((await getWorkflowByKey(t.db, 'k1'))!.question).toBe('q k1');
    expect((await getWorkflows(t.db, [again[2]!, a!])).map((w) => w.key)).toEqual(['k3', 'k1']);
  });

  it('claims pending or running (attempts + 1), finishes once from running, never claims a finished one', async () => {
    const [id] = await insertWorkflows(t.db, [{ key: 'claim', poolId, question: 'q', conductor: 'fixed:chain', seed: 1, options: {} }]);
    const first = await claimWorkflow(t.db, id!);
    expect(first).toMatchObject({ status: 'running', attempts: 1 });
    const second = await claimWorkflow(t.db, id!);
    expect(second).toMatchObject({ status: 'running', attempts: 2 });
    expect(second!.startedAt!.getTime()).toBe(first!.startedAt!.getTime());
    expect(await finishWorkflow(t.db, id!, { finishReason: 'answered', reward: 1, outcome: 'correct', workerCost: '0.5', steps: [{ worker: 0, name: 'a', subtask: 's', access: 'none' }] })).toBe(true);
    expect(await finishWorkflow(t.db, id!, { finishReason: 'step-error', reward: 0 })).toBe(false);
    expect(await claimWorkflow(t.db, id!)).toBeUndefined();
    const done = (await getWorkflows(t.db, [id!]))[0]!;
    expect(done).toMatchObject({ status: 'done', finishReason: 'answered', reward: 1, outcome: 'correct', workerCost: '0.500000000000', steps: [{ worker: 0, name: 'a', subtask: 's', access: 'none' }] });
  });

  it('keeps the first row of a step', async () => {
    const [id] = await insertWorkflows(t.db, [{ key: 'steps', poolId, question: 'q', conductor: 'fixed:chain', seed: 1, options: {} }]);
    await saveWorkflowSteps(t.db, [step(id!, 1, 'second'), step(id!, 0, 'first')]);
    // a re-execution writes its rows again: the first of each step stays
    await saveWorkflowSteps(t.db, [step(id!, 0, 'again'), step(id!, 2, 'third')]);
    const steps = await getWorkflowSteps(t.db, id!);
    expect(steps.map((s) => [s.idx, s.answer])).toEqual([[0, 'first'], [1, 'second'], [2, 'third']]);
    expect(steps[0]).toMatchObject({ access: 'none', sees: [], replay: { rule: 'recorded', correct: true }, cost: '0.000001000000' });
  });
});
