// Figure 4 of issue 11: a coordinator process enqueues 2,000 chat-call jobs and waits; the provider
// worker process is killed with SIGKILL mid-way and another started. Every job is answered, with
// exactly one row each, and the stub counts re-executions only for the jobs that were in flight
// (at most the killed worker's concurrency).
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
const KEY_ENV = 'FUGU_TEST_CHAT_FAULT_KEY';
const SECRET = 'sk-test-chat-fault-0123456789';
const coordinatorMain = fileURLToPath(new URL('./chat-coordinator.ts', import.meta.url));

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => {});
});

describe('chat-call fault injection', () => {
  it('kill -9 of a provider worker while a coordinator process waits on 2,000 chat calls: all answered once, re-executions bounded by the jobs in flight', async () => {
    const perStep = new Map<string, number>();
    const stub = await startOpenAIStub({
      latencyMs: 5,
      defaultReply: (req) => {
        const step = /Step (\d+)/.exec(req.rawBody)?.[1] ?? '?';
        perStep.set(step, (perStep.get(step) ?? 0) + 1);
        return { type: 'text', text: `answer ${step}`, usage: { input: 7, output: 2 } };
      },
    });
    cleanups.push(() => stub.close());
    const env: EvalEnv = await createEvalEnv({ overrides: { 'worker.lockDurationMs': 2000 } });
    cleanups.push(() => env.cleanup());
    const vars = { FUGU_WORKER_CONCURRENCY: String(CONCURRENCY), FUGU_WORKER_LOCK_MS: '2000', FUGU_WORKER_PROVIDERS: 'openai', [KEY_ENV]: SECRET };
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
    const rowsAtKill = await waitFor('a part of the chat calls', async () => { const n = await rows(); return n >= 400 ? n : undefined; }, 60_000, 10);
    await first.kill9();
    expect(rowsAtKill).toBeLessThan(JOBS);
    await startWorker();

    const result = await done;
    expect(await coordinator.exited).toEqual({ code: 0, signal: null });
    expect(result).toEqual({ answered: JOBS, ok: JOBS });
    const r = await sql<{ total: number; distinct: number; ok: number }>`
      select count(*)::int as total, count(distinct key)::int as distinct, count(*) filter (where status = 'ok')::int as ok from chat_calls`.execute(env.ctx.db);
    expect(r.rows[0]).toEqual({ total: JOBS, distinct: JOBS, ok: JOBS });
    // every step reached the provider; the ones sent more than once were in flight at the kill
    expect(perStep.size).toBe(JOBS);
    const reexecuted = [...perStep.values()].reduce((s, n) => s + n - 1, 0);
    const started = Number(await env.ctx.redis!.hget(providerCallCounterKey(env.config.queuePrefix), 'openai'));
    process.stdout.write(`chat-call kill -9 at ${rowsAtKill}/${JOBS} rows: ${reexecuted} re-executed at the stub, ${started - JOBS} by the workers' counter (concurrency ${CONCURRENCY})\n`);
    expect(reexecuted).toBeGreaterThanOrEqual(0);
    expect(reexecuted).toBeLessThanOrEqual(CONCURRENCY);
    expect(stub.requestCount).toBe(JOBS + reexecuted);
  });
});
