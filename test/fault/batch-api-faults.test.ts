// The Batch API through crashes (issue 18, figure 3): a batch is durable in Postgres, so a
// gateway killed -9 while it drives a batch, and a provider worker killed -9 while it runs its
// lines, leave it to finish: another gateway takes the batch over when the dead one's lease lapses
// (FUGU_BATCH_LEASE_MS), another worker takes the jobs, and the output holds each custom_id once,
// with exactly one chat_calls row per line (nothing paid twice). A gateway killed -9 while it runs
// fugu-ultra lines (each a workflow in the gateway, its agents' calls chat-call jobs): the gateway
// that takes over runs the lines left unanswered again, the same workflows, every agent call it
// finds answered taken from its row, so no worker call is made twice. Real processes, Redis, Postgres.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { sql } from 'kysely';
import { providerCallCounterKey } from '@fugu/calls';
import { publishUltraDeployment } from '@fugu/db';
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

  it('a gateway killed -9 mid fugu-ultra batch: the lines it left run again, each custom_id once, no worker call made twice', { timeout: 300_000 }, async () => {
    const db = stack.env.database.db;
    const redis = stack.env.ctx.redis!;
    await publishUltraDeployment(db, { name: 'fugu-ultra', conductor: 'fixed:moa:2', pool: 'llmrouter', options: {} });
    const started = async () => Number((await redis.hget(providerCallCounterKey(stack.env.config.queuePrefix), 'replay')) ?? 0);
    // the gateways of the test before would take the batch too (its driver polls): this test's own gateway must
    await stack.stopProcesses();
    const n = 12;
    const lines = Array.from({ length: n }, (_, i) => batchLine(`u-${i}`, { model: 'fugu-ultra', messages: [{ role: 'user', content: stack.prompts[(i * 29) % stack.prompts.length]! }] }));
    await stack.startWorker();
    const before = await started();
    // one line at a time, so the kill falls inside one
    const ULTRA = { ...GATEWAY, FUGU_BATCH_MAX_LOCAL: '1' };
    const a = await stack.startGateway(ULTRA);
    const ca = new OpenAI({ apiKey: stack.full.key, baseURL: a.url, maxRetries: 0 });
    const b = await ca.batches.create({ input_file_id: (await uploadBatchFile(ca, jsonl(lines))).id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    // the gateway it was made on drives it (its driver was poked)
    const owner = await waitFor('the batch taken', async () => (await sql<{ o: string | null }>`select lease_owner as o from batches where id = ${b.id}`.execute(db)).rows[0]!.o, 30_000, 20);
    expect(owner).toContain(`:${a.app.child.pid}:`);
    const workflows = () => sql<{ id: string; key: string; status: string; attempts: number }>`select id, key, status, attempts from workflows where key like ${`${b.id}.%`} order by split_part(key, '.', 2)::int`.execute(db);
    // a few lines answered, and one whose workflow has made an agent call but not finished
    await waitFor('a fugu-ultra line mid-workflow', async () => {
      const answered = Number((await sql<{ n: string }>`select count(*) as n from batch_lines where batch_id = ${b.id} and answer_status is not null`.execute(db)).rows[0]!.n);
      const mid = (await sql<{ n: string }>`
        select count(*) as n from workflows w where w.key like ${`${b.id}.%`} and w.status = 'running'
        and exists (select 1 from chat_calls c where c.key like 'wf' || w.id || '.%')`.execute(db)).rows[0]!.n;
      return answered >= 2 && Number(mid) > 0;
    }, 120_000, 20);
    await a.app.kill9();
    const g = await stack.startGateway(ULTRA);
    const cb = new OpenAI({ apiKey: stack.full.key, baseURL: g.url, maxRetries: 0 });
    const end = await batchEnded(cb, b.id);
    expect(end).toMatchObject({ status: 'completed', request_counts: { total: n, completed: n, failed: 0 }, error_file_id: null });
    const out = await fileLines(cb, end.output_file_id);
    expect(out.map((o) => o.custom_id)).toEqual(lines.map((l) => l.custom_id));
    // each line one workflow, keyed by its line, the answer's; the one the kill cut ran again
    const wfs = (await workflows()).rows;
    expect(wfs.map((w) => [w.key, w.status])).toEqual(lines.map((_, i) => [`${b.id}.${i + 1}`, 'done']));
    expect(out.map((o) => o.response.body.fugu.workflow)).toEqual(wfs.map((w) => Number(w.id)));
    expect(Math.max(...wfs.map((w) => w.attempts))).toBeGreaterThanOrEqual(2);
    // three agent calls a workflow, one row each, and exactly as many calls made: none twice
    const ids = wfs.map((w) => `wf${w.id}.%`);
    const rows = Number((await sql<{ n: string }>`select count(*) as n from chat_calls where key like any(${ids}::text[])`.execute(db)).rows[0]!.n);
    expect(rows).toBe(3 * n);
    expect((await started()) - before).toBe(3 * n);
  });
});
