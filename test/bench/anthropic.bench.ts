// npm run bench:anthropic — what the Anthropic Messages API (POST /v1/messages, the real
// `@anthropic-ai/sdk` client) costs over /v1/chat/completions (the real `openai` client) for the
// same worker, called by name on both (no routing), JSON answers: p50 and p99 at concurrency 1 and
// 16, with the stub provider called directly as the floor; and the same two requests as raw fetch
// (one HTTP client for both), which leaves the clients' own difference out. The gateway runs as its own process
// (`node apps/gateway/src/main.ts`, in-process mode), as deployed; the stub provider and the load
// generator share this process. Each gateway request writes its chat_calls and requests rows.
// The two APIs' requests alternate in chunks within each level (ABAB...), so both see the same
// machine state. Options (env): BENCH_REQUESTS_SCALE (default 1).
import { fork, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { Redis } from 'ioredis';
import { loadConfig, serviceEnv } from '@fugu/config';
import { createApiKey } from '@fugu/db';
import { createTestDatabase } from '@fugu/db/testing';
import { writeWorkerPool } from '@fugu/datasets';
import { startOpenAIStub } from '@fugu/providers/testing';
import { benchPrompts, pct } from './stats.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const gatewayMain = path.resolve(here, '../../apps/gateway/src/main.ts');
const home = process.env.FUGU_HOME ?? '/tmp/fugu-bench-anthropic';
mkdirSync(home, { recursive: true });
const scale = Number(process.env.BENCH_REQUESTS_SCALE ?? 1);
const log = (s: string) => process.stderr.write(`bench:anthropic: ${s}\n`);

const prompts = await benchPrompts();

const database = await createTestDatabase('fugu_bench_anthropic');
const config = loadConfig({
  FUGU_REDIS_URL: process.env.FUGU_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
  FUGU_DATABASE_URL: database.url,
  FUGU_QUEUE_PREFIX: `fugubenchanth${randomBytes(4).toString('hex')}`,
  FUGU_HOME: home,
});
const stub = await startOpenAIStub({ defaultReply: { type: 'text', text: 'A short answer from the stub provider, about twenty tokens long in all.' } });
const WORKER = 'w-stub';
const poolFile = path.join(home, 'bench-anthropic-pool.yaml');
await writeWorkerPool(poolFile, {
  name: 'bench-anthropic',
  workers: [{ name: WORKER, provider: 'openai-compatible', model: `${WORKER}-model`, baseUrl: stub.baseURL, settings: {}, prices: { inputPerMTok: '0.1', outputPerMTok: '0.2' } }],
});
const { key } = await createApiKey(database.db, { name: 'bench' });

type Call = (prompt: string) => Promise<unknown>;
type Run = { lat: number[]; errors: number; firstError?: string };

/** `n` calls at concurrency `conc`, prompts from `from` on; latencies appended to `into`. */
async function load(call: Call, n: number, conc: number, from: number, into: Run): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (next < n) {
        const k = from + next++;
        const s = performance.now();
        try {
          await call(prompts[k % prompts.length]!);
          into.lat.push(performance.now() - s);
        } catch (e) {
          into.errors++;
          into.firstError ??= (e as Error).message;
        }
      }
    }),
  );
}

async function startGateway(): Promise<{ child: ChildProcess; port: number }> {
  const child = fork(gatewayMain, [], {
    env: {
      PATH: process.env.PATH,
      ...serviceEnv(config),
      FUGU_LOG_LEVEL: 'warn',
      FUGU_GATEWAY_MODE: 'in-process',
      FUGU_GATEWAY_POOL: poolFile,
      FUGU_GATEWAY_PORT: '0',
      FUGU_ROUTER_EXECUTION_PROVIDER: 'cpu',
      // every call reaches the provider (prompts repeat): the full path is measured
      FUGU_GATEWAY_RESPONSE_CACHE: 'false',
    },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.on('message', (m: { type?: string; port?: number }) => m?.type === 'ready' && resolve(m.port!));
    child.once('exit', (code) => reject(new Error(`gateway exited during start (code ${code})`)));
  });
  return { child, port };
}

const gw = await startGateway();
const root = `http://127.0.0.1:${gw.port}`;
const direct = new OpenAI({ apiKey: 'unused', baseURL: stub.baseURL, maxRetries: 0 });
const openai = new OpenAI({ apiKey: key, baseURL: `${root}/v1`, maxRetries: 0, timeout: 60_000 });
const anthropic = new Anthropic({ apiKey: key, baseURL: root, maxRetries: 0, timeout: 60_000 });
const MAX = 256;
/** The same request as raw fetch (one HTTP client for both APIs: what differs is the gateway's side only). */
const raw = (route: string, headers: Record<string, string>) => async (p: string) => {
  const res = await fetch(`${root}${route}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ model: WORKER, max_tokens: MAX, messages: [{ role: 'user', content: p }] }) });
  if (res.status !== 200) throw new Error(`${route}: ${res.status} ${await res.text()}`);
  return res.json();
};
const KINDS = ['direct', 'chat', 'messages', 'chatFetch', 'messagesFetch'] as const;
const calls: Record<(typeof KINDS)[number], Call> = {
  direct: (p) => direct.chat.completions.create({ model: `${WORKER}-model`, max_tokens: MAX, messages: [{ role: 'user', content: p }] }),
  chat: (p) => openai.chat.completions.create({ model: WORKER, max_tokens: MAX, messages: [{ role: 'user', content: p }] }),
  messages: (p) => anthropic.messages.create({ model: WORKER, max_tokens: MAX, messages: [{ role: 'user', content: p }] }),
  chatFetch: raw('/v1/chat/completions', { authorization: `Bearer ${key}` }),
  messagesFetch: raw('/v1/messages', { 'x-api-key': key, 'anthropic-version': '2023-06-01' }),
};

log('warming up');
for (const c of Object.values(calls)) await load(c, 200, 8, 0, { lat: [], errors: 0 });

const levels: Array<[conc: number, n: number]> = [
  [1, Math.round(600 * scale)],
  [16, Math.round(3200 * scale)],
];
const CHUNKS = 4;
const rows: string[] = [];
let totalErrors = 0;
const ms = (x: number) => `${x.toFixed(2)} ms`.padStart(11);
for (const [conc, n] of levels) {
  const runs = Object.fromEntries(KINDS.map((k) => [k, { lat: [], errors: 0 } as Run])) as Record<(typeof KINDS)[number], Run>;
  const per = Math.ceil(n / CHUNKS);
  for (let i = 0; i < CHUNKS; i++) {
    // the same prompts for each, in alternating chunks
    for (const k of KINDS) await load(calls[k], per, conc, i * per, runs[k]);
  }
  for (const [name, r] of Object.entries(runs)) {
    totalErrors += r.errors;
    if (r.firstError) log(`c=${conc} ${name}: first error: ${r.firstError}`);
  }
  const p50 = (k: (typeof KINDS)[number]) => pct(runs[k].lat, 50);
  for (const [client, chat, messages] of [['SDKs', 'chat', 'messages'], ['fetch', 'chatFetch', 'messagesFetch']] as const) {
    rows.push(
      `${String(conc).padStart(4)} ${client.padEnd(6)} ${String(per * CHUNKS).padStart(6)} ${ms(p50('direct'))} ${ms(p50(chat))} ${ms(p50(messages))} ${ms(p50(chat) - p50('direct'))} ${ms(p50(messages) - p50('direct'))} ${ms(p50(messages) - p50(chat))}` +
        ` ${ms(pct(runs[chat].lat, 99))} ${ms(pct(runs[messages].lat, 99))}`,
    );
    log(rows.at(-1)!);
  }
}
gw.child.kill('SIGTERM');
await new Promise((r) => gw.child.once('exit', r));

process.stdout.write(
  `\n/v1/messages (@anthropic-ai/sdk) against /v1/chat/completions (openai) for the same worker by name, JSON answers; the stub provider called directly as the floor (${prompts.length} prompts)\n` +
    `clients: SDKs = openai for chat, @anthropic-ai/sdk for messages; fetch = the same raw HTTP requests for both (the gateway's difference alone)\n` +
    `conc client   reqs  direct p50    chat p50 messages p50 chat ovh p50  msg ovh p50 msg - chat p50    chat p99 messages p99\n` +
    rows.join('\n') +
    `\nerrors: ${totalErrors}\n`,
);
await stub.close();
await database.drop();
{
  // this run's queue prefix only
  const redis = new Redis(config.redisUrl);
  const keys = await redis.keys(`${config.queuePrefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
}
process.exit(totalErrors === 0 ? 0 : 1);
