// npm run bench:rewards — the latency of POST /v1/rewards for a request of 256 completions
// (issue 16, figure 8), against the same 256 workflows run the other ways in the same run.
//
// The gateway process (`node apps/gateway/src/main.ts`, pool mode) on the LLMRouter replay pool,
// one conductor process and one provider-worker process (their containers' commands). The 256
// completions are what the fixed topologies write (fixed:single, fixed:moa:3, fixed:chain,
// fixed:moa:2) for 64 test questions, the policy's prompt before each as a chat template renders
// it; each repetition takes a fresh seed, so every workflow is executed, nothing is reused.
//
//   rewards      one POST of the 256 in OpenRLHF's shape, through HTTP, wall time at the client
//   rewards hit  the same request again (every workflow already finished: the service's own cost)
//   eval         `fugu ultra eval`'s driver (runUltraEval) on the same 64 questions and 4 specs
//                (256 workflows), wall time of the call: the baseline a user has today
//   engine       the same 256 given workflows through submitWorkflows + waitForWorkflows in this
//                process (poll 100 ms, as the service), no HTTP: what the service adds on top
//
// Options (env): BENCH_REPEATS (default 5), FUGU_CONDUCTOR_CONCURRENCY (default 64). Services:
// FUGU_TEST_REDIS_URL and FUGU_TEST_DATABASE_URL (a fresh database, a queue prefix of its own).
import { fork } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import type { ChatMessage } from '@fugu/core';
import { serviceEnv } from '@fugu/config';
import { createApiKey, getDatasetItems, type StoredItem } from '@fugu/db';
import { resolveWorkerPool } from '@fugu/evaluation';
import { GIVEN_CONDUCTOR, submitWorkflows, waitForWorkflows, type NewWorkflow } from '@fugu/ultra';
import { promptPool, rewardPromptLine, runUltraEval, type UltraEvalOptions } from '@fugu/ultra-training';
import { createEvalEnv, startWorkerProcess } from '../support/eval-env.ts';
import { startConductorProcess } from '../support/conductor.ts';

const R = Number(process.env.BENCH_REPEATS ?? 5);
const CONCURRENCY = Number(process.env.FUGU_CONDUCTOR_CONCURRENCY ?? 64);
const SPECS = ['fixed:single:qwen2.5-7b-instruct', 'fixed:moa:3', 'fixed:chain', 'fixed:moa:2'];
const log = (s: string): void => void process.stderr.write(`bench:rewards: ${s}\n`);
const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
};
const chatml = (messages: ChatMessage[]): string => messages.map((m) => `<|im_start|>${m.role}\n${m.content as string}<|im_end|>\n`).join('') + '<|im_start|>assistant\n';

const env = await createEvalEnv({ overrides: { 'worker.concurrency': 64 } });
const procs = await Promise.all([startWorkerProcess(env.config), startConductorProcess(env.config, { FUGU_CONDUCTOR_CONCURRENCY: String(CONCURRENCY) })]);
const evalOptions = (runId: string, seed: number): UltraEvalOptions => ({
  dataset: 'llmrouter', pool: 'llmrouter', conductor: SPECS.join(','), split: 'test', splitSeed: 0, sample: 64, seed, repeats: 1, maxSteps: 5,
  maxUsd: null, maxTokensPerStep: null, localConductors: 0, localWorkers: 0, keyCheck: false, wait: true, runId, log: () => {},
});
let failures = 0;

// the 256 completions: one eval run's (warms the dataset, the pool and both processes)
const warm = await runUltraEval(env.ctx, evalOptions('warm', 1));
const items = new Map((await getDatasetItems(env.ctx.db, warm.run.datasetId!)).map((it) => [it.dbId, it]));
const rows = (await sql<{ item_id: number; completion: string }>`select item_id, completion from workflows where run_id = 'warm' order by id`.execute(env.ctx.db)).rows;
const pool = await resolveWorkerPool('llmrouter', env.config.llmrouterDir);
const cp = promptPool(pool.workers);
const entries = rows.map((r) => ({ item: items.get(r.item_id)! as StoredItem, completion: r.completion }));
const prompts = entries.map((e) => chatml(rewardPromptLine(e.item, cp, 5).prompt));
// exactly OpenRLHF's body; the seed goes in the URL, as it would in --remote_rm_url
const body = JSON.stringify({ query: entries.map((e, i) => `${prompts[i]}${e.completion}<|im_end|>`), prompts, labels: entries.map((e) => e.item.id) });
log(`${entries.length} completions, request body ${(body.length / 1e6).toFixed(2)} MB`);

const { key } = await createApiKey(env.ctx.db, { name: 'bench' });
const gw = fork(fileURLToPath(new URL('../../apps/gateway/src/main.ts', import.meta.url)), [], {
  env: { PATH: process.env.PATH, ...serviceEnv(env.config), FUGU_LOG_LEVEL: 'error', FUGU_GATEWAY_MODE: 'pool', FUGU_GATEWAY_POOL: 'llmrouter', FUGU_GATEWAY_PORT: '0' },
  stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
});
const port = await new Promise<number>((resolve, reject) => {
  gw.on('message', (m: { type?: string; port?: number }) => m?.type === 'ready' && resolve(m.port!));
  gw.once('exit', (code) => reject(new Error(`gateway exited during start (${code})`)));
});
const post = async (seed: number): Promise<{ ms: number; serverMs: number; unscored: number }> => {
  const t0 = performance.now();
  const res = await fetch(`http://127.0.0.1:${port}/v1/rewards?deadline_s=600&seed=${seed}`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` }, body });
  const j = (await res.json()) as { rewards?: unknown[]; unscored?: number[]; elapsed_ms?: number; error?: unknown };
  const ms = performance.now() - t0;
  if (res.status !== 200 || j.rewards?.length !== entries.length) {
    failures++;
    log(`rewards answered ${res.status}: ${JSON.stringify(j).slice(0, 300)}`);
  }
  return { ms, serverMs: j.elapsed_ms ?? NaN, unscored: j.unscored?.length ?? entries.length };
};
// one request to warm the gateway (dataset loaded, pool stored)
await post(99);

const t = { rewards: [] as number[], server: [] as number[], hit: [] as number[], eval: [] as number[], engine: [] as number[] };
for (let r = 0; r < R; r++) {
  const a = await post(1000 + r);
  t.rewards.push(a.ms);
  t.server.push(a.serverMs);
  if (a.unscored > 0) failures++;
  t.hit.push((await post(1000 + r)).ms);

  let t0 = performance.now();
  const e = await runUltraEval(env.ctx, evalOptions(`ev${r}`, 2000 + r));
  t.eval.push(performance.now() - t0);
  if (e.run.status !== 'completed') failures++;

  t0 = performance.now();
  const given: NewWorkflow[] = entries.map((x, i) => ({
    key: `bench.${r}.${i}`, itemId: x.item.dbId, poolId: 0, question: x.item.prompt, conductor: GIVEN_CONDUCTOR, seed: 3000 + r, options: { maxSteps: 5, completion: x.completion },
  }));
  const poolId = (await sql<{ pool_id: number }>`select pool_id from workflows where run_id = 'warm' limit 1`.execute(env.ctx.db)).rows[0]!.pool_id;
  for (const g of given) g.poolId = poolId;
  const { ids } = await submitWorkflows({ db: env.ctx.db, queue: (n) => env.ctx.queue(n) }, given);
  await waitForWorkflows(env.ctx.db, ids, { pollMs: 100, timeoutMs: 600_000 });
  t.engine.push(performance.now() - t0);
  log(`repetition ${r + 1}/${R}: rewards ${a.ms.toFixed(0)} ms (server ${a.serverMs} ms), again ${t.hit.at(-1)!.toFixed(0)} ms, eval ${t.eval.at(-1)!.toFixed(0)} ms, engine ${t.engine.at(-1)!.toFixed(0)} ms`);
}

const line = (name: string, xs: number[], note: string): string => `${name.padEnd(34)} ${pct(xs, 50).toFixed(0).padStart(7)} ${pct(xs, 90).toFixed(0).padStart(7)}   ${note}`;
process.stdout.write(
  [
    `\nPOST /v1/rewards, 256 completions per request (LLMRouter replay pool, 1 conductor x ${CONCURRENCY}, 1 provider worker; ${R} repetitions, fresh seed each; ${cpus().length} cores, load ${loadavg()[0]!.toFixed(2)})`,
    `${'what'.padEnd(34)} ${'p50 ms'.padStart(7)} ${'p90 ms'.padStart(7)}`,
    line('rewards (HTTP, OpenRLHF shape)', t.rewards, 'client wall time, 256 new workflows'),
    line('  of which in the service', t.server, 'elapsed_ms: from parsing to the last row read'),
    line('rewards, the same request again', t.hit, 'every workflow finished already'),
    line('baseline: fugu ultra eval', t.eval, 'runUltraEval, 64 questions x 4 fixed specs'),
    line('baseline: engine, no HTTP', t.engine, 'submitWorkflows + waitForWorkflows of the 256 given'),
    failures === 0 ? '' : `FAILURES: ${failures}`,
  ].join('\n') + '\n',
);

gw.kill('SIGTERM');
await new Promise((r) => gw.once('exit', r));
for (const p of procs.reverse()) await p.term();
await env.cleanup();
process.exit(failures === 0 ? 0 : 1);
