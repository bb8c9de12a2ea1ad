// An agent harness through fugu-ultra (issue 17, figure 3): a minimal coding-agent loop in the
// way of mini-SWE-agent (the model answers; every tool call it makes is executed on a scratch
// folder and its result sent back; until it answers without tools), with three file tools. It
// completes a two-turn task through fugu-ultra, where a workflow of three agents (two proposers
// in parallel, an aggregator that reads both) calls tools, and through a single worker by name.
// The workers are stub providers playing scripted agents: each decides from its own transcript
// (its task, the tool results it got), so a wrong routing of results breaks the task.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import OpenAI from 'openai';
import type { FastifyInstance } from 'fastify';
import type { WorkerPool } from '@fugu/core';
import { loadConfig, type FuguConfig } from '@fugu/config';
import { createApiKey, publishUltraDeployment, savePool, type StoredWorker } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { poolContentHash } from '@fugu/evaluation';
import { startOpenAIStub, type OpenAIStub, type RecordedRequest, type StubReply } from '@fugu/providers/testing';
import { createLogger } from '@fugu/telemetry';
import { testRedisUrl } from '../support/eval-env.ts';
import { startUltraGateway } from '../support/ultra-gateway.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

// ---- the harness ----------------------------------------------------------------------------

const TOOLS: OpenAI.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'write_file', description: 'Write a text file', parameters: { type: 'object', properties: { path: { type: 'string' }, content: { type: 'string' } }, required: ['path', 'content'] } } },
  { type: 'function', function: { name: 'read_file', description: 'Read a text file', parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } } },
  { type: 'function', function: { name: 'list_files', description: 'List the files of the folder', parameters: { type: 'object', properties: {} } } },
];

/** Executes one tool call in `dir` (paths may not leave it); the result text, or an error text. */
async function execute(dir: string, name: string, args: string): Promise<string> {
  let a: Record<string, string>;
  try {
    a = JSON.parse(args) as Record<string, string>;
  } catch {
    return `error: the arguments are not JSON: ${args}`;
  }
  const at = (p: string | undefined): string => {
    const full = path.resolve(dir, p ?? '');
    if (!p || !full.startsWith(dir + path.sep)) throw new Error(`path ${JSON.stringify(p)} is outside the folder`);
    return full;
  };
  try {
    if (name === 'write_file') {
      await writeFile(at(a.path), a.content ?? '');
      return `wrote ${a.path} (${(a.content ?? '').length} characters)`;
    }
    if (name === 'read_file') return await readFile(at(a.path), 'utf8');
    if (name === 'list_files') return (await readdir(dir)).sort().join('\n');
    return `error: no tool ${name}`;
  } catch (e) {
    return `error: ${(e as Error).message}`;
  }
}

type HarnessRun = { answer: string; rounds: number; toolCalls: number; messages: OpenAI.ChatCompletionMessageParam[] };

/** One user turn: the model until it answers without tool calls (at most `maxRounds` requests). */
async function harnessTurn(client: OpenAI, model: string, dir: string, messages: OpenAI.ChatCompletionMessageParam[], maxRounds = 20): Promise<HarnessRun> {
  let toolCalls = 0;
  for (let round = 1; round <= maxRounds; round++) {
    const r = await client.chat.completions.create({ model, messages, tools: TOOLS });
    const msg = r.choices[0]!.message;
    messages.push({ role: 'assistant', content: msg.content, ...(msg.tool_calls && { tool_calls: msg.tool_calls }) });
    if (!msg.tool_calls?.length) return { answer: msg.content ?? '', rounds: round, toolCalls, messages };
    for (const c of msg.tool_calls) {
      const fn = (c as OpenAI.ChatCompletionMessageFunctionToolCall).function;
      messages.push({ role: 'tool', tool_call_id: c.id, content: await execute(dir, fn.name, fn.arguments) });
      toolCalls += 1;
    }
  }
  throw new Error(`the harness gave up after ${maxRounds} rounds`);
}

// ---- the scripted agents ----------------------------------------------------------------------

const TASK1 = 'Each of you writes your notes into <your name>.txt; then write summary.txt listing every file of the folder.';
const TASK2 = 'How many lines does summary.txt have?';

const call = (name: string, args: Record<string, string>): StubReply => ({ type: 'tool-calls', calls: [{ name, arguments: JSON.stringify(args) }], usage: { input: 30, output: 5 } });
const say = (text: string): StubReply => ({ type: 'text', text, usage: { input: 30, output: 5 } });

/** An agent: its task from its last user message; its progress from the tool results since. */
function agent(name: string) {
  return (req: RecordedRequest): StubReply => {
    const msgs: Json[] = req.body?.messages ?? [];
    const lastUser = msgs.findLastIndex((m) => m.role === 'user');
    const prompt = String(msgs[lastUser]?.content ?? '');
    const results: string[] = msgs.slice(lastUser + 1).filter((m) => m.role === 'tool').map((m) => String(m.content));
    const k = results.length;
    const inWorkflow = prompt.includes('You are one agent in a small team');
    const aggregator = prompt.includes('Work already done by other agents');
    if (prompt.includes(TASK2)) {
      if (k === 0) return call('read_file', { path: 'summary.txt' });
      return say(`summary.txt has ${results[0]!.split('\n').length} lines`);
    }
    if (aggregator) {
      if (k === 0) return call('list_files', {});
      if (k === 1) return call('write_file', { path: 'summary.txt', content: results[0]! });
      return say('summary.txt lists every file');
    }
    if (k === 0) return call('write_file', { path: `${name}.txt`, content: `notes of ${name}` });
    if (k === 1) return call('list_files', {});
    if (inWorkflow) return say(`${name} wrote ${name}.txt`);
    // alone: the whole task
    if (k === 2) return call('write_file', { path: 'summary.txt', content: results[1]! });
    return say('summary.txt lists every file');
  };
}

// ---- the test ---------------------------------------------------------------------------------

let database: TestDatabase;
let home: string;
let config: FuguConfig;
let pool: WorkerPool;
let stored: { poolId: number; workers: StoredWorker[] };
let app: FastifyInstance;
let url: string;
let key: string;
const stubs: Record<string, OpenAIStub> = {};

beforeAll(async () => {
  database = await createTestDatabase();
  home = await mkdtemp(path.join(tmpdir(), 'fugu-ultra-harness-'));
  config = loadConfig({ FUGU_REDIS_URL: testRedisUrl(), FUGU_DATABASE_URL: database.url, FUGU_QUEUE_PREFIX: `fuguuh${randomBytes(4).toString('hex')}`, FUGU_HOME: home, FUGU_LOG_LEVEL: 'silent' });
  for (const n of ['alpha', 'beta']) stubs[n] = await startOpenAIStub({ defaultReply: agent(n) });
  pool = { name: 'harness', workers: ['alpha', 'beta'].map((n) => ({ name: n, provider: 'openai-compatible' as const, model: `${n}-model`, baseUrl: stubs[n]!.baseURL, settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' } })) };
  stored = await savePool(database.db, pool, poolContentHash(pool));
  await publishUltraDeployment(database.db, { name: 'fugu-ultra', conductor: 'fixed:moa:2', pool: pool.name, options: {} });
  ({ app, url } = await startUltraGateway({ config, db: database.db, pool, stored, secret: randomBytes(32), log: createLogger({ name: 'harness-test', level: 'silent' }) }));
  key = (await createApiKey(database.db, { name: 'harness' })).key;
});

afterAll(async () => {
  await app?.close();
  await Promise.all(Object.values(stubs).map((s) => s.close()));
  await database?.drop();
  if (home) await rm(home, { recursive: true, force: true });
});

async function scratch(name: string): Promise<string> {
  const dir = path.join(home, name);
  await mkdir(dir);
  return dir;
}

describe('an agent harness on a scratch folder', () => {
  it('completes a two-turn task through fugu-ultra: several agents call tools, each gets its own results', async () => {
    const dir = await scratch('ultra');
    const client = new OpenAI({ apiKey: key, baseURL: url, maxRetries: 0 });
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'system', content: 'You are a coding agent. Use the tools.' }, { role: 'user', content: TASK1 }];
    const t1 = await harnessTurn(client, 'fugu-ultra', dir, messages);
    // the proposers' writes (merged in one message), their listings (the same call: the client runs it once), the aggregator's listing and write, the answer
    expect(t1.rounds).toBe(5);
    expect(t1.toolCalls).toBe(5);
    expect(t1.answer).toBe('summary.txt lists every file');
    expect((await readdir(dir)).sort()).toEqual(['alpha.txt', 'beta.txt', 'summary.txt']);
    expect(await readFile(path.join(dir, 'alpha.txt'), 'utf8')).toBe('notes of alpha');
    expect(await readFile(path.join(dir, 'beta.txt'), 'utf8')).toBe('notes of beta');
    // the aggregator listed the folder after both proposers had written
    expect(await readFile(path.join(dir, 'summary.txt'), 'utf8')).toBe('alpha.txt\nbeta.txt');

    messages.push({ role: 'user', content: TASK2 });
    const t2 = await harnessTurn(client, 'fugu-ultra', dir, messages);
    expect(t2.answer).toBe('summary.txt has 2 lines');
    expect(t2.rounds).toBe(3);
    // two workflows of one conversation, both answered
    const wfs = await database.db.selectFrom('workflows').select(['key', 'status', 'finish_reason']).orderBy('id').execute();
    expect(wfs.map((w) => [w.key.replace(/key_[^/]+\/conv_[^.]+/, 'K/C'), w.status, w.finish_reason])).toEqual([['ultra.K/C.1', 'done', 'answered'], ['ultra.K/C.2', 'done', 'answered']]);
  });

  it('completes the same task through a single worker by name', async () => {
    const dir = await scratch('single');
    const client = new OpenAI({ apiKey: key, baseURL: url, maxRetries: 0 });
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'system', content: 'You are a coding agent. Use the tools.' }, { role: 'user', content: TASK1 }];
    const t1 = await harnessTurn(client, 'alpha', dir, messages);
    expect(t1.answer).toBe('summary.txt lists every file');
    expect(t1.toolCalls).toBe(3);
    expect((await readdir(dir)).sort()).toEqual(['alpha.txt', 'summary.txt']);
    messages.push({ role: 'user', content: TASK2 });
    expect((await harnessTurn(client, 'alpha', dir, messages)).answer).toBe('summary.txt has 1 lines');
  });
});
