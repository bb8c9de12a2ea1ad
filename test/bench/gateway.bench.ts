// npm run bench:gateway — the latency the gateway adds (auth, routing with the embedded USE-lite
// router, the provider call through the adapter, the OpenAI response) over calling the same stub
// provider directly, with the real `openai` client: p50/p99 at concurrency 1, 16 and 64, and
// requests/s, in-process mode and pool mode (the `route` queue and a router-worker process).
// The gateway runs as its own process (`node apps/gateway/src/main.ts`), as deployed; the stub
// provider and the load generator share this process, for the direct calls and the gateway's alike.
// Each gateway request also writes its chat_calls row (libs/calls) and its requests row.
// Options (env): BENCH_REQUESTS_SCALE (default 1), BENCH_ROUTER_WORKERS (default 1), BENCH_MODES,
// BENCH_RESPONSE_CACHE (default false: the gateway's response cache off, every call reaches the stub).
// BENCH_MODES takes `traced` too: in-process with OpenTelemetry on (OTEL_EXPORTER_OTLP_ENDPOINT at a
// local OTLP receiver in this process, export every 200 ms): what tracing adds, against the
// `in-process` rows of the same run (BENCH_MODES=in-process,traced).
import { fork, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { Redis } from 'ioredis';
import { loadConfig, serviceEnv } from '@fugu/config';
import { createApiKey, publishDeployment } from '@fugu/db';
import { createTestDatabase } from '@fugu/db/testing';
import { writeWorkerPool } from '@fugu/datasets';
import { startOpenAIStub } from '@fugu/providers/testing';
import { benchPrompts, pct } from './stats.ts';
import { saveAnchorCheckpoint } from '@fugu/serving/testing';
import { startOtlpReceiver } from '../support/otlp-receiver.ts';
import { startRouterWorkerProcess, type RouterWorkerProcess } from '../support/router-workers.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const gatewayMain = path.resolve(here, '../../apps/gateway/src/main.ts');
const home = process.env.FUGU_HOME ?? '/tmp/fugu-bench-gateway';
mkdirSync(home, { recursive: true });
const scale = Number(process.env.BENCH_REQUESTS_SCALE ?? 1);
const modes = (process.env.BENCH_MODES ?? 'in-process,pool').split(',');
const log = (s: string) => process.stderr.write(`bench:gateway: ${s}\n`);

const prompts = await benchPrompts();

const database = await createTestDatabase('fugu_bench');
const config = loadConfig({
  FUGU_REDIS_URL: process.env.FUGU_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
  FUGU_DATABASE_URL: database.url,
  FUGU_QUEUE_PREFIX: `fugubench${randomBytes(4).toString('hex')}`,
  FUGU_HOME: home,
});
const stub = await startOpenAIStub({ defaultReply: { type: 'text', text: 'A short answer from the stub provider, about twenty tokens long in all.' } });
const workers = ['w-math', 'w-code', 'w-chat'];
const poolFile = path.join(home, 'bench-pool.yaml');
await writeWorkerPool(poolFile, {
  name: 'bench',
  workers: workers.map((name) => ({ name, provider: 'openai-compatible', model: `${name}-model`, baseUrl: stub.baseURL, settings: {}, prices: { inputPerMTok: '0.1', outputPerMTok: '0.2' } })),
});
const ckpt = await saveAnchorCheckpoint(database.db, {
  home,
  anchors: { 'w-math': 'Solve the equation and show the arithmetic.', 'w-code': 'Write a Python function that parses the file.', 'w-chat': 'Tell me about the history of the city.' },
});
await publishDeployment(database.db, config.router.deployment, ckpt.id);
const { key } = await createApiKey(database.db, { name: 'bench' });

type Run = { lat: number[]; errors: number; secs: number; firstError?: string };

async function load(client: OpenAI, model: string, n: number, conc: number): Promise<Run> {
  const lat: number[] = [];
  let errors = 0;
  let next = 0;
  let firstError: string | undefined;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (next < n) {
        const k = next++;
        const s = performance.now();
        try {
          await client.chat.completions.create({ model, messages: [{ role: 'user', content: prompts[k % prompts.length]! }] });
          lat.push(performance.now() - s);
        } catch (e) {
          errors++;
          firstError ??= (e as Error).message;
        }
      }
    }),
  );
  return { lat, errors, secs: (performance.now() - t0) / 1000, ...(firstError && { firstError }) };
}

// the spans of `traced` mode go here (counted, so a run shows they were sent)
const receiver = modes.includes('traced') ? await startOtlpReceiver() : undefined;

async function startGateway(mode: string): Promise<{ child: ChildProcess; port: number }> {
  const child = fork(gatewayMain, [], {
    env: {
      PATH: process.env.PATH,
      ...serviceEnv(config),
      FUGU_LOG_LEVEL: 'warn',
      FUGU_GATEWAY_MODE: mode === 'traced' ? 'in-process' : mode,
      ...(mode === 'traced' && { OTEL_EXPORTER_OTLP_ENDPOINT: receiver!.url, OTEL_BSP_SCHEDULE_DELAY: '200' }),
      FUGU_GATEWAY_POOL: poolFile,
      FUGU_GATEWAY_PORT: '0',
      FUGU_ROUTER_EXECUTION_PROVIDER: 'cpu',
      // every call reaches the provider (prompts repeat across levels): the full path is measured
      FUGU_GATEWAY_RESPONSE_CACHE: process.env.BENCH_RESPONSE_CACHE ?? 'false',
    },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.on('message', (m: { type?: string; port?: number }) => m?.type === 'ready' && resolve(m.port!));
    child.once('exit', (code) => reject(new Error(`gateway exited during start (code ${code})`)));
  });
  return { child, port };
}

const direct = new OpenAI({ apiKey: 'unused', baseURL: stub.baseURL, maxRetries: 0 });
const levels: Array<[conc: number, n: number]> = [
  [1, Math.round(300 * scale)],
  [16, Math.round(1600 * scale)],
  [64, Math.round(3200 * scale)],
];
const rows: string[] = [];
let totalErrors = 0;
const ms = (x: number) => `${x.toFixed(2)} ms`.padStart(10);

for (const mode of modes) {
  const routers: RouterWorkerProcess[] = [];
  if (mode === 'pool') {
    for (let i = 0; i < Number(process.env.BENCH_ROUTER_WORKERS ?? 1); i++) routers.push(await startRouterWorkerProcess(config));
  }
  const gw = await startGateway(mode);
  const viaGateway = new OpenAI({ apiKey: key, baseURL: `http://127.0.0.1:${gw.port}/v1`, maxRetries: 0, timeout: 60_000 });
  log(`${mode}: warming up`);
  await load(viaGateway, 'fugu', 200, 8);
  await load(direct, 'w-math-model', 200, 8);
  for (const [conc, n] of levels) {
    // direct and gateway runs interleaved per level, so both see the same machine state
    const d = await load(direct, 'w-math-model', n, conc);
    const g = await load(viaGateway, 'fugu', n, conc);
    totalErrors += d.errors + g.errors;
    if (g.firstError) log(`${mode} c=${conc}: first error: ${g.firstError}`);
    rows.push(
      `${mode.padEnd(10)} ${String(conc).padStart(4)} ${String(n).padStart(6)} ${String(d.errors + g.errors).padStart(6)} ` +
        `${ms(pct(d.lat, 50))} ${ms(pct(d.lat, 99))} ${ms(pct(g.lat, 50))} ${ms(pct(g.lat, 99))} ${ms(pct(g.lat, 50) - pct(d.lat, 50))} ${ms(pct(g.lat, 99) - pct(d.lat, 99))} ` +
        `${(n / g.secs).toFixed(0).padStart(8)} ${(n / d.secs).toFixed(0).padStart(8)}`,
    );
    log(rows.at(-1)!);
  }
  gw.child.kill('SIGTERM');
  await new Promise((r) => gw.child.once('exit', r));
  for (const r of routers) await r.term();
}

process.stdout.write(
  `\ngateway overhead over calling the stub provider directly (real openai client; router: USE-lite in ${modes.join(' / ')} mode; ${prompts.length} LLMRouter prompts)\n` +
    `mode       conc   reqs errors  direct p50 direct p99    gw p50     gw p99  overhead p50 overhead p99  gw req/s  direct req/s\n` +
    rows.join('\n') +
    `\nerrors: ${totalErrors}\n` +
    (receiver ? `traced: ${receiver.spans.length} spans received in ${receiver.requests} OTLP requests\n` : ''),
);
await receiver?.close();
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
