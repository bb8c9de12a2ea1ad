// The conductor-run summary on hand-written workflow rows in a real Postgres: the SQL aggregates
// and the figures (per spec, reference rows from recorded scores, worker distribution, examples,
// the mean and sd over several runs).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatasetItem, WorkerPool } from '@fugu/core';
import { conductorRunProgress, createConductorRun, getDatasetItems, listConductorRuns, saveDataset, savePool, setConductorRunStatus, type Db, type StoredWorker } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { formatUltraSummary, summarizeUltraRun, summarizeUltraRuns } from './summary.ts';
import { rankWorkers, splitItems } from '@fugu/ultra';
import { runItems } from '../run-items.ts';
import { planWorkflows } from './run.ts';

let t: TestDatabase;
let db: Db;
let workers: StoredWorker[];
let poolId: number;
let itemIds: number[];

const rec = (score: number) => ({ score, tokensIn: 100, tokensOut: 50 });
const items: DatasetItem[] = [
  { id: 'a', task: 'math', prompt: 'What is 1+1?', groundTruth: '2', recorded: { alpha: rec(1), beta: rec(0) } },
  { id: 'b', task: 'math', prompt: 'What is 2+2?', groundTruth: '4', recorded: { alpha: rec(0), beta: rec(1) } },
  { id: 'c', task: 'qa', prompt: 'Capital of France?', groundTruth: 'Paris', recorded: { alpha: rec(1), beta: rec(1) } },
];
const pool: WorkerPool = {
  name: 'p',
  workers: [
    { name: 'alpha', provider: 'replay', model: 'alpha-8b', settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' } },
    { name: 'beta', provider: 'replay', model: 'beta-70b', settings: {}, prices: { inputPerMTok: '2', outputPerMTok: '4' } },
  ],
};

type Wf = {
  run: string; conductor: string; item: number; repeat?: number; status: 'pending' | 'running' | 'done' | 'failed'; reward?: number | null; outcome?: string | null;
  parseOk?: boolean | null; topology?: string | null; nSteps?: number | null; finish?: string | null; conductorCost?: string; workerCost?: string; latency?: number | null;
  steps?: Array<{ worker: 'alpha' | 'beta'; status?: 'ok' | 'error' | 'skipped'; cost?: string }>;
};

async function insertWorkflow(w: Wf): Promise<number> {
  const row = await db
    .insertInto('workflows')
    .values({
      key: `${w.run}.${itemIds[w.item]}.${w.conductor}.${w.repeat ?? 0}`, run_id: w.run, item_id: itemIds[w.item]!, pool_id: poolId, question: items[w.item]!.prompt,
      conductor: w.conductor, repeat: w.repeat ?? 0, options: JSON.stringify({ maxSteps: 5 }), status: w.status, reward: w.reward ?? null, outcome: w.outcome ?? null,
      parse_ok: w.parseOk ?? null, topology: w.topology ?? null, n_steps: w.nSteps ?? null, finish_reason: (w.finish ?? null) as never,
      conductor_cost: w.conductorCost ?? '0', worker_cost: w.workerCost ?? '0', conductor_tokens_in: w.conductorCost ? 40 : 0, conductor_tokens_out: w.conductorCost ? 10 : 0,
      worker_tokens_in: w.workerCost ? 300 : 0, worker_tokens_out: w.workerCost ? 30 : 0, latency_ms: w.latency ?? null,
      parse_error: w.parseOk === false ? JSON.stringify({ list: 'model id', step: 1, message: 'worker 7 is out of range' }) : null,
      final_answer: w.outcome === 'correct' || w.outcome === 'incorrect' ? 'an answer' : null,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const id = Number(row.id);
  for (const [idx, s] of (w.steps ?? []).entries()) {
    const worker = workers.find((x) => x.name === s.worker)!;
    await db.insertInto('workflow_steps').values({
      workflow_id: id, idx, worker_id: worker.id, worker: worker.name, subtask: `step ${idx}`, access: JSON.stringify(idx === 0 ? 'none' : 'all'),
      sees: JSON.stringify(idx === 0 ? [] : [0]), chat_call_id: `wf${id}.s${idx}`, status: s.status ?? 'ok', answer: s.status === 'skipped' ? null : `answer ${idx}`, cost: s.cost ?? '0',
    }).execute();
  }
  return id;
}

const chainSteps = [{ worker: 'alpha' as const, cost: '0.0004' }, { worker: 'beta' as const, cost: '0.0006' }];

beforeAll(async () => {
  t = await createTestDatabase();
  db = t.db;
  const ds = await saveDataset(db, { name: 'tiny', source: 'test', contentHash: 'tiny-1', items });
  itemIds = (await getDatasetItems(db, ds.id)).map((i) => i.dbId);
  ({ poolId, workers } = await savePool(db, pool, 'pool-1'));
  for (const [id, seed] of [['r1', 0], ['r2', 1]] as const) {
    await createConductorRun(db, {
      id, datasetId: ds.id, poolId, specs: ['fixed:chain', 'llm:alpha'], total: 6,
      options: { dataset: 'tiny', pool: 'p', split: 'all', splitSeed: 0, sample: null, seed, repeats: 1, items: 3, workflow: { maxSteps: 5, ranking: ['alpha', 'beta'] } },
    });
  }
  // run r1: fixed:chain answers all three (correct, wrong, correct); llm:alpha one unparsed, one correct, one failed
  await insertWorkflow({ run: 'r1', conductor: 'fixed:chain', item: 0, status: 'done', reward: 1, outcome: 'correct', parseOk: true, topology: 'chain', nSteps: 2, finish: 'answered', workerCost: '0.001', latency: 100, steps: chainSteps });
  await insertWorkflow({ run: 'r1', conductor: 'fixed:chain', item: 1, status: 'done', reward: 0.5, outcome: 'incorrect', parseOk: true, topology: 'chain', nSteps: 2, finish: 'answered', workerCost: '0.001', latency: 200, steps: chainSteps });
  await insertWorkflow({ run: 'r1', conductor: 'fixed:chain', item: 2, status: 'done', reward: 1, outcome: 'correct', parseOk: true, topology: 'chain', nSteps: 2, finish: 'answered', workerCost: '0.001', latency: 300, steps: chainSteps });
  await insertWorkflow({ run: 'r1', conductor: 'llm:alpha', item: 0, status: 'done', reward: 0, outcome: 'unparsed', parseOk: false, finish: 'parse-error', conductorCost: '0.003', latency: 50 });
  await insertWorkflow({ run: 'r1', conductor: 'llm:alpha', item: 1, status: 'done', reward: 1, outcome: 'correct', parseOk: true, topology: 'single', nSteps: 1, finish: 'answered', latency: 70, steps: [{ worker: 'beta' }] });
  // a failed workflow: reward counts as 0; its skipped step is not in the worker distribution
  await insertWorkflow({ run: 'r1', conductor: 'llm:alpha', item: 2, status: 'failed', finish: 'conductor-error', steps: [{ worker: 'alpha', status: 'skipped' }] });
  // not finished: in the progress, not in the figures
  await insertWorkflow({ run: 'r1', conductor: 'llm:alpha', item: 2, repeat: 1, status: 'pending' });
  await insertWorkflow({ run: 'r1', conductor: 'llm:alpha', item: 0, repeat: 1, status: 'running' });

  // run r2 (another seed): fixed:chain all correct, llm:alpha all correct
  for (const item of [0, 1, 2]) {
    await insertWorkflow({ run: 'r2', conductor: 'fixed:chain', item, status: 'done', reward: 1, outcome: 'correct', parseOk: true, topology: 'chain', nSteps: 2, finish: 'answered', workerCost: '0.002', latency: 100, steps: chainSteps });
    await insertWorkflow({ run: 'r2', conductor: 'llm:alpha', item, status: 'done', reward: 1, outcome: 'correct', parseOk: true, topology: 'single', nSteps: 1, finish: 'answered', latency: 100, steps: [{ worker: 'alpha' }] });
  }
}, 120_000);

afterAll(async () => {
  await t?.drop();
});

describe('conductor runs', () => {
  it('progress counts by status, overall and per spec; list and status moves', async () => {
    const p = await conductorRunProgress(db, 'r1');
    expect(p).toMatchObject({ total: 6, submitted: 8, counts: { pending: 1, running: 1, done: 5, failed: 1 } });
    expect(p.bySpec['fixed:chain']).toEqual({ pending: 0, running: 0, done: 3, failed: 0 });
    expect(p.bySpec['llm:alpha']).toEqual({ pending: 1, running: 1, done: 2, failed: 1 });
    expect(await setConductorRunStatus(db, 'r2', 'running', { from: ['pending'] })).toBe(true);
    expect(await setConductorRunStatus(db, 'r2', 'paused', { from: ['pending'] })).toBe(false);
    expect(await setConductorRunStatus(db, 'r2', 'completed')).toBe(true);
    const runs = await listConductorRuns(db);
    expect(runs.map((r) => r.id).sort()).toEqual(['r1', 'r2']);
    expect(runs.find((r) => r.id === 'r2')!.finishedAt).not.toBeNull();
  });
});

describe('summarizeUltraRun', () => {
  it('per spec: reward, accuracy, parse failures, $ and tokens per item, latency, steps, topologies, finish reasons', async () => {
    const s = await summarizeUltraRun(db, 'r1');
    const chain = s.results.find((r) => r.name === 'fixed:chain')!;
    expect(chain).toMatchObject({ kind: 'conductor', workflows: 3, parseFailureRate: 0, stepsPerWorkflow: 2, topologies: { chain: 3 }, finishReasons: { answered: 3 } });
    expect(chain.meanReward).toBeCloseTo(2.5 / 3, 12);
    expect(chain.accuracy).toBeCloseTo(2 / 3, 12);
    expect(chain.usdPerItem.workers).toBeCloseTo(0.001, 12);
    expect(chain.usdPerItem.conductor).toBe(0);
    expect(chain.tokensPerItem).toEqual({ conductor: 0, workers: 330 });
    expect(chain.latencyMs!.mean).toBeCloseTo(200, 9);
    expect(chain.latencyMs!.p95).toBeCloseTo(290, 9); // continuous percentile of 100, 200, 300

    const llm = s.results.find((r) => r.name === 'llm:alpha')!;
    expect(llm.workflows).toBe(3); // done 2 + failed 1; pending and running not yet
    expect(llm.meanReward).toBeCloseTo(1 / 3, 12);
    expect(llm.accuracy).toBeCloseTo(1 / 3, 12);
    expect(llm.parseFailureRate).toBeCloseTo(1 / 3, 12);
    expect(llm.usdPerItem.conductor).toBeCloseTo(0.001, 12);
    expect(llm.tokensPerItem.conductor).toBeCloseTo(50 / 3, 9);
    expect(llm.stepsPerWorkflow).toBeCloseTo(1 / 3, 12);
    expect(llm.latencyMs!.mean).toBeCloseTo(60, 9); // the failed one has no latency
    expect(llm.topologies).toEqual({ unparsed: 1, single: 1, other: 1 });
    expect(llm.finishReasons).toEqual({ 'parse-error': 1, answered: 1, 'conductor-error': 1 });
  });

  it('reference rows from the recorded scores on the same items, with $ from recorded tokens x prices', async () => {
    const s = await summarizeUltraRun(db, 'r1');
    const single = s.results.find((r) => r.name.startsWith('best single'))!;
    expect(single.name).toBe('best single (alpha, by train mean)');
    expect(single).toMatchObject({ kind: 'reference', workflows: 3, latencyMs: null, stepsPerWorkflow: 1 });
    expect(single.accuracy).toBeCloseTo(2 / 3, 12);
    expect(single.meanReward).toBeCloseTo((1 + 0.5 + 1) / 3, 12);
    expect(single.usdPerItem.workers).toBeCloseTo((100 * 1 + 50 * 2) / 1e6, 15);
    expect(single.tokensPerItem.workers).toBe(150);
    const oracle = s.results.find((r) => r.name === 'oracle')!;
    expect(oracle.accuracy).toBe(1);
    expect(oracle.meanReward).toBe(1);
    // item a: alpha ($0.0002), b: only beta ($0.0004), c: both, the cheaper alpha
    expect(oracle.usdPerItem.workers).toBeCloseTo((0.0002 + 0.0004 + 0.0002) / 3, 15);
    expect(s.results.map((r) => r.name)).toEqual(['fixed:chain', 'llm:alpha', 'best single (alpha, by train mean)', 'oracle']);
  });

  it('a restricted pool (--workers): the reference rows are over its workers only', async () => {
    const ds = (await db.selectFrom('datasets').select('id').where('name', '=', 'tiny').executeTakeFirstOrThrow()).id;
    await createConductorRun(db, {
      id: 'r-beta', datasetId: ds, poolId, specs: ['fixed:chain'], total: 3,
      options: { dataset: 'tiny', pool: 'p', split: 'all', splitSeed: 0, sample: null, seed: 0, repeats: 1, items: 3, workflow: { maxSteps: 5, ranking: ['alpha', 'beta'], workers: ['beta'] } },
    });
    for (const item of [0, 1, 2]) await insertWorkflow({ run: 'r-beta', conductor: 'fixed:chain', item, status: 'done', reward: 1, outcome: 'correct', parseOk: true, topology: 'single', nSteps: 1, finish: 'answered', latency: 100, steps: [{ worker: 'beta' }] });
    const s = await summarizeUltraRun(db, 'r-beta');
    const single = s.results.find((r) => r.name.startsWith('best single'))!;
    const oracle = s.results.find((r) => r.name === 'oracle')!;
    // alpha leads the ranking but is not in the pool; beta alone: items b and c correct
    expect(single.name).toBe('best single (beta, by train mean)');
    expect(single.accuracy).toBeCloseTo(2 / 3, 12);
    expect(oracle.accuracy).toBeCloseTo(2 / 3, 12);
    expect(s.run.pool).toBe('p (restricted to 1 of 2: beta)');
  });

  it('worker distribution per task (skipped steps left out), task counts, environment and replay parameters, examples', async () => {
    const s = await summarizeUltraRun(db, 'r1');
    expect(s.workerDistribution['fixed:chain']).toEqual({ math: { alpha: 0.5, beta: 0.5 }, qa: { alpha: 0.5, beta: 0.5 } });
    expect(s.workerDistribution['llm:alpha']).toEqual({ math: { beta: 1 } });
    expect(s.taskCounts).toEqual({ math: 2, qa: 1 });
    expect(s.run).toMatchObject({ id: 'r1', dataset: 'tiny', pool: 'p', split: 'all', seed: 0, repeats: 1, maxSteps: 5, environment: 'replay' });
    expect(s.run.replay!.alpha!.sizeClass).toBe('small');
    expect(s.run.replay!.beta!.sizeClass).toBe('large');
    const chain = s.examples.filter((e) => e.conductor === 'fixed:chain');
    expect(chain.map((e) => e.outcome)).toEqual(['correct', 'incorrect', 'correct']);
    expect(chain[0]!.steps.map((x) => x.worker)).toEqual(['alpha', 'beta']);
    expect(chain[0]!.steps[1]!.sees).toEqual([0]);
    expect(chain[0]!.steps[0]!.usd).toBeCloseTo(0.0004, 12);
    const llm = s.examples.filter((e) => e.conductor === 'llm:alpha');
    expect(llm.map((e) => e.outcome)).toEqual(['correct', 'unparsed', null]);
    expect(llm[1]!.parseError).toBe('model id step 1: worker 7 is out of range');
    expect(formatUltraSummary(s)).toMatch(/^fixed:chain\s+3\s+0\.833\s+0\.667\s+0\.000\s+0\.001000\s+2\.00\s+200\/290$/m);
  });

  it('several runs: the mean and sd over them in the same shape', async () => {
    const s = await summarizeUltraRuns(db, ['r1', 'r2']);
    const chain = s.results.find((r) => r.name === 'fixed:chain')!;
    expect(chain.workflows).toBe(6);
    expect(chain.meanReward).toBeCloseTo((2.5 / 3 + 1) / 2, 12);
    expect(chain.seeds!.count).toBe(2);
    expect(chain.seeds!.meanRewardSd).toBeCloseTo(Math.SQRT1_2 * (1 - 2.5 / 3), 12);
    expect(chain.seeds!.usdPerItemSd).toBeCloseTo(Math.SQRT1_2 * 0.001, 12);
    expect(chain.topologies).toEqual({ chain: 6 });
    const oracle = s.results.find((r) => r.name === 'oracle')!;
    expect(oracle.seeds!.meanRewardSd).toBe(0);
    expect(s.run.id).toBe('r1,r2');
    expect(s.taskCounts).toEqual({ math: 2, qa: 1 });
    // averaged over the runs that have the task, so each distribution still sums to 1
    expect(s.workerDistribution['llm:alpha']).toEqual({ math: { beta: 0.5, alpha: 0.5 }, qa: { alpha: 1 } });
    await expect(summarizeUltraRun(db, 'nope')).rejects.toThrow(/no conductor run "nope"/);
  });
});

describe('planning', () => {
  it('the split is the router split by unique prompt; the sample is stable; keys and seeds per (item, spec, repeat)', async () => {
    const stored = await getDatasetItems(db, (await db.selectFrom('datasets').select('id').executeTakeFirstOrThrow()).id);
    const all = splitItems(stored, 'all', 0);
    expect(all).toEqual([0, 1, 2]);
    const parts = ['train', 'val', 'test'].flatMap((s) => splitItems(stored, s as 'train', 0));
    expect(parts.sort()).toEqual([0, 1, 2]);
    expect(runItems(stored, { split: 'all', splitSeed: 0, sample: 2, seed: 5 })).toEqual(runItems(stored, { split: 'all', splitSeed: 0, sample: 2, seed: 5 }));
    expect(runItems(stored, { split: 'all', splitSeed: 0, sample: 2, seed: 5 })).toHaveLength(2);
    expect(rankWorkers(['alpha', 'beta'], [items[1]!, items[2]!])).toEqual(['beta', 'alpha']);
    expect(rankWorkers(['alpha', 'beta'], [])).toEqual(['alpha', 'beta']);
    const rows = planWorkflows({ id: 'r9', poolId, specs: ['fixed:chain', 'llm:alpha'] }, { seed: 10, repeats: 2, workflow: { maxSteps: 5 } }, stored.slice(0, 1));
    expect(rows.map((r) => [r.key, r.conductor, r.seed, r.repeat])).toEqual([
      [`r9.${stored[0]!.dbId}.0.0`, 'fixed:chain', 10, 0],
      [`r9.${stored[0]!.dbId}.0.1`, 'fixed:chain', 11, 1],
      [`r9.${stored[0]!.dbId}.1.0`, 'llm:alpha', 10, 0],
      [`r9.${stored[0]!.dbId}.1.1`, 'llm:alpha', 11, 1],
    ]);
  });
});
