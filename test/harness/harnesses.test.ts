// `npm run test:harnesses` (issue 30, item 3): the three coding harnesses, installed at their
// pinned versions into a cache outside the repository (test/harness/harnesses.ts), each run
// non-interactively (`codex exec`, `claude -p`, `opencode run`) in a throwaway git repository
// against a gateway on the keyless harness pool (data/pools/harness.yaml: scripted workers whose
// tool rules call each harness's own read and edit tools), as `fugu` and as `fugu-ultra`, on two
// tasks: `read` (the answer is in a file the harness must read with its own tool) and `edit` (a line
// of a file changed). Each run goes through a recording proxy (its own count of the harness's
// turns, the tool calls it was given and the results it sent back) and has its own API key (its
// request rows). Asserted: the harness's final output, the files on disk, one request row per
// harness turn, every tool call given to the harness answered by it (fugu-ultra: each result back
// in the transcript of the agent that made the call, and in no other's), the cost charged once
// (the key's spend = its rows' costs = the provider calls' costs); every row of a run carries the
// one session id its harness sent (Claude Code's x-claude-code-session-id, Codex's session-id,
// OpenCode's x-session-id). `fugu` routes each turn on its transcript so far with an anchor router
// published over the pool's two workers (a user's task nearest sim-coder, a tool's result on top of
// the transcript nearest sim-reviewer): each row's worker is the router's choice, named by the
// answer's x-fugu-worker. A table at the end: harness x model x task: pass, turns, requests, tool
// calls, the worker of each turn.
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { loadConfig, serviceEnv } from '@fugu/config';
import { formatUsd, parseUsd } from '@fugu/core';
import { createApiKey, getApiKey, listRequests, publishDeployment, type RequestRow } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { saveAnchorCheckpoint } from '@fugu/serving/testing';
import { forkGateway, type AppProcess } from '../support/app-process.ts';
import { HARNESSES, ROUTE, ensureHarnesses, harnessCache, invocation, plain, run, type HarnessSpec, type Installed } from './harnesses.ts';
import { callsIn, resultsIn, startRecorder, turnsOf, type SeenCall } from './recorder.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const POOL = new URL('../../data/pools/harness.yaml', import.meta.url).pathname;
const MODELS = ['fugu', 'fugu-ultra'] as const;
type Model = (typeof MODELS)[number];

const CODE_WORD = 'PERIWINKLE';
const TASKS = {
  read: {
    prompt: 'What is the code word in notes.txt? Read the file with your tools and answer with the code word.',
    files: { 'notes.txt': `The code word is ${CODE_WORD}.\n`, 'greeting.txt': 'Hello, world\nsecond line\n' },
    after: { 'notes.txt': `The code word is ${CODE_WORD}.\n`, 'greeting.txt': 'Hello, world\nsecond line\n' },
  },
  edit: {
    prompt: "In greeting.txt, change the line 'Hello, world' to 'Hello, fugu'.",
    files: { 'notes.txt': `The code word is ${CODE_WORD}.\n`, 'greeting.txt': 'Hello, world\nsecond line\n' },
    after: { 'notes.txt': `The code word is ${CODE_WORD}.\n`, 'greeting.txt': 'Hello, fugu\nsecond line\n' },
  },
} as const;
type Task = keyof typeof TASKS;

/** The router `fugu` serves: a user's task is nearest sim-coder, a tool's result on top of the transcript nearest sim-reviewer. */
const ANCHORS = {
  'sim-coder': [TASKS.read.prompt, TASKS.edit.prompt],
  'sim-reviewer': [`tool: The code word is ${CODE_WORD}.\nassistant: Read the file notes.txt`, 'tool: Hello, world\nsecond line\nassistant: Read the file greeting.txt'],
};

/** The header each harness sends its session id in (test/harness/recorder.ts shows them all). */
const SESSION_HEADER: Readonly<Record<HarnessSpec['name'], string>> = { codex: 'session-id', 'claude-code': 'x-claude-code-session-id', opencode: 'x-session-id' };

/** One run's figures, for the table. */
type Row = {
  harness: string; model: Model; task: Task; pass: boolean; turns: number; requests: number; toolCalls: number; agentCalls: number | null; cost: string; seconds: number;
  /** the worker of each turn, in order (fugu) */
  workers: string[];
  note?: string;
};
const table: Row[] = [];

let database: TestDatabase;
let home: string;
let gateway: { url: string; app: AppProcess };
let root: string;
let installs: Installed[] = [];
let installMs = 0;

beforeAll(async () => {
  root = harnessCache();
  const t0 = performance.now();
  installs = await ensureHarnesses(root, (line) => console.log(`test:harnesses: ${line}`));
  installMs = performance.now() - t0;
  home = await mkdtemp(path.join(tmpdir(), 'fugu-harnesses-'));
  database = await createTestDatabase('fugu_harness');
  const config = loadConfig({ FUGU_REDIS_URL: process.env.FUGU_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', FUGU_DATABASE_URL: database.url, FUGU_QUEUE_PREFIX: `fuguhn${randomBytes(4).toString('hex')}`, FUGU_HOME: home });
  const ckpt = await saveAnchorCheckpoint(database.db, { home, anchors: ANCHORS, prices: { 'sim-coder': { input: '0.20', output: '0.80' }, 'sim-reviewer': { input: '1.00', output: '4.00' } } });
  await publishDeployment(database.db, config.router.deployment, ckpt.id);
  gateway = await forkGateway({
    ...serviceEnv(config), FUGU_LOG_LEVEL: 'warn', FUGU_GATEWAY_POOL: POOL, FUGU_GATEWAY_PORT: '0', FUGU_GATEWAY_AUTH: 'keys', FUGU_ULTRA_ID_SECRET: randomBytes(32).toString('hex'),
  });
}, 900_000);

afterAll(async () => {
  printTable();
  await gateway?.app.term();
  await database?.drop();
  if (home) await rm(home, { recursive: true, force: true });
});

/** A throwaway git repository holding the task's files. */
async function repository(dir: string, files: Readonly<Record<string, string>>): Promise<void> {
  const git = (...args: string[]) => run('git', ['-c', 'user.email=harness@fugu.test', '-c', 'user.name=fugu harness', ...args], { cwd: dir, timeoutMs: 30_000 });
  expect((await git('init', '-q', '.')).code).toBe(0);
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(dir, name), text);
  expect((await git('add', '-A')).code).toBe(0);
  expect((await git('commit', '-q', '-m', 'the task')).code).toBe(0);
}

/** The request rows of a key, once the gateway has written them all (behind its answers). */
async function rowsOf(keyName: string, n: number): Promise<RequestRow[]> {
  let rows: RequestRow[] = [];
  await expect.poll(async () => (rows = await listRequests(database.db, { key: keyName, limit: 1000 })).length, { timeout: 30_000 }).toBeGreaterThanOrEqual(n);
  return rows.reverse();
}

async function runHarness(h: HarnessSpec, model: Model, task: Task): Promise<void> {
  const t = TASKS[task];
  const runDir = await mkdtemp(path.join(home, `${h.name}-${model}-${task}-`));
  const repo = path.join(runDir, 'repo');
  await run('mkdir', ['-p', repo], { cwd: runDir, timeoutMs: 10_000 });
  await repository(repo, t.files);
  const keyName = `${h.name}.${model}.${task}`;
  const key = await createApiKey(database.db, { name: keyName });
  const recorder = await startRecorder(gateway.url.replace(/\/v1$/, ''));
  const row: Row = { harness: h.name, model, task, pass: false, turns: 0, requests: 0, toolCalls: 0, agentCalls: null, cost: '-', seconds: 0, workers: [] };
  table.push(row);
  try {
    const inv = await invocation(h, { root, home: path.join(runDir, 'home'), baseUrl: recorder.url, apiKey: key.key, model, prompt: t.prompt });
    const r = await run(inv.cmd, inv.args, { cwd: repo, env: inv.env, timeoutMs: 240_000 });
    row.seconds = r.ms / 1000;
    const turns = turnsOf(h.wire, recorder.exchanges);
    row.turns = turns.length;
    const said = `${h.name} exited ${r.signal ?? r.code}\n--- stdout\n${plain(r.stdout).slice(-3000)}\n--- stderr\n${plain(r.stderr).slice(-3000)}`;
    expect(r.code, said).toBe(0);

    // the harness's final output
    const output = plain(inv.lastMessageFile ? await readFile(inv.lastMessageFile, 'utf8') : r.stdout).trim();
    expect(output.length, said).toBeGreaterThan(0);
    if (task === 'read') expect(output, said).toContain(CODE_WORD);

    // the files on disk: the edit made, nothing else changed
    for (const [name, text] of Object.entries(t.after)) expect(await readFile(path.join(repo, name), 'utf8'), `${name} after the ${task} task`).toBe(text);
    const status = await run('git', ['status', '--porcelain'], { cwd: repo, timeoutMs: 30_000 });
    expect(status.stdout.split('\n').filter(Boolean).sort()).toEqual(task === 'edit' ? [' M greeting.txt'] : []);

    // every turn answered, and one request row per turn (nothing else under this key)
    expect(turns.every((e) => e.status === 200), turns.map((e) => `${e.path} ${e.status} ${e.response.slice(0, 300)}`).join('\n')).toBe(true);
    expect(turns.length).toBeGreaterThanOrEqual(2);
    const rows = await rowsOf(keyName, turns.length);
    row.requests = rows.length;
    expect(rows.length).toBe(turns.length);
    expect(rows.every((x) => x.route === ROUTE[h.wire] && x.model === model && x.status === 200)).toBe(true);
    if (model === 'fugu') expect(rows.every((x) => x.workflowId === null)).toBe(true);
    else expect(rows.every((x) => x.workflowId !== null)).toBe(true);

    // one session: the id the harness sent with every turn, on every row of the run
    const sent = [...new Set(turns.map((e) => e.headers[SESSION_HEADER[h.name]]))];
    expect(sent, `${h.name}'s ${SESSION_HEADER[h.name]} header`).toEqual([expect.any(String)]);
    expect(rows.map((x) => x.session)).toEqual(rows.map(() => sent[0]));

    // fugu: each turn routed on its transcript (the router's choice is the worker that answered), named by the answer
    if (model === 'fugu') {
      const rowOf = new Map(rows.map((x) => [x.requestId, x]));
      row.workers = turns.map((e) => {
        const r = rowOf.get(String(e.responseHeaders['x-request-id']));
        expect(r, `the row of turn ${String(e.responseHeaders['x-request-id'])}`).toBeDefined();
        expect(r!.topProbs?.[0]?.worker).toBe(r!.worker);
        expect(e.responseHeaders['x-fugu-worker']).toBe(r!.worker);
        return r!.worker!;
      });
    }

    // the tool calls the harness was given, each answered by it in a later turn (its own tool, run in the repository)
    const given: SeenCall[] = turns.flatMap((e) => callsIn(h.wire, e));
    row.toolCalls = given.length;
    expect(given.length).toBeGreaterThanOrEqual(task === 'edit' && h.name !== 'codex' ? 2 : 1);
    const answered = new Map<string, string>();
    for (const e of turns) for (const [id, text] of resultsIn(h.wire, e)) answered.set(id, text);
    for (const c of given) expect(answered.has(c.id), `the harness answered ${c.name} (${c.id})`).toBe(true);
    // the harness's own tools, by the names it declares: its read tool (Codex: its shell), its edit tool (Codex: apply_patch, a custom tool)
    const names = given.map((c) => c.name);
    if (task === 'read') expect(names).toEqual([h.name === 'codex' ? 'exec_command' : h.name === 'claude-code' ? 'Read' : 'read']);
    else expect(names).toEqual(h.name === 'codex' ? ['apply_patch'] : h.name === 'claude-code' ? ['Read', 'Edit'] : ['read', 'edit']);

    // fugu-ultra: each result back with the agent that made the call, and with no other
    if (model === 'fugu-ultra') row.agentCalls = await checkAgents(rows, given, answered);

    // the cost charged once: the key's spend = its rows' costs = the provider calls' costs
    const rowCost = rows.reduce((s, x) => s + x.cost, 0n);
    const callKeys = [...rows.map((x) => `${x.id}.%`), ...new Set(rows.flatMap((x) => (x.workflowId === null ? [] : [`wf${x.workflowId}.%`])))];
    const calls = await sql<{ key: string; cost: string }>`select key, cost::text as cost from chat_calls where key like any(${callKeys})`.execute(database.db);
    const callCost = calls.rows.reduce((s, x) => s + parseUsd(x.cost), 0n);
    await expect.poll(async () => (await getApiKey(database.db, key.record.id))!.spent).toBe(rowCost);
    expect(callCost).toBe(rowCost);
    expect(rowCost).toBeGreaterThan(0n);
    row.cost = formatUsd(rowCost);
    row.pass = true;
  } catch (e) {
    row.note = (e as Error).message.split('\n')[0]!.slice(0, 200);
    throw e;
  } finally {
    await recorder.close();
  }
}

/**
 * fugu-ultra's agents and the harness's tool calls: in each workflow's state, every call an agent
 * made has its result in that agent's own transcript, and that result is what the harness sent for
 * the client call of the same tool and arguments; no agent holds a result of a call it did not
 * make. The conversation's tool memory has one entry per client call, under an agent that made it.
 * Returns the agents' calls (identical calls of one answer are one client call).
 */
async function checkAgents(rows: readonly RequestRow[], given: readonly SeenCall[], answered: ReadonlyMap<string, string>): Promise<number> {
  const ids = [...new Set(rows.map((x) => x.workflowId!))];
  const sessions = await sql<{ workflow_id: string; status: string; state: Json }>`select workflow_id::text, status, state from ultra_sessions where workflow_id = any(${ids})`.execute(database.db);
  expect(sessions.rows.length).toBe(ids.length);
  const resultOf = (name: string, args: string): string | undefined => {
    const c = given.find((g) => g.name === name && sameArgs(g.arguments, args));
    return c && answered.get(c.id);
  };
  let agentCalls = 0;
  const madeBy = new Map<string, Array<{ name: string; args: string }>>();
  for (const s of sessions.rows) {
    expect(s.status).toBe('done');
    (s.state.agents as Json[]).forEach((agent: Json, step: number) => {
      const transcript: Json[] = agent?.messages ?? [];
      const calls = transcript.flatMap((m) => (m.role === 'assistant' && Array.isArray(m.content) ? m.content.filter((p: Json) => p.type === 'tool-call') : []));
      const results = transcript.flatMap((m) => (m.role === 'tool' ? m.content : []));
      expect(results.map((p: Json) => p.toolCallId).sort()).toEqual(calls.map((c: Json) => c.id).sort());
      for (const c of calls) {
        const got = results.find((p: Json) => p.toolCallId === c.id);
        expect(got?.content, `workflow ${s.workflow_id} step ${step}: the result of its ${c.name}`).toBe(resultOf(c.name, c.arguments));
      }
      madeBy.set(`${s.workflow_id}.${step}`, calls.map((c: Json) => ({ name: c.name, args: c.arguments })));
      agentCalls += calls.length;
    });
  }
  const memory = await sql<{ workflow_id: string; step: number; name: string; arguments: string; call_id: string | null }>`
    select workflow_id::text, step, name, arguments, call_id from ultra_tool_log where workflow_id = any(${ids})`.execute(database.db);
  expect(memory.rows.map((m) => m.call_id).sort()).toEqual(given.map((c) => c.id).sort());
  for (const m of memory.rows) expect((madeBy.get(`${m.workflow_id}.${m.step}`) ?? []).some((c) => c.name === m.name && sameArgs(c.args, m.arguments))).toBe(true);
  return agentCalls;
}

const sameArgs = (a: string, b: string): boolean => {
  try {
    return JSON.stringify(JSON.parse(a)) === JSON.stringify(JSON.parse(b));
  } catch {
    return a === b;
  }
};

function printTable(): void {
  const lines = [
    '',
    'test:harnesses: each harness x model x task (turns: the harness\'s requests; requests: the gateway\'s rows; tool calls: given to the harness, [agents\' calls] on fugu-ultra)',
    '| harness | model | task | pass | turns | requests | tool calls | workers by turn | cost (USD) | s |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...table.map(
      (r) =>
        `| ${r.harness} | ${r.model} | ${r.task} | ${r.pass ? 'pass' : `FAIL${r.note ? `: ${r.note}` : ''}`} | ${r.turns} | ${r.requests} | ${r.toolCalls}${r.agentCalls !== null ? ` [${r.agentCalls}]` : ''} | ` +
        `${r.workers.length > 0 ? r.workers.map((w) => w.replace(/^sim-/, '')).join(' ') : '-'} | ${r.cost} | ${r.seconds.toFixed(1)} |`,
    ),
    '',
    `harness install: ${installs.map((i) => `${i.harness} ${i.installed ? `installed in ${(i.ms / 1000).toFixed(1)} s` : 'cached'}`).join(', ')} (${(installMs / 1000).toFixed(1)} s; cache ${root})`,
    '',
  ];
  console.log(lines.join('\n'));
}

describe.each(HARNESSES)('$name $version', (h) => {
  for (const model of MODELS) {
    for (const task of Object.keys(TASKS) as Task[]) {
      it(`${model}: ${task}`, () => runHarness(h, model, task));
    }
  }
});
