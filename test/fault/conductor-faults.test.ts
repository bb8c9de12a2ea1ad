// Figure 4 of issue 12: a batch of 300 workflows (fixed:moa:3, fixed:chain and llm: workflows whose
// planner is an endpoint on a second, slower OpenAI stub) runs on a provider-worker process and conductor
// process A; once a part is done A is killed with SIGKILL and conductor process B started. Every
// workflow ends done with one row, each with exactly the steps of its parsed workflow, once, and
// one chat_calls row per step; the stubs' counters show no step called twice (steps are chat-call
// jobs on the provider worker, which lives on) and the planner called again only for workflows
// that were in flight at the kill (at most A's concurrency).
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import type { WorkerSpec } from '@fugu/core';
import { savePool } from '@fugu/db';
import { providerCallCounterKey } from '@fugu/calls';
import { startOpenAIStub, type RecordedRequest } from '@fugu/providers/testing';
import { submitWorkflows, waitForWorkflows, type NewWorkflow } from '@fugu/ultra';
import { createEvalEnv, startWorkerProcess, waitFor, type EvalEnv } from '../support/eval-env.ts';
import { startConductorProcess, type ConductorProcess } from '../support/conductor.ts';

const WORKFLOWS = 300;
const KILL_AT = 80;
const CONDUCTOR_CONCURRENCY = 16;
const KEY_ENV = 'FUGU_TEST_CONDUCTOR_FAULT_KEY';
const SECRET = 'sk-test-conductor-fault-0123456789';
const WORKERS = ['gpt-a', 'gpt-b', 'gpt-c'];
/** what the planner writes for every llm: workflow: three steps, a chain with a last step that sees all */
const PLAN = 'First I solve, then check, then combine.\nmodel id = [1, 2, 0]\nsubtasks = ["solve the question", "check the answer of agent 0", "write the final answer"]\naccess list = [[], [0], "all"]';
/** steps per workflow, by conductor spec */
const STEPS: Record<string, number> = { 'fixed:moa:3': 4, 'fixed:chain': 2, 'llm:planner': 3 };

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => {});
});

const messagesOf = (req: RecordedRequest): string => JSON.stringify(req.body?.messages ?? []);

describe('conductor fault injection', () => {
  it('kill -9 of a conductor process mid-batch and another started: every workflow done once with its steps once; only planner calls in flight repeat', async () => {
    // the stubs' counters: step calls by (model, messages) — a re-executed step sends the same
    // request — and planner calls by the question's marker
    const perStep = new Map<string, number>();
    const perPlan = new Map<string, number>();
    const stub = await startOpenAIStub({
      apiKey: SECRET,
      latencyMs: 40,
      defaultReply: (req) => {
        const messages = messagesOf(req);
        const k = `${String(req.body?.model)} ${createHash('sha256').update(messages).digest('hex').slice(0, 16)}`;
        perStep.set(k, (perStep.get(k) ?? 0) + 1);
        return { type: 'text', text: `answer ${k}`, usage: { input: 20, output: 5 } };
      },
    });
    cleanups.push(() => stub.close());
    // the planner: another OpenAI stub, slower, so some of its calls are in flight at the kill
    const planner = await startOpenAIStub({
      apiKey: SECRET,
      latencyMs: 300,
      defaultReply: (req) => {
        const q = /\bQ(\d+)\b/.exec(messagesOf(req))?.[1] ?? '?';
        perPlan.set(q, (perPlan.get(q) ?? 0) + 1);
        return { type: 'text', text: PLAN, usage: { input: 120, output: 40 } };
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

    const worker = await startWorkerProcess(env.config, { [KEY_ENV]: SECRET, FUGU_WORKER_CONCURRENCY: '128', FUGU_WORKER_PROVIDERS: 'openai' });
    cleanups.push(async () => void (await worker.term()));
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
    const doneAtKill = await waitFor('a part of the workflows', async () => { const n = await doneCount(); return n >= KILL_AT ? n : undefined; }, 120_000, 10);
    await a.kill9();
    expect(doneAtKill).toBeLessThan(WORKFLOWS);
    const b = await startConductor();

    const finished = await waitForWorkflows(env.ctx.db, ids, { timeoutMs: 180_000, pollMs: 100 });
    expect(b.child.exitCode).toBeNull();

    // every workflow done, answered, one row per key
    const counts = await sql<{ total: number; keys: number; done: number; answered: number; reclaimed: number }>`
      select count(*)::int as total, count(distinct key)::int as keys, count(*) filter (where status = 'done')::int as done,
             count(*) filter (where finish_reason = 'answered')::int as answered, count(*) filter (where attempts > 1)::int as reclaimed
      from workflows`.execute(env.ctx.db);
    const c = counts.rows[0]!;
    expect(c).toMatchObject({ total: WORKFLOWS, keys: WORKFLOWS, done: WORKFLOWS, answered: WORKFLOWS });
    // B took over workflows A had claimed
    expect(c.reclaimed).toBeGreaterThanOrEqual(1);
    expect(c.reclaimed).toBeLessThanOrEqual(CONDUCTOR_CONCURRENCY);

    // workflow_steps: exactly the parsed workflow's steps, once each, answered
    const steps = await sql<{ workflow_id: string; idx: number; worker: string; status: string; chat_call_id: string }>`
      select workflow_id, idx, worker, status, chat_call_id from workflow_steps order by workflow_id, idx`.execute(env.ctx.db);
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

    // chat_calls: one row per step key and one per planner call, all ok
    const calls = await sql<{ steps: number; step_keys: number; conductors: number; conductor_keys: number; not_ok: number }>`
      select count(*) filter (where key ~ '^wf[0-9]+[.]s[0-9]+$')::int as steps,
             count(distinct key) filter (where key ~ '^wf[0-9]+[.]s[0-9]+$')::int as step_keys,
             count(*) filter (where key ~ '^wf[0-9]+[.]conductor$')::int as conductors,
             count(distinct key) filter (where key ~ '^wf[0-9]+[.]conductor$')::int as conductor_keys,
             count(*) filter (where status <> 'ok')::int as not_ok
      from chat_calls`.execute(env.ctx.db);
    const llmWorkflows = rows.filter((r) => r.conductor === 'llm:planner').length;
    expect(calls.rows[0]).toEqual({ steps: expectedSteps, step_keys: expectedSteps, conductors: llmWorkflows, conductor_keys: llmWorkflows, not_ok: 0 });

    // the stub: every step reached it, none twice; the planner once per llm: workflow, again only for those in flight at the kill
    expect(perStep.size).toBe(expectedSteps);
    const repeatedSteps = [...perStep.values()].reduce((s, n) => s + n - 1, 0);
    expect(perPlan.size).toBe(llmWorkflows);
    const repeatedPlans = [...perPlan.values()].reduce((s, n) => s + n - 1, 0);
    const counter = await env.ctx.redis!.hgetall(providerCallCounterKey(env.config.queuePrefix));
    const started = Object.values(counter).reduce((n, v) => n + Number(v), 0);
    process.stdout.write(
      `conductor kill -9 at ${doneAtKill}/${WORKFLOWS} workflows done: ${c.reclaimed} taken over by B, ${repeatedSteps} repeated step calls, ` +
        `${repeatedPlans} repeated conductor calls (A's concurrency ${CONDUCTOR_CONCURRENCY}); ${started - expectedSteps - llmWorkflows} repeated by the pipelines' counter\n`,
    );
    expect(repeatedSteps).toBe(0);
    expect(repeatedPlans).toBeGreaterThanOrEqual(0);
    expect(repeatedPlans).toBeLessThanOrEqual(Math.min(CONDUCTOR_CONCURRENCY, c.reclaimed));
    expect(stub.requestCount).toBe(expectedSteps);
    expect(planner.requestCount).toBe(llmWorkflows + repeatedPlans);
  });
});
