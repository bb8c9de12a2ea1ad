// What a run measured, gathered from Postgres: the per-worker / per-task table, the reference
// figures (best single worker, best worker per task, per-question oracle; overall and per
// split), cost and latency, and the soft labels p_i(j) = softmax(rbar_ij / tau) for router SFT.
import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { once } from 'node:events';
import { InputError, softLabels } from '@fugu/core';
import { getDataset, getDatasetItems, getPoolWorkers, getRun, itemWorkerMeans, workerCallStats, trimZeros, type Db, type RunRow, type StoredWorker } from '@fugu/db';
import { routingSummary, type RewardRow, type RoutingSummary } from '@fugu/datasets';
import type { EvalReportData } from './report-data.ts';

export type RunSummary = {
  run: RunRow;
  workers: StoredWorker[];
  /** items with a reward from every worker (all of them once the run is complete) */
  rows: RewardRow[];
  summary: RoutingSummary | undefined;
  report: EvalReportData;
};

export async function collectRunSummary(db: Db, runId: string): Promise<RunSummary> {
  const run = await getRun(db, runId);
  if (!run) throw new InputError(`no evaluation run "${runId}"`, { field: 'run' });
  const dataset = (await getDataset(db, run.datasetId))!;
  const chosen = run.options.workers as string[] | undefined;
  const workers = (await getPoolWorkers(db, run.poolId)).filter((w) => !chosen || chosen.includes(w.name));
  const nameOf = new Map(workers.map((w) => [w.id, w.name]));

  const byItem = new Map<number, RewardRow>();
  for (const m of await itemWorkerMeans(db, runId)) {
    let row = byItem.get(m.itemId);
    if (!row) byItem.set(m.itemId, (row = { itemId: m.extId, task: m.task, ...(m.sourceSplit !== null && { split: m.sourceSplit }), rewards: {} }));
    const name = nameOf.get(m.workerId);
    if (name) row.rewards[name] = m.mean;
  }
  const rows = [...byItem.values()].filter((r) => workers.every((w) => r.rewards[w.name] !== undefined));
  const names = workers.map((w) => w.name);
  const summary = rows.length > 0 ? routingSummary(rows, names) : undefined;

  const oracleWins = new Map<string, number>(names.map((n) => [n, 0]));
  for (const r of rows) {
    const best = Math.max(...names.map((n) => r.rewards[n]!));
    for (const n of names) if (r.rewards[n] === best) oracleWins.set(n, oracleWins.get(n)! + 1);
  }
  const stats = new Map((await workerCallStats(db, runId)).map((s) => [s.workerId, s]));
  const tasks = summary ? Object.keys(summary.perTask).sort() : [];
  const taskCounts: Record<string, number> = {};
  for (const r of rows) taskCounts[r.task] = (taskCounts[r.task] ?? 0) + 1;
  const durationS = run.startedAt && run.finishedAt ? (run.finishedAt.getTime() - run.startedAt.getTime()) / 1000 : null;

  const report: EvalReportData = {
    run: {
      id: run.id,
      dataset: dataset.name,
      pool: String(run.options.pool ?? run.poolId),
      repetitions: run.repetitions,
      seed: run.seed,
      sampleSize: run.sampleSize,
      status: run.status,
      createdAt: run.createdAt.toISOString(),
      finishedAt: run.finishedAt?.toISOString() ?? null,
      durationS,
      calls: { total: run.totalCalls, ok: run.doneCalls, failed: run.failedCalls },
      callsPerS: durationS ? (run.doneCalls + run.failedCalls) / durationS : null,
      spendUsd: trimZeros(run.spent),
      spendCapUsd: run.spendCap === null ? null : trimZeros(run.spendCap),
    },
    workers: workers.map((w) => {
      const s = stats.get(w.id);
      return {
        name: w.name,
        provider: w.provider,
        model: w.model,
        inputPerMTok: w.prices.inputPerMTok,
        outputPerMTok: w.prices.outputPerMTok,
        mean: summary?.perWorker.find((p) => p.worker === w.name)?.mean ?? NaN,
        calls: s?.calls ?? 0,
        failed: s?.failed ?? 0,
        tokensIn: s?.tokensIn ?? 0,
        tokensOut: s?.tokensOut ?? 0,
        costUsd: trimZeros(s?.cost ?? '0'),
        latencyP50Ms: s?.latencyP50Ms ?? null,
        latencyP95Ms: s?.latencyP95Ms ?? null,
        oracleShare: rows.length ? oracleWins.get(w.name)! / rows.length : 0,
      };
    }),
    tasks,
    perTask: summary?.perTask ?? {},
    taskCounts,
    reference: summary
      ? { n: summary.n, bestSingle: summary.bestSingle, bestPerTask: summary.bestPerTask, oracle: summary.oracle }
      : { n: 0, bestSingle: { worker: '-', mean: NaN }, bestPerTask: { mean: NaN, choice: {} }, oracle: NaN },
    bySplit: Object.fromEntries(
      Object.entries(summary?.bySplit ?? {}).map(([k, v]) => [k, { n: v.n, bestSingle: v.bestSingle, bestPerTask: { mean: v.bestPerTask.mean }, oracle: v.oracle }]),
    ),
  };
  return { run, workers, rows, summary, report };
}

/** The per-worker x per-task table and the reference figures, as plain text. */
export function formatSummary(s: RunSummary): string {
  const out: string[] = [];
  const { summary, report } = s;
  if (!summary) return `run ${s.run.id}: no item has a reward from every worker yet\n`;
  const names = s.workers.map((w) => w.name);
  const tasks = report.tasks;
  // columns are numbered (names are long and share prefixes); the legend names them
  const col = 9;
  const head = names.map((_, j) => `w${j + 1}`);
  out.push(`workers: ${names.map((n, j) => `w${j + 1} ${n}`).join(', ')}`);
  out.push(`mean reward per worker and task (${summary.n} items${summary.n < s.run.itemCount ? ` of ${s.run.itemCount}` : ''}, ${s.run.repetitions} repetition(s); * best of the row):`);
  out.push(['task'.padEnd(22), 'n'.padStart(5), ...head.map((h) => h.padStart(col))].join(''));
  for (const t of tasks) {
    const best = Math.max(...names.map((n) => summary.perTask[t]![n]!));
    out.push([t.padEnd(22).slice(0, 22), String(report.taskCounts[t] ?? 0).padStart(5), ...names.map((n) => {
      const v = summary.perTask[t]![n]!;
      return `${v === best ? '*' : ' '}${v.toFixed(3)}`.padStart(col);
    })].join(''));
  }
  out.push(['ALL'.padEnd(22), String(summary.n).padStart(5), ...summary.perWorker.map((p) => p.mean.toFixed(3).padStart(col))].join(''));
  out.push(['cost USD'.padEnd(27), ...report.workers.map((w) => Number(w.costUsd).toFixed(4).padStart(col))].join(''));
  out.push('');
  // the dataset's own split (LLMRouter's published train/test, duplicates across them included), not
  // the router's split by unique prompt that `fugu router train` and the Conductor's runs use
  const splits = Object.keys(summary.bySplit);
  out.push(`reference figures (mean reward of the chosen worker)${splits.length > 0 ? `, per split as the dataset gives it (${splits.sort().join(' / ')}; the router's own split, by unique prompt, is another):` : ':'}`);
  out.push(`${'split'.padEnd(8)}${'n'.padStart(6)}  ${'best single worker'.padEnd(42)}${'best per task'.padStart(14)}${'oracle'.padStart(9)}`);
  const line = (name: string, f: { n: number; bestSingle: { worker: string; mean: number }; bestPerTask: { mean: number }; oracle: number }) =>
    `${name.padEnd(8)}${String(f.n).padStart(6)}  ${`${f.bestSingle.mean.toFixed(3)} (${f.bestSingle.worker})`.padEnd(42)}${f.bestPerTask.mean.toFixed(3).padStart(14)}${f.oracle.toFixed(3).padStart(9)}`;
  out.push(line('all', summary));
  for (const [k, v] of Object.entries(summary.bySplit).sort()) out.push(line(k, v));
  out.push('');
  out.push(`calls: ${s.run.doneCalls} ok, ${s.run.failedCalls} failed of ${s.run.totalCalls}; spend $${report.run.spendUsd}${report.run.callsPerS ? `; ${report.run.callsPerS.toFixed(0)} calls/s` : ''}`);
  return `${out.join('\n')}\n`;
}

/** `labels`: each item's soft label (in the run's worker order), for statistics over them (the report's argmax counts, ties split: softLabelArgmax) */
export type LabelStats = { path: string; items: number; tau: number; meanEntropy: number; workers: string[]; labels: number[][] };

/** The prompts of a run's items, by item id, for label files that train a router on their own. */
export async function runPrompts(db: Db, s: RunSummary): Promise<Map<string, string>> {
  return new Map((await getDatasetItems(db, s.run.datasetId)).map((i) => [i.id, i.prompt]));
}

/**
 * Writes one JSON line per item: its prompt (when given), rewards per worker and the soft labels
 * at temperature tau. `fugu router train --labels` reads these files.
 */
export async function writeSoftLabels(s: RunSummary, tau: number, outPath: string, prompts?: ReadonlyMap<string, string>): Promise<LabelStats> {
  if (!(tau > 0)) throw new InputError(`tau must be > 0, got ${tau}`, { field: '--tau' });
  if (s.rows.length === 0) throw new InputError(`run ${s.run.id} has no item with a reward from every worker yet`, { field: 'run' });
  await mkdir(path.dirname(path.resolve(outPath)), { recursive: true });
  const names = s.workers.map((w) => w.name);
  const out = createWriteStream(outPath);
  const labels: number[][] = [];
  let entropySum = 0;
  for (const r of s.rows) {
    const rbar = names.map((n) => r.rewards[n]!);
    const p = softLabels(rbar, tau);
    entropySum += -p.reduce((acc, v) => acc + (v > 0 ? v * Math.log(v) : 0), 0);
    labels.push(p);
    const line = JSON.stringify({
      run: s.run.id, item: r.itemId, task: r.task, split: r.split ?? null, ...(prompts?.has(r.itemId) && { prompt: prompts.get(r.itemId) }),
      workers: names, rewards: rbar, tau, labels: p.map((v) => Number(v.toPrecision(8))),
    });
    if (!out.write(`${line}\n`)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
  return { path: outPath, items: s.rows.length, tau, meanEntropy: entropySum / s.rows.length, workers: names, labels };
}
