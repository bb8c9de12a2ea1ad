// Rate limits against a local OpenAI wire-format stub, asserting what the limiter guarantees, in a
// way that holds however loaded the machine is (no wall-clock rate or duration is asserted):
//
// - The limiter (libs/calls, one Redis bucket per provider shared by every process) grants at most
//   burst + w * rate requests in any window of w ms. A request reaches the stub after its grant
//   (same clock), so the requests the stub sees in any window of w ms are at most those granted in
//   it plus those granted earlier and still on their way, which is at most the callers' concurrency:
//   arrivals(w) <= burst + ceil(w * rate) + concurrency. Counted by the stub, on its own clock.
// - 429s (the stub's own limit) and the limiter's waits never use an attempt: every call ends ok
//   with attempts 1, and the stub accepts each call exactly once.
// - A direct (gateway-style) pipeline call and queued evaluation calls share the one limit: the
//   invariant holds for their requests together (two separate limits would let twice the rate
//   through), and both leave their rows.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import type { WorkerPool, WorkerSpec } from '@fugu/core';
import { createCallPipeline, requestBurst } from '@fugu/calls';
import { startOpenAIStub, type OpenAIStub, type RecordedRequest } from '@fugu/providers/testing';
import { createLogger, Registry } from '@fugu/telemetry';
import { startProviderWorker, type ProviderWorkerHandle } from '../../apps/provider-worker/src/worker.ts';
import { runEval } from '../../apps/cli/src/eval/run.ts';
import { createEvalEnv, syntheticItems, writeFixtures, type EvalEnv } from '../support/eval-env.ts';

const R = 20; // requests per second: the limiter's rate, and the stub's own limit where it has one
const CONCURRENCY = 4; // jobs at once in the worker
const KEY_ENV = 'FUGU_TEST_RATE_LIMIT_KEY';

const stubs: OpenAIStub[] = [];
let env: EvalEnv | undefined;
let worker: ProviderWorkerHandle | undefined;
beforeAll(() => {
  process.env[KEY_ENV] = 'sk-test-rate-limit';
});
afterEach(async () => {
  await worker?.close();
  worker = undefined;
  await env?.cleanup();
  env = undefined;
  await Promise.all(stubs.splice(0).map((s) => s.close()));
});
afterAll(() => {
  delete process.env[KEY_ENV];
});

/** A stub answering every question right (syntheticItems: "Question i about ..." -> 2i), counting accepted requests per question. */
async function stub(limit: number | undefined): Promise<{ stub: OpenAIStub; accepted: Map<string, number> }> {
  const accepted = new Map<string, number>();
  const s = await startOpenAIStub({
    ...(limit !== undefined && { rateLimit: { requestsPerSecond: limit } }),
    defaultReply: (req) => {
      const q = /(Question (\d+)|Direct \d+)/.exec(req.rawBody);
      const key = q?.[1] ?? '?';
      accepted.set(key, (accepted.get(key) ?? 0) + 1);
      return { type: 'text', text: `The answer is ${q?.[2] ? 2 * Number(q[2]) : 0}.`, usage: { input: 20, output: 5 } };
    },
  });
  stubs.push(s);
  return { stub: s, accepted };
}

const gpt = (s: OpenAIStub): WorkerSpec => ({ name: 'gpt', provider: 'openai', model: 'gpt-test', baseUrl: s.baseURL, apiKeyEnv: KEY_ENV, settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' } });

async function setUp(s: OpenAIStub, rpm: number): Promise<EvalEnv> {
  env = await createEvalEnv({
    overrides: { 'worker.concurrency': CONCURRENCY, 'worker.responseCache': false, ...(rpm > 0 && { 'rateLimits.openai.requestsPerMinute': rpm }) },
  });
  worker = await startProviderWorker({ config: env.config, db: env.ctx.db, log: createLogger({ name: 't', level: 'silent' }), registry: new Registry() });
  return env;
}

async function evaluate(e: EvalEnv, s: OpenAIStub, n: number, runId: string) {
  const pool: WorkerPool = { name: 'stubbed', workers: [gpt(s)] };
  const files = await writeFixtures(e.dir, syntheticItems(n), pool);
  const out = await runEval(e.ctx, {
    dataset: files.dataset, pool: files.pool, repetitions: 1, sample: null, seed: 0, spendCap: null, localWorkers: 0, keyCheck: true, wait: true, log: () => {}, runId,
  });
  const rows = await sql<{ attempts: number; status: string }>`select attempts, status from calls where run_id = ${runId}`.execute(e.ctx.db);
  return { run: out.run, rows: rows.rows };
}

/**
 * The most requests the stub received in any window of `w` ms (its own clock), and the bound the
 * limiter guarantees for it: burst + ceil(w * rate) + the requests that can be on their way.
 */
function worstWindow(requests: readonly RecordedRequest[], w: number, rpm: number, inFlight: number): { seen: number; bound: number } {
  const at = requests.map((r) => r.at).sort((a, b) => a - b);
  let seen = 0;
  for (let i = 0, j = 0; j < at.length; j++) {
    while (at[j]! - at[i]! > w) i++;
    seen = Math.max(seen, j - i + 1);
  }
  return { seen, bound: requestBurst(rpm) + Math.ceil((w * rpm) / 60_000) + inFlight };
}

function report(what: string, requests: readonly RecordedRequest[], rpm: number, inFlight: number, limited: number): void {
  const cells = [1_000, 5_000].map((w) => {
    const { seen, bound } = worstWindow(requests, w, rpm, inFlight);
    return `${w / 1000} s: ${seen} (bound ${bound})`;
  });
  process.stdout.write(`rate limit ${what}: ${requests.length} requests, ${limited} answered 429; most in a window of ${cells.join(', ')}\n`);
}

describe('provider rate limits', () => {
  it('with the limit configured at R: the stub never sees more than the limiter grants, and no call fails or uses an attempt', async () => {
    const N = 100;
    const rpm = R * 60;
    const { stub: s, accepted } = await stub(R);
    const e = await setUp(s, rpm);
    const { run, rows } = await evaluate(e, s, N, 'limited');
    expect(run).toMatchObject({ status: 'completed', doneCalls: N, failedCalls: 0 });
    expect(rows.every((r) => r.status === 'ok' && r.attempts === 1)).toBe(true);
    expect(accepted.size).toBe(N);
    expect([...accepted.values()].every((n) => n === 1)).toBe(true);
    report(`limiter ${rpm}/min, concurrency ${CONCURRENCY}`, s.requests, rpm, CONCURRENCY, s.rateLimited);
    for (const w of [1_000, 2_000, 5_000]) {
      const { seen, bound } = worstWindow(s.requests, w, rpm, CONCURRENCY);
      expect(seen, `requests in a window of ${w} ms`).toBeLessThanOrEqual(bound);
    }
  });

  it('with no limit configured, 429s and their retry-after pace the queue without using attempts', async () => {
    const N = 100;
    const { stub: s, accepted } = await stub(R);
    const e = await setUp(s, 0);
    const { run, rows } = await evaluate(e, s, N, 'unlimited');
    report(`none, concurrency ${CONCURRENCY}`, s.requests, R * 60, CONCURRENCY, s.rateLimited);
    expect(s.rateLimited).toBeGreaterThan(0);
    expect(run).toMatchObject({ status: 'completed', doneCalls: N, failedCalls: 0 });
    expect(rows.every((r) => r.status === 'ok' && r.attempts === 1)).toBe(true);
    // each call was answered exactly once, whatever the number of 429s before it
    expect(accepted.size).toBe(N);
    expect([...accepted.values()].every((n) => n === 1)).toBe(true);
    expect(s.requests.length).toBe(N + s.rateLimited);
  });

  it('a direct (gateway-style) pipeline call and queued evaluation calls share one rate limit, and both leave rows', async () => {
    const N = 60; // evaluation calls through the queue
    const M = 40; // direct calls, two at a time
    const DIRECT_CONCURRENCY = 2;
    const rpm = R * 60;
    const { stub: s, accepted } = await stub(undefined); // no 429s: only the shared limit paces
    const e = await setUp(s, rpm);
    const direct = createCallPipeline({ db: e.ctx.db, redis: e.ctx.redis!, config: e.config, env: process.env });
    let next = 0;
    const directCalls = Promise.all(
      Array.from({ length: DIRECT_CONCURRENCY }, async () => {
        while (next < M) {
          const j = next++;
          await direct.call({ worker: gpt(s), request: { messages: [{ role: 'user', content: `Direct ${j}` }] }, origin: 'gateway', key: `direct-${j}`, maxWaitMs: 60_000 });
        }
      }),
    );
    const [{ run, rows }] = await Promise.all([evaluate(e, s, N, 'shared'), directCalls]);
    report(`shared ${rpm}/min, concurrency ${CONCURRENCY} queued + ${DIRECT_CONCURRENCY} direct`, s.requests, rpm, CONCURRENCY + DIRECT_CONCURRENCY, s.rateLimited);

    expect(run).toMatchObject({ status: 'completed', doneCalls: N, failedCalls: 0 });
    expect(rows.every((r) => r.status === 'ok')).toBe(true);
    const gatewayRows = await sql<{ n: number; ok: number }>`
      select count(*)::int as n, count(*) filter (where status = 'ok')::int as ok from chat_calls where origin = 'gateway'`.execute(e.ctx.db);
    expect(gatewayRows.rows[0]).toEqual({ n: M, ok: M });
    expect(accepted.size).toBe(N + M);
    expect(s.requests.length).toBe(N + M);
    // one limit for both: together they stay within what one bucket grants (two separate buckets
    // would let about twice as many through in the longer windows)
    for (const w of [1_000, 2_000, 4_000]) {
      const { seen, bound } = worstWindow(s.requests, w, rpm, CONCURRENCY + DIRECT_CONCURRENCY);
      expect(seen, `requests in a window of ${w} ms`).toBeLessThanOrEqual(bound);
    }
  });
});
