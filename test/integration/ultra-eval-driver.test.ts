// The `fugu ultra eval` driver against the real engine: real Postgres, Redis and BullMQ, a
// provider-worker process and a conductor process (their containers' commands) executing the
// workflows on a replay pool of synthetic items with recorded scores. What is tested is the
// driver: the split and sample, keys and seeds, the ranking, completion, an abort (Ctrl-C)
// pausing mid-submission and `resume` finishing with one row per key, re-submission after the
// conduct jobs are lost, and an error leaving the run paused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getDatasetItems, getConductorRun } from '@fugu/db';
import { conductQueue } from '@fugu/queue';
import { initPolicyCheckpoint, rankWorkers, splitItems } from '@fugu/ultra';
import { InputError } from '@fugu/core';
import { sql } from 'kysely';
import { formatUltraSummary, runUltraEval, summarizeUltraRun, type UltraEvalOptions } from '@fugu/ultra-training';
import { createEvalEnv, replayPool, startWorkerProcess, syntheticItems, writeFixtures, type EvalEnv, type WorkerProcess } from '../support/eval-env.ts';
import { startConductorProcess, type ConductorProcess } from '../support/conductor.ts';

let env: EvalEnv;
let files: { dataset: string; pool: string };
let worker: WorkerProcess | undefined;
let conductor: ConductorProcess | undefined;
const items = syntheticItems(60, 5);
const startConductor = async (): Promise<void> => {
  conductor = await startConductorProcess(env.config, { FUGU_CONDUCTOR_POLL_MS: '20' });
};

beforeAll(async () => {
  env = await createEvalEnv({ overrides: { 'worker.concurrency': 16, 'conductor.pollMs': 20 } });
  files = await writeFixtures(env.dir, items, replayPool());
  [worker] = await Promise.all([startWorkerProcess(env.config), startConductor()]);
}, 120_000);
afterAll(async () => {
  await conductor?.term();
  await worker?.term();
  await env?.cleanup();
});

const base = (): UltraEvalOptions => ({
  dataset: files.dataset, pool: files.pool, split: 'test', splitSeed: 0, sample: null, seed: 3, repeats: 2, maxSteps: 5, maxUsd: null, maxTokensPerStep: null,
  localConductors: 0, localWorkers: 0, keyCheck: false, wait: true, stallSeconds: 30, log: () => {},
});

describe('runUltraEval', () => {
  it('pauses on an abort mid-submission, and --resume finishes the run with one row per (item, spec, repeat)', async () => {
    const ac = new AbortController();
    let updates = 0;
    const first = await runUltraEval(env.ctx, {
      ...base(), runId: 'pause', conductor: 'fixed:chain,fixed:single:beta', chunkSize: 4, signal: ac.signal,
      // the abort lands while the first chunk is being submitted (the bar is made once submission has begun)
      progress: () => {
        ac.abort();
        return { update: () => { updates++; }, stop() {} };
      },
    });
    expect(first.interrupted).toBe(true);
    expect(first.run.status).toBe('paused');
    expect(first.run.statusReason).toMatch(/fugu ultra eval --resume pause/);
    const submittedBefore = (await env.ctx.db.selectFrom('workflows').select((e) => e.fn.countAll<number>().as('n')).where('run_id', '=', 'pause').executeTakeFirstOrThrow()).n;
    expect(Number(submittedBefore)).toBe(4); // the chunk in flight, no more
    expect(updates).toBe(0);

    const again = await runUltraEval(env.ctx, { ...base(), resume: 'pause' });
    expect(again.interrupted).toBe(false);
    expect(again.run.status).toBe('completed');
    const rows = await env.ctx.db.selectFrom('workflows').select(['key', 'status', 'seed', 'repeat', 'conductor', 'item_id', 'options']).where('run_id', '=', 'pause').execute();
    expect(rows).toHaveLength(again.run.total);
    expect(new Set(rows.map((r) => r.key)).size).toBe(rows.length);
    expect(rows.every((r) => r.status === 'done')).toBe(true);
    // the engine ran them: every workflow answered with its steps and a reward from the replayed outcome
    const wf = await env.ctx.db.selectFrom('workflows').select(['conductor', 'finish_reason', 'n_steps', 'reward', 'topology']).where('run_id', '=', 'pause').execute();
    for (const w of wf) {
      expect(w).toMatchObject(w.conductor === 'fixed:chain' ? { finish_reason: 'answered', n_steps: 2, topology: 'chain' } : { finish_reason: 'answered', n_steps: 1, topology: 'single' });
      expect([0.5, 1]).toContain(w.reward);
    }

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
    expect(s.results[0]).toMatchObject({ name: 'fixed:moa:2', workflows: 7, parseFailureRate: 0, stepsPerWorkflow: 3 });
    expect(s.run).toMatchObject({ split: 'all', sample: 7, environment: 'replay' });
    expect(s.results.map((r) => r.kind)).toEqual(['conductor', 'reference', 'reference']);
  });

  // issue 29 (GRPO as a user, item 1): `--split test` under --split-by dataset is the dataset's own test split
  it("--split-by dataset: the dataset's test items (12 of 60, not the 6 of the split by prompt), named in the run and its summary; a checkpoint of another scheme is refused", async () => {
    const sourceTest = items.filter((it) => it.sourceSplit === 'test');
    const r = await runUltraEval(env.ctx, { ...base(), runId: 'by-dataset', conductor: 'fixed:single:beta', splitBy: 'dataset', repeats: 1 });
    expect(r.run.status).toBe('completed');
    expect(r.run.options).toMatchObject({ split: 'test', splitBy: 'dataset', items: sourceTest.length });
    const { rows } = await sql<{ ext_id: string }>`select i.ext_id from workflows w join items i on i.id = w.item_id where w.run_id = 'by-dataset'`.execute(env.ctx.db);
    expect(rows.map((x) => x.ext_id).sort()).toEqual(sourceTest.map((it) => it.id).sort());
    const s = await summarizeUltraRun(env.ctx.db, 'by-dataset');
    expect(s.run).toMatchObject({ split: 'test', splitBy: 'dataset' });
    expect(formatUltraSummary(s)).toMatch(/test split \(the dataset's own split/);
    // by prompt (the default) it is the split it always was
    const byPrompt = await runUltraEval(env.ctx, { ...base(), runId: 'by-prompt', conductor: 'fixed:single:beta', repeats: 1 });
    expect(byPrompt.run.options).toMatchObject({ splitBy: 'prompt', items: splitItems(items, 'test', 0).length });
    // a policy whose ranking was made on the dataset's own split, scored on the split by prompt: refused before anything runs
    const policy = await initPolicyCheckpoint(env.ctx.db, { workers: ['alpha', 'beta', 'gamma'], backboneId: 'b', featureDim: 4, seed: 0, id: 'p-by-dataset', rankedBy: { splitBy: 'dataset' } });
    const e = await runUltraEval(env.ctx, { ...base(), runId: 'mismatch', conductor: `policy:${policy.id}`, splitBy: 'prompt' }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(InputError);
    expect(e).toMatchObject({ field: '--split-by' });
    expect((e as Error).message).toMatch(/policy checkpoint p-by-dataset was made with the split of the dataset's own/);
    expect(await getConductorRun(env.ctx.db, 'mismatch')).toBeUndefined();
  });

  it('no progress with the conduct queue empty (jobs lost): the unfinished workflows are submitted again', async () => {
    // no conductor until the jobs are lost (a paused BullMQ worker may still take a job it was already fetching)
    await conductor?.term();
    let drained = false;
    const logs: string[] = [];
    const out = await runUltraEval(env.ctx, {
      ...base(), runId: 'stall', conductor: 'fixed:chain', split: 'all', sample: 5, repeats: 1, stallSeconds: 1, log: (l) => logs.push(l),
      progress: ({ total }) => ({
        update: (p) => {
          if (drained || p.submitted < total) return;
          drained = true;
          // the jobs vanish (a flushed Redis) while nothing has run: once all of them are in the
          // queue (submitted is counted when the submit call returns; on a loaded machine the
          // jobs may land a moment later), drain it, then start a conductor
          void (async () => {
            const q = env.ctx.queue(conductQueue);
            while ((await q.getWaitingCount()) < total) await new Promise((r) => setTimeout(r, 20));
            await q.drain();
            await startConductor();
          })();
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
