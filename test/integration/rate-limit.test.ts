// Rate limits against a local OpenAI wire-format stub that answers 429 (with retry-after) above
// R requests per second: a batch finishes with zero failed calls, 429s never use an attempt,
// and the achieved rate stays between 0.8 R and R.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import type { WorkerPool } from '@fugu/core';
import { startOpenAIStub, type OpenAIStub } from '@fugu/providers/testing';
import { createLogger, Registry } from '@fugu/telemetry';
import { startProviderWorker, type ProviderWorkerHandle } from '../../apps/provider-worker/src/worker.ts';
import { runEval } from '@fugu/evaluation';
import { createEvalEnv, syntheticItems, writeFixtures, type EvalEnv } from '../support/eval-env.ts';

const R = 20; // requests per second the stub accepts
const N = 200; // calls per batch: about ten seconds at R
const KEY_ENV = 'FUGU_TEST_RATE_LIMIT_KEY';

let stub: OpenAIStub;
let accepted: number[] = [];
beforeAll(async () => {
  process.env[KEY_ENV] = 'sk-test-rate-limit';
  stub = await startOpenAIStub({
    rateLimit: { requestsPerSecond: R },
    defaultReply: () => {
      accepted.push(Date.now()); // the stub's own clock: its window is (now - 1000 ms, now]
      return { type: 'text', text: 'The answer is 0.', usage: { input: 20, output: 5 } };
    },
  });
});
afterAll(async () => {
  await stub?.close();
});

let env: EvalEnv | undefined;
let worker: ProviderWorkerHandle | undefined;
afterEach(async () => {
  await worker?.close();
  await env?.cleanup();
});

async function batch(rpm: number): Promise<{ rate: number; peak: number; failed: number; attempts: number[]; limited: number }> {
  accepted = [];
  stub.reset();
  env = await createEvalEnv({
    overrides: { 'worker.concurrency': 16, 'worker.responseCache': false, ...(rpm > 0 && { 'rateLimits.openai.requestsPerMinute': rpm }) },
  });
  const pool: WorkerPool = {
    name: 'stubbed',
    workers: [{ name: 'gpt', provider: 'openai', model: 'gpt-test', baseUrl: stub.baseURL, apiKeyEnv: KEY_ENV, settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' } }],
  };
  const files = await writeFixtures(env.dir, syntheticItems(N), pool);
  worker = await startProviderWorker({ config: env.config, db: env.ctx.db, log: createLogger({ name: 't', level: 'silent' }), registry: new Registry() });
  const out = await runEval(env.ctx, {
    dataset: files.dataset, pool: files.pool, repetitions: 1, sample: null, seed: 0, spendCap: null, localWorkers: 0, keyCheck: true, wait: true, log: () => {},
  });
  expect(out.run.status).toBe('completed');
  expect(out.run.doneCalls + out.run.failedCalls).toBe(N);
  const rows = await sql<{ attempts: number }>`select attempts from calls where run_id = ${out.run.id}`.execute(env.ctx.db);
  // achieved rate: accepted requests over the seconds they span (the last one's second included),
  // and the most accepted in any sliding one-second window
  const rate = accepted.length / ((accepted.at(-1)! - accepted[0]!) / 1000 + 1);
  let peak = 0;
  for (let i = 0, j = 0; i < accepted.length; i++) {
    while (accepted[i]! - accepted[j]! >= 1000) j++;
    peak = Math.max(peak, i - j + 1);
  }
  process.stdout.write(`rate limit R=${R}/s, ${rpm > 0 ? `limiter ${rpm}/min` : 'no limiter'}: achieved ${rate.toFixed(2)}/s, peak ${peak} in 1 s, ${stub.rateLimited} answers 429\n`);
  return { rate, peak, failed: out.run.failedCalls, attempts: rows.rows.map((r) => r.attempts), limited: stub.rateLimited };
}

describe('provider rate limits', () => {
  it('with the limit configured at R, the batch runs at 0.8 R..R with no failed call', async () => {
    const r = await batch(R * 60);
    expect(r.failed).toBe(0);
    expect(accepted).toHaveLength(N);
    expect(r.rate).toBeGreaterThanOrEqual(0.8 * R);
    expect(r.rate).toBeLessThanOrEqual(R);
    expect(r.peak).toBeLessThanOrEqual(R);
  });

  it('with no limit configured, 429s and their retry-after pace the queue without using attempts', async () => {
    const r = await batch(0);
    expect(r.limited).toBeGreaterThan(0);
    expect(r.failed).toBe(0);
    expect(accepted).toHaveLength(N);
    expect(r.attempts.every((a) => a === 1)).toBe(true);
    expect(r.rate).toBeGreaterThanOrEqual(0.8 * R);
    expect(r.rate).toBeLessThanOrEqual(R);
    expect(r.peak).toBeLessThanOrEqual(R);
  });
});
