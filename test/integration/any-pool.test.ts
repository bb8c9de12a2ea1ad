// Any pool, served from its first minute (issue 28, section 2): the gateway as deployed, started
// on a pool no router was trained on (scripted workers, no key), answers model `fugu` with the
// pool's default worker (said in a header and in the `fugu` object), a worker by name, and
// fugu-ultra's tool loop to its final answer on the default Conductor (none is published), all
// through the real `openai` client; the shipped example (examples/ultra-tool-loop.ts) as printed.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { loadConfig, serviceEnv, type FuguConfig } from '@fugu/config';
import { createApiKey } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { writeWorkerPool } from '@fugu/datasets';
import { instantScriptedWorkers } from '../support/scripted-pool.ts';
import { forkGateway, type AppProcess } from '../support/app-process.ts';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

let database: TestDatabase;
let home: string;
let config: FuguConfig;
let gateway: { url: string; app: AppProcess };
let client: OpenAI;
let apiKey: string;

beforeAll(async () => {
  home = await mkdtemp(path.join(tmpdir(), 'fugu-any-pool-'));
  database = await createTestDatabase('fugu_any_pool');
  config = loadConfig({ FUGU_REDIS_URL: process.env.FUGU_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', FUGU_DATABASE_URL: database.url, FUGU_QUEUE_PREFIX: `fuguap${randomBytes(4).toString('hex')}`, FUGU_HOME: home });
  // the shipped scripted pool, renamed, its default worker declared, without the delays and failures
  const workers = await instantScriptedWorkers();
  const poolFile = path.join(home, 'new-pool.yaml');
  await writeWorkerPool(poolFile, { name: 'new-pool', defaultWorker: 'sim-medium', workers });
  const { key } = await createApiKey(database.db, { name: 'any-pool' });
  apiKey = key;
  gateway = await forkGateway({ ...serviceEnv(config), FUGU_LOG_LEVEL: 'warn', FUGU_GATEWAY_POOL: poolFile, FUGU_GATEWAY_PORT: '0', FUGU_GATEWAY_AUTH: 'keys', FUGU_ULTRA_ID_SECRET: randomBytes(32).toString('hex') });
  client = new OpenAI({ apiKey: key, baseURL: gateway.url, maxRetries: 0 });
}, 120_000);

afterAll(async () => {
  await gateway?.app.term();
  await database?.drop();
  await rm(home, { recursive: true, force: true });
});

describe('a gateway on a pool no router was trained on', () => {
  it('starts, says it is ready, and tells its parent that fugu routes by the default worker', async () => {
    expect((gateway.app.ready as Json).defaultRouting).toMatchObject({ worker: 'sim-medium', reason: expect.stringMatching(/no router checkpoint is published/) });
    expect((await fetch(gateway.url.replace(/\/v1$/, '/readyz'))).status).toBe(200);
  });

  it('fugu answers with the default worker, said in x-fugu-routing and the fugu object; the answer says it is a simulation', async () => {
    const { data, response } = await client.chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: 'Who won the most gold medals in the Olympics?' }] }).withResponse();
    expect(response.headers.get('x-fugu-routing')).toBe('default');
    expect(response.headers.get('x-fugu-worker')).toBe('sim-medium');
    expect(data.choices[0]!.message.content).toMatch(/\[scripted sim-medium\] On .*gold, medals, olympics/);
    expect((data as Json).fugu).toMatchObject({ worker: 'sim-medium', routing: 'default', routing_reason: expect.stringMatching(/no router checkpoint/), simulation: expect.stringMatching(/^scripted/) });
    // restricted to other workers, the default goes to the first of those the request may use
    const other = await client.chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: 'hi' }], fugu: { workers: ['sim-large', 'sim-small'] } } as never);
    expect((other as Json).fugu.worker).toBe('sim-small');
  });

  it('a worker by name answers any prompt; the stream too', async () => {
    const c = await client.chat.completions.create({ model: 'sim-large', messages: [{ role: 'user', content: 'What is a heat pump?' }] });
    expect(c.choices[0]!.message.content).toMatch(/\[scripted sim-large\]/);
    expect((c as Json).fugu).toMatchObject({ worker: 'sim-large', simulation: expect.stringMatching(/^scripted/) });
    let text = '';
    for await (const chunk of await client.chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: 'What is a heat pump?' }], stream: true })) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toMatch(/\[scripted sim-medium\] On heat, pump/);
  });

  it('the shipped example runs fugu-ultra\'s tool loop to its final answer, as the demo prints it', async () => {
    const example = new URL('../../examples/ultra-tool-loop.ts', import.meta.url).pathname;
    const { stdout } = await promisify(execFile)(process.execPath, [example, gateway.url], { env: { ...process.env, FUGU_API_KEY: apiKey }, timeout: 60_000 });
    expect(stdout).toMatch(/request 1: workflow \d+ \(fixed:moa:2; steps on sim-small, sim-medium, sim-small\): 1 tool call/);
    expect(stdout).toMatch(/tool get_weather\(\{"city":"Paris"\}\) -> 14 C, light rain/);
    expect(stdout).toMatch(/request 2: .*the final answer\nassistant: .*\[scripted sim-small\]/);
  });

  it('fugu-ultra (none published for this pool: the default Conductor, said in the fugu object) runs a tool loop to its final answer on the scripted workers', async () => {
    const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { name: 'get_weather', description: 'Current weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Should I take an umbrella in Paris today? Check the weather.' }];
    const first = await client.chat.completions.create({ model: 'fugu-ultra', messages, tools });
    const calls = first.choices[0]!.message.tool_calls ?? [];
    expect(first.choices[0]!.finish_reason).toBe('tool_calls');
    // both proposers ask the same thing: one call (merged)
    expect(calls.map((c) => [(c as Json).function.name, JSON.parse((c as Json).function.arguments)])).toEqual([['get_weather', { city: 'Paris' }]]);
    messages.push(first.choices[0]!.message as never, ...calls.map((c) => ({ role: 'tool' as const, tool_call_id: c.id, content: 'rain, 12 C' })));
    const done = await client.chat.completions.create({ model: 'fugu-ultra', messages, tools });
    expect(done.choices[0]!.finish_reason).toBe('stop');
    // the aggregator (sim-small, the first worker, as fixed:moa:2 writes it) answers from the proposers' answers, which read the tool's result
    expect(done.choices[0]!.message.content).toMatch(/\[scripted sim-small\]/);
    expect((done as Json).fugu).toMatchObject({ status: 'done', topology: 'parallel', conductor: 'fixed:moa:2', conductor_default: expect.stringMatching(/^no Conductor is published as "fugu-ultra"/) });
  });
});
