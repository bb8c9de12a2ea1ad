// The Batch API through crashes (issue 18, figure 3): a batch is durable in Postgres, so a
// gateway killed -9 while it drives a batch, and a provider worker killed -9 while it runs its
// lines, leave it to finish: another gateway takes the batch over when the dead one's lease lapses
// (FUGU_BATCH_LEASE_MS), another worker takes the jobs, and the output holds each custom_id once,
// with exactly one chat_calls row per line (nothing paid twice). Real processes, Redis, Postgres.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { sql } from 'kysely';
import { waitFor } from '../support/eval-env.ts';
import { batchEnded, batchLine, fileLines, jsonl, startBatchStack, uploadBatchFile, type BatchStack } from '../support/batch-stack.ts';

let stack: BatchStack;
beforeAll(async () => {
  stack = await startBatchStack();
}, 120_000);
afterAll(async () => {
  await stack?.close();
});

const GATEWAY = { FUGU_BATCH_LEASE_MS: '2000', FUGU_BATCH_MAX_IN_FLIGHT: '300' };

describe('a batch through crashes', () => {
  it('a gateway and a provider worker killed -9 mid-batch: it completes, each custom_id once, one call row per line', { timeout: 600_000 }, async () => {
    const n = 1000;
    const { workers, prompts } = stack;
    const lines = Array.from({ length: n }, (_, i) => batchLine(`k-${i}`, { model: i % 4 === 0 ? 'fugu' : workers[i % workers.length]!, messages: [{ role: 'user', content: prompts[(i * 17) % prompts.length]! }] }));
    const w1 = await stack.startWorker({ FUGU_WORKER_CONCURRENCY: '4' });
    const a = await stack.startGateway(GATEWAY);
    const ca = new OpenAI({ apiKey: stack.full.key, baseURL: a.url, maxRetries: 0 });
    const file = await uploadBatchFile(ca, jsonl(lines));
    const b = await ca.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const rows = async () => Number((await sql<{ n: string }>`select count(*) as n from chat_calls where key like ${`${b.id}.%`}`.execute(stack.env.database.db)).rows[0]!.n);

    // the gateway that drives it dies a few hundred lines in
    await waitFor('lines answered', async () => (await rows()) >= 200, 120_000, 50);
    await a.app.kill9();
    const atKill = await rows();
    expect(atKill).toBeLessThan(n);
    // then the worker, while jobs are still queued
    await w1.kill9();
    const g = await stack.startGateway(GATEWAY);
    const cb = new OpenAI({ apiKey: stack.full.key, baseURL: g.url, maxRetries: 0 });
    await stack.startWorker();
    const end = await batchEnded(cb, b.id);
    expect(end).toMatchObject({ status: 'completed', request_counts: { total: n, completed: n, failed: 0 }, error_file_id: null });
    const out = await fileLines(cb, end.output_file_id);
    expect(out.map((o) => o.custom_id)).toEqual(lines.map((l) => l.custom_id));
    expect(out.every((o) => o.response.status_code === 200)).toBe(true);
    // exactly one call row per line
    const perLine = (await sql<{ n: string; distinct: string }>`select count(*) as n, count(distinct key) as distinct from chat_calls where key like ${`${b.id}.%`}`.execute(stack.env.database.db)).rows[0]!;
    expect([Number(perLine.n), Number(perLine.distinct)]).toEqual([n, n]);
    // each answer is its own line's call
    expect(out.every((o, i) => o.response.request_id === `${b.id}.${i + 1}`)).toBe(true);
  });
});
