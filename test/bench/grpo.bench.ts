// npm run bench:grpo — one GRPO iteration's wall time on the cluster path (issue 16, figure 6):
// Q x G rollouts (default 8 x 16) of the embedded policy on the LLMRouter replay pool as conduct
// jobs in one flow, with 1, 2 and 4 conductor processes (`node apps/conductor/src/main.ts`, as
// deployed) and one provider-worker process; this process is the coordinator (runStagedLoop with
// the GRPO driver). Per setting: the mean iteration cycle (from the end of one commit to the end
// of the next), rollouts per second, and the share of the cycle the coordinator adds beyond the
// rollouts (load: the run's state and the iteration's rows; dispatch: the flow; fan-in: the
// update; commit: the transaction; its poll, counting finished rows every 500 ms while the
// rollouts run, is shown apart: the fan-in job wakes the loop when the last one ends). Baseline,
// measured in the same run: the same iterations in process (runGrpoInProcess: the engine with the
// replay provider called in this process, no queue), which is what the cluster adds to.
//
// Options (env): BENCH_Q (8), BENCH_G (16), BENCH_ITERATIONS (3 per setting, the first not
// counted: it loads the backbone in the conductors), FUGU_CONDUCTOR_POLL_MS (the engine's poll
// for step answers, default 50). Services: FUGU_TEST_REDIS_URL, FUGU_TEST_DATABASE_URL (a fresh
// database is made and dropped, a queue prefix of its own).
import { cpus, loadavg } from 'node:os';
import { backboneFeatures, runGrpo, startGrpoRun } from '@fugu/ultra-training';
import { createEvalEnv, startWorkerProcess } from '../support/eval-env.ts';
import { startConductorProcess, type ConductorProcess } from '../support/conductor.ts';

const Q = Number(process.env.BENCH_Q ?? 8);
const G = Number(process.env.BENCH_G ?? 16);
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 3);
const POLL_MS = process.env.FUGU_CONDUCTOR_POLL_MS ?? '50';
const log = (s: string) => process.stderr.write(`bench:grpo: ${s}\n`);
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

const env = await createEvalEnv({ overrides: { 'worker.concurrency': 256 } });
const features = await backboneFeatures(env.ctx.db, env.config.home);
type Row = { setting: string; cycleMs: number; rolloutsPerS: number; coordinatorShare: number | null; breakdown: string };
const rows: Row[] = [];
try {
  const base = { dataset: 'llmrouter', pool: 'llmrouter', q: Q, g: G, iterations: ITERATIONS, seed: 1, valEvery: 0, lr: 0.003 };
  // the baseline: in process
  const local = await startGrpoRun(env.ctx, { ...base, runId: 'bench-local' }, features);
  const localCycles: number[] = [];
  await runGrpo(env.ctx, { runId: local, rollouts: 'local', features, onIteration: (e) => { if (e.index > 0) localCycles.push(e.wallMs); } });
  const lc = mean(localCycles);
  rows.push({ setting: 'in process (baseline)', cycleMs: lc, rolloutsPerS: (Q * G) / (lc / 1000), coordinatorShare: null, breakdown: 'no queue' });
  log(`in process: ${lc.toFixed(0)} ms per iteration`);

  const worker = await startWorkerProcess(env.config);
  const conductors: ConductorProcess[] = [];
  try {
    for (const n of [1, 2, 4]) {
      while (conductors.length < n) conductors.push(await startConductorProcess(env.config, { FUGU_CONDUCTOR_POLL_MS: POLL_MS }));
      const id = await startGrpoRun(env.ctx, { ...base, runId: `bench-c${n}`, from: `${local}-start` }, features);
      const cycles: Array<{ cycle: number; coord: number; t: Record<string, number> }> = [];
      const r = await runGrpo(env.ctx, {
        runId: id, rollouts: 'cluster', features,
        // the loop's own events carry its timings; runGrpo passes the cycle as wallMs
        log: () => {},
        onIteration: (e) => {
          if (e.index === 0) return;
          cycles.push({ cycle: e.wallMs, coord: e.coordinatorMs ?? 0, t: { ...e.timings } });
        },
      });
      if (r.status !== 'completed') throw new Error(`run ${id} ended ${r.status}: ${r.reason ?? ''}`);
      const cycle = mean(cycles.map((c) => c.cycle));
      // the poll runs while the rollouts do (the fan-in job wakes the loop at the end): what the
      // coordinator adds beyond the rollouts is the rest
      const coord = mean(cycles.map((c) => c.coord - (c.t.poll ?? 0)));
      const parts = ['load', 'dispatch', 'fanin', 'commit', 'poll'].map((k) => `${k} ${mean(cycles.map((c) => c.t[k] ?? 0)).toFixed(0)}`).join(', ');
      rows.push({ setting: `cluster, ${n} conductor${n > 1 ? 's' : ''}`, cycleMs: cycle, rolloutsPerS: (Q * G) / (cycle / 1000), coordinatorShare: coord / cycle, breakdown: parts });
      log(`${n} conductor(s): ${cycle.toFixed(0)} ms per iteration, coordinator ${coord.toFixed(0)} ms`);
    }
  } finally {
    for (const c of conductors) await c.term();
    await worker.term();
  }
} finally {
  await features.release();
  await env.cleanup();
}

process.stdout.write(`\nGRPO iteration, Q ${Q} x G ${G} = ${Q * G} replay rollouts of the embedded policy (LLMRouter pool), mean over ${ITERATIONS - 1} iterations; ${cpus().length} cores, load ${loadavg()[0]!.toFixed(1)}\n\n`);
process.stdout.write('| setting | iteration (ms) | rollouts/s | coordinator adds (share of the cycle) | coordinator ms (load, dispatch, fan-in, commit; poll, overlapped) |\n|---|---|---|---|---|\n');
for (const r of rows) process.stdout.write(`| ${r.setting} | ${r.cycleMs.toFixed(0)} | ${r.rolloutsPerS.toFixed(0)} | ${r.coordinatorShare === null ? '—' : `${(100 * r.coordinatorShare).toFixed(1)}%`} | ${r.breakdown} |\n`);
