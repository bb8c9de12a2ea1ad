// The live path of the Conductor through the CLI, as processes (issue 12, figures 5 and 6):
// stub OpenAI, Anthropic and Google workers in a pool file, an `llm:` Conductor on an
// OpenAI-compatible endpoint (FUGU_CONDUCTOR_ENDPOINTS, the OpenAI stub) that writes workflows —
// valid ones (parallel, chained, all three workers) and malformed ones (wrong list lengths, an id
// out of range, garbage) — and a dataset whose ground truth the stub workers answer right (gpt,
// gem) or wrong (claude).
// - `fugu ultra run` prints the workflow, each step with its worker and answer, the final answer,
//   tokens and cost (and --json); an unreachable conductor endpoint ends conductor-error, named
//   with its URL, exit 1;
// - `fugu ultra eval` with two specs: exit 0, the summary table, the HTML report; a malformed
//   workflow has reward 0 with its parse error (list and step); `fugu ultra show --json` lists
//   the parse failures;
// - Ctrl-C (SIGINT to the process group, as a terminal sends it) mid-eval pauses the run (exit
//   130) and `--resume` completes it with one row per key.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DatasetItem, WorkerSpec } from '@fugu/core';
import { writeDatasetJsonl, writeWorkerPool } from '@fugu/datasets';
import { getConductorRun, getWorkflowSteps } from '@fugu/db';
import { startAnthropicStub, startGoogleStub, startOpenAIStub, type AnthropicStub, type GoogleStub, type OpenAIStub, type RecordedRequest } from '@fugu/providers/testing';
import type { FuguConfig } from '@fugu/config';
import { createEvalEnv, startWorkerProcess, waitFor, type EvalEnv, type WorkerProcess } from '../support/eval-env.ts';
import { startConductorProcess, type ConductorProcess } from '../support/conductor.ts';
import { runCli, trainerEnv } from '../support/es-env.ts';

const KEY_ENV = 'FUGU_TEST_LIVE_KEY';
const SECRET = 'sk-test-live-0123456789';

let env: EvalEnv;
let fast: Stubs;
let slow: Stubs;
let worker: WorkerProcess;
let conductor: ConductorProcess;
let poolFile: string;
let slowPoolFile: string;
let datasetFile: string;
let manyFile: string;
let cliEnv: Record<string, string>;

/** The planner's completions, by the marker in the question; questions without one get a valid chain. */
const PLANS: Record<string, string> = {
  // all three workers, two in parallel, the third aggregating (tolerant form: reasoning, a think block, a fence, smart quotes)
  'P-PAR': '<think>two solvers, one judge</think>\nThe plan:\n```\nmodel_id = [0, 1, 2]\nsubtasks = [“solve the sum”, "solve the sum too", "combine the two answers"]\naccess list = [[], [], [0, 1]]\n```',
  // chained: gem solves, gpt checks, claude (wrong) has the last word
  'P-CHAIN': 'model id = [2, 0, 1]\nsubtasks = ["solve it", "check the answer", "give the final answer"]\naccess list = [[], "all", [1]]',
  'P-LEN': 'model id = [0, 1]\nsubtasks = ["only one subtask"]\naccess list = [[], [0]]',
  'P-RANGE': 'model id = [0, 9]\nsubtasks = ["a", "b"]\naccess list = [[], [0]]',
  'P-JUNK': 'I would rather not plan anything today.',
};
const DEFAULT_PLAN = 'model id = [0, 2]\nsubtasks = ["solve it", "check and correct it"]\naccess list = [[], [0]]';

const textOf = (req: RecordedRequest): string => JSON.stringify(req.body ?? {});
const lastUser = (req: RecordedRequest): string => {
  const msgs = (req.body?.messages ?? []) as Array<{ role: string; content: unknown }>;
  const c = msgs.filter((m) => m.role === 'user').at(-1)?.content;
  return typeof c === 'string' ? c : JSON.stringify(c);
};
/** a worker's answer: the sum in the question (the overall task comes first in a worker prompt), off by `off` */
const sumAnswer = (req: RecordedRequest, off: number): string => {
  const m = /What is (\d+) \+ (\d+)/.exec(textOf(req));
  return m ? `The answer is ${Number(m[1]) + Number(m[2]) + off}` : 'I cannot tell';
};

type Stubs = { openai: OpenAIStub; anthropic: AnthropicStub; google: GoogleStub; workers: WorkerSpec[]; planner: FuguConfig['conductor']['endpoints'][number] };

/** Stub OpenAI (the planner endpoint and worker gpt: right), Anthropic (claude: wrong by one) and Google (gem: right). */
async function startStubs(name: string, latencyMs: number): Promise<Stubs> {
  const openai = await startOpenAIStub({
    apiKey: SECRET, latencyMs,
    defaultReply: (req) => {
      if (req.body?.model === 'planner-model') {
        const q = lastUser(req);
        const plan = Object.entries(PLANS).find(([k]) => q.includes(`[${k}]`));
        return { type: 'text', text: plan?.[1] ?? DEFAULT_PLAN, usage: { input: 100, output: 40 } };
      }
      return { type: 'text', text: sumAnswer(req, 0), usage: { input: 10, output: 4 } };
    },
  });
  const anthropic = await startAnthropicStub({ apiKey: SECRET, latencyMs, defaultReply: (req) => ({ type: 'text', text: sumAnswer(req, 1), usage: { input: 10, output: 4 } }) });
  const google = await startGoogleStub({ apiKey: SECRET, latencyMs, defaultReply: (req) => ({ type: 'text', text: sumAnswer(req, 0), usage: { input: 10, output: 4 } }) });
  const prices = { inputPerMTok: '1', outputPerMTok: '2' };
  return {
    openai, anthropic, google,
    planner: { name, baseUrl: openai.baseURL, model: 'planner-model', apiKeyEnv: KEY_ENV, prices },
    workers: [
      { name: 'gpt', provider: 'openai', model: 'gpt-test', baseUrl: openai.baseURL, apiKeyEnv: KEY_ENV, settings: {}, prices, description: 'a general model' },
      { name: 'claude', provider: 'anthropic', model: 'claude-test', baseUrl: anthropic.baseURL, apiKeyEnv: KEY_ENV, settings: {}, prices, description: 'a careful writer' },
      { name: 'gem', provider: 'google', model: 'gemini-test', baseUrl: google.baseURL, apiKeyEnv: KEY_ENV, settings: {}, prices, description: 'a fast solver' },
    ],
  };
}

const item = (id: string, a: number, b: number, marker = ''): DatasetItem => ({
  id, task: 'arith', prompt: `What is ${a} + ${b}?${marker ? ` [${marker}]` : ''}`, groundTruth: String(a + b), metric: 'numeric',
});
const ITEMS = [item('par', 2, 3, 'P-PAR'), item('chain', 4, 5, 'P-CHAIN'), item('len', 1, 1, 'P-LEN'), item('range', 3, 3, 'P-RANGE'), item('junk', 5, 5, 'P-JUNK')];
const MANY = Array.from({ length: 10 }, (_, i) => item(`m${i}`, i, 2 * i));

beforeAll(async () => {
  env = await createEvalEnv({ overrides: { 'conductor.pollMs': 20 } });
  [fast, slow] = await Promise.all([startStubs('planner', 0), startStubs('slow-planner', 150)]);
  env.config.conductor.endpoints = [
    fast.planner, slow.planner,
    { name: 'dead', baseUrl: 'http://127.0.0.1:9/v1', model: 'dead-model', apiKeyEnv: KEY_ENV, prices: { inputPerMTok: '0', outputPerMTok: '0' } },
  ];
  poolFile = path.join(env.dir, 'live-pool.yaml');
  slowPoolFile = path.join(env.dir, 'slow-pool.yaml');
  datasetFile = path.join(env.dir, 'live.jsonl');
  manyFile = path.join(env.dir, 'many.jsonl');
  await writeWorkerPool(poolFile, { name: 'live', workers: fast.workers });
  await writeWorkerPool(slowPoolFile, { name: 'live-slow', workers: slow.workers });
  await writeDatasetJsonl(datasetFile, ITEMS);
  await writeDatasetJsonl(manyFile, MANY);
  cliEnv = { [KEY_ENV]: SECRET, FUGU_CONDUCTOR_ENDPOINTS: JSON.stringify(env.config.conductor.endpoints), FUGU_CONDUCTOR_POLL_MS: '20' };
  [worker, conductor] = await Promise.all([startWorkerProcess(env.config, { [KEY_ENV]: SECRET }), startConductorProcess(env.config, { [KEY_ENV]: SECRET, FUGU_CONDUCTOR_POLL_MS: '20' })]);
}, 120_000);

afterAll(async () => {
  await conductor?.term();
  await worker?.term();
  await Promise.all([fast, slow].flatMap((s) => (s ? [s.openai.close(), s.anthropic.close(), s.google.close()] : [])));
  await env?.cleanup();
});

const fugu = (args: string[]) => runCli(env.config, args, cliEnv);

describe('fugu ultra run on live (stub) workers with an llm: Conductor', () => {
  it('prints the workflow, each step with its worker and answer, the final answer, tokens and cost; --json has the same', async () => {
    const r = await fugu(['ultra', 'run', 'What is 6 + 7? [P-PAR]', '--conductor', 'llm:planner', '--pool', poolFile]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^workflow \d+ \(q_\w+\) by llm:planner: done, answered, parallel$/m);
    expect(r.stdout).toContain('question: What is 6 + 7? [P-PAR]');
    expect(r.stdout).toMatch(/^step 0 \[gpt\] sees nothing: solve the sum\n {2}ok: The answer is 13$/m);
    expect(r.stdout).toMatch(/^step 1 \[claude\] sees nothing: solve the sum too\n {2}ok: The answer is 14$/m);
    expect(r.stdout).toMatch(/^step 2 \[gem\] sees 0, 1: combine the two answers\n {2}ok: The answer is 13$/m);
    expect(r.stdout).toMatch(/^final answer: The answer is 13$/m);
    // conductor: 100 in + 40 out at $1/$2 per MTok; workers: 3 steps of 10 in + 4 out
    expect(r.stdout).toMatch(/^tokens: conductor 140, workers 42; cost: conductor \$0\.000180+, workers \$0\.000054/m);
    expect(r.stdout).not.toMatch(/^outcome:/m); // a free question has no verifier
    // the aggregator saw both earlier answers
    expect(JSON.stringify(fast.google.lastRequest!.body)).toContain('The answer is 14');

    const j = await fugu(['ultra', 'run', 'What is 1 + 2? [P-CHAIN]', '--conductor', 'llm:planner', '--pool', poolFile, '--json']);
    expect(j.code, j.stderr).toBe(0);
    const { workflow } = JSON.parse(j.stdout) as { workflow: { conductor: string; topology: string; finalAnswer: string; conductorTokens: number; workerTokens: number; steps: Array<{ worker: string; sees: number[]; answer: string }> } };
    expect(workflow).toMatchObject({ conductor: 'llm:planner', topology: 'chain', finalAnswer: 'The answer is 4', conductorTokens: 140, workerTokens: 42 });
    expect(workflow.steps.map((s) => [s.worker, s.sees, s.answer])).toEqual([['gem', [], 'The answer is 3'], ['gpt', [0], 'The answer is 3'], ['claude', [1], 'The answer is 4']]);
  });

  it('an unreachable conductor endpoint: conductor-error, a line naming the endpoint and its URL, exit 1', async () => {
    const r = await fugu(['ultra', 'run', 'What is 1 + 1?', '--conductor', 'llm:dead', '--pool', poolFile]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/by llm:dead: done, conductor-error/);
    expect(r.stdout).toMatch(/^error: .*llm:dead.*http:\/\/127\.0\.0\.1:9\/v1/m);
    const lines = r.stderr.trim().split('\n').filter((l) => l.startsWith('fugu:'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^fugu: workflow \d+ ended conductor-error: .*llm:dead.*http:\/\/127\.0\.0\.1:9\/v1/);
    expect(r.stderr).not.toContain(SECRET);
  });
});

type ShowJson = {
  conductorRun: { id: string; status: string };
  parseFailures: Array<{ conductor: string; item: string; list: string; step?: number; message: string }>;
  summary: { results: Array<{ name: string; workflows: number; meanReward: number; accuracy: number; parseFailureRate: number }>; examples: Array<{ parseError: string | null }> };
};

describe('fugu ultra eval on live (stub) workers', () => {
  it('two specs on the same items: exit 0, the summary, the report; malformed workflows get reward 0 with their parse error; show --json lists them', async () => {
    const out = path.join(env.dir, 'live-report.html');
    const r = await fugu([
      'ultra', 'eval', '--dataset', datasetFile, '--pool', poolFile, '--conductor', 'llm:planner,fixed:chain', '--split', 'all',
      '--run-id', 'live1', '--local-conductors', '0', '--local-workers', '0', '--out', out,
    ]);
    expect(r.code, r.stderr).toBe(0);
    // llm:planner: par 1, chain 0.5 (claude last), three unparsed 0 -> 0.3; fixed:chain (gpt solves, claude corrects) 0.5 each
    expect(r.stdout).toMatch(/^conductor\s+workflows\s+reward\s+accuracy\s+unparsed/m);
    expect(r.stdout).toMatch(/^llm:planner\s+5\s+0\.300\s+0\.200\s+0\.600/m);
    expect(r.stdout).toMatch(/^fixed:chain\s+5\s+0\.500\s+0\.000\s+0\.000/m);
    expect(r.stdout).toContain(`report: ${out}`);
    const html = await readFile(out, 'utf8');
    expect(html).toContain('llm:planner');
    expect(html).toContain('fixed:chain');

    const rows = await env.ctx.db.selectFrom('workflows as w').innerJoin('items as i', 'i.id', 'w.item_id')
      .select(['w.id', 'i.ext_id', 'w.conductor', 'w.status', 'w.reward', 'w.outcome', 'w.parse_ok', 'w.parse_error', 'w.finish_reason', 'w.topology'])
      .where('w.run_id', '=', 'live1').execute();
    expect(rows).toHaveLength(10);
    const llm = new Map(rows.filter((x) => x.conductor === 'llm:planner').map((x) => [x.ext_id, x]));
    expect(llm.get('par')).toMatchObject({ status: 'done', reward: 1, outcome: 'correct', parse_ok: true, topology: 'parallel' });
    expect(llm.get('chain')).toMatchObject({ status: 'done', reward: 0.5, outcome: 'incorrect', parse_ok: true, topology: 'chain' });
    expect(llm.get('len')).toMatchObject({ reward: 0, outcome: 'unparsed', parse_ok: false, finish_reason: 'parse-error', parse_error: { list: 'subtasks', step: 2 } });
    expect(llm.get('range')).toMatchObject({ reward: 0, outcome: 'unparsed', parse_ok: false, parse_error: { list: 'model id', step: 2 } });
    expect(llm.get('range')!.parse_error!.message).toMatch(/9/);
    expect(llm.get('junk')).toMatchObject({ reward: 0, outcome: 'unparsed', parse_ok: false, parse_error: { list: 'model id' } });
    for (const k of ['len', 'range', 'junk']) expect(await getWorkflowSteps(env.ctx.db, Number(llm.get(k)!.id))).toEqual([]);
    // the three workers all ran steps of the parallel workflow
    expect((await getWorkflowSteps(env.ctx.db, Number(llm.get('par')!.id))).map((s) => s.worker)).toEqual(['gpt', 'claude', 'gem']);

    const show = await fugu(['ultra', 'show', 'live1', '--json']);
    expect(show.code, show.stderr).toBe(0);
    const s = JSON.parse(show.stdout) as ShowJson;
    expect(s.conductorRun).toMatchObject({ id: 'live1', status: 'completed' });
    expect(s.parseFailures.map((f) => [f.conductor, f.item, f.list, f.step])).toEqual([
      ['llm:planner', 'len', 'subtasks', 2], ['llm:planner', 'range', 'model id', 2], ['llm:planner', 'junk', 'model id', undefined],
    ].sort((a, b) => ITEMS.findIndex((i) => i.id === a[1]) - ITEMS.findIndex((i) => i.id === b[1])));
    expect(s.summary.results.find((x) => x.name === 'llm:planner')).toMatchObject({ workflows: 5, parseFailureRate: 0.6 });
    expect(s.summary.examples.some((e) => e.parseError !== null)).toBe(true);
    const plain = await fugu(['ultra', 'show', 'live1']);
    expect(plain.stdout).toMatch(/^parse failures: 3$/m);
    expect(plain.stdout).toMatch(/^ {2}llm:planner range: model id step 2: /m);
  });

  it('Ctrl-C mid-eval pauses the run (exit 130); --resume completes it with one row per key', async () => {
    // only the CLI's own local processes this time, on the slow stubs: the batch is still going when the signal comes
    await Promise.all([conductor.term(), worker.term()]);
    const local = { FUGU_CONDUCTOR_CONCURRENCY: '2', FUGU_CONDUCTOR_LOCK_MS: '2000', FUGU_WORKER_DRAIN_TIMEOUT_MS: '3000' };
    const cli = fileURLToPath(new URL('../../apps/cli/src/main.ts', import.meta.url));
    // detached: its own process group, which the signal goes to (as a terminal's Ctrl-C does: the CLI and its local processes)
    const child = spawn(process.execPath, [
      cli, 'ultra', 'eval', '--dataset', manyFile, '--pool', slowPoolFile, '--conductor', 'llm:slow-planner,fixed:chain', '--split', 'all',
      '--run-id', 'live-int', '--local-conductors', '1', '--local-workers', '1',
    ], { env: trainerEnv(env.config, { ...cliEnv, ...local }), detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
    child.stdout.resume();
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const done = async (): Promise<number> => Number((await env.ctx.db.selectFrom('workflows').select((e) => e.fn.countAll<number>().as('n')).where('run_id', '=', 'live-int').where('status', '=', 'done').executeTakeFirst())?.n ?? 0);
    await waitFor('a first finished workflow', async () => (await done()) >= 1, 120_000, 20);
    process.kill(-child.pid!, 'SIGINT');
    const code = await exited;
    expect(code, stderr).toBe(130);
    expect(stderr).toMatch(/fugu ultra eval --resume live-int/);
    const paused = (await getConductorRun(env.ctx.db, 'live-int'))!;
    expect(paused.status).toBe('paused');
    expect(await done()).toBeLessThan(20);

    const again = await runCli(env.config, ['ultra', 'eval', '--resume', 'live-int', '--local-conductors', '1', '--local-workers', '1'], { ...cliEnv, ...local });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toMatch(/resuming conductor run live-int: \d+\/20 workflows finished/);
    const rows = await env.ctx.db.selectFrom('workflows').select(['key', 'status']).where('run_id', '=', 'live-int').execute();
    expect(rows).toHaveLength(20);
    expect(new Set(rows.map((x) => x.key)).size).toBe(20);
    expect(rows.every((x) => x.status === 'done')).toBe(true);
    expect((await getConductorRun(env.ctx.db, 'live-int'))!.status).toBe('completed');
  });
});
