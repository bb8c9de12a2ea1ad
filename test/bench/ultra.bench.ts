// npm run bench:ultra — the time fugu-ultra adds beyond its workers' own calls (issue 17, figure
// 6): the Conductor's decision, the scheduling of the agents and the workflow's state in Postgres
// (conversation, workflow row, session, step rows, finish), per workflow and per tool round trip.
//
// The gateway runs as its own process (`node apps/gateway/src/main.ts`, as deployed) with a pool
// file of two stub OpenAI-compatible workers (alpha, beta) that answer every call after a fixed
// delay L (BENCH_LATENCY_MS, default 50), and a fugu-ultra deployment published in Postgres
// (publishUltraDeployment; re-published between shapes with the message `fugu ultra publish`
// sends, so the gateway drops the deployment it reuses at once). The
// real `openai` client sends every request; the stubs and the load generator share this process.
//
// Shapes (k = the stub calls on the request's critical path):
//   fixed:single:alpha          one step                                              k = 1
//   fixed:moa:2                 alpha and beta propose in parallel, alpha aggregates  k = 2
//   tools (fixed:single:alpha)  request 1: the agent calls a tool                     k = 1
//                               request 2: the client's result; the agent answers     k = 1
//                               (the by-name tool loop's own calls: what fugu-ultra
//                               adds to the same provider calls)
//   tools (fixed:moa:2, tools)  request 1: both proposers call a tool (the merged
//                               tool calls come back)                                 k = 1
//                               request 2: the client's results; each proposer
//                               answers, then the aggregator                          k = 2
//                               the round trip: both requests                         k = 3
// Baselines, measured in the same run at the same concurrency: the stub called directly (k = 1)
// and a worker called by name through the same gateway (`model: "alpha"`, the gateway's plain
// path: auth, the call pipeline, the chat_calls and requests rows; k = 1).
//
// added = wall - k x L (p50 and p99 of each request's); "over the plain path" = a shape's p50
// added minus the worker-by-name p50 added. The tool loop is also set against the same loop on a
// worker by name (`model: "alpha"` with the tools: a tool call, then the answer; k = 1 + 1), part
// for part, since a round trip is two client requests on either path. Each shape is checked: the stub calls it made per
// request (= the workflow's agent turns) and its answer.
//
// Postgres commits per unit (issue 27, section 5): each fugu-ultra shape's units are run once more
// at concurrency 1 between two readings of pg_stat_database.xact_commit (every transaction of the
// bench's database: the gateway's writes and reads), each after 11 s without requests (a backend
// flushes its counts within 10 s of going idle), less what the gateway commits while idle (its
// batch driver's polls, the journal's sweeps: an idle window of the same wait before the run).
//
// CPU per unit: the CPU time the gateway process, the machine's postgres processes and the bench's
// own process (the load generator and the stubs) spent per unit of each shape, from Linux's /proc
// (n/a elsewhere, or with a Postgres of another machine: then it counts none). At concurrency 16
// the two cores of this machine are the limit, so a shape's latency there follows its CPU.
//
// BENCH_WORKERS=scripted (issue 28, figure 2): alpha and beta are the scripted provider's workers
// instead (`provider: scripted`, latency_ms L, which each call draws from 0.75 L to 1.25 L; run in
// the gateway's process, no HTTP), the direct-stub baseline is left out, and an answer is checked
// for its kind (text or tool calls), not its words. In both modes a rows pass runs each shape's
// units once more at concurrency 1 and prints what they left in Postgres per unit (chat_calls,
// requests, workflows and their steps) and whether every charge agrees: the calls' costs, each
// one's tokens at the pool's prices, the request rows' costs and the API key's spent.
//
// BENCH_JITTER=j (0 to 1, default 0): each stub call waits L x (1 - j) plus a uniform draw of 0 to
// 2 j L (mean L, seeded by BENCH_SEED, default 1) instead of exactly L. With every call exactly L,
// the 16 loops at concurrency 16 move in lock step, and a run settles into one burst or several:
// its p50 then swings between runs by more than the differences it compares (session 17); real
// providers' times vary by far more than this.
//
// Options (env): BENCH_LATENCY_MS (L, default 50), BENCH_REQUESTS_SCALE (default 1: 100 requests
// at concurrency 1, 400 at 16, per shape), BENCH_CONCURRENCY (default 1,16), BENCH_COMMITS (default
// 1; 0 leaves the commits pass out: about 35 s a shape), BENCH_SHAPES (the fugu-ultra shapes to
// run, by name, comma-separated; default all). Services:
// FUGU_TEST_REDIS_URL and FUGU_TEST_DATABASE_URL (a fresh database is made and dropped).
import { fork } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { loadConfig, serviceEnv } from '@fugu/config';
import { createApiKey } from '@fugu/db';
import { createTestDatabase } from '@fugu/db/testing';
import { writeWorkerPool } from '@fugu/datasets';
import { startOpenAIStub, WEATHER_TOOL, type OpenAIStub, type RecordedRequest, type StubReply } from '@fugu/providers/testing';
import { watchApp } from '../support/app-process.ts';
import { publishUltraAndTell } from '../support/ultra-publish.ts';
import { batchEnded, batchLine, jsonl, uploadBatchFile } from '../support/batch-stack.ts';
import { rng } from '@fugu/core';
import { pct } from './stats.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const gatewayMain = path.resolve(here, '../../apps/gateway/src/main.ts');
const L = Number(process.env.BENCH_LATENCY_MS ?? 50);
const scale = Number(process.env.BENCH_REQUESTS_SCALE ?? 1);
const levels = (process.env.BENCH_CONCURRENCY ?? '1,16').split(',').map(Number);
const SCRIPTED = (process.env.BENCH_WORKERS ?? 'stub') === 'scripted';
const JITTER = Number(process.env.BENCH_JITTER ?? 0);
if (!(JITTER >= 0 && JITTER <= 1)) throw new Error(`BENCH_JITTER must be a fraction from 0 to 1, got ${process.env.BENCH_JITTER}`);
const draw = rng('bench:ultra', Number(process.env.BENCH_SEED ?? 1));
if (!['stub', 'scripted'].includes(process.env.BENCH_WORKERS ?? 'stub')) throw new Error(`BENCH_WORKERS must be stub or scripted, got ${process.env.BENCH_WORKERS}`);
const log = (s: string) => process.stderr.write(`bench:ultra: ${s}\n`);
const load1 = () => loadavg()[0]!.toFixed(2);

const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { name: WEATHER_TOOL.name, description: WEATHER_TOOL.description!, parameters: WEATHER_TOOL.parameters } }];
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

// the workers: with tools and the task last, a proposer calls get_weather; given the result, or
// as the aggregator (it reads the proposers' answers), or without tools, it answers
const aggregator = (req: RecordedRequest): boolean => JSON.stringify(req.body?.messages ?? []).includes('Work already done by other agents');
function replyAs(name: string) {
  const reply = replyOf(name);
  // the stub waits L x (1 - j) first; the rest of a call's time is drawn here (BENCH_JITTER)
  return JITTER === 0 ? reply : async (req: RecordedRequest): Promise<StubReply> => {
    await new Promise((r) => setTimeout(r, draw.next() * 2 * JITTER * L));
    return reply(req);
  };
}
function replyOf(name: string) {
  return (req: RecordedRequest): StubReply => {
    const last = (req.body?.messages ?? []).at(-1);
    if (aggregator(req)) return { type: 'text', text: `${name} aggregated`, usage: { input: 40, output: 2 } };
    if (req.body?.tools && last?.role !== 'tool') return { type: 'tool-calls', calls: [{ name: 'get_weather', arguments: `{"city":"${name}"}` }], usage: { input: 20, output: 3 } };
    return { type: 'text', text: `${name} answered`, usage: { input: 30, output: 4 } };
  };
}

const home = await mkdtemp(path.join(tmpdir(), 'fugu-bench-ultra-'));
const database = await createTestDatabase('fugu_bench_ultra');
const config = loadConfig({
  FUGU_REDIS_URL: process.env.FUGU_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
  FUGU_DATABASE_URL: database.url,
  FUGU_QUEUE_PREFIX: `fugubu${randomBytes(4).toString('hex')}`,
  FUGU_HOME: home,
});
const stubs: Record<string, OpenAIStub> = {};
if (!SCRIPTED) for (const name of ['alpha', 'beta']) stubs[name] = await startOpenAIStub({ latencyMs: L * (1 - JITTER), defaultReply: replyAs(name) });
/** the stub calls so far (scripted workers: undefined, their calls are counted in the rows pass) */
const stubCalls = () => (SCRIPTED ? undefined : stubs.alpha!.requests.length + stubs.beta!.requests.length);
const PRICES = { inputPerMTok: '1', outputPerMTok: '2' };
const poolFile = path.join(home, 'pool.yaml');
await writeWorkerPool(poolFile, {
  name: 'bench-ultra',
  workers: ['alpha', 'beta'].map((n, i) =>
    SCRIPTED
      ? { name: n, provider: 'scripted' as const, model: `${n}-model`, settings: {}, prices: PRICES, script: { seed: i + 1, latencyMs: L } }
      : { name: n, provider: 'openai-compatible' as const, model: `${n}-model`, baseUrl: stubs[n]!.baseURL, settings: {}, prices: PRICES },
  ),
});
const publish = (conductor: string) => publishUltraAndTell(config, database.db, { name: 'fugu-ultra', conductor, pool: 'bench-ultra', options: {} });
await publish('fixed:single:alpha');
const { key, record: keyRecord } = await createApiKey(database.db, { name: 'bench-ultra' });

const child = fork(gatewayMain, [], {
  env: {
    PATH: process.env.PATH,
    ...serviceEnv(config),
    FUGU_LOG_LEVEL: 'warn',
    FUGU_GATEWAY_POOL: poolFile,
    FUGU_GATEWAY_PORT: '0',
    FUGU_GATEWAY_AUTH: 'keys',
    FUGU_ULTRA_ID_SECRET: randomBytes(32).toString('hex'),
    FUGU_ROUTER_EXECUTION_PROVIDER: 'cpu',
    // every call reaches its stub (the same prompts repeat)
    FUGU_GATEWAY_RESPONSE_CACHE: 'false',
  },
  stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
});
// the gateway goes with the bench, whatever ends it (a bench that throws must not leave it serving)
process.once('exit', () => {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});
const gateway = await watchApp(child, 'gateway');
const viaGateway = new OpenAI({ apiKey: key, baseURL: `http://127.0.0.1:${gateway.ready.port}/v1`, maxRetries: 0, timeout: 60_000 });
const direct = SCRIPTED ? undefined : new OpenAI({ apiKey: 'unused', baseURL: stubs.alpha!.baseURL, maxRetries: 0, timeout: 60_000 });

type Sample = { ms: number[]; k: number };
type Shape = {
  name: string;
  conductor?: string;
  /** one unit of work (a request, or a tool round trip's two): the wall time of each part, by part name */
  run(i: number): Promise<Record<string, number>>;
  /** the parts, with their critical paths (stub calls in sequence) */
  parts: Record<string, number>;
  /** stub calls per unit */
  calls: number;
};

const question = (i: number) => `Question ${i}: compare the weather of two cities and say which is warmer.`;
const timed = async <T>(f: () => Promise<T>): Promise<[number, T]> => {
  const s = performance.now();
  const out = await f();
  return [performance.now() - s, out];
};
/** the stubs' answer word for word; a scripted worker's: some text, ended by `stop` */
function expectText(c: OpenAI.ChatCompletion, want: string, what: string): void {
  const got = c.choices[0]?.message.content;
  if (SCRIPTED ? !got || c.choices[0]?.finish_reason !== 'stop' : got !== want) throw new Error(`${what}: answered ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
}

/** One fugu-ultra tool round trip: request 1 gets `want` tool calls; request 2 sends their results and gets the answer `answer`. */
async function ultraToolLoop(i: number, what: string, want: number, answer: string): Promise<Record<string, number>> {
  const history: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: question(i) }];
  const [ms1, first] = await timed(() => viaGateway.chat.completions.create({ model: 'fugu-ultra', messages: history, tools }));
  const calls = first.choices[0]?.message.tool_calls ?? [];
  if (first.choices[0]?.finish_reason !== 'tool_calls' || calls.length !== want) throw new Error(`${what}: request 1 answered ${JSON.stringify(first.choices[0])}, expected ${want} tool calls`);
  history.push(first.choices[0]!.message as never, ...calls.map((c) => ({ role: 'tool' as const, tool_call_id: c.id, content: `sunny, 20 C (${(c as Json).function.arguments})` })));
  const [ms2, done] = await timed(() => viaGateway.chat.completions.create({ model: 'fugu-ultra', messages: history, tools }));
  expectText(done, answer, `${what}: request 2`);
  return { 'request 1 (tool calls)': ms1, 'request 2 (results)': ms2, 'round trip': ms1 + ms2 };
}

const allShapes: Shape[] = [
  ...(direct === undefined ? [] : [{
    name: 'direct stub (baseline)',
    parts: { request: 1 },
    calls: 1,
    run: async (i: number) => {
      const [ms, c] = await timed(() => direct.chat.completions.create({ model: 'alpha-model', messages: [{ role: 'user', content: question(i) }] }));
      expectText(c, 'alpha answered', 'direct');
      return { request: ms };
    },
  }]),
  {
    name: 'worker by name (gateway)',
    parts: { request: 1 },
    calls: 1,
    run: async (i) => {
      const [ms, c] = await timed(() => viaGateway.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: question(i) }] }));
      expectText(c, 'alpha answered', 'alpha');
      return { request: ms };
    },
  },
  {
    // the same tool loop on a worker by name (the plain path's own round trip: two requests)
    name: 'worker by name, tools (gateway)',
    parts: { 'request 1 (tool calls)': 1, 'request 2 (results)': 1, 'round trip': 2 },
    calls: 2,
    run: async (i) => {
      const history: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: question(i) }];
      const [ms1, first] = await timed(() => viaGateway.chat.completions.create({ model: 'alpha', messages: history, tools }));
      const calls = first.choices[0]?.message.tool_calls ?? [];
      if (first.choices[0]?.finish_reason !== 'tool_calls' || calls.length !== 1) throw new Error(`by name, tools: request 1 answered ${JSON.stringify(first.choices[0])}, expected a tool call`);
      history.push(first.choices[0]!.message as never, { role: 'tool' as const, tool_call_id: calls[0]!.id, content: 'sunny, 20 C' });
      const [ms2, done] = await timed(() => viaGateway.chat.completions.create({ model: 'alpha', messages: history, tools }));
      expectText(done, 'alpha answered', 'by name, tools: request 2');
      return { 'request 1 (tool calls)': ms1, 'request 2 (results)': ms2, 'round trip': ms1 + ms2 };
    },
  },
  {
    name: 'fixed:single:alpha',
    conductor: 'fixed:single:alpha',
    parts: { workflow: 1 },
    calls: 1,
    run: async (i) => {
      const [ms, c] = await timed(() => viaGateway.chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: question(i) }] }));
      expectText(c, 'alpha answered', 'fixed:single:alpha');
      return { workflow: ms };
    },
  },
  {
    name: 'fixed:moa:2',
    conductor: 'fixed:moa:2',
    parts: { workflow: 2 },
    calls: 3,
    run: async (i) => {
      const [ms, c] = await timed(() => viaGateway.chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: question(i) }] }));
      expectText(c, 'alpha aggregated', 'fixed:moa:2');
      return { workflow: ms };
    },
  },
  {
    // the by-name tool loop's own shape (one agent: a tool call, then its answer; k = 1 + 1): the
    // round trip over the same loop by name is what fugu-ultra adds to the same provider calls
    name: 'tools (fixed:single:alpha)',
    conductor: 'fixed:single:alpha',
    parts: { 'request 1 (tool calls)': 1, 'request 2 (results)': 1, 'round trip': 2 },
    calls: 2,
    run: (i) => ultraToolLoop(i, 'tools (fixed:single:alpha)', 1, 'alpha answered'),
  },
  {
    name: 'tools (fixed:moa:2)',
    conductor: 'fixed:moa:2',
    parts: { 'request 1 (tool calls)': 1, 'request 2 (results)': 2, 'round trip': 3 },
    calls: 5,
    // the stubs' proposers call with their own names as the city; the scripted ones draw the same
    // arguments from the same prompt, and fugu merges two identical calls into one
    run: (i) => ultraToolLoop(i, 'tools (fixed:moa:2)', SCRIPTED ? 1 : 2, 'alpha aggregated'),
  },
];
// BENCH_SHAPES: the fugu-ultra shapes to run (names, comma-separated; default all); the baselines always run
const only = process.env.BENCH_SHAPES?.split(',').map((x) => x.trim());
const unknown = only?.filter((x) => !allShapes.some((sh) => sh.name === x));
if (unknown?.length) throw new Error(`BENCH_SHAPES: no shape ${unknown.map((x) => JSON.stringify(x)).join(', ')} (shapes: ${allShapes.filter((sh) => sh.conductor).map((sh) => sh.name).join(', ')})`);
const shapes = allShapes.filter((sh) => !sh.conductor || !only || only.includes(sh.name));

/** CPU time so far (ms, Linux's /proc; undefined elsewhere) of the gateway process, of each postgres process of this machine (by pid), and of this process (the load generator and the stubs). */
type Cpu = { gateway?: number; postgres?: Map<string, number>; bench: number };
async function cpuNow(): Promise<Cpu> {
  const bench = (process.cpuUsage().user + process.cpuUsage().system) / 1000;
  // utime and stime, the 14th and 15th fields of /proc/<pid>/stat, in ticks of 10 ms
  const of = async (pid: string): Promise<{ comm: string; ms: number } | undefined> => {
    const text = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
    if (!text) return undefined;
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { comm: text.slice(text.indexOf('(') + 1, text.lastIndexOf(')')), ms: (Number(f[11]) + Number(f[12])) * 10 };
  };
  const gateway = child.pid === undefined ? undefined : (await of(String(child.pid)))?.ms;
  if (gateway === undefined) return { bench };
  const postgres = new Map<string, number>();
  for (const pid of (await readdir('/proc')).filter((d) => /^\d+$/.test(d))) {
    const p = await of(pid);
    if (p?.comm === 'postgres') postgres.set(pid, p.ms);
  }
  return { gateway, postgres, bench };
}
/** CPU ms per unit between two readings (a postgres process that ended meanwhile counts none: an undercount) */
function cpuPer(a: Cpu, b: Cpu, n: number): { gateway?: number; postgres?: number; bench: number } {
  const pg = a.postgres && b.postgres ? [...b.postgres].reduce((t, [pid, ms]) => t + ms - (a.postgres!.get(pid) ?? 0), 0) : undefined;
  return { ...(a.gateway !== undefined && b.gateway !== undefined && { gateway: (b.gateway - a.gateway) / n }), ...(pg !== undefined && { postgres: pg / n }), bench: (b.bench - a.bench) / n };
}

async function measure(shape: Shape, n: number, conc: number): Promise<{ samples: Record<string, Sample>; errors: number; secs: number; callsPerUnit: number; firstError?: string; cpu: { gateway?: number; postgres?: number; bench: number } }> {
  const samples: Record<string, Sample> = Object.fromEntries(Object.entries(shape.parts).map(([p, k]) => [p, { ms: [], k }]));
  let next = 0;
  let errors = 0;
  let firstError: string | undefined;
  const calls0 = stubCalls();
  const cpu0 = await cpuNow();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (next < n) {
        const i = next++;
        try {
          const out = await shape.run(i);
          for (const [p, ms] of Object.entries(out)) samples[p]!.ms.push(ms);
        } catch (e) {
          errors++;
          firstError ??= (e as Error).message;
        }
      }
    }),
  );
  const calls1 = stubCalls();
  const secs = (performance.now() - t0) / 1000;
  const cpu = cpuPer(cpu0, await cpuNow(), n);
  return { samples, errors, secs, callsPerUnit: calls0 === undefined ? shape.calls : (calls1! - calls0) / n, ...(firstError && { firstError }), cpu };
}

/** Transactions committed in the bench's database so far, as pg_stat_database has them flushed (this reading commits 2 itself). */
async function commits(): Promise<number> {
  await sql`select pg_stat_clear_snapshot()`.execute(database.db);
  return Number((await sql<{ n: string }>`select xact_commit::text as n from pg_stat_database where datname = current_database()`.execute(database.db)).rows[0]!.n);
}
const settle = () => new Promise((r) => setTimeout(r, 11_000));

/** Postgres commits per unit of a shape, net of the gateway's idle commits (see the header). */
async function commitsPerUnit(shape: Shape, n: number): Promise<number> {
  if (shape.conductor) await publish(shape.conductor);
  await settle();
  const c0 = await commits();
  await settle();
  const c1 = await commits();
  const idlePerMs = Math.max(0, c1 - c0 - 2) / 11_000;
  const t0 = performance.now();
  const m = await measure(shape, n, 1);
  if (m.errors > 0) throw new Error(`${shape.name}: ${m.errors} errors in the commits pass, the first: ${m.firstError}`);
  await settle();
  const c2 = await commits();
  return (c2 - c1 - 2 - idlePerMs * (performance.now() - t0)) / n;
}

const rows: string[] = [];
const cpuRows: string[] = [];
const plain = new Map<number, number>();
const overPlain: string[] = [];
/** the by-name tool loop's p50 added, by concurrency and part; the fugu-ultra tool loop's parts over them */
const plainTools = new Map<string, number>();
const overPlainTools: string[] = [];
let totalErrors = 0;
const f = (x: number) => x.toFixed(1).padStart(7);
log(`L = ${L} ms${JITTER > 0 ? `, jitter ${JITTER} (each call ${(L * (1 - JITTER)).toFixed(0)} to ${(L * (1 + JITTER)).toFixed(0)} ms)` : ''}; load average ${load1()} at the start`);
for (const conc of levels) {
  const units = Math.round((conc === 1 ? 100 : 400) * scale);
  for (const shape of shapes) {
    if (shape.conductor) await publish(shape.conductor);
    await measure(shape, Math.max(4, Math.round(units / 20)), Math.min(conc, 4)); // warm-up
    const m = await measure(shape, units, conc);
    totalErrors += m.errors;
    if (m.firstError) log(`${shape.name} c=${conc}: ${m.errors} errors, the first: ${m.firstError}`);
    if (Math.abs(m.callsPerUnit - shape.calls) > 1e-9) {
      log(`${shape.name} c=${conc}: ${m.callsPerUnit} stub calls per unit, expected ${shape.calls}`);
      totalErrors++;
    }
    for (const [part, s] of Object.entries(m.samples)) {
      // (a part every unit of which failed has no timings: its errors are counted above)
      if (s.ms.length === 0) continue;
      const label = Object.keys(m.samples).length > 1 ? `${shape.name}: ${part}` : shape.name;
      const added50 = pct(s.ms, 50) - s.k * L;
      const added99 = pct(s.ms, 99) - s.k * L;
      if (shape.name === 'worker by name (gateway)') plain.set(conc, added50);
      else if (shape.name.startsWith('worker by name')) plainTools.set(`${conc}/${part}`, added50);
      else if (!shape.name.startsWith('direct')) {
        const base = plain.get(conc);
        if (base !== undefined) overPlain.push(`${label.padEnd(44)} ${String(conc).padStart(4)} ${f(added50 - base)} ms`);
        const same = plainTools.get(`${conc}/${part}`);
        if (shape.name.startsWith('tools') && same !== undefined) overPlainTools.push(`${label.padEnd(44)} ${String(conc).padStart(4)} ${f(added50 - same)} ms`);
      }
      rows.push(
        `${label.padEnd(44)} ${String(conc).padStart(4)} ${String(s.ms.length).padStart(5)} ${String(m.errors).padStart(6)} ${String(s.k).padStart(2)} ${f(pct(s.ms, 50))} ${f(pct(s.ms, 99))} ${f(added50)} ${f(added99)} ${(s.ms.length / m.secs).toFixed(1).padStart(7)}`,
      );
    }
    const ms = (x?: number) => (x === undefined ? 'n/a' : x.toFixed(2)).padStart(9);
    cpuRows.push(`${shape.name.padEnd(44)} ${String(conc).padStart(4)} ${ms(m.cpu.gateway)} ${ms(m.cpu.postgres)} ${ms(m.cpu.bench)} ${ms((m.cpu.gateway ?? NaN) + (m.cpu.postgres ?? NaN) + m.cpu.bench)}`);
    log(`${shape.name} c=${conc}: done (load ${load1()})`);
  }
}

const commitRows: string[] = [];
if (process.env.BENCH_COMMITS !== '0') {
  for (const shape of shapes.filter((x) => !x.name.startsWith('direct'))) {
    const per = await commitsPerUnit(shape, Math.max(10, Math.round(50 * scale)));
    commitRows.push(`${shape.name.padEnd(44)} ${per.toFixed(2).padStart(8)}`);
    log(`${shape.name}: ${per.toFixed(2)} commits per unit`);
  }
}

/** What the bench's database holds so far: rows, tokens and charges in picodollars (exact). */
type Ledger = { calls: number; requests: number; workflows: number; steps: number; tokensIn: number; tokensOut: number; paid: bigint; priced: bigint; requested: bigint; spent: bigint };
async function ledger(): Promise<Ledger> {
  const q = async (text: string) => (await sql<Record<string, string>>`${sql.raw(text)}`.execute(database.db)).rows[0]!;
  // the pool's prices: 1 and 2 USD per million tokens, 1e6 and 2e6 picodollars a token
  const c = await q(`select count(*)::text as n, coalesce(sum(tokens_in), 0)::text as i, coalesce(sum(tokens_out), 0)::text as o, coalesce((sum(cost) * 1e12)::bigint, 0)::text as paid,
    coalesce(sum(tokens_in::bigint * 1000000 + tokens_out::bigint * 2000000), 0)::text as priced from chat_calls`);
  const r = await q(`select count(*)::text as n, coalesce((sum(cost) * 1e12)::bigint, 0)::text as cost from requests`);
  const w = await q(`select (select count(*) from workflows)::text as w, (select count(*) from workflow_steps)::text as s`);
  const k = await q(`select spent::text as spent from api_keys where id = '${keyRecord.id}'`);
  return {
    calls: Number(c.n), requests: Number(r.n), workflows: Number(w.w), steps: Number(w.s), tokensIn: Number(c.i), tokensOut: Number(c.o),
    paid: BigInt(c.paid!), priced: BigInt(c.priced!), requested: BigInt(r.cost!), spent: BigInt(k.spent!),
  };
}
/** The ledger once the rows written behind the answers have landed (two equal readings 1.5 s apart). */
async function settledLedger(): Promise<Ledger> {
  let a = await ledger();
  for (;;) {
    await new Promise((r) => setTimeout(r, 1_500));
    const b = await ledger();
    if (JSON.stringify(a, (_k, v) => (typeof v === 'bigint' ? String(v) : v)) === JSON.stringify(b, (_k, v) => (typeof v === 'bigint' ? String(v) : v))) return b;
    a = b;
  }
}

// the rows pass: each shape's units at concurrency 1, and what they left in Postgres per unit
const ledgerRows: string[] = [];
{
  const n = Math.max(10, Math.round(20 * scale));
  for (const shape of shapes.filter((x) => !x.name.startsWith('direct'))) {
    if (shape.conductor) await publish(shape.conductor);
    const a = await settledLedger();
    const m = await measure(shape, n, 1);
    const b = await settledLedger();
    if (m.errors > 0) {
      log(`${shape.name}: ${m.errors} errors in the rows pass, the first: ${m.firstError}`);
      totalErrors += m.errors;
    }
    const per = (k: 'calls' | 'requests' | 'workflows' | 'steps' | 'tokensIn' | 'tokensOut') => (b[k] - a[k]) / n;
    const paid = b.paid - a.paid;
    // every call's cost is its tokens at the pool's prices, the request rows carry the same sum, and the key was charged it
    const agree = paid === b.priced - a.priced && paid === b.requested - a.requested && paid === b.spent - a.spent && paid > 0n;
    if (!agree || per('calls') !== shape.calls) {
      log(`${shape.name}: rows pass: ${per('calls')} calls per unit (expected ${shape.calls}); paid ${paid}, priced ${b.priced - a.priced}, requests ${b.requested - a.requested}, spent ${b.spent - a.spent} (pUSD)`);
      totalErrors++;
    }
    const usd = Number(paid) / 1e12 / n;
    ledgerRows.push(
      `${shape.name.padEnd(44)} ${per('calls').toFixed(2).padStart(6)} ${per('requests').toFixed(2).padStart(8)} ${per('workflows').toFixed(2).padStart(9)} ${per('steps').toFixed(2).padStart(6)} ${per('tokensIn').toFixed(1).padStart(8)} ${per('tokensOut').toFixed(1).padStart(8)} ${usd.toExponential(3).padStart(10)} ${agree ? 'yes' : 'NO'}`,
    );
  }
}

// the Batch API over the same workers: lines naming alpha and fugu-ultra (fixed:moa:2), run by the
// provider worker the gateway starts for a batch that finds none; what they left per line and the
// batch's charge
{
  const n = Math.max(10, Math.round(20 * scale));
  await publish('fixed:moa:2');
  const lines = Array.from({ length: 2 * n }, (_, i) => batchLine(`b-${i}`, { model: i < n ? 'alpha' : 'fugu-ultra', messages: [{ role: 'user', content: question(i) }] }));
  const a = await settledLedger();
  const file = await uploadBatchFile(viaGateway, jsonl(lines));
  const created = await viaGateway.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
  const done = await batchEnded(viaGateway, created.id, 300_000);
  const b = await settledLedger();
  const charged = BigInt((await sql<{ c: string }>`select charged::text as c from batches where id = ${created.id}`.execute(database.db)).rows[0]!.c);
  const paid = b.paid - a.paid;
  const calls = b.calls - a.calls;
  const agree = paid === b.priced - a.priced && paid === charged && paid === b.spent - a.spent && paid > 0n;
  const ok = done.status === 'completed' && done.request_counts?.completed === 2 * n && calls === n * (1 + 3) && agree;
  if (!ok) {
    log(`batch: ${done.status}, ${JSON.stringify(done.request_counts)}, ${calls} calls (expected ${4 * n}); paid ${paid}, priced ${b.priced - a.priced}, charged ${charged}, spent ${b.spent - a.spent} (pUSD)`);
    totalErrors++;
  }
  ledgerRows.push(
    `${`batch, ${n} alpha + ${n} fugu-ultra: per line`.padEnd(44)} ${(calls / (2 * n)).toFixed(2).padStart(6)} ${((b.requests - a.requests) / (2 * n)).toFixed(2).padStart(8)} ${((b.workflows - a.workflows) / (2 * n)).toFixed(2).padStart(9)} ${((b.steps - a.steps) / (2 * n)).toFixed(2).padStart(6)} ${((b.tokensIn - a.tokensIn) / (2 * n)).toFixed(1).padStart(8)} ${((b.tokensOut - a.tokensOut) / (2 * n)).toFixed(1).padStart(8)} ${(Number(paid) / 1e12 / (2 * n)).toExponential(3).padStart(10)} ${agree ? 'yes' : 'NO'}`,
  );
  log(`batch: ${done.status} (${done.request_counts?.completed} of ${2 * n} lines)`);
}

const header = `${'shape'.padEnd(44)} conc  reqs errors  k  p50 ms  p99 ms  added    added     req/s\n${''.padEnd(44)} ${''.padStart(4)} ${''.padStart(5)} ${''.padStart(6)} ${''.padStart(2)}    wall    wall    p50 ms   p99 ms`;
process.stdout.write(
  `\nfugu-ultra served: wall time per request and what it adds beyond its ${SCRIPTED ? 'scripted' : 'stub'} workers' delays (L = ${L} ms${SCRIPTED ? ', each call drawn from 0.75 L to 1.25 L' : JITTER > 0 ? `, each call drawn from ${1 - JITTER} L to ${1 + JITTER} L (BENCH_JITTER)` : ''}; added = wall - k x L, k = stub calls on the critical path; real openai client; gateway process as deployed)\n` +
    `${header}\n${rows.join('\n')}\n` +
    `\nfugu-ultra over the gateway's plain path (p50 added minus the worker-by-name p50 added, same concurrency)\n${overPlain.join('\n')}\n` +
    `\nfugu-ultra's tool loop over the same tool loop on a worker by name (each part against its by-name counterpart: two requests a round trip on both sides)\n${overPlainTools.join('\n')}\n` +
    `\nRows and charges per unit (concurrency 1; workers: ${SCRIPTED ? 'scripted' : 'OpenAI-wire stubs'}): chat_calls, requests, workflows and workflow_steps rows, the calls' tokens, USD; "agree": each call's cost is its tokens at the pool's prices, the request rows (a batch: its charge) sum to it, the key's spent too\n` +
    `${'shape'.padEnd(44)}  calls requests workflows  steps tok in  tok out        USD agree\n${ledgerRows.join('\n')}\n` +
    `\nCPU per unit (ms; a unit: a request, or a tool loop's two): the gateway process, every postgres process of the machine, the bench's own (the load generator${SCRIPTED ? '' : ' and the stubs'}); at concurrency 16 the two cores are the limit, and a unit's latency follows its CPU\n` +
    `${'shape'.padEnd(44)} conc   gateway  postgres     bench       all\n${cpuRows.join('\n')}\n` +
    (commitRows.length > 0 ? `\nPostgres commits per unit (a request; tools: the round trip's two), net of the gateway's idle commits\n${commitRows.join('\n')}\n` : '') +
    `errors: ${totalErrors}; load average (1 min) at the end: ${load1()}\n`,
);

await gateway.term();
await Promise.all(Object.values(stubs).map((s) => s.close()));
await database.drop();
{
  const redis = new Redis(config.redisUrl);
  const keys = await redis.keys(`${config.queuePrefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
}
await rm(home, { recursive: true, force: true });
process.exit(totalErrors === 0 ? 0 : 1);
