// An evaluation batch end to end on real Redis and real Postgres: enqueue, provider workers,
// one row per (run, item, worker, repetition), the summary, soft labels, the report; Ctrl-C
// and resume; the spend cap; and bad input that must stop before anything is stored.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { sql } from 'kysely';
import { ConfigError, InputError, softLabels } from '@fugu/core';
import { getRun } from '@fugu/db';
import { providerCallQueue } from '@fugu/queue';
import { routingSummary } from '@fugu/datasets';
import { createLogger, Registry } from '@fugu/telemetry';
import { startProviderWorker, type ProviderWorkerHandle } from '../../apps/provider-worker/src/worker.ts';
import { runEval, type EvalOptions } from '../../apps/cli/src/eval/run.ts';
import { collectRunSummary, writeSoftLabels } from '../../apps/cli/src/eval/summary.ts';
import { renderEvalReport } from '../../apps/cli/src/report/eval-report.ts';
import { createEvalEnv, replayPool, syntheticItems, waitFor, writeFixtures, type EvalEnv, REPLAY_WORKERS } from '../support/eval-env.ts';

const quiet = () => {};
const base = (files: { dataset: string; pool: string }, over: Partial<EvalOptions> = {}): EvalOptions => ({
  dataset: files.dataset, pool: files.pool, repetitions: 2, sample: null, seed: 1, spendCap: null, localWorkers: 0, keyCheck: true, wait: true, log: quiet, ...over,
});

let env: EvalEnv;
let worker: ProviderWorkerHandle;
const items = syntheticItems(120);
let files: { dataset: string; pool: string };

beforeAll(async () => {
  env = await createEvalEnv({ overrides: { 'worker.concurrency': 4 } });
  files = await writeFixtures(env.dir, items, replayPool());
  worker = await startProviderWorker({ config: env.config, db: env.ctx.db, log: createLogger({ name: 'test', level: 'silent' }), registry: new Registry() });
});
afterAll(async () => {
  await worker?.close();
  await env?.cleanup();
});

async function callRows(runId: string): Promise<{ total: number; distinct: number }> {
  const r = await sql<{ total: number; distinct: number }>`
    select count(*)::int as total, count(distinct (item_id, worker_id, repetition))::int as distinct from calls where run_id = ${runId}`.execute(env.ctx.db);
  return r.rows[0]!;
}

describe('evaluation batch', () => {
  it('runs dataset x workers x repetitions, one row per call, and reproduces the recorded figures', async () => {
    const out = await runEval(env.ctx, base(files, { runId: 'full' }));
    expect(out.run.status).toBe('completed');
    expect(out.run.totalCalls).toBe(120 * 3 * 2);
    expect(await callRows('full')).toEqual({ total: 720, distinct: 720 });
    const s = await collectRunSummary(env.ctx.db, 'full');
    const expected = routingSummary(
      items.map((it) => ({ itemId: it.id, task: it.task, split: it.sourceSplit!, rewards: Object.fromEntries(REPLAY_WORKERS.map((w) => [w, it.recorded![w]!.score])) })),
      [...REPLAY_WORKERS],
    );
    expect(s.summary!.oracle).toBeCloseTo(expected.oracle, 12);
    expect(s.summary!.bestSingle).toEqual(expected.bestSingle);
    expect(s.summary!.bestPerTask.mean).toBeCloseTo(expected.bestPerTask.mean, 12);
    expect(s.summary!.bySplit.test!.oracle).toBeCloseTo(expected.bySplit.test!.oracle, 12);
    // exact money: spend = sum of per-call costs
    const spent = await sql<{ s: string }>`select sum(cost)::text as s from calls where run_id = 'full'`.execute(env.ctx.db);
    expect(Number(out.run.spent)).toBeCloseTo(Number(spent.rows[0]!.s), 12);
    expect(s.report.workers.every((w) => w.calls === 240 && w.failed === 0)).toBe(true);

    const labelsPath = path.join(env.dir, 'labels.jsonl');
    const stats = await writeSoftLabels(s, 0.2, labelsPath);
    const lines = (await readFile(labelsPath, 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).toHaveLength(120);
    expect(stats.items).toBe(120);
    const first = lines.find((l) => l.item === 'q1')!;
    const want = softLabels(REPLAY_WORKERS.map((w) => items[1]!.recorded![w]!.score), 0.2);
    expect(first.workers).toEqual([...REPLAY_WORKERS]);
    first.labels.forEach((p: number, j: number) => expect(p).toBeCloseTo(want[j]!, 6));

    const html = renderEvalReport(s.report);
    expect(html).toContain('full');
    expect(html).toContain('<svg');
  });

  it('re-running the plan of a finished run adds nothing (idempotent resume)', async () => {
    const out = await runEval(env.ctx, { ...base(files), resume: 'full' });
    expect(out.run.status).toBe('completed');
    expect(await callRows('full')).toEqual({ total: 720, distinct: 720 });
  });

  it('Ctrl-C pauses the run; --resume finishes it with exactly one row per call', async () => {
    const big = await writeFixtures(path.join(env.dir, 'big'), syntheticItems(1500, 3), replayPool());
    const ac = new AbortController();
    const running = runEval(env.ctx, base(big, { runId: 'interrupted', signal: ac.signal }));
    await waitFor('some progress', async () => ((await getRun(env.ctx.db, 'interrupted'))?.doneCalls ?? 0) > 50, 30_000, 20);
    ac.abort();
    const first = await running;
    expect(first.interrupted).toBe(true);
    expect(first.run.status).toBe('paused');
    expect(first.run.statusReason).toMatch(/fugu eval --resume interrupted/);
    // the paused run's remaining jobs are skipped by the workers, not recorded: wait until the
    // workers have taken every one of them
    const queue = env.ctx.queue(providerCallQueue('replay'));
    await waitFor('the paused run\'s jobs taken', async () => {
      const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
      return c.waiting! + c.active! + c.delayed! + c.prioritized! === 0;
    }, 60_000, 50);
    const partial = await callRows('interrupted');
    expect(partial.total).toBeLessThan(9000);
    const second = await runEval(env.ctx, { ...base(big), resume: 'interrupted' });
    expect(second.run.status).toBe('completed');
    expect(await callRows('interrupted')).toEqual({ total: 9000, distinct: 9000 });
  });

  it('pauses at the spend cap with a clear reason, and resumes with a higher cap', async () => {
    const out = await runEval(env.ctx, base(files, { runId: 'capped', spendCap: '0.01', repetitions: 4 }));
    expect(out.run.status).toBe('paused');
    expect(out.run.statusReason).toMatch(/spend cap \$0\.01 reached/);
    expect(Number(out.run.spent)).toBeGreaterThanOrEqual(0.01);
    const partial = await callRows('capped');
    expect(partial.total).toBeLessThan(1440);
    await expect(runEval(env.ctx, { ...base(files), resume: 'capped' })).rejects.toThrow(/higher --spend-cap/);
    const resumed = await runEval(env.ctx, { ...base(files), resume: 'capped', spendCap: '100' });
    expect(resumed.run.status).toBe('completed');
    expect(await callRows('capped')).toEqual({ total: 1440, distinct: 1440 });
  });
});

describe('bad input stops before anything is stored', () => {
  async function nothingStored(): Promise<void> {
    const runs = await sql<{ n: number }>`select count(*)::int as n from eval_runs where id like 'bad%'`.execute(env.ctx.db);
    expect(runs.rows[0]!.n).toBe(0);
  }

  it('a malformed dataset line names the file and the line', async () => {
    const lines = (await readFile(files.dataset, 'utf8')).split('\n');
    lines[2] = '{"id": "q2", "task": "math", "prompt": ';
    const bad = path.join(env.dir, 'bad.jsonl');
    await writeFile(bad, lines.join('\n'));
    const e = await runEval(env.ctx, base({ dataset: bad, pool: files.pool }, { runId: 'bad1' })).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(InputError);
    expect((e as Error).message).toContain(`${bad}:3`);
    await nothingStored();
    const lines2 = lines.slice();
    lines2[2] = JSON.stringify({ id: 'q2', task: 'math', prompt: 'x', scores: { alpha: 2 } });
    await writeFile(bad, lines2.join('\n'));
    const e2 = await runEval(env.ctx, base({ dataset: bad, pool: files.pool }, { runId: 'bad1' })).catch((x: unknown) => x);
    expect((e2 as Error).message).toMatch(new RegExp(`${bad}:3.*scores`));
    await nothingStored();
  });

  it('an unknown worker is named, with the pool it is not in', async () => {
    const e = await runEval(env.ctx, base(files, { runId: 'bad2', workers: ['alpha', 'zeta'] })).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(InputError);
    expect((e as Error).message).toMatch(/unknown worker "zeta".*alpha, beta, gamma/);
    const other = await writeFixtures(path.join(env.dir, 'delta'), items, replayPool(['alpha', 'delta']));
    const e2 = await runEval(env.ctx, base({ dataset: files.dataset, pool: other.pool }, { runId: 'bad3' })).catch((x: unknown) => x);
    expect((e2 as Error).message).toMatch(/unknown worker "delta": a replay worker needs recorded scores/);
    await nothingStored();
  });

  it('a missing API key names the variable to set', async () => {
    const pool = replayPool(['alpha']);
    pool.workers.push({ name: 'gpt', provider: 'openai', model: 'gpt-4o-mini', apiKeyEnv: 'FUGU_TEST_MISSING_OPENAI_KEY', settings: {}, prices: { inputPerMTok: '0.15', outputPerMTok: '0.6' } });
    const f = await writeFixtures(path.join(env.dir, 'keys'), items, pool);
    const e = await runEval(env.ctx, base(f, { runId: 'bad4' })).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as Error).message).toContain('FUGU_TEST_MISSING_OPENAI_KEY');
    await nothingStored();
  });
});
