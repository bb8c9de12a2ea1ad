// The `fugu ultra eval` driver against real Postgres, Redis and BullMQ, with a stand-in for the
// engine (until it merges): `submit` writes the workflow rows (idempotent by key) and enqueues
// conduct jobs; a BullMQ worker on the conduct queue finishes each workflow with a reward. What is
// tested is the driver: the split and sample, keys and seeds, the ranking, completion, Ctrl-C
// pausing mid-submission and `--resume` finishing with one row per key.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { getDatasetItems, getConductorRun } from '@fugu/db';
import { conductQueue, conductJobId, CONDUCT_JOB } from '@fugu/queue';
import { rankWorkers, runUltraEval, splitItems, summarizeUltraRun, type NewWorkflow, type UltraEvalOptions } from '@fugu/ultra';
import { createEvalEnv, replayPool, syntheticItems, writeFixtures, type EvalEnv } from '../support/eval-env.ts';

let env: EvalEnv;
let files: { dataset: string; pool: string };
let worker: Worker | undefined;
let workerRedis: Redis | undefined;
const items = syntheticItems(60, 5);

/** The stand-in engine's submit: rows by key (never twice), a conduct job for each unfinished one. */
const submit: NonNullable<UltraEvalOptions['submit']> = async ({ db, queue }, rows: readonly NewWorkflow[]) => {
  if (rows.length === 0) return { ids: [], enqueued: 0, done: 0 };
  await db
    .insertInto('workflows')
    .values(rows.map((r) => ({
      key: r.key, run_id: r.runId ?? null, item_id: r.itemId ?? null, pool_id: r.poolId, question: r.question, conductor: r.conductor,
      seed: r.seed, repeat: r.repeat ?? 0, options: JSON.stringify(r.options),
    })))
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
  const got = await db.selectFrom('workflows').select(['id', 'key', 'status']).where('key', 'in', rows.map((r) => r.key)).execute();
  const open = got.filter((g) => g.status === 'pending' || g.status === 'running');
  await queue(conductQueue).addBulk(open.map((g) => ({ name: CONDUCT_JOB, data: { v: 1, workflowId: Number(g.id) }, opts: { jobId: conductJobId(Number(g.id)), removeOnComplete: true } })));
  return { ids: got.map((g) => Number(g.id)), enqueued: open.length, done: got.length - open.length };
};

async function startExecutor(): Promise<void> {
  workerRedis = new Redis(env.config.redisUrl, { maxRetriesPerRequest: null });
  worker = new Worker(
    conductQueue,
    async (job) => {
      const id = (job.data as { workflowId: number }).workflowId;
      // a deterministic stand-in outcome: correct on even ids
      const correct = id % 2 === 0;
      await env.ctx.db.updateTable('workflows').set({
        status: 'done', reward: correct ? 1 : 0.5, outcome: correct ? 'correct' : 'incorrect', parse_ok: true, topology: 'single', n_steps: 1,
        finish_reason: 'answered', latency_ms: 5, final_answer: 'x', attempts: sql<number>`attempts + 1`,
      }).where('id', '=', id).where('status', 'in', ['pending', 'running']).execute();
    },
    { connection: workerRedis, prefix: env.config.queuePrefix, concurrency: 8 },
  );
  await worker.waitUntilReady();
}

beforeAll(async () => {
  env = await createEvalEnv();
  files = await writeFixtures(env.dir, items, replayPool());
}, 120_000);
afterAll(async () => {
  await worker?.close();
  workerRedis?.disconnect();
  await env?.cleanup();
});

const base = (): UltraEvalOptions => ({
  dataset: files.dataset, pool: files.pool, split: 'test', splitSeed: 0, sample: null, seed: 3, repeats: 2, maxSteps: 5, maxUsd: null, maxTokensPerStep: null,
  localConductors: 0, localWorkers: 0, keyCheck: false, wait: true, stallSeconds: 30, submit, log: () => {},
});

describe('runUltraEval', () => {
  it('pauses on an abort mid-submission, and --resume finishes the run with one row per (item, spec, repeat)', async () => {
    const ac = new AbortController();
    let updates = 0;
    const first = await runUltraEval(env.ctx, {
      ...base(), runId: 'pause', conductor: 'fixed:chain,fixed:single:beta', chunkSize: 4, signal: ac.signal,
      // a slow submitter, so that the abort lands while chunks are still to go
      submit: async (d, r) => { await new Promise((ok) => setTimeout(ok, 200)); return submit(d, r); },
      progress: () => ({ update: () => { if (++updates === 1) ac.abort(); }, stop() {} }),
    });
    expect(first.interrupted).toBe(true);
    expect(first.run.status).toBe('paused');
    expect(first.run.statusReason).toMatch(/fugu ultra eval --resume pause/);
    const submittedBefore = (await env.ctx.db.selectFrom('workflows').select((e) => e.fn.countAll<number>().as('n')).where('run_id', '=', 'pause').executeTakeFirstOrThrow()).n;
    expect(Number(submittedBefore)).toBeLessThan(first.run.total);

    await startExecutor();
    const again = await runUltraEval(env.ctx, { ...base(), resume: 'pause' });
    expect(again.interrupted).toBe(false);
    expect(again.run.status).toBe('completed');
    const rows = await env.ctx.db.selectFrom('workflows').select(['key', 'status', 'seed', 'repeat', 'conductor', 'item_id', 'options']).where('run_id', '=', 'pause').execute();
    expect(rows).toHaveLength(again.run.total);
    expect(new Set(rows.map((r) => r.key)).size).toBe(rows.length);
    expect(rows.every((r) => r.status === 'done')).toBe(true);

    // the items are the router's test split by unique prompt; every spec on every item, seeds = seed + repeat
    const stored = await getDatasetItems(env.ctx.db, (await getConductorRun(env.ctx.db, 'pause'))!.datasetId!);
    const test = splitItems(stored, 'test', 0).map((i) => stored[i]!);
    expect(again.run.total).toBe(test.length * 2 * 2);
    expect(new Set(rows.map((r) => Number(r.item_id)))).toEqual(new Set(test.map((i) => i.dbId)));
    for (const r of rows) {
      expect(r.key).toBe(`pause.${r.item_id}.${r.conductor === 'fixed:chain' ? 0 : 1}.${r.repeat}`);
      expect(r.seed).toBe(3 + r.repeat);
    }
    const ranking = rankWorkers(['alpha', 'beta', 'gamma'], splitItems(stored, 'train', 0).map((i) => stored[i]!));
    expect((again.run.options as { workflow: { ranking: string[] } }).workflow.ranking).toEqual(ranking);
    expect(rows[0]!.options).toMatchObject({ maxSteps: 5, ranking });

    // resuming a completed run does nothing
    const done = await runUltraEval(env.ctx, { ...base(), resume: 'pause' });
    expect(done.run.status).toBe('completed');
  });

  it('a sample of the split, the same for the same seed; the summary of the finished run', async () => {
    const a = await runUltraEval(env.ctx, { ...base(), runId: 'sa', conductor: 'fixed:moa:2', split: 'all', sample: 7, repeats: 1 });
    await runUltraEval(env.ctx, { ...base(), runId: 'sb', conductor: 'fixed:chain', split: 'all', sample: 7, repeats: 1 });
    expect(a.run.status).toBe('completed');
    const itemsOf = async (run: string): Promise<number[]> =>
      (await env.ctx.db.selectFrom('workflows').select('item_id').where('run_id', '=', run).orderBy('item_id').execute()).map((r) => Number(r.item_id));
    expect(await itemsOf('sa')).toHaveLength(7);
    expect(await itemsOf('sa')).toEqual(await itemsOf('sb'));
    const s = await summarizeUltraRun(env.ctx.db, 'sa');
    expect(s.results[0]).toMatchObject({ name: 'fixed:moa:2', workflows: 7, parseFailureRate: 0, stepsPerWorkflow: 1 });
    expect(s.run).toMatchObject({ split: 'all', sample: 7, environment: 'replay' });
    expect(s.results.map((r) => r.kind)).toEqual(['conductor', 'reference', 'reference']);
  });

  it('no progress with the conduct queue empty (jobs lost): the unfinished workflows are submitted again', async () => {
    // no executor until the jobs are lost (a paused BullMQ worker may still take a job it was already fetching)
    await worker?.close();
    workerRedis?.disconnect();
    let drained = false;
    const logs: string[] = [];
    const out = await runUltraEval(env.ctx, {
      ...base(), runId: 'stall', conductor: 'fixed:chain', split: 'all', sample: 5, repeats: 1, stallSeconds: 1, log: (l) => logs.push(l),
      progress: ({ total }) => ({
        update: (p) => {
          if (drained || p.submitted < total) return;
          drained = true;
          // the jobs vanish (a flushed Redis) while nothing has run
          void env.ctx.queue(conductQueue).drain().then(startExecutor);
        },
        stop() {},
      }),
    });
    expect(drained).toBe(true);
    expect(out.run.status).toBe('completed');
    expect(logs.some((l) => /no progress for 1s and nothing queued: submitted again, \d+ conduct job/.test(l))).toBe(true);
    const rows = await env.ctx.db.selectFrom('workflows').select(['status']).where('run_id', '=', 'stall').execute();
    expect(rows).toHaveLength(5);
    expect(rows.every((r) => r.status === 'done')).toBe(true);
  });

  it('an error after the run is created (no way to start local conductors) leaves it paused and resumable', async () => {
    await expect(runUltraEval(env.ctx, { ...base(), runId: 'noproc', conductor: 'fixed:chain', split: 'all', sample: 2, repeats: 1, localConductors: 2 }))
      .rejects.toThrow(/field --local-conductors: no way to start local conductor processes here/);
    const run = (await getConductorRun(env.ctx.db, 'noproc'))!;
    expect(run.status).toBe('paused');
    expect(run.statusReason).toMatch(/stopped by an error: .*resume with `fugu ultra eval --resume noproc`/);
    const resumed = await runUltraEval(env.ctx, { ...base(), resume: 'noproc' });
    expect(resumed.run.status).toBe('completed');
  });
});
