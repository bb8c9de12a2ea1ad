// Figure 4 of issue 12, with the provider worker killed too: a batch of 300 workflows
// (fixed:moa:3, fixed:chain and llm: workflows whose planner is an endpoint on a second, slower
// OpenAI stub) runs on provider-worker process W1 and conductor process A. Once a part is done A is
// killed with SIGKILL and conductor process B started; later, mid-batch, W1 is killed with SIGKILL
// and provider worker W2 started. Every workflow ends done with one row, with exactly the steps of
// its parsed workflow, once, and one chat_calls row per step id. The stubs keep their own count of
// the requests they served per chat-call id (steps: by the stored request of the id, planner: by
// the question), and number their answers: every id was served, every chat_calls row holds the
// stub's last answer for its id, and an id was served again only when it was in flight at a kill
// (a step: its chat-call job active on W1; a planner call: its workflow active on A and re-claimed
// by B), no more often than those in flight; the same bound holds for the pipelines' counter.
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import type { WorkerSpec } from '@fugu/core';
import { savePool } from '@fugu/db';
import { conductQueue, providerCallQueue } from '@fugu/queue';
import { providerCallCounterKey } from '@fugu/calls';
import { startOpenAIStub, type RecordedRequest } from '@fugu/providers/testing';
import { submitWorkflows, waitForWorkflows, type NewWorkflow } from '@fugu/ultra';
import { createEvalEnv, startWorkerProcess, waitFor, type EvalEnv, type WorkerProcess } from '../support/eval-env.ts';
import { startConductorProcess, type ConductorProcess } from '../support/conductor.ts';

const WORKFLOWS = 300;
/** workflows done when conductor A is killed */
const KILL_CONDUCTOR_AT = 80;
/** workflows done when provider worker W1 is killed (once at least KILL_WORKER_IN_FLIGHT chat-call jobs are active) */
const KILL_WORKER_AT = 160;
const KILL_WORKER_IN_FLIGHT = 4;
const CONDUCTOR_CONCURRENCY = 16;
const KEY_ENV = 'FUGU_TEST_CONDUCTOR_FAULT_KEY';
const SECRET = 'sk-test-conductor-fault-0123456789';
const WORKERS = ['gpt-a', 'gpt-b', 'gpt-c'];
/** what the planner writes for every llm: workflow: three steps, a chain with a last step that sees all */
const plan = (reply: number): string =>
  `Plan reply ${reply}: first I solve, then check, then combine.\nmodel id = [1, 2, 0]\nsubtasks = ["solve the question", "check the answer of agent 0", "write the final answer"]\naccess list = [[], [0], "all"]`;
/** steps per workflow, by conductor spec */
const STEPS: Record<string, number> = { 'fixed:moa:3': 4, 'fixed:chain': 2, 'llm:planner': 3 };

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => {});
});

const messagesOf = (req: RecordedRequest): string => JSON.stringify(req.body?.messages ?? []);
type Message = { role: string; content: string | Array<{ type: string; text?: string }> };
/** a request's identity as a stub sees it and as chat_requests stores it: the model and the messages' roles and texts */
const requestKey = (model: string, messages: readonly Message[]): string =>
  `${model}\n${JSON.stringify(messages.map((m) => [m.role, typeof m.content === 'string' ? m.content : m.content.map((p) => p.text ?? '').join('')]))}`;
/** what a stub served for one id: how often, and its numbered answers in order */
type Served = { n: number; answers: string[] };
const serve = (m: Map<string, Served>, k: string, answer: (n: number) => string): string => {
  const s = m.get(k) ?? { n: 0, answers: [] };
  s.n++;
  s.answers.push(answer(s.n));
  m.set(k, s);
  return s.answers.at(-1)!;
};

describe('conductor fault injection', () => {
  it('kill -9 of a conductor process and of the provider worker mid-batch, others started: every workflow done once, one chat_calls row per step with the stub\'s answer; only calls in flight at a kill are sent again', async () => {
    // the stubs' own records: step requests by (model, messages), planner requests by the
    // question's marker; every answer numbered, so a row shows which send it holds
    const perStep = new Map<string, Served>();
    const perPlan = new Map<string, Served>();
    const stub = await startOpenAIStub({
      apiKey: SECRET,
      latencyMs: 40,
      defaultReply: (req) => {
        const k = requestKey(String(req.body?.model), (req.body?.messages ?? []) as Message[]);
        const h = createHash('sha256').update(k).digest('hex').slice(0, 16);
        return { type: 'text', text: serve(perStep, k, (n) => `answer ${h} #${n}`), usage: { input: 20, output: 5 } };
      },
    });
    cleanups.push(() => stub.close());
    // the planner: another OpenAI stub, slower, so some of its calls are in flight at the kill
    const planner = await startOpenAIStub({
      apiKey: SECRET,
      latencyMs: 300,
      defaultReply: (req) => {
        const q = /\bQ(\d+)\b/.exec(messagesOf(req))?.[1] ?? '?';
        return { type: 'text', text: serve(perPlan, q, plan), usage: { input: 120, output: 40 } };
      },
    });
    cleanups.push(() => planner.close());
    const env: EvalEnv = await createEvalEnv({ overrides: { 'worker.lockDurationMs': 2000, 'conductor.pollMs': 20 } });
    cleanups.push(() => env.cleanup());
    env.config.conductor.endpoints = [{ name: 'planner', baseUrl: planner.baseURL, model: 'planner-model', apiKeyEnv: KEY_ENV, prices: { inputPerMTok: '1', outputPerMTok: '2' } }];
    const workers: WorkerSpec[] = WORKERS.map((name) => ({
      name, provider: 'openai', model: `${name}-model`, baseUrl: stub.baseURL, apiKeyEnv: KEY_ENV, settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' }, description: `a general model (${name})`,
    }));
    const { poolId } = await savePool(env.ctx.db, { name: 'fault-live', workers }, 'conductor-fault-pool');

    // a short lock: the jobs a killed worker held are taken back by the next one within seconds
    const workerVars = { [KEY_ENV]: SECRET, FUGU_WORKER_CONCURRENCY: '128', FUGU_WORKER_LOCK_MS: '2000', FUGU_WORKER_PROVIDERS: 'openai' };
    const startWorker = async (): Promise<WorkerProcess> => {
      const w = await startWorkerProcess(env.config, workerVars);
      cleanups.push(async () => void (await w.term()));
      return w;
    };
    const w1 = await startWorker();
    const conductorVars = { [KEY_ENV]: SECRET, FUGU_CONDUCTOR_CONCURRENCY: String(CONDUCTOR_CONCURRENCY), FUGU_CONDUCTOR_LOCK_MS: '2000', FUGU_CONDUCTOR_POLL_MS: '20' };
    const startConductor = async (): Promise<ConductorProcess> => {
      const c = await startConductorProcess(env.config, conductorVars);
      cleanups.push(async () => void (await c.term()));
      return c;
    };
    const a = await startConductor();

    // mostly fixed topologies, every fifth an llm: workflow, interleaved so some planner calls are in flight at the kill
    const specs = ['fixed:moa:3', 'fixed:chain', 'fixed:moa:3', 'fixed:chain', 'llm:planner'];
    const rows: NewWorkflow[] = Array.from({ length: WORKFLOWS }, (_, i) => ({
      key: `fault.${i}`, poolId, question: `Q${i}: what is ${i} + ${i}?`, conductor: specs[i % specs.length]!, seed: i, options: { maxSteps: 5, ranking: WORKERS },
    }));
    const { ids, enqueued } = await submitWorkflows({ db: env.ctx.db, queue: (n) => env.ctx.queue(n), endpoints: ['planner'] }, rows);
    expect(enqueued).toBe(WORKFLOWS);

    const doneCount = async () => (await sql<{ n: number }>`select count(*)::int as n from workflows where status = 'done'`.execute(env.ctx.db)).rows[0]!.n;
    // the jobs a killed process held: still active (no other process on that queue runs the stalled check yet)
    const activeIds = async (queue: string) => new Set((await env.ctx.queue(queue).getJobs(['active'])).map((j) => j.id!));

    // 1. conductor A killed; what it held is in flight; B started
    const doneAtConductorKill = await waitFor('a part of the workflows', async () => { const n = await doneCount(); return n >= KILL_CONDUCTOR_AT ? n : undefined; }, 120_000, 10);
    await a.kill9();
    const conductsInFlight = await activeIds(conductQueue);
    expect(doneAtConductorKill).toBeLessThan(WORKFLOWS);
    expect(conductsInFlight.size).toBeGreaterThanOrEqual(1);
    expect(conductsInFlight.size).toBeLessThanOrEqual(CONDUCTOR_CONCURRENCY);
    const b = await startConductor();

    // 2. later, with chat-call jobs active, provider worker W1 killed; what it held is in flight; W2 started
    const stepQueue = providerCallQueue('openai');
    const doneAtWorkerKill = await waitFor('more workflows, with steps in flight', async () => {
      const n = await doneCount();
      return n >= KILL_WORKER_AT && (await env.ctx.queue(stepQueue).getActiveCount()) >= KILL_WORKER_IN_FLIGHT ? n : undefined;
    }, 120_000, 10);
    await w1.kill9();
    const stepsInFlight = await activeIds(stepQueue);
    expect(doneAtWorkerKill).toBeLessThan(WORKFLOWS);
    expect(stepsInFlight.size).toBeGreaterThanOrEqual(1);
    const w2 = await startWorker();

    const finished = await waitForWorkflows(env.ctx.db, ids, { timeoutMs: 180_000, pollMs: 100 });
    expect(b.child.exitCode).toBeNull();
    expect(w2.child.exitCode).toBeNull();

    // every workflow done, answered, one row per key
    const wf = await sql<{ id: string; key: string; status: string; finish_reason: string | null; attempts: number }>`
      select id, key, status, finish_reason, attempts from workflows`.execute(env.ctx.db);
    expect(wf.rows).toHaveLength(WORKFLOWS);
    expect(new Set(wf.rows.map((r) => r.key))).toEqual(new Set(rows.map((r) => r.key)));
    for (const r of wf.rows) expect([r.key, r.status, r.finish_reason]).toEqual([r.key, 'done', 'answered']);
    // B took over workflows, only ones A held at its kill
    const reclaimed = wf.rows.filter((r) => r.attempts > 1);
    expect(reclaimed.length).toBeGreaterThanOrEqual(1);
    for (const r of reclaimed) expect([...conductsInFlight], `workflow ${r.key} (attempts ${r.attempts})`).toContain(`wf${r.id}`);

    // workflow_steps: exactly the parsed workflow's steps, once each, answered
    const steps = await sql<{ workflow_id: string; idx: number; worker: string; status: string; chat_call_id: string; answer: string | null }>`
      select workflow_id, idx, worker, status, chat_call_id, answer from workflow_steps order by workflow_id, idx`.execute(env.ctx.db);
    const byWorkflow = new Map<number, typeof steps.rows>();
    for (const s of steps.rows) {
      const k = Number(s.workflow_id);
      byWorkflow.set(k, [...(byWorkflow.get(k) ?? []), s]);
    }
    const expectedSteps = rows.reduce((n, r) => n + STEPS[r.conductor]!, 0);
    expect(steps.rows).toHaveLength(expectedSteps);
    finished.forEach((w, i) => {
      const want = STEPS[rows[i]!.conductor]!;
      expect(w.nSteps).toBe(want);
      expect(w.steps).toHaveLength(want);
      const got = byWorkflow.get(w.id) ?? [];
      expect(got.map((s) => [s.idx, s.worker, s.status, s.chat_call_id])).toEqual(w.steps!.map((s, j) => [j, s.name, 'ok', `wf${w.id}.s${j}`]));
      expect(w.finalAnswer).toMatch(/^answer /);
    });

    // chat_calls: one row per step id and one per planner call, all ok
    const callRows = (await sql<{ key: string; status: string; text: string | null }>`
      select key, status, response->>'text' as text from chat_calls`.execute(env.ctx.db)).rows;
    const callOf = new Map(callRows.map((r) => [r.key, r]));
    expect(callOf.size).toBe(callRows.length);
    for (const r of callRows) expect([r.key, r.status]).toEqual([r.key, 'ok']);
    const stepIds = steps.rows.map((s) => s.chat_call_id);
    const llmIds = finished.filter((_, i) => rows[i]!.conductor === 'llm:planner').map((w) => `wf${w.id}.conductor`);
    expect(new Set(callRows.map((r) => r.key))).toEqual(new Set([...stepIds, ...llmIds]));

    // steps against the stub's own record: each step id's stored request was served (the ids and
    // the stub's requests match one to one), its row holds the stub's last answer (and so does its
    // step), and it was served again only if its job was active on W1 at the kill
    const requests = await sql<{ id: string; model: string; request: { messages: Message[] } }>`
      select r.id, w.model, r.request from chat_requests r join workers w on w.id = r.worker_id where r.id ~ '^wf[0-9]+[.]s[0-9]+$'`.execute(env.ctx.db);
    const keyOfStep = new Map(requests.rows.map((r) => [r.id, requestKey(r.model, r.request.messages)]));
    expect(new Set(keyOfStep.keys())).toEqual(new Set(stepIds));
    expect(new Set(keyOfStep.values())).toEqual(new Set(perStep.keys()));
    expect(perStep.size).toBe(expectedSteps);
    let stepsResent = 0;
    for (const s of steps.rows) {
      const served = perStep.get(keyOfStep.get(s.chat_call_id)!)!;
      expect(callOf.get(s.chat_call_id)!.text, s.chat_call_id).toBe(served.answers.at(-1));
      expect(s.answer, s.chat_call_id).toBe(served.answers.at(-1));
      if (served.n > 1) {
        expect([...stepsInFlight], `${s.chat_call_id} served ${served.n} times`).toContain(s.chat_call_id);
        stepsResent += served.n - 1;
      }
    }
    expect(stepsResent).toBeLessThanOrEqual(stepsInFlight.size);

    // planner calls against the planner stub's record: one question per llm: workflow, its row the
    // last plan served, served again only for a workflow B re-claimed (at most once per re-claim)
    expect(new Set(perPlan.keys())).toEqual(new Set(rows.flatMap((r, i) => (r.conductor === 'llm:planner' ? [String(i)] : []))));
    const attemptsOf = new Map(wf.rows.map((r) => [r.key, r.attempts]));
    let plansResent = 0;
    finished.forEach((w, i) => {
      if (rows[i]!.conductor !== 'llm:planner') return;
      const served = perPlan.get(String(i))!;
      expect(callOf.get(`wf${w.id}.conductor`)!.text, rows[i]!.key).toBe(served.answers.at(-1));
      expect(served.n, rows[i]!.key).toBeLessThanOrEqual(attemptsOf.get(rows[i]!.key)!);
      plansResent += served.n - 1;
    });
    const reclaimedLlm = reclaimed.filter((r) => rows[Number(r.key.split('.')[1])]!.conductor === 'llm:planner').length;

    // the pipelines' counter (provider calls started, counted before each call): re-sent only what was in flight
    const counter = await env.ctx.redis!.hgetall(providerCallCounterKey(env.config.queuePrefix));
    const started = Object.values(counter).reduce((n, v) => n + Number(v), 0);
    const pipelineResent = started - expectedSteps - llmIds.length;
    process.stdout.write(
      `conductor kill -9 at ${doneAtConductorKill}/${WORKFLOWS} workflows done: ${conductsInFlight.size} conduct jobs in flight, ${reclaimed.length} taken over by B ` +
        `(${reclaimedLlm} llm:), ${plansResent} planner calls re-sent; provider worker kill -9 at ${doneAtWorkerKill}/${WORKFLOWS}: ${stepsInFlight.size} chat-call jobs in flight, ` +
        `${stepsResent} step calls re-sent to the stub; ${pipelineResent} re-sent by the pipelines' counter (bound ${stepsInFlight.size + reclaimedLlm})\n`,
    );
    expect(pipelineResent).toBeLessThanOrEqual(stepsInFlight.size + reclaimedLlm);
  });
});
