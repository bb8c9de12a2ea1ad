// Resume exactness of GRPO on the cluster path: the coordinator process (apps/trainer/src/grpo-main.ts,
// the Job's command) is killed with SIGKILL during fan-out, mid fan-in, between a commit and the
// next iteration, and at a moment the test does not choose (but checks: some rollouts of the last
// iteration done, the iteration not committed); after each restart it resumes from Postgres. A
// conductor process is killed -9 with rollouts in hand. Each run must end with the same final
// policy, iteration records, rollout rows and validation checkpoint as an uninterrupted run with
// the same seed. SIGTERM before the end exits 143.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { getConductorCheckpoint, getGrpoRun, listGrpoIterations, listGrpoRollouts } from '@fugu/db';
import { createEvalEnv, startWorkerProcess, waitFor, type EvalEnv, type WorkerProcess } from '../support/eval-env.ts';
import { startConductorProcess, type ConductorProcess } from '../support/conductor.ts';
import { resumeHarness } from '../support/resume.ts';

let env: EvalEnv;
let worker: WorkerProcess;
let conductors: ConductorProcess[] = [];
const CONDUCTOR_ENV = { FUGU_CONDUCTOR_POLL_MS: '20', FUGU_CONDUCTOR_LOCK_MS: '2000' };

beforeAll(async () => {
  env = await createEvalEnv({ overrides: { 'worker.concurrency': 32 } });
  worker = await startWorkerProcess(env.config, { FUGU_WORKER_LOCK_MS: '2000' });
  conductors = await Promise.all([startConductorProcess(env.config, CONDUCTOR_ENV), startConductorProcess(env.config, CONDUCTOR_ENV)]);
});
afterAll(async () => {
  for (const c of conductors) await c.kill9().catch(() => {});
  await worker?.kill9().catch(() => {});
  await env?.cleanup();
});

async function outcome(runId: string) {
  const run = (await getGrpoRun(env.ctx.db, runId))!;
  const iterations = (await listGrpoIterations(env.ctx.db, runId)).map((i) => {
    const { wallMs: _w, dispatches: _d, ...record } = i.record;
    return { iteration: i.iteration, record, valReward: i.valReward, policy: i.nextCheckpointId.replace(runId, 'RUN') };
  });
  const rollouts = (await listGrpoRollouts(env.ctx.db, runId)).map(({ workflowId: _w, ...r }) => r);
  return {
    status: run.status, iteration: run.iteration, adamStep: run.adam.step, adamM: Array.from(run.adam.m!), best: run.bestCheckpointId?.replace(runId, 'RUN'),
    theta: Array.from((await getConductorCheckpoint(env.ctx.db, run.policyCheckpointId))!.theta), iterations, rollouts,
  };
}

const resume = resumeHarness({
  config: () => env.config,
  train: () => [
    'train', 'grpo', '--dataset', 'llmrouter', '--pool', 'llmrouter', '--q', '4', '--g', '4', '--iterations', '4', '--val-every', '2', '--val-size', '6',
    '--seed', '5', '--lr', '0.01', '--deadline-ms', '20000',
  ],
  process: 'grpo',
  env: (runId) => ({ FUGU_GRPO_RUN: runId, FUGU_GRPO_POLL_MS: '50' }),
  crashEnv: 'FUGU_GRPO_CRASH_AT',
  progress: async (runId) => {
    const run = (await getGrpoRun(env.ctx.db, runId))!;
    return { step: run.iteration, status: run.status };
  },
  outcome,
});
const { create, coordinator } = resume;

let reference: Awaited<ReturnType<typeof outcome>>;

describe('GRPO resume after kill -9', () => {
  it('an uninterrupted reference run', async () => {
    reference = await resume.uninterrupted('ref');
    expect(reference.status).toBe('completed');
    expect(reference.iterations).toHaveLength(4);
    // the run learnt something to compare: the policy moved and Adam stepped
    expect(reference.adamStep).toBeGreaterThan(0);
  });

  it('the coordinator killed during fan-out, mid fan-in, between commit and next iteration, and at a moment the test does not choose', async () => {
    await create('crash');
    await resume.crashAtEachPoint('crash');
    // a kill once iteration 3 has some rollouts finished and before it is committed: the
    // conductors run one workflow at a time meanwhile, so the iteration's 22 rollouts (16 train,
    // 6 validation) finish over 11 rounds and the first done one comes long before the last
    const slow = await Promise.all([0, 1].map(() => startConductorProcess(env.config, { ...CONDUCTOR_ENV, FUGU_CONDUCTOR_CONCURRENCY: '1' })));
    for (const old of conductors) await old.term();
    conductors = slow;
    const iteration3 = async () => (await sql<{ done: number; total: number }>`
      select count(*) filter (where status = 'done')::int as done, count(*)::int as total from workflows where key like 'grpo.crash.3.%'`.execute(env.ctx.db)).rows[0]!;
    const c = await coordinator('crash');
    const seen = await waitFor('a rollout of iteration 3 done', async () => {
      const run = (await getGrpoRun(env.ctx.db, 'crash'))!;
      if (run.iteration > 3 || run.status === 'completed') throw new Error(`the run went past iteration 3 before a rollout of it was seen done (iteration ${run.iteration}, ${run.status})`);
      const n = await iteration3();
      return n.done > 0 && n;
    }, 60_000, 20);
    await c.kill9();
    process.stdout.write(`grpo kill -9 with ${seen.done} of ${seen.total} rollouts of iteration 3 done\n`);
    // the kill landed mid-iteration: iteration 3 not committed, some of its rollouts not done
    const atKill = (await getGrpoRun(env.ctx.db, 'crash'))!;
    expect({ iteration: atKill.iteration, status: atKill.status }, 'the kill landed before iteration 3 was committed').toEqual({ iteration: 3, status: 'running' });
    expect(seen.total).toBe(22);
    expect(seen.done, 'rollouts of iteration 3 done when the kill was sent').toBeLessThan(seen.total);
    // back to the usual conductors for the resumed coordinator and the tests after this one
    const usual = await Promise.all([0, 1].map(() => startConductorProcess(env.config, CONDUCTOR_ENV)));
    for (const old of conductors) await old.term();
    conductors = usual;
    await resume.finishes('crash', reference);
  });

  it('a conductor process killed -9 with rollouts in hand: the same final policy', async () => {
    await create('conductor-kill');
    const c = await coordinator('conductor-kill');
    await waitFor('rollouts of iteration 1 running', async () => {
      const n = await sql<{ n: number }>`select count(*)::int as n from workflows where key like 'grpo.conductor-kill.1.%' and status in ('running', 'done')`.execute(env.ctx.db);
      return n.rows[0]!.n > 0;
    }, 60_000, 5);
    await conductors[0]!.kill9();
    conductors[0] = await startConductorProcess(env.config, CONDUCTOR_ENV);
    expect(await c.exited).toEqual({ code: 0, signal: null });
    expect(await outcome('conductor-kill')).toEqual(reference);
  });

  it('SIGTERM before the run completes: exit 143, and the next process resumes it', async () => {
    await resume.termAndResume('term', reference, 'an iteration committed');
  });
});
