// The Conductor's workflow engine on real Redis, Postgres and BullMQ, through a provider-worker
// process and a conductor process (their containers' commands):
// - the LLMRouter replay pool on a few test items with fixed:single, fixed:moa:3 and fixed:chain:
//   rows complete, step rows match the workflow, moa's proposers were submitted together, a
//   single step's outcome is the recorded score, the same seed gives the same rewards, and
//   submitting again calls nothing;
// - an llm: Conductor (an OpenAI-compatible endpoint on the OpenAI stub) writing scripted
//   workflows over stub OpenAI, Anthropic and Google workers; a malformed one gets reward 0 with
//   its parse error; budgets end with their finish reasons; an unreachable endpoint ends
//   conductor-error naming it; bad input to submitWorkflows is an InputError naming the field;
// - fixed:router on an anchor router checkpoint, and policy: on an initial policy checkpoint.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { estimateTokens, InputError, messageText, type DatasetItem, type WorkerSpec } from '@fugu/core';
import { loadLlmRouter, loadLlmRouterPool } from '@fugu/datasets';
import { getWorkflowSteps, listItemKeys, saveDataset, savePool, type WorkflowRow } from '@fugu/db';
import { conductQueue } from '@fugu/queue';
import { providerCallCounterKey } from '@fugu/calls';
import { startAnthropicStub, startGoogleStub, startOpenAIStub, type AnthropicStub, type GoogleStub, type OpenAIStub, type RecordedRequest } from '@fugu/providers/testing';
import { initPolicyCheckpoint, submitWorkflows, waitForWorkflows, type NewWorkflow, type SubmitDeps } from '@fugu/ultra';
import { loadUseLite, useLiteHeadDims } from '@fugu/router-model';
import { saveAnchorCheckpoint } from '@fugu/serving/testing';
import { createEvalEnv, startWorkerProcess, type EvalEnv, type WorkerProcess } from '../support/eval-env.ts';
import { startConductorProcess, type ConductorProcess } from '../support/conductor.ts';

const KEY_ENV = 'FUGU_TEST_CONDUCTOR_KEY';
const SECRET = 'sk-test-conductor-0123456789';

let env: EvalEnv;
let openai: OpenAIStub;
let anthropic: AnthropicStub;
let google: GoogleStub;
let worker: WorkerProcess;
let conductor: ConductorProcess;
let deps: SubmitDeps;
let replayPoolId: number;
let livePoolId: number;
let items: Array<{ dbId: number; item: DatasetItem }>;
const REPLAY = ['qwen2.5-7b-instruct', 'gemma-2-9b-it', 'llama3-chatqa-1.5-70b'];

/** completions of the planner endpoint, by question; the system prompts it was sent, by question */
const plans = new Map<string, string>();
const plannerSystem = new Map<string, string>();
/** what the dataflow test's stub saw */
const dataflow: { step1HeldUntilStep2?: boolean } = {};

const lastUser = (req: RecordedRequest): string => {
  const msgs = (req.body?.messages ?? []) as Array<{ role: string; content: unknown }>;
  const c = msgs.filter((m) => m.role === 'user').at(-1)?.content;
  return typeof c === 'string' ? c : JSON.stringify(c);
};

beforeAll(async () => {
  env = await createEvalEnv({
    overrides: { 'worker.concurrency': 16, 'worker.attempts': 2, 'worker.backoffMs': 20, 'conductor.pollMs': 20 },
  });
  openai = await startOpenAIStub({
    apiKey: SECRET,
    defaultReply: (req) => {
      const q = lastUser(req);
      if (req.body?.model === 'planner-model') {
        const plan = [...plans.entries()].find(([k]) => q.includes(k));
        const system = ((req.body?.messages ?? []) as Array<{ role: string; content: unknown }>).find((m) => m.role === 'system')?.content;
        if (plan) plannerSystem.set(plan[0], typeof system === 'string' ? system : JSON.stringify(system));
        return { type: 'text', text: plan?.[1] ?? 'no plan', usage: { input: 100, output: 40 } };
      }
      if (q.includes('CUT')) return { type: 'text', text: 'a cut answer', finish: 'length', usage: { input: 10, output: 8 } };
      // the dataflow test: step 1 is held until step 2's request has arrived (at most 10 s)
      if (q.includes('DF-STEP-1') && !q.includes('DF-STEP-2')) {
        return new Promise((resolve) => {
          const t0 = Date.now();
          const check = (): void => {
            const arrived = openai.requests.some((r) => lastUser(r).includes('DF-STEP-2') && !lastUser(r).includes('DF-STEP-3'));
            if (arrived || Date.now() - t0 > 10_000) {
              dataflow.step1HeldUntilStep2 = arrived;
              resolve({ type: 'text', text: 'answer one', usage: { input: 10, output: 3 } });
            } else setTimeout(check, 5);
          };
          check();
        });
      }
      return { type: 'text', text: 'openai answer', usage: { input: 10, output: 3 } };
    },
  });
  anthropic = await startAnthropicStub({ apiKey: SECRET });
  google = await startGoogleStub({ apiKey: SECRET });
  env.config.conductor.endpoints = [
    { name: 'planner', baseUrl: openai.baseURL, model: 'planner-model', apiKeyEnv: KEY_ENV, prices: { inputPerMTok: '1', outputPerMTok: '2' } },
    { name: 'dead', baseUrl: 'http://127.0.0.1:9/v1', model: 'dead-model', apiKeyEnv: KEY_ENV, prices: { inputPerMTok: '0', outputPerMTok: '0' } },
  ];

  // a few LLMRouter test items with 0/1 recorded scores for the three replay workers
  const ds = await loadLlmRouter(env.config.llmrouterDir);
  const chosen = ds.items.filter((it) => it.sourceSplit === 'test' && REPLAY.every((w) => [0, 1].includes(it.recorded?.[w]?.score ?? -1))).slice(0, 4);
  expect(chosen).toHaveLength(4);
  const { id: datasetId } = await saveDataset(env.ctx.db, { name: 'llmrouter-few', source: 'test', contentHash: `few-${Date.now()}`, items: chosen });
  const keys = await listItemKeys(env.ctx.db, datasetId);
  items = chosen.map((item) => ({ item, dbId: keys.find((k) => k.extId === item.id)!.dbId }));
  const pool = await loadLlmRouterPool(env.config.llmrouterDir);
  const replayPool = { name: 'llmrouter-3', workers: REPLAY.map((n) => pool.workers.find((w) => w.name === n)!) };
  expect(replayPool.workers.every((w) => w.description && w.size)).toBe(true);
  replayPoolId = (await savePool(env.ctx.db, replayPool, 'conductor-replay-pool')).poolId;
  const live: WorkerSpec[] = [
    { name: 'gpt', provider: 'openai', model: 'gpt-test', baseUrl: openai.baseURL, apiKeyEnv: KEY_ENV, settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' }, description: 'a general model' },
    { name: 'claude', provider: 'anthropic', model: 'claude-test', baseUrl: anthropic.baseURL, apiKeyEnv: KEY_ENV, settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' } },
    { name: 'gem', provider: 'google', model: 'gemini-test', baseUrl: google.baseURL, apiKeyEnv: KEY_ENV, settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' } },
  ];
  livePoolId = (await savePool(env.ctx.db, { name: 'live', workers: live }, 'conductor-live-pool')).poolId;

  const keyEnv = { [KEY_ENV]: SECRET };
  [worker, conductor] = await Promise.all([startWorkerProcess(env.config, keyEnv), startConductorProcess(env.config, { ...keyEnv, FUGU_CONDUCTOR_POLL_MS: '20' })]);
  deps = { db: env.ctx.db, queue: (n) => env.ctx.queue(n), endpoints: ['planner', 'dead'], jobOptions: { attempts: 2, backoff: { type: 'fixed', delay: 50 } } };
});

afterAll(async () => {
  await conductor?.term();
  await worker?.term();
  await Promise.all([openai?.close(), anthropic?.close(), google?.close()]);
  await env?.cleanup();
});

const run = async (rows: NewWorkflow[]): Promise<WorkflowRow[]> => {
  const { ids } = await submitWorkflows(deps, rows);
  return waitForWorkflows(env.ctx.db, ids, { timeoutMs: 60_000, pollMs: 50 });
};
const replayRows = (prefix: string, conductorSpec: string, seed: number): NewWorkflow[] =>
  items.map(({ item, dbId }) => ({ key: `${prefix}.${item.id}`, itemId: dbId, poolId: replayPoolId, question: item.prompt, conductor: conductorSpec, seed, options: { maxSteps: 5, ranking: REPLAY } }));
const calls = async (): Promise<number> => {
  const h = await env.ctx.redis!.hgetall(providerCallCounterKey(env.config.queuePrefix));
  return Object.values(h).reduce((a, v) => a + Number(v), 0);
};

describe('fixed topologies on the LLMRouter replay pool', () => {
  it('fixed:single answers each item with the recorded score; one step row, one chat call', async () => {
    const w = REPLAY[2]!;
    const rows = await run(replayRows('single', `fixed:single:${w}`, 1));
    rows.forEach((r, i) => {
      const recorded = items[i]!.item.recorded![w]!.score;
      expect(r).toMatchObject({ status: 'done', finishReason: 'answered', parseOk: true, topology: 'single', nSteps: 1, criticalPath: 1, score: recorded });
      expect(r.reward).toBe(recorded === 1 ? 1 : 0.5);
      expect(r.outcome).toBe(recorded === 1 ? 'correct' : 'incorrect');
    });
    const steps = await getWorkflowSteps(env.ctx.db, rows[0]!.id);
    expect(steps).toHaveLength(1);
    expect(steps[0]).toMatchObject({ idx: 0, worker: w, status: 'ok', sees: [], chatCallId: `wf${rows[0]!.id}.s0` });
    expect(steps[0]!.replay).toMatchObject({ rule: 'recorded', correct: items[0]!.item.recorded![w]!.score === 1 });
  });

  it('fixed:moa:3 runs its proposers together, the aggregator sees all three; fixed:chain runs in order; the same seed gives the same rewards', async () => {
    const moa = await run(replayRows('moa', 'fixed:moa:3', 7));
    const chain = await run(replayRows('chain', 'fixed:chain', 7));
    for (const r of moa) expect(r).toMatchObject({ status: 'done', finishReason: 'answered', topology: 'parallel', nSteps: 4, criticalPath: 2 });
    for (const r of chain) expect(r).toMatchObject({ status: 'done', finishReason: 'answered', topology: 'chain', nSteps: 2, criticalPath: 2 });
    const steps = await getWorkflowSteps(env.ctx.db, moa[0]!.id);
    expect(steps.map((s) => [s.idx, s.status, s.sees])).toEqual([[0, 'ok', []], [1, 'ok', []], [2, 'ok', []], [3, 'ok', [0, 1, 2]]]);
    expect(steps.map((s) => s.worker)).toEqual(moa[0]!.steps!.map((s) => s.name));
    // the aggregator's information: the proposers' workers other than its own; it pays for reading their answers
    const aggregator = steps[3]!;
    const proposers = [...new Set(steps.slice(0, 3).map((x) => x.worker))].filter((w) => w !== aggregator.worker).sort();
    expect(aggregator.replay).toMatchObject({ rule: expect.stringMatching(/keep|misled|adopt|fix|mixed/), sources: proposers });
    const stored3 = await sql<{ request: { messages: Array<{ role: string; content: unknown }> } }>`select request from chat_requests where id = ${aggregator.chatCallId}`.execute(env.ctx.db);
    const lastUser = [...stored3.rows[0]!.request.messages].reverse().find((m) => m.role === 'user')!;
    const seenOut = steps.slice(0, 3).reduce((a, x) => a + x.tokensOut, 0);
    expect(seenOut).toBeGreaterThan(0);
    expect(aggregator.tokensIn).toBe(estimateTokens(messageText(lastUser as Parameters<typeof messageText>[0])) + seenOut);
    // the three proposers' requests were stored in one statement (one timestamp), the aggregator's after them
    const stored = await sql<{ id: string; created_at: Date }>`select id, created_at from chat_requests where id like ${`wf${moa[0]!.id}.s%`} order by id`.execute(env.ctx.db);
    const at = new Map(stored.rows.map((r) => [r.id, r.created_at.getTime()]));
    const s = (i: number) => at.get(`wf${moa[0]!.id}.s${i}`)!;
    expect(s(0)).toBe(s(1));
    expect(s(1)).toBe(s(2));
    expect(s(3)).toBeGreaterThan(s(2));
    // a chain step sees the one before it
    const chainSteps = await getWorkflowSteps(env.ctx.db, chain[0]!.id);
    expect(chainSteps.map((x) => x.sees)).toEqual([[], [0]]);
    // the same seed (other keys): the same rewards and replay cells
    const again = await run(replayRows('moa-again', 'fixed:moa:3', 7));
    expect(again.map((r) => r.reward)).toEqual(moa.map((r) => r.reward));
    expect(again.map((r) => r.finalAnswer)).toEqual(moa.map((r) => r.finalAnswer));
  });

  it('submitting the same keys again calls nothing and adds no rows', async () => {
    const before = await calls();
    const n = (await sql<{ n: number }>`select count(*)::int as n from workflows`.execute(env.ctx.db)).rows[0]!.n;
    const res = await submitWorkflows(deps, replayRows('moa', 'fixed:moa:3', 7));
    expect(res).toMatchObject({ enqueued: 0, done: items.length });
    expect(await calls()).toBe(before);
    expect((await sql<{ n: number }>`select count(*)::int as n from workflows`.execute(env.ctx.db)).rows[0]!.n).toBe(n);
    expect(await env.ctx.queue(conductQueue).getJobCounts('waiting', 'active')).toEqual({ waiting: 0, active: 0 });
  });
});

const live = (key: string, question: string, conductorSpec: string, options: NewWorkflow['options'] = { maxSteps: 5 }): NewWorkflow => ({ key, poolId: livePoolId, question, conductor: conductorSpec, seed: 3, options });

describe('an llm: Conductor over live (stub) workers', () => {
  it('a valid workflow runs on stub OpenAI, Anthropic and Google workers; the planner is called once and its tokens are the conductor\'s', async () => {
    plans.set('PLAN-OK', 'Reasoning first.\nmodel id = [0, 1, 2]\nsubtasks = ["solve it", "solve it too", "combine the two answers"]\naccess list = [[], [], [0, 1]]');
    const [r] = await run([live('llm-ok', 'PLAN-OK: what is 2+2?', 'llm:planner')]);
    expect(r).toMatchObject({ status: 'done', finishReason: 'answered', parseOk: true, nSteps: 3, topology: 'parallel', reward: null, outcome: null, conductorTokensIn: 100, conductorTokensOut: 40 });
    expect(r!.conductorCost).toBe('0.000180000000');
    expect(r!.finalAnswer).toBe(lastAnswerOf(await getWorkflowSteps(env.ctx.db, r!.id)));
    const steps = await getWorkflowSteps(env.ctx.db, r!.id);
    expect(steps.map((s) => [s.worker, s.status])).toEqual([['gpt', 'ok'], ['claude', 'ok'], ['gem', 'ok']]);
    expect(r!.workerTokensIn).toBe(steps.reduce((a, s) => a + s.tokensIn, 0));
    // the worker prompt of the last step shows both earlier answers
    expect(JSON.stringify(google.lastRequest!.body)).toContain('openai answer');
    const conductorRows = await sql<{ n: number }>`select count(*)::int as n from chat_calls where key = ${`wf${r!.id}.conductor`} and origin = 'conductor'`.execute(env.ctx.db);
    expect(conductorRows.rows[0]!.n).toBe(1);
  });

  it('a malformed completion gets reward 0 with the parse error (list and step) stored', async () => {
    plans.set('PLAN-BAD', 'model id = [0, 7]\nsubtasks = ["a", "b"]\naccess list = [[], [0]]');
    const [r] = await run([live('llm-bad', 'PLAN-BAD: anything', 'llm:planner')]);
    expect(r).toMatchObject({ status: 'done', finishReason: 'parse-error', parseOk: false, reward: 0, outcome: 'unparsed' });
    expect(r!.parseError).toMatchObject({ list: 'model id', step: 2 });
    expect(await getWorkflowSteps(env.ctx.db, r!.id)).toEqual([]);
  });

  it('steps start when their own inputs are ready: with access [none, none, [0], all], step 2 runs while step 1 is still held', async () => {
    // the stub holds step 1 until step 2's request has arrived: a level barrier would wait for
    // step 1 before starting step 2, so step 1 would be answered only by the stub's 10 s fallback
    plans.set('PLAN-DF', 'model id = [0, 0, 0, 0]\nsubtasks = ["DF-STEP-0 solve it", "DF-STEP-1 solve it too", "DF-STEP-2 check step 0", "DF-STEP-3 combine"]\naccess list = [[], [], [0], [0, 1, 2]]');
    const [r] = await run([live('llm-df', 'PLAN-DF: what is 2+2?', 'llm:planner')]);
    expect(r).toMatchObject({ finishReason: 'answered', nSteps: 4 });
    expect(dataflow.step1HeldUntilStep2).toBe(true);
    // step 2's request came while step 1 was open, and read step 0's answer only; step 3 read all three
    const reqs = openai.requests.map(lastUser);
    const at = (tag: string) => reqs.findIndex((q) => q.includes(tag) && !q.includes(`DF-STEP-${Number(tag.slice(-1)) + 1}`));
    expect(at('DF-STEP-2')).toBeGreaterThan(at('DF-STEP-1'));
    expect(reqs[at('DF-STEP-2')]).not.toContain('answer one');
    expect(reqs[at('DF-STEP-3')]).toContain('answer one');
    expect((await getWorkflowSteps(env.ctx.db, r!.id)).map((s) => s.status)).toEqual(['ok', 'ok', 'ok', 'ok']);
  });

  it('too many steps ends budget-steps', async () => {
    plans.set('PLAN-LONG', 'model id = [0, 0, 0]\nsubtasks = ["a", "b", "c"]\naccess list = [[], [0], [1]]');
    const [r] = await run([live('llm-long', 'PLAN-LONG: anything', 'llm:planner', { maxSteps: 2 })]);
    expect(r).toMatchObject({ finishReason: 'budget-steps', parseOk: false, reward: 0, nSteps: 3 });
  });

  it('budgets: maxUsd stops before the next level (unrun steps skipped); a step cut by maxTokensPerStep ends budget-tokens', async () => {
    const [usd, tokens] = await run([
      live('budget-usd', 'USD question', 'fixed:chain', { maxSteps: 5, maxUsd: '0.000000000001' }),
      live('budget-tokens', 'CUT question', 'fixed:chain', { maxSteps: 5, maxTokensPerStep: 8 }),
    ]);
    expect(usd).toMatchObject({ finishReason: 'budget-usd', outcome: 'unanswered', finalAnswer: null });
    expect((await getWorkflowSteps(env.ctx.db, usd!.id)).map((s) => s.status)).toEqual(['ok', 'skipped']);
    expect(tokens).toMatchObject({ finishReason: 'budget-tokens' });
    expect((await getWorkflowSteps(env.ctx.db, tokens!.id)).map((s) => s.status)).toEqual(['ok', 'skipped']);
    // the step's call carried the limit
    const req = await sql<{ request: { maxTokens?: number } }>`select request from chat_requests where id = ${`wf${tokens!.id}.s0`}`.execute(env.ctx.db);
    expect(req.rows[0]!.request.maxTokens).toBe(8);
  });

  it('an unreachable conductor endpoint ends conductor-error naming the endpoint', async () => {
    const [dead] = await run([live('llm-dead', 'anything', 'llm:dead')]);
    expect(dead).toMatchObject({ status: 'done', finishReason: 'conductor-error' });
    expect(dead!.error!.message).toContain('llm:dead');
    expect(dead!.error!.message).toContain('http://127.0.0.1:9/v1');
  });
});

describe('the fugu router as a one-step workflow (fixed:router:<checkpoint>)', () => {
  it('runs the worker the router checkpoint picks for each question; a checkpoint of another pool, or none, ends conductor-error naming it', async () => {
    // an anchor router: item i's own question is the anchor of worker i, so it routes item i to REPLAY[i]
    const anchors = Object.fromEntries(REPLAY.map((w, i) => [w, items[i]!.item.prompt]));
    const ckpt = await saveAnchorCheckpoint(env.ctx.db, { home: env.config.home, anchors, id: 'anchor-replay-3' });
    const rows = await run(replayRows('router', `fixed:router:${ckpt.id}`, 3).slice(0, REPLAY.length));
    for (const [i, r] of rows.entries()) {
      expect(r).toMatchObject({ status: 'done', finishReason: 'answered', nSteps: 1 });
      expect((await getWorkflowSteps(env.ctx.db, r.id)).map((s) => s.worker)).toEqual([REPLAY[i]]);
    }
    const [other, missing] = await run([live('router-other-pool', 'anything', `fixed:router:${ckpt.id}`), live('router-missing', 'anything', 'fixed:router:no-such-router')]);
    expect(other).toMatchObject({ finishReason: 'conductor-error' });
    expect(other!.error!.message).toMatch(/routes over \[qwen2\.5-7b-instruct, .*\], not the pool's \[gpt, claude, gem\]/);
    expect(missing).toMatchObject({ finishReason: 'conductor-error' });
    expect(missing!.error!.message).toMatch(/no router checkpoint "no-such-router"/);
  });
});

describe('the embedded policy (policy:<checkpoint>)', () => {
  it('writes parseable workflows from the question\'s features with an exact logprob, the same for the same seed; a checkpoint of another pool, or none, ends conductor-error naming it', async () => {
    const backbone = await loadUseLite();
    const ckpt = await initPolicyCheckpoint(env.ctx.db, { id: 'pol-replay-3', workers: REPLAY, backboneId: backbone.backboneId, featureDim: useLiteHeadDims(REPLAY.length).dim, seed: 3, ranking: REPLAY });
    const rows = await run([...replayRows('pol-a', `policy:${ckpt.id}`, 5), ...replayRows('pol-b', `policy:${ckpt.id}`, 5)]);
    const [a, b] = [rows.slice(0, items.length), rows.slice(items.length)];
    for (const r of rows) {
      expect(r).toMatchObject({ status: 'done', parseOk: true, finishReason: 'answered' });
      expect(r.promptVersion).toBe('policy-v2');
      expect(r.logprob).toBeLessThanOrEqual(0);
      expect(r.reward === 1 || r.reward === 0.5).toBe(true);
    }
    // the same seed on the same items: the same workflows and rewards
    expect(b.map((r) => [r.completion, r.logprob, r.reward])).toEqual(a.map((r) => [r.completion, r.logprob, r.reward]));
    // the features came from (and went to) the Postgres feature cache
    const cached = await sql<{ n: number }>`select count(*)::int as n from router_features where backbone_id = ${backbone.backboneId}`.execute(env.ctx.db);
    expect(cached.rows[0]!.n).toBeGreaterThanOrEqual(items.length);

    const [other, missing] = await run([live('pol-other-pool', 'anything', `policy:${ckpt.id}`), live('pol-missing', 'anything', 'policy:no-such-ckpt')]);
    expect(other).toMatchObject({ finishReason: 'conductor-error' });
    expect(other!.error!.message).toContain(`policy:${ckpt.id}`);
    expect(other!.error!.message).toMatch(/qwen2\.5-7b-instruct.*gpt|gpt.*qwen2\.5-7b-instruct/);
    expect(missing).toMatchObject({ finishReason: 'conductor-error' });
    expect(missing!.error!.message).toMatch(/no policy checkpoint "no-such-ckpt"/);
  });
});

describe('a restricted pool (options.workers: a per-key pool, a randomised training pool)', () => {
  it('every writer sees only those workers: the llm: prompt lists them from id 0, the router and the policy pick among them, fixed topologies rank them', async () => {
    // llm: the planner's prompt lists claude and gem as 0 and 1, and never gpt; its ids are theirs
    plans.set('PLAN-SUB', 'model id = [0, 1]\nsubtasks = ["solve it", "check it"]\naccess list = [[], [0]]');
    plans.set('PLAN-XSUB', 'model id = [2]\nsubtasks = ["solve it"]\naccess list = [[]]');
    const sub = { maxSteps: 5, workers: ['claude', 'gem'] };
    const [ok, bad, single, unknown] = await run([
      live('sub-llm', 'PLAN-SUB: what is 2+2?', 'llm:planner', sub),
      live('sub-llm-bad', 'PLAN-XSUB: anything', 'llm:planner', sub),
      live('sub-single', 'anything', 'fixed:single:gpt', sub),
      live('sub-unknown', 'anything', 'fixed:chain', { maxSteps: 5, workers: ['claude', 'nobody'] }),
    ]);
    expect(ok).toMatchObject({ finishReason: 'answered', nSteps: 2 });
    expect((await getWorkflowSteps(env.ctx.db, ok!.id)).map((s) => s.worker)).toEqual(['claude', 'gem']);
    const system = plannerSystem.get('PLAN-SUB')!;
    expect(system).toContain('0: claude-test (anthropic)');
    expect(system).toContain('1: gemini-test (google)');
    expect(system).not.toContain('a general model');
    // id 2 is outside the 2-worker pool the planner was shown
    expect(bad).toMatchObject({ finishReason: 'parse-error', reward: 0 });
    expect(bad!.parseError).toMatchObject({ list: 'model id', step: 1 });
    // a fixed topology naming a worker outside the pool, and a pool naming a stranger, end conductor-error naming it
    expect(single).toMatchObject({ finishReason: 'conductor-error' });
    expect(single!.error!.message).toContain('"gpt"');
    expect(unknown).toMatchObject({ finishReason: 'conductor-error' });
    expect(unknown!.error!.message).toMatch(/options\.workers\[1\]: worker "nobody" is not in the pool/);

    // fixed:router restricted: item 0 is the anchor of REPLAY[0], which is not allowed: it goes to one of the two others;
    // items 1 and 2 still go to their own workers. fixed:chain ranks the allowed ones. policy: steps only on them.
    const anchors = Object.fromEntries(REPLAY.map((w, i) => [w, items[i]!.item.prompt]));
    const ckpt = await saveAnchorCheckpoint(env.ctx.db, { home: env.config.home, anchors, id: 'anchor-replay-3-sub' });
    const allowed = [REPLAY[1]!, REPLAY[2]!];
    const backbone = await loadUseLite();
    const pol = await initPolicyCheckpoint(env.ctx.db, { id: 'pol-replay-3-sub', workers: REPLAY, backboneId: backbone.backboneId, featureDim: useLiteHeadDims(REPLAY.length).dim, seed: 3, ranking: REPLAY });
    const restricted = (prefix: string, spec: string, seed = 3): NewWorkflow[] => replayRows(prefix, spec, seed).map((r) => ({ ...r, options: { ...r.options, workers: allowed } }));
    const rows = await run([...restricted('sub-router', `fixed:router:${ckpt.id}`).slice(0, 3), ...restricted('sub-chain', 'fixed:chain'), ...[5, 6, 7].flatMap((s) => restricted(`sub-pol-${s}`, `policy:${pol.id}`, s))]);
    const stepsOf = async (r: WorkflowRow) => (await getWorkflowSteps(env.ctx.db, r.id)).map((s) => s.worker);
    expect(rows.every((r) => r.finishReason === 'answered')).toBe(true);
    expect((await Promise.all(rows.slice(0, 3).map(stepsOf))).map((w) => w.length === 1 && allowed.includes(w[0]!))).toEqual([true, true, true]);
    expect(await stepsOf(rows[1]!)).toEqual([REPLAY[1]]);
    expect(await stepsOf(rows[2]!)).toEqual([REPLAY[2]]);
    // the chain: the best-ranked allowed worker solves, the next verifies (REPLAY[0] leads the ranking but is not allowed)
    expect(await stepsOf(rows[3]!)).toEqual(allowed);
    const polSteps = (await Promise.all(rows.slice(3 + items.length).map(stepsOf))).flat();
    expect(polSteps.length).toBeGreaterThan(3 * items.length);
    for (const w of polSteps) expect(allowed).toContain(w);
  });
});

describe('bad input to submitWorkflows', () => {
  const base = (): NewWorkflow => live('bad', 'a question', 'fixed:single:gpt');
  const rejects = async (row: NewWorkflow, field: RegExp, message: RegExp) => {
    const e = await submitWorkflows(deps, [row]).then(() => undefined, (x: unknown) => x);
    expect(e).toBeInstanceOf(InputError);
    expect((e as InputError).field).toMatch(field);
    expect((e as Error).message).toMatch(message);
  };
  it('names the field: unknown worker, unknown topology, maxSteps out of range, empty question', async () => {
    await rejects({ ...base(), conductor: 'fixed:single:nobody' }, /^rows\[0\]\.conductor$/, /unknown worker "nobody".*gpt, claude, gem/);
    await rejects({ ...base(), conductor: 'fixed:star' }, /^rows\[0\]\.conductor$/, /unknown topology "star"/);
    await rejects({ ...base(), conductor: 'llm:nowhere' }, /^rows\[0\]\.conductor$/, /unknown worker or endpoint "nowhere"/);
    await rejects({ ...base(), options: { maxSteps: 0 } }, /^rows\[0\]\.options\.maxSteps$/, /maxSteps must be an integer from 1 to 10, got 0/);
    await rejects({ ...base(), options: { maxSteps: 11 } }, /^rows\[0\]\.options\.maxSteps$/, /got 11/);
    await rejects({ ...base(), question: '   ' }, /^rows\[0\]\.question$/, /question is empty/);
    expect((await sql<{ n: number }>`select count(*)::int as n from workflows where key = 'bad'`.execute(env.ctx.db)).rows[0]!.n).toBe(0);
  });
});

function lastAnswerOf(steps: Array<{ answer: string | null }>): string | null {
  return steps.at(-1)!.answer;
}
