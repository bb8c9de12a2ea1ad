// node test/bench/fitness-tasks.bench.ts — the ES fitness tasks' speed on the LLMRouter data:
// an evaluation run of the recorded scores written straight to a fresh test database, SFT on it
// (@fugu/training's trainRouter), then P = 32 candidates (the SFT theta plus N(0, sigma^2) noise)
// evaluated on the single-step task and on the episode task, a few generations each.
// Then the held-out comparison (compareOnEpisodes: SFT sampled and argmax, best single worker,
// random, oracle on the test split, 3 seeds).
// FUGU_BENCH_P (32), FUGU_BENCH_SIGMA (0.05), FUGU_BENCH_REPS (3), FUGU_BENCH_THREADS (cores),
// FUGU_BENCH_ONLY (single-step | episodes | compare: run only that part).
import { availableParallelism } from 'node:os';
import { rng } from '@fugu/core';
import { createTestDatabase } from '@fugu/db/testing';
import { defaultLlmRouterDir, loadLlmRouter } from '@fugu/datasets';
import { compareOnEpisodes, createFitnessTask, formatComparison, trainRouter, TRAIN_DEFAULTS, type FitnessTaskSpec } from '@fugu/training';
import { saveRewardRun } from '@fugu/training/testing';

const P = Number(process.env.FUGU_BENCH_P ?? 32);
const SIGMA = Number(process.env.FUGU_BENCH_SIGMA ?? 0.05);
const REPS = Number(process.env.FUGU_BENCH_REPS ?? 3);
const threads = Number(process.env.FUGU_BENCH_THREADS ?? availableParallelism());
const home = process.env.FUGU_HOME ?? '/tmp/fugu-bench-tasks';
const only = process.env.FUGU_BENCH_ONLY;
const log = (s: string) => process.stderr.write(`bench:fitness-tasks: ${s}\n`);

const dataset = await loadLlmRouter(defaultLlmRouterDir());
const t = await createTestDatabase('fugu_bench');
try {
  const workers = dataset.workers;
  const scores = dataset.items.map((it) => workers.map((w) => it.recorded?.[w]?.score ?? 0));
  const run = await saveRewardRun(t.db, { items: dataset.items, workers, scores });
  log(`run ${run}: ${dataset.items.length} items x ${workers.length} workers; SFT ...`);
  const sft = await trainRouter(t.db, { ...TRAIN_DEFAULTS, run, home, log: () => {} });
  log(`SFT checkpoint ${sft.checkpointId} (best epoch ${sft.bestEpoch})`);

  const specs = ([
    { kind: 'single-step', batchSize: 256 },
    { kind: 'single-step', batchSize: 1024 },
    { kind: 'episodes', episodes: 16, questions: 3, turnBudget: 6 },
    { kind: 'episodes', episodes: 64, questions: 3, turnBudget: 6 },
  ] as FitnessTaskSpec[]).filter((s) => !only || s.kind === only);
  const lines: string[] = [];
  for (const spec of specs) {
    const task = await createFitnessTask({ db: t.db, home, checkpointId: sft.checkpointId, spec, threads });
    try {
      const base = task.theta0;
      const thetas = Array.from({ length: P }, (_, k) => {
        const r = rng('bench-candidate', k);
        return k === 0 ? Float32Array.from(base) : Float32Array.from(base, (v) => v + SIGMA * r.normal());
      });
      await task.evaluate(thetas, { seed: 'warmup', generation: 0, replica: 0, split: 'train' });
      const s0 = JSON.parse(JSON.stringify(task.stats)) as typeof task.stats;
      const t0 = performance.now();
      let mean = 0;
      for (let g = 1; g <= REPS; g++) {
        const res = await task.evaluate(thetas, { seed: 1, generation: g, replica: 0, split: 'train' });
        mean += res.reduce((s, r) => s + r.fitness, 0) / res.length / REPS;
      }
      const secs = (performance.now() - t0) / 1000;
      const perEval = (1000 * secs) / REPS;
      const candPerS = (P * REPS) / secs;
      let line = `${JSON.stringify(spec)}  P=${P}: ${perEval.toFixed(0)} ms per evaluate call, ${candPerS.toFixed(1)} candidate evaluations/s, mean fitness ${mean.toFixed(3)}`;
      if (spec.kind === 'single-step') {
        line += `, ${((candPerS * spec.batchSize) / 1000).toFixed(0)}k input-candidate evaluations/s`;
      } else {
        const f = task.stats.features!, f0 = s0.features!, l = task.stats.layout!, l0 = s0.layout!;
        const encoded = (f.encoded - f0.encoded) / REPS;
        const lookups = (f.lookups - f0.lookups) / REPS;
        line += `\n    per call: ${encoded.toFixed(0)} state texts encoded of ${lookups.toFixed(0)} distinct (${(100 * (1 - encoded / lookups)).toFixed(0)}% cached)` +
          `, encode ${((f.encodeMs - f0.encodeMs) / REPS).toFixed(0)} ms (${((f.encodeMs - f0.encodeMs) / REPS / encoded).toFixed(2)} ms/text)` +
          `, head ${((l.headMs - l0.headMs) / REPS).toFixed(0)} ms over ${((l.shared - l0.shared) / REPS).toFixed(1)} shared + ${((l.paired - l0.paired) / REPS).toFixed(1)} paired turns` +
          `, ${(((l.pairs - l0.pairs) / REPS)).toFixed(0)} (candidate, state) rows`;
      }
      lines.push(line);
      log(line);
    } finally {
      await task.release();
    }
  }
  if (lines.length > 0) process.stdout.write(`\nfitness tasks on LLMRouter (${dataset.items.length} items, ${workers.length} workers), ${threads} ONNX threads, sigma ${SIGMA}, ${REPS} generations each:\n${lines.join('\n')}\n`);
  if (!only || only === 'compare') {
    const t0 = performance.now();
    const cmp = await compareOnEpisodes({
      db: t.db, home, checkpoints: [sft.checkpointId], episodes: 500, questions: 3, turnBudget: 6, seeds: [0, 1, 2], modes: ['sample', 'argmax'], threads,
    });
    process.stdout.write(`\n${formatComparison(cmp)}(${((performance.now() - t0) / 1000).toFixed(1)} s)\n`);
  }
} finally {
  await t.drop();
}
