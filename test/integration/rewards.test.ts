// POST /v1/rewards end to end: the gateway process (`node apps/gateway/src/main.ts`, its
// container's command) on the LLMRouter replay pool, a conductor process and a provider-worker
// process, real Redis, Postgres and BullMQ. A client written to OpenRLHF's remote reward model
// protocol (a plain JSON POST of {query, prompts, labels}, as openrlhf/utils/remote_rm_utils.py
// sends it; its key as HTTP Basic, as `requests` sends it from ~/.netrc) scores 256 completions:
// the completions `fugu ultra eval` wrote for fixed topologies on test questions, each after the
// `llm:` Conductor's prompt as a chat template renders it, plus unparsable ones and repeats. The
// rewards must equal the eval run's (computed here through runUltraEval, the same items and
// seed), an unparsable completion gets 0, a workflow past the deadline is unscored (null, or a
// 503 with unscored=error) and a retry finishes it without a second row; bad input is a 400
// naming the field (413 for a body over the limit) and stores nothing; a key is required; no
// key reaches a row.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import type { ChatMessage, WorkerSpec } from '@fugu/core';
import { serviceEnv } from '@fugu/config';
import { createApiKey, getDatasetItems, getWorkflowSteps, listApiKeys, revokeApiKey, type StoredItem } from '@fugu/db';
import { conductQueue, providerCallQueue } from '@fugu/queue';
import { splitItems } from '@fugu/ultra';
import { promptPool, rewardPromptLine, runUltraEval, type UltraEvalOptions } from '@fugu/ultra-training';
import { resolveWorkerPool } from '@fugu/evaluation';
import { createEvalEnv, startWorkerProcess, type EvalEnv, type WorkerProcess } from '../support/eval-env.ts';
import { startConductorProcess, type ConductorProcess } from '../support/conductor.ts';
import { watchApp, type AppProcess } from '../support/app-process.ts';

const gatewayMain = fileURLToPath(new URL('../../apps/gateway/src/main.ts', import.meta.url));
const cliMain = fileURLToPath(new URL('../../apps/cli/src/main.ts', import.meta.url));
const BODY_LIMIT = 8 * 1024 * 1024;
const SEED = 5;
const SPECS = ['fixed:single:qwen2.5-7b-instruct', 'fixed:moa:3', 'fixed:chain', 'fixed:moa:2'];

let env: EvalEnv;
let worker: WorkerProcess;
let conductor: ConductorProcess;
let gateway: AppProcess | undefined;
let url: string;
let key: string;
let keyId: string;
let items: Map<number, StoredItem>;
let workerRecords: WorkerSpec[];
/** the eval run's workflows: item, its completion, its reward as the eval summary counts it */
let evalRows: Array<{ item: StoredItem; completion: string; reward: number; spec: string }>;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

/** A ChatML rendering (Qwen's template) of the policy's prompt messages, with the generation prompt. */
const chatml = (messages: ChatMessage[]): string => messages.map((m) => `<|im_start|>${m.role}\n${m.content as string}<|im_end|>\n`).join('') + '<|im_start|>assistant\n';
const promptOf = (item: StoredItem): string => chatml(rewardPromptLine(item, promptPool(workerRecords), 5).prompt);

/** What OpenRLHF's requests.post(url, json=data, headers={"Content-Type": "application/json"}) sends, with ~/.netrc's Basic auth. */
async function openrlhfPost(data: unknown, opts: { query?: string; auth?: string | null } = {}): Promise<{ status: number; body: Json; headers: Headers }> {
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  const auth = opts.auth === undefined ? `Basic ${Buffer.from(`trainer:${key}`).toString('base64')}` : opts.auth;
  if (auth !== null) headers.Authorization = auth;
  const res = await fetch(`${url}/v1/rewards${opts.query ? `?${opts.query}` : ''}`, { method: 'POST', headers, body: JSON.stringify(data) });
  const text = await res.text();
  let body: Json = text;
  try {
    body = JSON.parse(text);
  } catch {
    // a non-JSON body stays text
  }
  return { status: res.status, body, headers: res.headers };
}

const countGiven = async (): Promise<number> => (await sql<{ n: number }>`select count(*)::int as n from workflows where conductor = 'given'`.execute(env.ctx.db)).rows[0]!.n;

beforeAll(async () => {
  env = await createEvalEnv({ overrides: { 'worker.concurrency': 32, 'conductor.pollMs': 20 } });
  [worker, conductor] = await Promise.all([startWorkerProcess(env.config), startConductorProcess(env.config, { FUGU_CONDUCTOR_CONCURRENCY: '64' })]);

  // the reference: `fugu ultra eval` of four fixed topologies on 60 test questions, seed 5
  const base: UltraEvalOptions = {
    dataset: 'llmrouter', pool: 'llmrouter', conductor: SPECS.join(','), split: 'test', splitSeed: 0, sample: 60, seed: SEED, repeats: 1, maxSteps: 5,
    maxUsd: null, maxTokensPerStep: null, localConductors: 0, localWorkers: 0, keyCheck: false, wait: true, runId: 'ref', log: () => {},
  };
  const out = await runUltraEval(env.ctx, base);
  expect(out.run.status).toBe('completed');
  items = new Map((await getDatasetItems(env.ctx.db, out.run.datasetId!)).map((it) => [it.dbId, it]));
  const rows = (await sql<{ item_id: number; completion: string; reward: number | null; conductor: string }>`
    select item_id, completion, reward, conductor from workflows where run_id = 'ref' order by item_id, conductor`.execute(env.ctx.db)).rows;
  // the summary counts a workflow without a reward as 0
  evalRows = rows.map((r) => ({ item: items.get(r.item_id)!, completion: r.completion, reward: r.reward ?? 0, spec: r.conductor }));
  expect(evalRows).toHaveLength(240);
  workerRecords = (await resolveWorkerPool('llmrouter', env.config.llmrouterDir)).workers;

  const k = await createApiKey(env.ctx.db, { name: 'trainer' });
  key = k.key;
  keyId = k.record.id;
  gateway = await watchApp(fork(gatewayMain, [], {
    env: {
      PATH: process.env.PATH, ...serviceEnv(env.config), FUGU_LOG_LEVEL: 'warn', FUGU_GATEWAY_MODE: 'pool', FUGU_GATEWAY_POOL: 'llmrouter', FUGU_GATEWAY_PORT: '0',
      FUGU_REWARDS_BODY_LIMIT_BYTES: String(BODY_LIMIT),
    },
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  }), 'gateway');
  url = `http://127.0.0.1:${gateway.ready.port}`;
}, 300_000);

afterAll(async () => {
  await gateway?.term();
  await conductor?.term();
  await worker?.term();
  await env?.cleanup();
});

describe('OpenRLHF remote reward protocol', () => {
  it("256 completions: the rewards of fugu ultra eval's workflows on the same items and seed; unparsed 0; repeats share a workflow; the key is charged", async () => {
    const entries: Array<{ item: StoredItem; completion: string; expected: number; outcome?: string }> = evalRows.map((r) => ({ item: r.item, completion: r.completion, expected: r.reward }));
    // 8 that do not parse (no lists, a worker id out of range, lists of different lengths, an empty completion)
    const bad = ['I think the answer is 42.', 'model id = [0, 12]\nsubtasks = ["a", "b"]\naccess list = [[], [0]]', 'model id = [0, 1]\nsubtasks = ["a"]\naccess list = [[]]', ''];
    for (let i = 0; i < 8; i++) entries.push({ item: evalRows[i * 7]!.item, completion: bad[i % bad.length]!, expected: 0, outcome: 'unparsed' });
    // 8 repeats of completions above (a GRPO group samples the same text twice)
    for (let i = 0; i < 8; i++) entries.push({ ...entries[i * 29]! });
    expect(entries).toHaveLength(256);
    // correct and wrong answers among them, so that equality is not met by a constant
    expect(entries.some((e) => e.expected === 1) && entries.some((e) => e.expected === 0.5)).toBe(true);

    const prompts = entries.map((e) => promptOf(e.item));
    // the policy's decode: prompt, response, end-of-turn and end-of-text tokens (skip_special_tokens=False)
    const query = entries.map((e, i) => `${prompts[i]}${e.completion}<|im_end|><|endoftext|>`);
    const labels = entries.map((e) => e.item.id);
    const before = await countGiven();
    const spentBefore = (await listApiKeys(env.ctx.db)).find((k) => k.id === keyId)!.spent;
    const t0 = Date.now();
    const r = await openrlhfPost({ query, prompts, labels }, { query: `seed=${SEED}` });
    expect(r.status, JSON.stringify(r.body).slice(0, 500)).toBe(200);
    const ms = Date.now() - t0;
    expect(r.body.rewards).toHaveLength(256);
    expect(r.body.unscored).toEqual([]);
    expect(r.body.rewards).toEqual(entries.map((e) => e.expected));
    expect(r.body.scores).toEqual(r.body.rewards);
    for (const k of ['correct', 'parsed', 'scored', 'steps', 'usd']) expect(r.body.extra_logs[k], k).toHaveLength(256);
    expect(r.body.extra_logs.scored.every((v: number) => v === 1)).toBe(true);
    for (let i = 240; i < 248; i++) expect(r.body.results[i]).toMatchObject({ outcome: 'unparsed', finish_reason: 'parse-error', reward: 0 });
    expect(r.body.extra_logs.correct).toEqual(r.body.results.map((x: Json) => (x.outcome === 'correct' ? 1 : 0)));
    // repeats share their workflow: 248 distinct, each stored once with the completion as eval wrote it
    expect(await countGiven()).toBe(before + 248);
    const ids = r.body.results.map((x: Json) => x.workflow_id);
    expect(new Set(ids).size).toBe(248);
    const stored = await sql<{ id: string; options: { completion: string; maxSteps: number }; seed: number; item_id: number }>`
      select id, options, seed, item_id from workflows where id = any(${ids.slice(0, 240)}::bigint[])`.execute(env.ctx.db);
    const byId = new Map(stored.rows.map((x) => [Number(x.id), x]));
    entries.slice(0, 240).forEach((e, i) => {
      const row = byId.get(ids[i])!;
      expect(row.options.completion).toBe(e.completion);
      expect([row.seed, row.item_id]).toEqual([SEED, e.item.dbId]);
    });
    // the key paid for the workflows this request ran
    const cost = (await sql<{ pico: string }>`select (sum(conductor_cost + worker_cost) * 1e12)::bigint::text as pico from workflows where id = any(${[...new Set(ids)]}::bigint[])`.execute(env.ctx.db)).rows[0]!.pico;
    expect(BigInt(cost)).toBeGreaterThan(0n);
    // the gateway writes a key's spend behind the answer
    await expect.poll(async () => (await listApiKeys(env.ctx.db)).find((k) => k.id === keyId)!.spent - spentBefore).toBe(BigInt(cost));
    process.stderr.write(`rewards: 256 completions in ${ms} ms\n`);

    // the same request again: the same workflows, nothing new, nothing charged
    const again = await openrlhfPost({ query, prompts, labels }, { query: `seed=${SEED}` });
    expect(again.body.rewards).toEqual(r.body.rewards);
    expect(again.body.results.map((x: Json) => x.workflow_id)).toEqual(ids);
    expect(await countGiven()).toBe(before + 248);
    expect((await listApiKeys(env.ctx.db)).find((k) => k.id === keyId)!.spent - spentBefore).toBe(BigInt(cost));
  });

  it('a label may be a JSON object with the question id and a seed; fugu\'s own shape gives the same rewards', async () => {
    const few = evalRows.slice(0, 6);
    const viaJson = await openrlhfPost({
      query: few.map((e) => promptOf(e.item) + e.completion),
      prompts: few.map((e) => promptOf(e.item)),
      labels: few.map((e) => JSON.stringify({ question_id: e.item.id, seed: SEED })),
    });
    expect(viaJson.status).toBe(200);
    expect(viaJson.body.rewards).toEqual(few.map((e) => e.reward));
    const fugu = await openrlhfPost({ completions: few.map((e) => ({ completion: e.completion, question_id: e.item.id })), seed: SEED }, { auth: `Bearer ${key}` });
    expect(fugu.status).toBe(200);
    expect(fugu.body.rewards).toEqual(few.map((e) => e.reward));
  });
});

describe('unscored: a workflow past the deadline', () => {
  it('comes back null with its index (or a 503 with unscored=error); the same request later finishes it, one row per completion', async () => {
    const few = evalRows.slice(10, 14);
    const data = { query: few.map((e) => promptOf(e.item) + e.completion), prompts: few.map((e) => promptOf(e.item)), labels: few.map((e) => e.item.id) };
    const replayQueue = env.ctx.queue(providerCallQueue('replay'));
    // the provider workers take no step: no workflow can finish
    await replayQueue.pause();
    try {
      const before = await countGiven();
      const t0 = Date.now();
      const r = await openrlhfPost(data, { query: 'seed=77&deadline_s=2' });
      expect(r.status).toBe(200);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(1900);
      expect(r.body.rewards).toEqual([null, null, null, null]);
      expect(r.body.unscored).toEqual([0, 1, 2, 3]);
      expect(r.body.extra_logs.scored).toEqual([0, 0, 0, 0]);
      expect(r.body.results.every((x: Json) => x.reward === null && ['pending', 'running'].includes(x.status))).toBe(true);
      const e = await openrlhfPost(data, { query: 'seed=77&deadline_s=1&unscored=error' });
      expect(e.status).toBe(503);
      expect(e.headers.get('retry-after')).toBe('5');
      expect(e.body.error).toMatchObject({ code: 'unscored' });
      expect(e.body.error.message).toMatch(/4 of 4 completions were not scored within the deadline of 1 s \(indices 0, 1, 2, 3\); send the same request again/);
      expect(await countGiven()).toBe(before + 4);
    } finally {
      await replayQueue.resume();
    }
    const done = await openrlhfPost(data, { query: 'seed=77' });
    expect(done.status).toBe(200);
    expect(done.body.unscored).toEqual([]);
    for (const v of done.body.rewards) expect([0, 0.5, 1]).toContain(v);
    const rows = (await sql<{ n: number }>`select count(*)::int as n from workflows where conductor = 'given' and seed = 77`.execute(env.ctx.db)).rows[0]!.n;
    expect(rows).toBe(4);
  });
});

describe('bad input: a 400 naming the field, nothing stored', () => {
  it('unknown question id, missing ground truth, empty list, too many, lengths that differ, a query without its prompt, a body over the limit', async () => {
    const e = evalRows[0]!;
    const p = promptOf(e.item);
    const ok = { query: [p + e.completion, p + e.completion], prompts: [p, p], labels: [e.item.id, e.item.id] };
    const before = await countGiven();
    const expect400 = async (data: unknown, param: string, message: RegExp, query?: string): Promise<void> => {
      const r = await openrlhfPost(data, query ? { query } : {});
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.error.param).toBe(param);
      expect(r.body.error.message).toMatch(message);
    };
    await expect400({ ...ok, labels: [e.item.id, 'no-such-question'] }, 'labels[1]', /unknown question id "no-such-question" \(dataset "llmrouter" has \d+ items\)/);
    await expect400({ ...ok, labels: [e.item.id, { question: 'What is 2+2?' }] }, 'labels[1].ground_truth', /missing ground truth/);
    await expect400({ ...ok, labels: [e.item.id, ''] }, 'labels[1]', /missing ground truth/);
    await expect400({ query: [], prompts: [], labels: [] }, 'query', /query is empty/);
    await expect400({ ...ok, labels: [e.item.id] }, 'labels', /labels has 1 entries, query has 2/);
    await expect400({ ...ok, prompts: [p] }, 'prompts', /prompts has 1 entries, query has 2/);
    await expect400({ ...ok, query: [ok.query[0], 'a query that lost its prompt'] }, 'query[1]', /does not contain prompts\[1\]/);
    await expect400({ query: Array(1025).fill('P x'), prompts: Array(1025).fill('P'), labels: Array(1025).fill(e.item.id) }, 'query', /1025 completions, at most 1024/);
    await expect400(ok, 'deadline_s', /deadline_s must be a number of seconds/, 'deadline_s=soon');
    // an inline question: the replay pool answers only its dataset's questions
    await expect400({ ...ok, labels: [e.item.id, { question: 'What is 2+2?', ground_truth: '4', metric: 'numeric' }] }, 'labels[1]', /replay workers, which answer only the questions of their dataset/);
    const big = await openrlhfPost({ query: ['P ' + 'x'.repeat(BODY_LIMIT)], prompts: ['P'], labels: [e.item.id] });
    expect(big.status).toBe(413);
    expect(big.body.error).toMatchObject({ param: 'body', code: 'request_too_large' });
    expect(big.body.error.message).toMatch(/more than the reward service's limit of 8388608 bytes \(FUGU_REWARDS_BODY_LIMIT_BYTES\)/);
    expect(await countGiven()).toBe(before);
  });
});

describe('auth: the gateway\'s API keys', () => {
  it('no key and a wrong or revoked key are 401; a Bearer key and a Basic password both work', async () => {
    const e = evalRows[0]!;
    const data = { query: [promptOf(e.item) + e.completion], prompts: [promptOf(e.item)], labels: [e.item.id] };
    const none = await openrlhfPost(data, { auth: null, query: `seed=${SEED}` });
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe('missing_api_key');
    expect((await openrlhfPost(data, { auth: 'Bearer fugu-sk-wrong', query: `seed=${SEED}` })).status).toBe(401);
    expect((await openrlhfPost(data, { auth: `Basic ${Buffer.from('x:fugu-sk-wrong').toString('base64')}`, query: `seed=${SEED}` })).status).toBe(401);
    const bearer = await openrlhfPost(data, { auth: `Bearer ${key}`, query: `seed=${SEED}` });
    expect(bearer.status).toBe(200);
    expect(bearer.body.rewards).toEqual([e.reward]);
    const other = await createApiKey(env.ctx.db, { name: 'revoked' });
    await revokeApiKey(env.ctx.db, 'revoked');
    expect((await openrlhfPost(data, { auth: `Bearer ${other.key}` })).status).toBe(401);
  });

  it('a key restricted to some workers scores on them only (options.workers, the prompt numbering them from 0)', async () => {
    const allowed = ['gemma-2-9b-it', 'qwen2.5-7b-instruct', 'llama-3.1-8b-instruct'].filter((n) => workerRecords.some((w) => w.name === n));
    expect(allowed).toHaveLength(3);
    const k = await createApiKey(env.ctx.db, { name: 'restricted', allowedWorkers: allowed });
    const e = evalRows[3]!;
    const inPool = workerRecords.map((w) => w.name).filter((n) => allowed.includes(n));
    const r = await openrlhfPost({ completions: [{ completion: 'model id = [2]\nsubtasks = ["solve it"]\naccess list = [[]]', question_id: e.item.id }] }, { auth: `Bearer ${k.key}` });
    expect(r.status).toBe(200);
    const id = r.body.results[0].workflow_id;
    const row = (await sql<{ options: { workers: string[] } }>`select options from workflows where id = ${id}`.execute(env.ctx.db)).rows[0]!;
    expect(row.options.workers).toEqual(inPool);
    expect((await getWorkflowSteps(env.ctx.db, id)).map((s) => s.worker)).toEqual([inPool[2]]);
  });
});

describe('secrets', () => {
  it('no API key in a workflow row, a step request or a job left on the conduct queue', async () => {
    const rows = (await sql<{ n: number }>`select count(*)::int as n from workflows where options::text like ${`%${key}%`} or question like ${`%${key}%`}`.execute(env.ctx.db)).rows[0]!.n;
    expect(rows).toBe(0);
    const reqs = (await sql<{ n: number }>`select count(*)::int as n from chat_requests where request::text like ${'%fugu-sk-%'}`.execute(env.ctx.db)).rows[0]!.n;
    expect(reqs).toBe(0);
    const jobs = await env.ctx.queue(conductQueue).getJobs(['waiting', 'active', 'delayed', 'failed', 'completed']);
    for (const j of jobs) expect(Object.keys(j.data as object).sort()).toEqual(['v', 'workflowId']);
  });
});

describe('fugu ultra prompt', () => {
  it("writes the llm: Conductor's prompt per question as JSONL (label = question id), the same the tests render", async () => {
    const out = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
      execFile(process.execPath, [cliMain, 'ultra', 'prompt', '--pool', 'llmrouter', '--dataset', 'llmrouter', '--split', 'test', '--sample', '3', '--seed', '1'], {
        env: { PATH: process.env.PATH, ...serviceEnv(env.config) }, timeout: 60_000, maxBuffer: 1 << 24,
      }, (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr })),
    );
    expect(out.code, out.stderr).toBe(0);
    const lines = out.stdout.trim().split('\n').map((l) => JSON.parse(l) as Json);
    expect(lines).toHaveLength(3);
    const all = [...items.values()];
    const byExt = new Map(all.map((it) => [it.id, it]));
    // every label is the id of a question of the test split (the split asked for), each once
    const testIds = new Set(splitItems(all, 'test', 0).map((i) => all[i]!.id));
    expect(lines.map((l) => testIds.has(l.label as string))).toEqual([true, true, true]);
    expect(new Set(lines.map((l) => l.label)).size).toBe(3);
    for (const l of lines) {
      const it = byExt.get(l.label)!;
      expect(l).toMatchObject({ question_id: l.label, data_source: 'fugu', reward_model: { style: 'rule', ground_truth: l.label } });
      expect(chatml(l.prompt)).toBe(promptOf(it));
      expect(l.prompt[0].content).toMatch(/^You coordinate a team of AI workers/);
      expect(l.prompt[1].content).toContain(it.prompt);
    }
  });
});
