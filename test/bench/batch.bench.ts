// npm run bench:batch — the Batch API at scale (issue 18, figure 2): a batch of BENCH_BATCH_LINES
// lines (default 100,000; BENCH_BATCH_FUGU_SHARE of them, default 0.1, model `fugu`, the rest a
// worker by name) over the LLMRouter replay pool through the gateway process and
// BENCH_BATCH_WORKERS provider-worker processes (default 2), and, in the same run, a batch ten
// times smaller as the baseline. For each: wall time, lines/s, and each process's peak RSS
// (sampled from /proc every 250 ms) while the batch was at 10%, 50% and 100% of its lines. Memory
// must not grow with the batch: the large batch's peaks within 10% of the small one's. The same
// processes run both batches. BENCH_TRACE_GC=1: the workers' live heap after full collections too.
import OpenAI from 'openai';
import { batchEnded, batchLine, jsonl, startBatchStack, uploadBatchFile } from '../support/batch-stack.ts';
import type { AppProcess } from '../support/app-process.ts';
import { growthTable, note, onLiveHeap, rssMiB, windows, type Windows } from './growth.ts';

const LINES = Number(process.env.BENCH_BATCH_LINES ?? 100_000);
const WORKERS = Number(process.env.BENCH_BATCH_WORKERS ?? 2);
// the share of lines asking for `fugu` (routed by the router in the gateway, on these CPU cores the
// slowest part); the rest name a worker
const FUGU_SHARE = Number(process.env.BENCH_BATCH_FUGU_SHARE ?? 0.1);
// each worker's concurrency: the worker's own default (the tests' stack runs 16)
const CONCURRENCY = process.env.FUGU_WORKER_CONCURRENCY ?? '256';
// BENCH_PROFILE_DIR: every process writes a V8 CPU profile there (ended by SIGTERM at the end)
const PROFILE: Record<string, string> = process.env.BENCH_PROFILE_DIR ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}` } : {};
const log = (s: string) => process.stderr.write(`bench:batch: ${s}\n`);

// BENCH_TRACE_GC=1: the workers run with --trace-gc, and the bench reports their live heap after
// each full collection beside their RSS (as bench:eval's growth runs)
const TRACE_GC = process.env.BENCH_TRACE_GC === '1';

const stack = await startBatchStack();
const procs: Array<{ name: string; app: AppProcess }> = [];
for (let i = 0; i < WORKERS; i++) {
  const app = await stack.startWorker({ FUGU_WORKER_CONCURRENCY: CONCURRENCY, ...PROFILE }, TRACE_GC ? { execArgv: ['--trace-gc'], stdout: 'pipe' } : {});
  procs.push({ name: `provider-worker ${i + 1}`, app });
}
const workerProcs = procs.slice();
let live: Windows[] = [];
let frac = 0;
workerProcs.forEach((p, i) =>
  onLiveHeap(p.app.child.stdout, (mib) => {
    if (live[i]) note(live[i], frac, mib);
  }),
);
const g = await stack.startGateway({ FUGU_FILES_MAX_BYTES: String(2 * 1024 ** 3), FUGU_BATCH_MAX_LINES: String(Math.max(LINES, 1_000_000)), ...PROFILE });
procs.unshift({ name: 'gateway', app: g.app });
const client = new OpenAI({ apiKey: stack.full.key, baseURL: g.url, maxRetries: 2, timeout: 600_000 });

type Result = { lines: number; secs: number; peaks: Windows[]; live: Windows[] };

async function run(n: number): Promise<Result> {
  const { workers, prompts } = stack;
  const text = jsonl(Array.from({ length: n }, (_, i) => batchLine(`b-${i}`, { model: i % 100 < FUGU_SHARE * 100 ? 'fugu' : workers[i % workers.length]!, messages: [{ role: 'user', content: prompts[(i * 7919) % prompts.length]! }], max_tokens: 64 })));
  const file = await uploadBatchFile(client, text);
  log(`${n} lines uploaded (${(file.bytes / 1024 / 1024).toFixed(1)} MiB)`);
  const t0 = performance.now();
  const b = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
  const peaks = procs.map((p) => windows(p.name));
  live = workerProcs.map((p) => windows(p.name));
  let done = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      frac = done / n;
      for (const [i, p] of procs.entries()) note(peaks[i]!, frac, rssMiB(p.app.child.pid));
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  let shown = 0;
  const poll = setInterval(() => {
    void client.batches.retrieve(b.id).then((x) => {
      done = (x.request_counts?.completed ?? 0) + (x.request_counts?.failed ?? 0);
      if (performance.now() - shown > 10_000) {
        shown = performance.now();
        log(`${b.id}: ${x.status} ${done}/${n} (${((done / ((performance.now() - t0) / 1000)) || 0).toFixed(0)} lines/s)`);
      }
    }, () => {});
  }, 1000);
  const end = await batchEnded(client, b.id, 24 * 3600 * 1000);
  clearInterval(poll);
  done = n;
  await new Promise((r) => setTimeout(r, 500));
  sampling = false;
  await sampler;
  const secs = (performance.now() - t0) / 1000;
  if (end.status !== 'completed' || end.request_counts?.completed !== n) throw new Error(`batch ${b.id} ended ${end.status} with ${JSON.stringify(end.request_counts)}`);
  return { lines: n, secs, peaks, live };
}

const small = await run(Math.max(1, Math.round(LINES / 10)));
const large = await run(LINES);
let out = `\nBatch API over the LLMRouter replay pool (simulated answers from recorded outcomes); gateway + ${WORKERS} provider worker(s) (concurrency ${CONCURRENCY}); ${(FUGU_SHARE * 100).toFixed(0)}% of lines model fugu\n`;
out += `lines      wall s   lines/s\n`;
for (const r of [small, large]) out += `${String(r.lines).padEnd(9)} ${r.secs.toFixed(1).padStart(7)} ${(r.lines / r.secs).toFixed(0).padStart(9)}\n`;
const { text, worst } = growthTable('peak RSS   process', { n: small.lines, windows: small.peaks }, { n: large.lines, windows: large.peaks });
out += `\n${text}\nlargest peak-RSS ratio, ${large.lines} lines against ${small.lines}: ${worst.toFixed(3)} (flat: at most 1.10) -> ${worst <= 1.1 ? 'flat' : 'GROWS'}\n`;
if (TRACE_GC) {
  const heap = growthTable('live heap after a full GC (largest)', { n: small.lines, windows: small.live }, { n: large.lines, windows: large.live });
  out += `\n${heap.text}largest live-heap ratio: ${heap.worst.toFixed(3)}\n`;
}
process.stdout.write(out);
if (process.env.BENCH_PROFILE_DIR) for (const p of procs) await p.app.term();
await stack.close();
process.exit(worst <= 1.1 ? 0 : 1);
