// test:cluster — fugu across hosts (network namespaces on one machine, see netns.ts):
//   db       Redis and Postgres
//   w1, w2   a provider worker, a conductor (cases 2 and 3) and an ES evaluator each
//   c1, c2   the ES coordinator (c2 takes over when c1's process is killed); c1 also coordinates
//            the GRPO run (`fugu train grpo`, cluster rollouts)
//   op       the operator's `fugu` commands (eval, ultra eval, train grpo --rollouts local, router
//            train, train es --no-wait, router publish)
//   gw       the gateway in pool mode (its router workers: w2)
// 1. an evaluation batch spread over w1 and w2 completes with every result exactly once; and
//    again with w1 cut off mid-batch and restored after the run completed (its late results
//    neither duplicate a row nor count twice);
// 2. a conductor batch (`fugu ultra eval`, fixed:moa:3 and fixed:chain on replay workers) with w1
//    cut off mid-batch: the workflows w1's conductor held are finished by w2's; every workflow,
//    step row and step call exactly once, and w1's late work, once restored, changes no row;
// 3. a GRPO run (Q 8 x G 4, 4 iterations, validation 3 times) whose rollouts are conduct jobs on
//    the conductors of w1 and w2, w1 cut off while its conductor holds rollouts of iteration >= 1
//    and restored after the run completed: the final policy, Adam's state, the iteration records
//    (less wall-clock fields) and every rollout row equal the uninterrupted run's (`--rollouts
//    local` on op, the same seed); the rollouts w1 held were taken back (stalled) and finished by
//    w2, and w1's late finishes of them, once restored, change no row;
// 4. an ES run whose worker host w1 is cut off mid-generation (link down) and later restored
//    completes with the final state of an uninterrupted run with the same seed;
// 5. the coordinator's process killed on c1 and started again on c2 resumes the run;
// 6. a gateway in pool mode with no router worker alive answers 503 at once and leaves one wake
//    job (the depth KEDA scales a router pool up from zero on); a router worker started on w2
//    takes it, and the gateway's requests are then routed over the network.
// Timings (detection of the lost host, re-dispatch, total delay) are printed as a table and,
// with FUGU_CLUSTER_REPORT=<file>, written as JSON (docs/deploy.md quotes them).
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { getCheckpoint, getConductorCheckpoint, getConductorRun, getEsRun, getEsState, getGrpoRun, getRun, listCheckpoints, listEsGenerations, listGrpoIterations, listGrpoRollouts } from '@fugu/db';
import { conductQueue, esEvalQueue, queueKeys, routeQueue } from '@fugu/queue';
import { waitFor } from '../support/eval-env.ts';
import { TestCluster, type FuguProcess } from './cluster.ts';
import { netnsUnavailable } from './netns.ts';

const SAMPLE = 1000; // LLMRouter questions; x 9 recorded workers = the batch's calls
const ES_EVALUATOR = { FUGU_ES_LOCK_MS: '3000', FUGU_ES_EVAL_CONCURRENCY: '4' };
const ES_ARGS = ['--lambda', '8', '--replicas', '2', '--generations', '5', '--task', 'episodes', '--episodes', '4', '--questions', '3', '--turn-budget', '5', '--seed', '11', '--deadline-ms', '120000'];

let cluster: TestCluster;
const procs: FuguProcess[] = [];
const timings: Record<string, number | string> = {};

beforeAll(async () => {
  const why = netnsUnavailable();
  if (why) throw new Error(why);
  cluster = await TestCluster.start(['w1', 'w2', 'c1', 'c2', 'op', 'gw']);
  // a lost host's calls come back after about this long (default 30 s)
  for (const host of ['w1', 'w2']) procs.push(await cluster.startApp(host, 'provider-worker', { FUGU_WORKER_LOCK_MS: '3000' }));
}, 120_000);

afterAll(async () => {
  const rows = Object.entries(timings);
  if (rows.length) {
    process.stdout.write(`\ntest:cluster timings\n${rows.map(([k, v]) => `  ${k.padEnd(44)} ${typeof v === 'number' ? `${(v / 1000).toFixed(2)} s` : v}`).join('\n')}\n`);
    if (process.env.FUGU_CLUSTER_REPORT) writeFileSync(process.env.FUGU_CLUSTER_REPORT, `${JSON.stringify(timings, null, 2)}\n`);
  }
  for (const p of procs) await p.kill9().catch(() => undefined);
  await cluster?.stop();
});

/** A counter of a Prometheus text page, summed over its label sets. */
function counter(page: string, name: string): number {
  let sum = 0;
  for (const line of page.split('\n')) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

/** Calls a provider worker host has made so far (its own counter, over the network). */
const callsMade = async (host: string): Promise<number> => counter(await cluster.httpGet(host, 9464, '/metrics'), 'fugu_provider_calls_total');

/** Waits until an evaluation run has completed; returns it. */
const completedRun = (runId: string) =>
  waitFor(`run ${runId} to complete`, async () => {
    const r = await getRun(cluster.db, runId);
    return r?.status === 'completed' ? r : undefined;
  }, 240_000, 100);

/** [call rows, distinct (item, worker, repetition) among them, reward rows, distinct among them] */
async function rowsOf(runId: string): Promise<number[]> {
  const q = (table: 'calls' | 'rewards') =>
    sql<{ n: string; distinct: string }>`select count(*) as n, count(distinct (item_id, worker_id, repetition)) as distinct from ${sql.table(table)} where run_id = ${runId}`.execute(cluster.db);
  const [calls, rewards] = [(await q('calls')).rows[0]!, (await q('rewards')).rows[0]!];
  return [calls.n, calls.distinct, rewards.n, rewards.distinct].map(Number);
}

async function cli(args: string[]): Promise<string> {
  const r = await cluster.cli('op', args);
  expect(r.code, `fugu ${args.join(' ')}\n${r.stderr}`).toBe(0);
  return r.stdout;
}

describe('an evaluation batch over two worker hosts', () => {
  it('completes with every result exactly once, both hosts taking part', async () => {
    const t0 = Date.now();
    await cli(['eval', '--dataset', 'llmrouter', '--pool', 'llmrouter', '--sample', String(SAMPLE), '--repetitions', '1', '--seed', '0', '--run-id', 'batch', '--no-wait']);
    const run = await completedRun('batch');
    timings['batch: calls'] = String(run.totalCalls);
    timings['batch: wall time (enqueue to completed)'] = Date.now() - t0;
    expect(run.totalCalls).toBe(SAMPLE * 9);
    expect(run.doneCalls).toBe(run.totalCalls);
    expect(run.failedCalls).toBe(0);
    // every (item, worker, repetition) has one call row and one reward, none missing, none twice
    expect(await rowsOf('batch')).toEqual([SAMPLE * 9, SAMPLE * 9, SAMPLE * 9, SAMPLE * 9]);
    // each call was made once: the hosts' own counters add up to the batch, and both did work
    const made = await Promise.all(['w1', 'w2'].map(callsMade));
    timings['batch: calls made by w1 / w2'] = made.join(' / ');
    expect(made[0]! + made[1]!).toBe(SAMPLE * 9);
    expect(Math.min(...made)).toBeGreaterThan(0);
  });

  it('a worker host cut off mid-batch and restored: still every result exactly once, counted once', async () => {
    const before = { w1: await callsMade('w1'), w2: await callsMade('w2') };
    await cli(['eval', '--dataset', 'llmrouter', '--pool', 'llmrouter', '--sample', String(SAMPLE), '--repetitions', '1', '--seed', '1', '--run-id', 'cutbatch', '--no-wait']);
    // w1 has calls in hand: cut it off
    await waitFor('w1 at work on the batch', async () => (await callsMade('w1')) > before.w1 + 500, 60_000, 10);
    const cutAt = Date.now();
    cluster.net.linkDown('w1');
    const run = await completedRun('cutbatch');
    timings['batch with w1 cut: cut -> completed by w2'] = Date.now() - cutAt;
    // w1 comes back with its late results (calls it made before the cut and could not write)
    cluster.net.linkUp('w1');
    await waitFor('w1 reachable again', async () => (await cluster.httpGet('w1', 9464, '/healthz').catch(() => '')).includes('ok'), 60_000, 200);
    await new Promise((r) => setTimeout(r, 3_000));
    const after = (await getRun(cluster.db, 'cutbatch'))!;
    expect([run.doneCalls, after.doneCalls, after.failedCalls, after.status]).toEqual([SAMPLE * 9, SAMPLE * 9, 0, 'completed']);
    expect(await rowsOf('cutbatch')).toEqual([SAMPLE * 9, SAMPLE * 9, SAMPLE * 9, SAMPLE * 9]);
    // at least once: what w1 held when it was cut off was made again by w2 (replay calls cost nothing)
    const made = (await callsMade('w1')) - before.w1 + (await callsMade('w2')) - before.w2;
    expect(made).toBeGreaterThanOrEqual(SAMPLE * 9);
    timings['batch with w1 cut: calls made twice (held by w1 at the cut)'] = String(made - SAMPLE * 9);
  });
});

const CONDUCTOR_SAMPLE = 300; // LLMRouter test-split questions, x 2 specs = the batch's workflows
const CONDUCTOR_SPECS = 'fixed:moa:3,fixed:chain'; // 4 steps and 2 steps
const CONDUCTOR = { FUGU_CONDUCTOR_LOCK_MS: '3000' };

/** Workflows a conductor host has finished so far (its own counter, over the network). */
const workflowsDone = async (host: string): Promise<number> => counter(await cluster.httpGet(host, 9472, '/metrics'), 'fugu_conductor_workflows_total');

/** What a conductor run stored: its workflows, their steps, and the chat calls of those steps. */
async function conductorRows(runId: string) {
  const wf = await sql<{ n: number; keys: number; items: number; done: number; answered: number; steps: number; retried: number }>`
    select count(*)::int as n, count(distinct key)::int as keys, count(distinct (item_id, conductor, repeat))::int as items,
           count(*) filter (where status = 'done')::int as done, count(*) filter (where finish_reason = 'answered')::int as answered,
           coalesce(sum(n_steps), 0)::int as steps, count(*) filter (where attempts > 1)::int as retried
    from workflows where run_id = ${runId}`.execute(cluster.db);
  const st = await sql<{ n: number; distinct: number; ok: number; calls: number; callKeys: number; extra: number }>`
    select count(*)::int as n, count(distinct (s.workflow_id, s.idx))::int as distinct, count(*) filter (where s.status = 'ok')::int as ok,
           (select count(*)::int from chat_calls c join workflow_steps s2 on c.key = s2.chat_call_id join workflows w2 on w2.id = s2.workflow_id where w2.run_id = ${runId}) as calls,
           (select count(distinct c.key)::int from chat_calls c join workflow_steps s2 on c.key = s2.chat_call_id join workflows w2 on w2.id = s2.workflow_id where w2.run_id = ${runId}) as "callKeys",
           (select count(*)::int from chat_calls c join workflows w3 on c.key like 'wf' || w3.id || '.%' where w3.run_id = ${runId}
              and not exists (select 1 from workflow_steps s3 where s3.chat_call_id = c.key)) as extra
    from workflow_steps s join workflows w on w.id = s.workflow_id where w.run_id = ${runId}`.execute(cluster.db);
  return { workflows: wf.rows[0]!, steps: st.rows[0]! };
}

/** The finished rows of a run as they stand (what a late writer must not change). */
const workflowSnapshot = async (runId: string) =>
  (await sql<Record<string, unknown>>`select id, key, status, attempts, finish_reason, final_answer, outcome, reward, worker_cost, finished_at from workflows where run_id = ${runId} order by id`.execute(cluster.db)).rows;

describe('a conductor batch over two worker hosts', () => {
  const conductors: FuguProcess[] = [];
  beforeAll(async () => {
    for (const host of ['w1', 'w2']) conductors.push(await cluster.startApp(host, 'conductor', CONDUCTOR));
  }, 120_000);
  afterAll(async () => {
    // the later cases do not need them: give the two cores back
    for (const p of conductors) await p.kill9().catch(() => undefined);
  });

  it('a worker host cut off mid-batch and restored: every workflow, step and call exactly once, finished on the other host', async () => {
    const total = CONDUCTOR_SAMPLE * 2;
    const stepsTotal = CONDUCTOR_SAMPLE * (4 + 2);
    const before = { w1: await callsMade('w1'), w2: await callsMade('w2') };
    const redis = new Redis(cluster.redisUrl, { maxRetriesPerRequest: null });
    const eventsConnection = redis.duplicate();
    const events = new QueueEvents(conductQueue, { connection: eventsConnection, prefix: 'fugu' });
    try {
      await events.waitUntilReady();
      const stalled: number[] = [];
      events.on('stalled', () => stalled.push(Date.now()));
      const t0 = Date.now();
      // the operator's batch, followed to the end (the CLI marks the run completed)
      const batch = cluster.cli('op', ['ultra', 'eval', '--dataset', 'llmrouter', '--pool', 'llmrouter', '--conductor', CONDUCTOR_SPECS, '--sample', String(CONDUCTOR_SAMPLE), '--seed', '0',
        '--run-id', 'ucut', '--local-conductors', '0', '--local-workers', '0']);
      // both conductor hosts at work; w1 with workflows in hand: cut it off
      await waitFor('both conductors at work on the batch', async () => Math.min(await workflowsDone('w1'), await workflowsDone('w2')) >= 40, 120_000, 10);
      const w1Done = await workflowsDone('w1');
      const cutAt = Date.now();
      cluster.net.linkDown('w1');
      const r = await batch;
      const completedAt = Date.now();
      expect(r.code, `fugu ultra eval\n${r.stderr}`).toBe(0);
      const run = (await getConductorRun(cluster.db, 'ucut'))!;
      expect([run.status, run.total]).toEqual(['completed', total]);
      timings['conductor batch: workflows / steps'] = `${total} / ${stepsTotal}`;
      timings['conductor batch: wall time (CLI start to completed)'] = completedAt - t0;
      timings['conductor batch, w1 cut: detection (cut -> first stalled job taken back)'] = stalled.length ? stalled[0]! - cutAt : 'none';
      timings['conductor batch, w1 cut: cut -> completed by w2'] = completedAt - cutAt;
      const atCompletion = await workflowSnapshot('ucut');

      // every workflow once, all done; every step row once and answered; one chat_calls row per step key, none besides
      const rows = await conductorRows('ucut');
      expect(rows.workflows).toEqual({ n: total, keys: total, items: total, done: total, answered: total, steps: stepsTotal, retried: rows.workflows.retried });
      expect(rows.steps).toEqual({ n: stepsTotal, distinct: stepsTotal, ok: stepsTotal, calls: stepsTotal, callKeys: stepsTotal, extra: 0 });
      // workflows w1's conductor held at the cut came back (stalled) and were finished by w2's, after the cut
      expect(stalled.length, 'conduct jobs held by the cut-off host came back through the stalled-job check').toBeGreaterThan(0);
      const moved = await sql<{ n: number; late: number }>`select count(*)::int as n, count(*) filter (where finished_at < to_timestamp(${cutAt / 1000}))::int as late
        from workflows where run_id = 'ucut' and attempts > 1`.execute(cluster.db);
      expect(moved.rows[0]!.n).toBeGreaterThan(0);
      expect(moved.rows[0]!.late).toBe(0);
      timings['conductor batch, w1 cut: workflows taken over by w2'] = String(moved.rows[0]!.n);

      // w1 comes back, with its conductor's and provider worker's late work
      cluster.net.linkUp('w1');
      await waitFor('w1 reachable again', async () => (await cluster.httpGet('w1', 9472, '/healthz').catch(() => '')).includes('ok'), 60_000, 200);
      await new Promise((res) => setTimeout(res, 3_000));
      expect(await workflowSnapshot('ucut'), 'the late host changed no workflow row').toEqual(atCompletion);
      expect(await conductorRows('ucut')).toEqual(rows);
      // both hosts took part: conductors and provider workers
      const [w1After, w2Done] = [await workflowsDone('w1'), await workflowsDone('w2')];
      timings['conductor batch: workflows finished by w1 (before the cut) / w2'] = `${w1Done} / ${w2Done}`;
      expect(Math.min(w1Done, w2Done)).toBeGreaterThan(0);
      // each workflow was finished by one of them (w1's late finishes count there, and were refused)
      expect(w1After + w2Done).toBeGreaterThanOrEqual(total);
      const made = [(await callsMade('w1')) - before.w1, (await callsMade('w2')) - before.w2];
      timings['conductor batch: step calls made by w1 / w2'] = made.join(' / ');
      expect(Math.min(...made)).toBeGreaterThan(0);
      expect(made[0]! + made[1]!).toBeGreaterThanOrEqual(stepsTotal);
    } finally {
      cluster.net.linkUp('w1');
      await events.close();
      eventsConnection.disconnect();
      redis.disconnect();
    }
  });
});

// GRPO (issue 16): Q 8 x G 4, 4 iterations, validation at 0, 2 and 3 (8 items): 32 or 40 rollouts an iteration
const GRPO_ARGS = ['train', 'grpo', '--dataset', 'llmrouter', '--pool', 'llmrouter', '--q', '8', '--g', '4', '--iterations', '4', '--val-every', '2', '--val-size', '8',
  '--seed', '7', '--lr', '0.01', '--deadline-ms', '120000'];
const GRPO_ROLLOUTS = 4 * 8 * 4 + 3 * 8;
// few workflows per conductor, so that more rollouts in hand than one conductor takes means both hold some
const GRPO_CONCURRENCY = 4;
const GRPO_CONDUCTOR = { FUGU_CONDUCTOR_LOCK_MS: '3000', FUGU_CONDUCTOR_CONCURRENCY: String(GRPO_CONCURRENCY) };

/** What a GRPO run ends with, its own id taken out: the state, the records less wall-clock fields, every rollout row, the final policy. */
async function grpoOutcome(runId: string) {
  const run = (await getGrpoRun(cluster.db, runId))!;
  const iterations = (await listGrpoIterations(cluster.db, runId)).map((i) => {
    const { wallMs: _w, dispatches: _d, ...record } = i.record;
    return { iteration: i.iteration, from: i.policyCheckpointId.replace(runId, 'RUN'), next: i.nextCheckpointId.replace(runId, 'RUN'), record, valReward: i.valReward };
  });
  const rollouts = (await listGrpoRollouts(cluster.db, runId)).map(({ workflowId: _w, ...r }) => r);
  return {
    status: run.status, iteration: run.iteration, policy: run.policyCheckpointId.replace(runId, 'RUN'), best: run.bestCheckpointId?.replace(runId, 'RUN'), bestValReward: run.bestValReward,
    adam: { step: run.adam.step, m: Array.from(run.adam.m ?? []), v: Array.from(run.adam.v ?? []) },
    theta: Array.from((await getConductorCheckpoint(cluster.db, run.policyCheckpointId))!.theta),
    bestTheta: run.bestCheckpointId ? Array.from((await getConductorCheckpoint(cluster.db, run.bestCheckpointId))!.theta) : null,
    iterations, rollouts,
  };
}

/** The rows the rollouts of a GRPO run left in workflows (key grpo.<run>.<iteration>.<rollout>), their steps and step calls. */
async function grpoWorkflowRows(runId: string) {
  const like = `grpo.${runId}.%`;
  const workflows = (await sql<Record<string, unknown>>`select id, key, status, attempts, finish_reason, final_answer, outcome, reward, logprob, decisions, n_steps, worker_cost, started_at, finished_at
    from workflows where key like ${like} order by id`.execute(cluster.db)).rows;
  const steps = (await sql<Record<string, unknown>>`select s.workflow_id, s.idx, s.worker, s.status, s.answer, s.chat_call_id, s.cost from workflow_steps s join workflows w on w.id = s.workflow_id
    where w.key like ${like} order by s.workflow_id, s.idx`.execute(cluster.db)).rows;
  const calls = (await sql<{ n: number; keys: number }>`select count(*)::int as n, count(distinct c.key)::int as keys from chat_calls c join workflows w on split_part(c.key, '.', 1) = 'wf' || w.id
    where c.key like 'wf%' and w.key like ${like}`.execute(cluster.db)).rows[0]!;
  return { workflows, steps, calls };
}

describe('GRPO across hosts', () => {
  const conductors: FuguProcess[] = [];
  let reference: Awaited<ReturnType<typeof grpoOutcome>>;
  beforeAll(async () => {
    // the reference in process on op (--rollouts local, bit-identical to the cluster path:
    // test/integration/grpo.test.ts) while conductors with few workflows each start on w1 and w2
    const t0 = Date.now();
    const [ref] = await Promise.all([
      cluster.cli('op', [...GRPO_ARGS, '--rollouts', 'local', '--run-id', 'gref']).then((x) => {
        timings['GRPO reference: in process on op (CLI start to end, --rollouts local)'] = Date.now() - t0;
        return x;
      }),
      ...['w1', 'w2'].map(async (host) => conductors.push(await cluster.startApp(host, 'conductor', GRPO_CONDUCTOR))),
    ]);
    expect(ref.code, `fugu train grpo --rollouts local\n${ref.stderr}`).toBe(0);
    reference = await grpoOutcome('gref');
  }, 180_000);
  afterAll(async () => {
    for (const p of conductors) await p.kill9().catch(() => undefined);
  });

  it('a GRPO run whose worker host w1 is cut off mid-rollout and restored after it: the policy, records and rollouts of the uninterrupted run', async () => {
    expect(reference.status).toBe('completed');
    expect(reference.iterations).toHaveLength(4);
    expect(reference.iterations.filter((i) => i.valReward !== null)).toHaveLength(3);
    // the reference learnt something to compare: Adam stepped, the policy moved
    expect(reference.adam.step).toBeGreaterThan(0);
    const start = Array.from((await getConductorCheckpoint(cluster.db, 'gref-start'))!.theta);
    expect(reference.theta).not.toEqual(start);

    const redis = new Redis(cluster.redisUrl, { maxRetriesPerRequest: null });
    const eventsConnection = redis.duplicate();
    const events = new QueueEvents(conductQueue, { connection: eventsConnection, prefix: 'fugu' });
    try {
      await events.waitUntilReady();
      // the conduct jobs taken back from a lost holder: workflow id and when
      const stalled: Array<{ workflowId: number; at: number }> = [];
      events.on('stalled', ({ jobId }) => stalled.push({ workflowId: Number(/^wf(\d+)\./.exec(jobId)?.[1] ?? -1), at: Date.now() }));
      const t0 = Date.now();
      // the coordinator on c1 (what the Job fugu-grpo-coordinator runs, here followed by the CLI)
      const train = cluster.cli('c1', [...GRPO_ARGS, '--rollouts', 'cluster', '--local-conductors', '0', '--local-workers', '0', '--run-id', 'gcut']);
      // iteration >= 1 mid-rollout: more rollouts claimed than one conductor holds (so w1 holds
      // some), and enough still pending that its hands stay full until the cut
      const held = await waitFor('rollouts of iteration >= 1 in both conductors\' hands', async () => {
        const r = await sql<{ it: number; running: number; pending: number }>`select split_part(key, '.', 3)::int as it, count(*) filter (where status = 'running')::int as running,
            count(*) filter (where status = 'pending')::int as pending from workflows where key like 'grpo.gcut.%' and key not like 'grpo.gcut.0.%' group by 1 order by 1 desc limit 1`.execute(cluster.db);
        const x = r.rows[0];
        return x && x.running > GRPO_CONCURRENCY && x.pending >= 2 * GRPO_CONCURRENCY ? x : undefined;
      }, 180_000, 5);
      const cutAt = Date.now();
      cluster.net.linkDown('w1');
      const linkDownAt = Date.now();
      // what w1's conductor had finished when it lost the network, read on the host itself
      const w1AtCut = counter(await cluster.localGet('w1', 9472, '/metrics'), 'fugu_conductor_workflows_total');
      const cut = held.it;
      await waitFor(`iteration ${cut} committed`, async () => ((await getGrpoRun(cluster.db, 'gcut'))?.iteration ?? 0) > cut, 180_000, 20);
      const recoveredAt = Date.now();
      const r = await train;
      const completedAt = Date.now();
      expect(r.code, `fugu train grpo\n${r.stderr}`).toBe(0);

      // the run ends where the uninterrupted one does: policy, Adam, records, every rollout row, the validation best
      expect(await grpoOutcome('gcut')).toEqual(reference);
      // one workflows row per rollout, all done; one step row per (workflow, step), one call row per step key
      const atCompletion = await grpoWorkflowRows('gcut');
      expect(atCompletion.workflows).toHaveLength(GRPO_ROLLOUTS);
      expect(new Set(atCompletion.workflows.map((w) => w.key)).size).toBe(GRPO_ROLLOUTS);
      expect(atCompletion.workflows.every((w) => w.status === 'done')).toBe(true);
      expect(new Set((await listGrpoRollouts(cluster.db, 'gcut')).map((x) => x.workflowId)).size).toBe(GRPO_ROLLOUTS);
      const nSteps = atCompletion.workflows.reduce((a, w) => a + Number(w.n_steps ?? 0), 0);
      expect(atCompletion.steps).toHaveLength(nSteps);
      expect(atCompletion.calls).toEqual({ n: nSteps, keys: nSteps });

      // the cut mattered: conduct jobs w1's conductor held came back (stalled) and w2's finished
      // them, after the cut (the workflows claimed twice); all rollouts of the cut iteration
      const gcutIds = new Set(atCompletion.workflows.map((w) => Number(w.id)));
      const takenBack = stalled.filter((x) => gcutIds.has(x.workflowId));
      expect(takenBack.length, 'conduct jobs held by the cut-off host came back through the stalled-job check').toBeGreaterThan(0);
      // (claimed before the cut and taken back after it; a stall of a host's own under load, before
      // the cut or of a workflow first claimed after it, is allowed: it changes no result)
      // A job taken back is either of a workflow its holder had finished before the link went down
      // (its row written, the job's completion lost with the link: not claimed again, a finished
      // workflow never runs twice) or of one still in flight (claimed again, finished after the cut).
      // Counting the first kind as moved failed a CI run of 0fadc70.
      const takenAfterCut = new Set(takenBack.filter((x) => x.at >= cutAt).map((x) => x.workflowId));
      const takenRows = atCompletion.workflows.filter((w) => takenAfterCut.has(Number(w.id)) && (w.started_at as Date).getTime() < cutAt);
      expect(takenRows.length, 'workflows of jobs taken back after the cut').toBeGreaterThan(0);
      const finishedBy = (w: Record<string, unknown>) => (w.finished_at as Date).getTime();
      expect(takenRows.filter((w) => Number(w.attempts) === 1).every((w) => finishedBy(w) <= linkDownAt), 'a job taken back whose workflow was not claimed again: finished before the link went down').toBe(true);
      const moved = takenRows.filter((w) => Number(w.attempts) > 1);
      expect(moved.every((w) => finishedBy(w) >= cutAt), 'each moved rollout finished after the cut').toBe(true);
      // all of one iteration: the one running at the cut (the run may have gone on past the one
      // seen in both conductors' hands between that poll and the cut)
      const movedIterations = new Set(moved.map((w) => Number(String(w.key).split('.')[2])));
      expect(movedIterations.size, 'the moved rollouts are of one iteration').toBeLessThanOrEqual(1);
      for (const i of movedIterations) expect(i).toBeGreaterThanOrEqual(cut);
      const records = await listGrpoIterations(cluster.db, 'gcut');
      const wall = (i: number) => Number(records.find((x) => x.iteration === i)!.record.wallMs);
      const others = records.map((x) => x.iteration).filter((i) => i !== cut && i !== 0).map(wall).sort((a, b) => a - b);
      timings['GRPO: rollouts (Q 8 x G 4, 4 iterations, 3 x 8 validation)'] = String(GRPO_ROLLOUTS);
      timings['GRPO run on the cluster: wall time (CLI start to completed)'] = completedAt - t0;
      timings['GRPO iteration on the cluster (uncut, median)'] = others[Math.floor(others.length / 2)]!;
      timings[`GRPO, w1 cut in iteration ${cut}: rollouts claimed by w1 + w2 / taken over by w2`] = `${held.running} / ${moved.length}`;
      timings['GRPO, w1 cut: detection (cut -> first stalled job taken back)'] = takenBack[0]!.at - cutAt;
      timings['GRPO, w1 cut: cut -> iteration committed by w2'] = recoveredAt - cutAt;
      timings['GRPO, w1 cut: delay of the cut iteration'] = wall(cut) - others[Math.floor(others.length / 2)]!;
      timings['GRPO, w1 cut: dispatches of the cut iteration'] = String(records.find((x) => x.iteration === cut)!.record.dispatches);
      timings['GRPO, w1 cut: cut -> run completed'] = completedAt - cutAt;

      // w1 comes back after the run completed; its conductor finishes the rollouts it held when it
      // was cut off (late, and refused: a workflow row is finished once), and nothing changes
      const upAt = Date.now();
      cluster.net.linkUp('w1');
      await waitFor('w1 reachable again', async () => (await cluster.httpGet('w1', 9472, '/healthz').catch(() => '')).includes('ok'), 60_000, 200);
      await waitFor('w1\'s late finishes of the rollouts it held', async () => (await workflowsDone('w1')) >= w1AtCut + moved.length, 90_000, 200);
      timings['GRPO, w1 restored: link up -> its late finishes done (refused)'] = Date.now() - upAt;
      await new Promise((res) => setTimeout(res, 1_000));
      expect(await grpoWorkflowRows('gcut'), 'the late host changed no workflow, step or call row').toEqual(atCompletion);
      expect(await grpoOutcome('gcut')).toEqual(reference);
    } finally {
      // a failed assertion above must not leave w1 cut off for the suites after it
      cluster.net.linkUp('w1');
      await events.close();
      eventsConnection.disconnect();
      redis.disconnect();
    }
  });
});

type Outcome = { status: string; state: unknown; gens: unknown[]; theta: number[] };

async function outcome(runId: string): Promise<Outcome> {
  const run = (await getEsRun(cluster.db, runId))!;
  const gens = (await listEsGenerations(cluster.db, runId)).map(({ committedAt: _c, wallMs: _w, dispatches: _d, ...g }) => g);
  return { status: run.status, state: (await getEsState(cluster.db, runId))!.state, gens, theta: Array.from((await getCheckpoint(cluster.db, run.bestCheckpointId!))!.theta) };
}

/** Waits until the ES run has committed `n` generations. */
async function committed(runId: string, n: number): Promise<void> {
  await waitFor(`${runId}: ${n} generations committed`, async () => ((await getEsRun(cluster.db, runId))?.generation ?? 0) >= n, 240_000, 20);
}

let checkpoint: string; // the SFT router trained on the batch

describe('ES across hosts', () => {
  let reference: Outcome;

  beforeAll(async () => {
    await cli(['router', 'train', '--run', 'batch', '--epochs', '8', '--seed', '0']);
    checkpoint = (await listCheckpoints(cluster.db)).find((c) => c.stage === 'sft')!.id;
    for (const host of ['w1', 'w2']) procs.push(await cluster.startApp(host, 'evaluator', ES_EVALUATOR));
  }, 300_000);

  const create = (runId: string) => cli(['train', 'es', '--from', checkpoint, ...ES_ARGS, '--eval-run', 'batch', '--run-id', runId, '--no-wait']);
  const coordinator = async (host: string, runId: string) => {
    const p = await cluster.startApp(host, 'coordinator', { FUGU_ES_RUN: runId, FUGU_ES_POLL_MS: '100' });
    procs.push(p);
    return p;
  };

  /** How much longer generation g of a run took than a typical generation of the reference. */
  const extraMs = async (runId: string, g: number) => {
    const gens = await listEsGenerations(cluster.db, runId);
    return (gens.find((x) => x.generation === g)?.wallMs ?? Number.NaN) - typicalMs;
  };
  let typicalMs = 0;

  it('an uninterrupted reference run, evaluated on both worker hosts', async () => {
    await create('ref');
    const c = await coordinator('c1', 'ref');
    expect(await c.exited).toEqual({ code: 0, signal: null });
    reference = await outcome('ref');
    expect(reference.status).toBe('completed');
    expect(reference.gens).toHaveLength(5);
    // generation 0 also pays the evaluators' first feature computation: the median of the rest
    const walls = (await listEsGenerations(cluster.db, 'ref')).slice(1).map((g) => g.wallMs ?? 0).sort((a, b) => a - b);
    typicalMs = walls[Math.floor(walls.length / 2)]!;
    timings['ES generation wall time (reference, median)'] = typicalMs;
  });

  it('a worker host cut off mid-generation and restored later: the run ends in the reference state', async () => {
    await create('cut');
    const redis = new Redis(cluster.redisUrl, { maxRetriesPerRequest: null });
    const eventsConnection = redis.duplicate();
    const events = new QueueEvents(esEvalQueue, { connection: eventsConnection, prefix: 'fugu' });
    try {
      await events.waitUntilReady();
      const stalled: number[] = [];
      events.on('stalled', () => stalled.push(Date.now()));
      const c = await coordinator('c1', 'cut');
      // generation 2 dispatched and in both evaluators' hands: cut w1 off
      await committed('cut', 2);
      await waitFor('generation 2 jobs in hand', async () => (await redis.llen(queueKeys('fugu', esEvalQueue).active)) >= 6, 60_000, 5);
      const cutAt = Date.now();
      cluster.net.linkDown('w1');
      await committed('cut', 3);
      const recoveredAt = Date.now();
      // the host stays away a while longer, then comes back (its late results must change nothing)
      await new Promise((r) => setTimeout(r, 3_000));
      cluster.net.linkUp('w1');
      expect(await c.exited).toEqual({ code: 0, signal: null });
      expect(stalled.length, 'jobs held by the cut-off host came back through the stalled-job check').toBeGreaterThan(0);
      timings['link cut: detection (cut -> first stalled job taken back)'] = stalled[0]! - cutAt;
      timings['link cut: re-dispatch done (cut -> generation committed)'] = recoveredAt - cutAt;
      timings['link cut: delay of the cut generation'] = await extraMs('cut', 2);
      expect(await outcome('cut')).toEqual(reference);
      // the restored host serves again
      expect(await cluster.httpGet('w1', 9471, '/healthz')).toContain('ok');
    } finally {
      cluster.net.linkUp('w1');
      await events.close();
      eventsConnection.disconnect();
      redis.disconnect();
    }
  });

  it('the coordinator killed on c1 and started on c2 resumes the run', async () => {
    await create('move');
    const first = await coordinator('c1', 'move');
    await committed('move', 2);
    await first.kill9();
    const killedAt = Date.now();
    const second = await coordinator('c2', 'move');
    timings['coordinator move: kill -> ready on c2'] = Date.now() - killedAt;
    await committed('move', 3);
    timings['coordinator move: kill -> next generation committed'] = Date.now() - killedAt;
    expect(await second.exited).toEqual({ code: 0, signal: null });
    expect(await outcome('move')).toEqual(reference);
  });
});

describe('serving across hosts', () => {
  it('a gateway in pool mode wakes a router pool scaled to zero, then routes through it', async () => {
    await cli(['router', 'publish', checkpoint]);
    const gw = await cluster.startApp('gw', 'gateway', { FUGU_GATEWAY_MODE: 'pool', FUGU_GATEWAY_HOST: '0.0.0.0', FUGU_GATEWAY_PORT: '8080', FUGU_GATEWAY_AUTH: 'none', FUGU_GATEWAY_POOL: 'llmrouter' });
    procs.push(gw);
    const question = (gw.ready as { example?: string }).example!;
    expect(question).toBeTruthy();
    const ask = () =>
      fetch(`http://${cluster.net.host('gw').ip}:8080/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'fugu', messages: [{ role: 'user', content: question }] }),
        signal: AbortSignal.timeout(30_000),
      });
    const redis = new Redis(cluster.redisUrl);
    try {
      // no router worker anywhere: every request is answered at once, and one wake job waits
      for (let i = 0; i < 5; i++) {
        const r = await ask();
        expect(r.status).toBe(503);
        expect(((await r.json()) as { error: { code: string } }).error.code).toBe('router_unavailable');
      }
      await waitFor('the wake job', async () => (await redis.llen(queueKeys('fugu', routeQueue).wait)) === 1, 10_000, 20);
      // what KEDA does on that depth: a router worker starts (on w2); it drops the wake job
      const t0 = Date.now();
      procs.push(await cluster.startApp('w2', 'router-worker', { FUGU_ROUTER_EXECUTION_PROVIDER: 'cpu', FUGU_ROUTER_THREADS: '1' }));
      await waitFor('the wake job taken', async () => (await redis.llen(queueKeys('fugu', routeQueue).wait)) === 0, 30_000, 20);
      const r = await waitFor('a routed answer', async () => {
        const res = await ask();
        return res.status === 200 ? res : undefined;
      }, 30_000, 200);
      timings['serving: router worker started -> first routed answer'] = Date.now() - t0;
      const body = (await r.json()) as { model: string };
      expect(r.headers.get('x-fugu-worker')).toBe(body.model);
      const workers = (await getCheckpoint(cluster.db, checkpoint))!.workers.map((w) => w.name);
      expect(workers).toContain(body.model);
    } finally {
      redis.disconnect();
    }
  });
});
