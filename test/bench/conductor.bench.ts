// npm run bench:conductor — what the Conductor's workflow engine adds to its steps' own latency
// (issue 12, figure 2). Stub OpenAI workers answer after a fixed delay L; a provider-worker process
// runs the steps (chat-call jobs) and conductor processes (`node apps/conductor/src/main.ts`, as
// deployed) run the workflows; this process submits them and reads the rows.
//
// 1. latency: one workflow at a time, R times each, for critical paths c = 1..4 — fixed:single,
//    fixed:chain, and llm: workflows whose planner (an endpoint on a second OpenAI stub that
//    answers at once, so the planner call is part of the overhead) writes chains of c steps. The
//    wall time of a workflow is its row's finished_at - created_at (Postgres' clock: from the
//    insert by submitWorkflows to the final write, no polling of ours in it). Baseline, measured
//    in the same run: the stub's own latency L' through the openai client, called directly.
//    Overhead per level = (measured - c x L') / c, a level being one step of the critical path.
// 2. parallel against sequential: fixed:moa:3 (3 proposers at once, then the aggregator: c = 2),
//    the same 4 steps (same workers, prompts of the same kinds) as an llm: workflow with moa's
//    access lists, and as an llm: chain (c = 4, each step after the one before); the ratio.
// 3. throughput: a batch of N fixed:moa:3 workflows with 1 and with 2 conductor processes (each
//    FUGU_CONDUCTOR_CONCURRENCY, default 32); the provider worker's concurrency (512) is far above
//    the steps in flight (at most 3 x 32 per conductor), so its concurrency is not the bottleneck.
//    Ideal = conductors x concurrency / (2 x L'). Beside it: the most step calls the stub held at
//    once and the CPU seconds per second of the conductors, the provider worker and this process.
// 4. where the time goes: each workflow's wall time split along its critical path into queue,
//    conductor, engine, dispatch, provider and finish (see `breakdown`), medians per shape.
//
// Options (env): BENCH_LATENCY_MS (L, default 200), BENCH_REPEATS (R, default 5), BENCH_SCALE
// (multiplies the batch of 400), FUGU_CONDUCTOR_CONCURRENCY (default 32), FUGU_CONDUCTOR_POLL_MS
// (default 50, the engine's Postgres poll for step answers), FUGU_CONDUCTOR_STEP_EVENTS (default
// true: the steps' completion events wake their workflow, the poll is a 1 s backstop; false: the
// poll alone, as before). Services: FUGU_TEST_REDIS_URL and
// FUGU_TEST_DATABASE_URL (a fresh database is made and dropped, a queue prefix of its own).
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import OpenAI from 'openai';
import { sql } from 'kysely';
import type { WorkerSpec } from '@fugu/core';
import { savePool } from '@fugu/db';
import { startOpenAIStub, type RecordedRequest } from '@fugu/providers/testing';
import { submitWorkflows, waitForWorkflows, type NewWorkflow, type SubmitDeps } from '@fugu/ultra';
import { createEvalEnv, startWorkerProcess } from '../support/eval-env.ts';
import { startConductorProcess, type ConductorProcess } from '../support/conductor.ts';

const L = Number(process.env.BENCH_LATENCY_MS ?? 200);
const R = Number(process.env.BENCH_REPEATS ?? 5);
const BATCH = Math.round(400 * Number(process.env.BENCH_SCALE ?? 1));
const CONCURRENCY = Number(process.env.FUGU_CONDUCTOR_CONCURRENCY ?? 32);
const POLL_MS = Number(process.env.FUGU_CONDUCTOR_POLL_MS ?? 50);
const KEY_ENV = 'FUGU_BENCH_CONDUCTOR_KEY';
const SECRET = 'sk-bench-conductor-0123456789';
const WORKERS = ['w-a', 'w-b', 'w-c'];
const log = (s: string) => process.stderr.write(`bench:conductor: ${s}\n`);
const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2; };

// the planner's completions, by a marker in the question
const list = (xs: unknown[]) => `[${xs.map((x) => JSON.stringify(x)).join(', ')}]`;
const plans: Record<string, string> = {
  ...Object.fromEntries([1, 2, 3, 4].map((c) => [
    `chain${c}`,
    `model id = ${list(Array.from({ length: c }, (_, i) => i % 3))}\nsubtasks = ${list(Array.from({ length: c }, (_, i) => (i === 0 ? 'solve the question' : `check and improve the answer of agent ${i - 1}`)))}\naccess list = ${list(Array.from({ length: c }, (_, i) => (i === 0 ? [] : [i - 1])))}`,
  ])),
  // moa:3's steps: three proposers, the first worker aggregates
  moa: `model id = [0, 1, 2, 0]\nsubtasks = ["propose an answer", "propose an answer", "propose an answer", "combine the proposals into one answer"]\naccess list = [[], [], [], "all"]`,
  // the same four steps, each after the one before
  'moa-chain': `model id = [0, 1, 2, 0]\nsubtasks = ["propose an answer", "propose an answer", "propose an answer", "combine the proposals into one answer"]\naccess list = [[], [0], [1], [2]]`,
};
const lastUser = (req: RecordedRequest): string => JSON.stringify((req.body?.messages ?? []).at(-1) ?? '');

const workersStub = await startOpenAIStub({
  apiKey: SECRET,
  latencyMs: L,
  defaultReply: (req) => {
    arrivals.push(req.at);
    return { type: 'text', text: 'A short answer from the stub worker.', usage: { input: 40, output: 10 } };
  },
});
const plannerStub = await startOpenAIStub({
  apiKey: SECRET,
  defaultReply: (req) => {
    const m = /\[plan:([a-z0-9-]+)\]/.exec(lastUser(req))?.[1];
    return { type: 'text', text: (m && plans[m]) ?? 'no plan', usage: { input: 300, output: 60 } };
  },
});
const env = await createEvalEnv({ overrides: { 'conductor.pollMs': POLL_MS } });
env.config.conductor.endpoints = [{ name: 'planner', baseUrl: plannerStub.baseURL, model: 'planner-model', apiKeyEnv: KEY_ENV, prices: { inputPerMTok: '0.1', outputPerMTok: '0.2' } }];
const workers: WorkerSpec[] = WORKERS.map((name) => ({ name, provider: 'openai', model: `${name}-model`, baseUrl: workersStub.baseURL, apiKeyEnv: KEY_ENV, settings: {}, prices: { inputPerMTok: '0.1', outputPerMTok: '0.2' }, description: 'a general model' }));
const { poolId } = await savePool(env.ctx.db, { name: 'bench-conductor', workers }, 'bench-conductor-pool');
const deps: SubmitDeps = { db: env.ctx.db, queue: (n) => env.ctx.queue(n), endpoints: ['planner'] };
const keyEnv = { [KEY_ENV]: SECRET };
const STEP_EVENTS = process.env.FUGU_CONDUCTOR_STEP_EVENTS ?? 'true';
const conductorVars = { ...keyEnv, FUGU_CONDUCTOR_CONCURRENCY: String(CONCURRENCY), FUGU_CONDUCTOR_POLL_MS: String(POLL_MS), FUGU_CONDUCTOR_STEP_EVENTS: STEP_EVENTS };

const procs: Array<{ term(): Promise<unknown> }> = [];
let seq = 0;
let failures = 0;
const row = (conductor: string, plan?: string): NewWorkflow => {
  const n = seq++;
  // a question of its own: no response-cache hit between workflows
  return { key: `bench.${n}`, poolId, question: `Question ${n}${plan ? ` [plan:${plan}]` : ''}: what is ${n} times ${n + 7}?`, conductor, seed: n, options: { maxSteps: 5, ranking: WORKERS } };
};
const runRows = async (rows: NewWorkflow[], pollMs = 20) => {
  const { ids } = await submitWorkflows(deps, rows);
  const done = await waitForWorkflows(env.ctx.db, ids, { timeoutMs: 600_000, pollMs });
  const bad = done.filter((w) => w.status !== 'done' || w.finishReason !== 'answered');
  if (bad.length > 0) {
    failures += bad.length;
    log(`${bad.length} workflows not answered, e.g. ${JSON.stringify({ conductor: bad[0]!.conductor, finishReason: bad[0]!.finishReason, error: bad[0]!.error, parseError: bad[0]!.parseError })}`);
  }
  return done;
};
/** CPU seconds (user + system) a process has used so far */
function cpuSecs(pid: number | undefined): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return NaN;
  }
}
/** arrival times of the step calls at the workers' stub; each is answered L ms later */
let arrivals: number[] = [];
/** the most step calls the stub held at once: the most arrivals in any window of L ms */
function inFlightMax(): number {
  const a = [...arrivals].sort((x, y) => x - y);
  let best = 0;
  for (let i = 0, j = 0; i < a.length; i++) {
    while (a[i]! - a[j]! >= L) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}
/**
 * Where a workflow's wall time goes, along its critical path (the parts add up to finished_at -
 * created_at, all on Postgres' clock): queue (insert -> a conductor's claim), conductor (claim ->
 * the first steps' requests stored: the writer, llm: its planner call, parse), engine (a level's
 * inputs answered -> the next level's requests stored: the conductor's poll and its writes),
 * dispatch (request stored -> the call's row written, less the call itself: the chat-call job's
 * enqueue and pickup, the worker's reads before the call (the request, the response cache), and
 * whatever the worker waits for between the answer and its row's insert), provider (the call
 * itself: L plus the HTTP round trip), finish (the last answer -> the workflow row's final write:
 * verifier, reward, step rows). A row's time is its insert's (created_at = now()).
 */
type Parts = { queue: number; conductor: number; engine: number; dispatch: number; provider: number; finish: number };
const PARTS: Array<keyof Parts> = ['queue', 'conductor', 'engine', 'dispatch', 'provider', 'finish'];
async function breakdown(ids: number[]): Promise<Parts> {
  const r = await sql<{ workflow_id: string; idx: number; sees: number[]; req: Date; done: Date; latency_ms: number; created: Date; started: Date; finished: Date }>`
    select s.workflow_id, s.idx, s.sees, q.created_at as req, c.created_at as done, c.latency_ms, w.created_at as created, w.started_at as started, w.finished_at as finished
    from workflow_steps s join workflows w on w.id = s.workflow_id join chat_requests q on q.id = s.chat_call_id join chat_calls c on c.key = s.chat_call_id
    where s.workflow_id = any(${ids.map(String)}::bigint[]) order by s.workflow_id, s.idx`.execute(env.ctx.db);
  const by = new Map<string, typeof r.rows>();
  for (const x of r.rows) by.set(x.workflow_id, [...(by.get(x.workflow_id) ?? []), x]);
  const per: Parts[] = [];
  for (const steps of by.values()) {
    const t = (d: Date) => d.getTime();
    const w = steps[0]!;
    const p: Parts = { queue: t(w.started) - t(w.created), conductor: 0, engine: 0, dispatch: 0, provider: 0, finish: 0 };
    // the critical path, back from the last step: each time through the input answered last
    let s = steps.at(-1)!;
    p.finish = t(w.finished) - t(s.done);
    for (;;) {
      p.provider += s.latency_ms;
      p.dispatch += t(s.done) - s.latency_ms - t(s.req);
      const prev = s.sees.map((j) => steps[j]!).sort((a, b) => t(b.done) - t(a.done))[0];
      if (!prev) {
        p.conductor = t(s.req) - t(w.started);
        break;
      }
      p.engine += t(s.req) - t(prev.done);
      s = prev;
    }
    per.push(p);
  }
  return Object.fromEntries(PARTS.map((k) => [k, median(per.map((x) => x[k]))])) as Parts;
}
const partsLine = (name: string, p: Parts, wall: number) => `${name.padEnd(24)} ${PARTS.map((k) => p[k].toFixed(0).padStart(k.length + 1)).join('')} ${wall.toFixed(0).padStart(6)}`;
const wallMs = (w: { createdAt: Date; finishedAt: Date | null }) => w.finishedAt!.getTime() - w.createdAt.getTime();

try {
  const worker = await startWorkerProcess(env.config, { ...keyEnv, FUGU_WORKER_CONCURRENCY: '512', FUGU_WORKER_PROVIDERS: 'openai' });
  procs.push(worker);
  const first: ConductorProcess = await startConductorProcess(env.config, conductorVars);
  procs.push(first);
  const load0 = loadavg()[0]!;
  log(`L = ${L} ms, ${R} runs per shape, conductor concurrency ${CONCURRENCY}, poll ${POLL_MS} ms; warming up`);
  await runRows([row('fixed:moa:3'), row('fixed:chain'), row('llm:planner', 'chain2')]);

  // the baseline: the stub's own latency, called directly with the openai client
  const direct = new OpenAI({ apiKey: SECRET, baseURL: workersStub.baseURL, maxRetries: 0 });
  const directMs: number[] = [];
  for (let i = 0; i < 10; i++) {
    const t = performance.now();
    await direct.chat.completions.create({ model: 'w-a-model', messages: [{ role: 'user', content: `direct ${i}` }] });
    directMs.push(performance.now() - t);
  }
  const Lm = median(directMs);
  const stepCallsBefore = workersStub.requestCount;

  // 1 + 2: one workflow at a time
  type Shape = { name: string; conductor: string; plan?: string; c: number; steps: number };
  const shapes: Shape[] = [
    { name: 'fixed:single', conductor: `fixed:single:${WORKERS[0]}`, c: 1, steps: 1 },
    { name: 'fixed:chain', conductor: 'fixed:chain', c: 2, steps: 2 },
    ...[1, 2, 3, 4].map((c) => ({ name: `llm: chain of ${c}`, conductor: 'llm:planner', plan: `chain${c}`, c, steps: c })),
    { name: 'fixed:moa:3', conductor: 'fixed:moa:3', c: 2, steps: 4 },
    { name: 'llm: moa:3 steps', conductor: 'llm:planner', plan: 'moa', c: 2, steps: 4 },
    { name: 'llm: same 4 in a chain', conductor: 'llm:planner', plan: 'moa-chain', c: 4, steps: 4 },
  ];
  const measured = new Map<string, number>();
  let stepCalls = 0;
  const lines: string[] = [];
  const partLines: string[] = [];
  for (const s of shapes) {
    const times: number[] = [];
    const shapeIds: number[] = [];
    for (let i = 0; i < R; i++) {
      const [w] = await runRows([row(s.conductor, s.plan)]);
      shapeIds.push(w!.id);
      if (w!.criticalPath !== s.c || w!.nSteps !== s.steps) throw new Error(`${s.name}: expected c = ${s.c}, ${s.steps} steps; the row has ${w!.criticalPath}, ${w!.nSteps}`);
      times.push(wallMs(w!));
      stepCalls += s.steps;
    }
    const m = median(times);
    measured.set(s.name, m);
    partLines.push(partsLine(s.name, await breakdown(shapeIds), m));
    const over = m - s.c * Lm;
    lines.push(
      `${s.name.padEnd(24)} ${String(s.c).padStart(2)} ${String(s.steps).padStart(6)} ${(s.c * Lm).toFixed(0).padStart(8)} ${m.toFixed(0).padStart(9)} ${Math.min(...times).toFixed(0).padStart(6)} ${Math.max(...times).toFixed(0).padStart(6)} ` +
        `${over.toFixed(0).padStart(9)} ${(over / s.c).toFixed(1).padStart(10)}`,
    );
    log(lines.at(-1)!);
  }
  if (workersStub.requestCount - stepCallsBefore !== stepCalls) throw new Error(`the workers' stub answered ${workersStub.requestCount - stepCallsBefore} step calls, expected ${stepCalls}`);

  // 3: throughput with 1 and 2 conductor processes
  const throughput: string[] = [];
  for (const n of [1, 2]) {
    if (n === 2) procs.push(await startConductorProcess(env.config, conductorVars));
    const rows = Array.from({ length: BATCH }, () => row('fixed:moa:3'));
    const conductors = procs.slice(1) as ConductorProcess[];
    const cpu0 = [cpuSecs(worker.child.pid), ...conductors.map((c) => cpuSecs(c.child.pid)), process.cpuUsage()];
    arrivals = [];
    const done = await runRows(rows, 200);
    // from the first insert to the last final write (Postgres' clock; our polling is not in it)
    const secs = (Math.max(...done.map((w) => w.finishedAt!.getTime())) - Math.min(...done.map((w) => w.createdAt.getTime()))) / 1000;
    const own = process.cpuUsage(cpu0.at(-1) as NodeJS.CpuUsage);
    const cpuWorker = cpuSecs(worker.child.pid) - (cpu0[0] as number);
    const cpuConductors = conductors.reduce((a, c, i) => a + cpuSecs(c.child.pid) - (cpu0[i + 1] as number), 0);
    const cpuHere = (own.user + own.system) / 1e6;
    const ideal = (n * CONCURRENCY) / ((2 * Lm) / 1000);
    throughput.push(
      `${String(n).padStart(10)} ${String(BATCH).padStart(9)} ${secs.toFixed(2).padStart(8)} ${(BATCH / secs).toFixed(1).padStart(10)} ${ideal.toFixed(0).padStart(8)} ${((100 * BATCH) / secs / ideal).toFixed(0).padStart(6)}% ` +
        `${median(done.map(wallMs)).toFixed(0).padStart(12)} ${String(inFlightMax()).padStart(10)} ${(cpuConductors / secs).toFixed(2).padStart(10)} ${(cpuWorker / secs).toFixed(2).padStart(9)} ${(cpuHere / secs).toFixed(2).padStart(9)}`,
    );
    log(throughput.at(-1)!);
    partLines.push(partsLine(`batch, ${n} conductor${n > 1 ? 's' : ''}`, await breakdown(done.map((w) => w.id)), median(done.map(wallMs))));
  }
  const ratio = measured.get('llm: same 4 in a chain')! / measured.get('fixed:moa:3')!;
  const stepsRows = await sql<{ n: number }>`select count(*)::int as n from workflow_steps`.execute(env.ctx.db);

  process.stdout.write(
    `\nconductor: workflow wall time over stub workers answering after L = ${L} ms (measured directly: L' = ${Lm.toFixed(1)} ms); ` +
      `median of ${R} runs, one workflow at a time; conductor poll ${POLL_MS} ms, step events ${STEP_EVENTS}\n` +
      `shape                     c  steps   c x L'  measured    min    max  overhead  per level\n` +
      lines.join('\n') +
      `\n\nfixed:moa:3 (c = 2) ${measured.get('fixed:moa:3')!.toFixed(0)} ms against the same 4 steps one after another ${measured.get('llm: same 4 in a chain')!.toFixed(0)} ms: ${ratio.toFixed(2)}x\n` +
      `\nthroughput: ${BATCH} fixed:moa:3 workflows, conductor concurrency ${CONCURRENCY}, provider worker concurrency 512 (steps in flight <= 3 x ${CONCURRENCY} per conductor)\n` +
      `conductors  workflows     secs  wf per s    ideal  of ideal  p50 wall ms  max steps  conductor  provider  submitter\n` +
      `                                                                          in flight  CPU/s      worker    CPU/s\n` +
      throughput.join('\n') +
      `\n\nwhere the time goes (ms, medians over the workflows; the parts along the critical path add up to the wall time):\n` +
      `shape                   ${PARTS.map((k) => ` ${k}`).join('')}   wall\n` +
      partLines.join('\n') +
      `\n\nmachine: ${cpus().length} cores (${cpus()[0]?.model ?? '?'}), load average ${load0.toFixed(1)} at the start, ${loadavg()[0]!.toFixed(1)} at the end` +
      `\n${stepsRows.rows[0]!.n} step rows; workflows not answered: ${failures}\n`,
  );
} finally {
  for (const p of procs.reverse()) await p.term().catch(() => {});
  await workersStub.close();
  await plannerStub.close();
  await env.cleanup();
}
process.exit(failures === 0 ? 0 : 1);
