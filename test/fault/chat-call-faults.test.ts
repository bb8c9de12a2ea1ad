// Figure 4 of issue 11: a coordinator process enqueues 2,000 chat-call jobs and waits; the provider
// worker process is killed with SIGKILL mid-way and another started. Every job is answered, with
// exactly one row each, and the provider is paid twice for exactly the calls that were in flight
// at the kill with nothing of their answer kept: the test reads, once the killed worker is gone,
// which steps had reached the stub, which had their row and which their cached answer, and
// predicts from that alone which steps the stub sees twice and which rows the cache answers.
import { afterEach, describe, expect, it } from 'vitest';
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { serviceEnv } from '@fugu/config';
import { providerCallCounterKey } from '@fugu/calls';
import { startOpenAIStub } from '@fugu/providers/testing';
import { watchApp } from '../support/app-process.ts';
import { createEvalEnv, startWorkerProcess, waitFor, type EvalEnv, type WorkerProcess } from '../support/eval-env.ts';

const JOBS = 2000;
const CONCURRENCY = 32;
const LINGER_MS = 200;
const KEY_ENV = 'FUGU_TEST_CHAT_FAULT_KEY';
const SECRET = 'sk-test-chat-fault-0123456789';
const coordinatorMain = fileURLToPath(new URL('./chat-coordinator.ts', import.meta.url));

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => {});
});

describe('chat-call fault injection', () => {
  it('kill -9 of a provider worker while a coordinator process waits on 2,000 chat calls: all answered once, paid twice exactly for the calls in flight with no answer kept', async () => {
    const stepOf = (rawBody: string): string => /Step (\d+)/.exec(rawBody)?.[1] ?? '?';
    const stub = await startOpenAIStub({
      latencyMs: 5,
      defaultReply: (req) => ({ type: 'text', text: `answer ${stepOf(req.rawBody)}`, usage: { input: 7, output: 2 } }),
    });
    cleanups.push(() => stub.close());
    // requests the stub received, per step
    const sentPerStep = (): Map<string, number> => {
      const m = new Map<string, number>();
      for (const r of stub.requests) m.set(stepOf(r.rawBody), (m.get(stepOf(r.rawBody)) ?? 0) + 1);
      return m;
    };
    const env: EvalEnv = await createEvalEnv({ overrides: { 'worker.lockDurationMs': 2000 } });
    cleanups.push(() => env.cleanup());
    // rows wait 200 ms for more before they are written (cache entries do not): the kill finds
    // answers cached whose rows never got written, the re-run must answer those from the cache
    const vars = { FUGU_WORKER_CONCURRENCY: String(CONCURRENCY), FUGU_WORKER_LOCK_MS: '2000', FUGU_WRITE_LINGER_MS: String(LINGER_MS), FUGU_WORKER_PROVIDERS: 'openai', [KEY_ENV]: SECRET };
    const startWorker = async (): Promise<WorkerProcess> => {
      const w = await startWorkerProcess(env.config, vars);
      cleanups.push(async () => { if (w.child.exitCode === null && w.child.signalCode === null) await w.term(); });
      return w;
    };
    const first = await startWorker();

    const child = fork(coordinatorMain, [], {
      env: { PATH: process.env.PATH, ...serviceEnv(env.config), FUGU_LOG_LEVEL: 'warn', CHAT_N: String(JOBS), CHAT_STUB_URL: stub.baseURL, CHAT_KEY_ENV: KEY_ENV },
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    const done = new Promise<{ answered: number; ok: number }>((resolve) => child.on('message', (m: { type?: string; answered?: number; ok?: number }) => {
      if (m?.type === 'done') resolve({ answered: m.answered!, ok: m.ok! });
    }));
    const coordinator = await watchApp(child, 'coordinator');
    cleanups.push(() => coordinator.kill9());

    const rows = async () => (await sql<{ n: number }>`select count(*)::int as n from chat_calls`.execute(env.ctx.db)).rows[0]!.n;
    await waitFor('a part of the chat calls', async () => { const n = await rows(); return n >= 400 ? n : undefined; }, 60_000, 10);
    // rows appear a batch at a time: the kill lands while answers are cached whose rows wait (on
    // a loaded machine a fixed pause can land just after a batch was written)
    const unrecorded = async () => (await sql<{ n: number }>`select count(*)::int as n from response_cache r where not exists (select 1 from chat_calls c where r.paid_by = 'chat-call:' || c.key)`.execute(env.ctx.db)).rows[0]!.n;
    await waitFor('answers cached whose rows are not yet written', async () => (await unrecorded()) >= 4, 60_000, 5);
    await first.kill9();
    // the killed worker's last request and statements land (nothing else calls the stub or
    // writes rows until the next worker starts); then what it left: the steps that reached the
    // stub, those with their row, those with their answer in the response cache
    await new Promise((r) => setTimeout(r, 500));
    const step = (key: string): string => key.slice(key.lastIndexOf('fault.step-') + 'fault.step-'.length);
    const sentAtKill = new Set(sentPerStep().keys());
    const rowAtKill = new Set((await sql<{ key: string }>`select key from chat_calls`.execute(env.ctx.db)).rows.map((r) => step(r.key)));
    const cachedAtKill = new Set((await sql<{ paid_by: string }>`select paid_by from response_cache`.execute(env.ctx.db)).rows.map((r) => step(r.paid_by)));
    expect(rowAtKill.size).toBeLessThan(JOBS);
    // in flight: sent, not recorded. Those whose answer was cached are answered from the cache
    // (paid once, by the call that paid for it); the others are sent again, and only those
    const inFlight = [...sentAtKill].filter((s) => !rowAtKill.has(s));
    const fromCache = inFlight.filter((s) => cachedAtKill.has(s)).sort();
    const paidTwice = inFlight.filter((s) => !cachedAtKill.has(s)).sort();
    expect(inFlight.length).toBeLessThanOrEqual(CONCURRENCY);
    expect(fromCache.length, 'the kill left answers cached whose rows were not written').toBeGreaterThan(0);
    await startWorker();

    const result = await done;
    expect(await coordinator.exited).toEqual({ code: 0, signal: null });
    expect(result).toEqual({ answered: JOBS, ok: JOBS });
    const r = await sql<{ total: number; distinct: number; ok: number }>`
      select count(*)::int as total, count(distinct key)::int as distinct, count(*) filter (where status = 'ok')::int as ok from chat_calls`.execute(env.ctx.db);
    expect(r.rows[0]).toEqual({ total: JOBS, distinct: JOBS, ok: JOBS });
    // every step reached the provider; twice exactly the ones predicted at the kill, none more often
    const sent = sentPerStep();
    expect(sent.size).toBe(JOBS);
    expect(Math.max(...sent.values())).toBeLessThanOrEqual(2);
    expect([...sent].filter(([, n]) => n > 1).map(([s]) => s).sort()).toEqual(paidTwice);
    expect(stub.requestCount).toBe(JOBS + paidTwice.length);
    // the rows the cache answered are the predicted ones, each still costed (paid by its own first attempt)
    const cachedRows = await sql<{ key: string }>`select key from chat_calls where cached`.execute(env.ctx.db);
    expect(cachedRows.rows.map((x) => step(x.key)).sort()).toEqual(fromCache);
    const costs = await sql<{ cost: string; n: number }>`select cost::text as cost, count(*)::int as n from chat_calls group by cost`.execute(env.ctx.db);
    expect(costs.rows).toEqual([{ cost: '0.000011000000', n: JOBS }]);
    const started = Number(await env.ctx.redis!.hget(providerCallCounterKey(env.config.queuePrefix), 'openai'));
    process.stdout.write(`chat-call kill -9 at ${rowAtKill.size}/${JOBS} rows: ${inFlight.length} in flight, ${fromCache.length} answered from the cache, ${paidTwice.length} sent again (the workers' counter: ${started - JOBS}; concurrency ${CONCURRENCY})\n`);
  });
});
