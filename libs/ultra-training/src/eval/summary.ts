// The summary of a conductor run (what `fugu ultra eval` prints and the Conductor report shows),
// gathered from Postgres: per conductor spec the figures of its finished workflows; reference rows
// computed from the recorded scores on the same items ('best single (<w>)' by train mean, 'oracle');
// the worker distribution per task; a few workflows step by step. `summarizeUltraRuns` is the
// mean and sd over several runs (seeds) in the same shape.
import { tokenCost, InputError, PICO_PER_USD } from '@fugu/core';
import { DEFAULT_REWARD_CONFIG, recordedCallTokens, type ReplayConfig, type RewardConfig } from '@fugu/conductor';
import { splitLabel } from '@fugu/datasets';
import { workerReplayParams } from '@fugu/ultra';
import {
  conductorRunItems, exampleWorkflowIds, getConductorRun, getDataset, getPoolWorkers, stepWorkerCounts, workflowCounts, workflowDetails, workflowSpecStats,
  type Db, type StoredWorker, type WorkflowDetail,
} from '@fugu/db';
import type { ConductorReportData, ConductorResult, ShownWorkflow } from '@fugu/report';
import type { UltraRunOptions } from './options.ts';

const usd = (pico: bigint): number => Number(pico) / Number(PICO_PER_USD);

export async function summarizeUltraRun(db: Db, runId: string, opts: { examplesPerSpec?: number } = {}): Promise<ConductorReportData> {
  const run = await getConductorRun(db, runId);
  if (!run) throw new InputError(`no conductor run "${runId}"`, { field: 'run' });
  const o = run.options as Partial<UltraRunOptions>;
  const workers = await getPoolWorkers(db, run.poolId);
  const dataset = run.datasetId === null ? undefined : await getDataset(db, run.datasetId);
  const reward: RewardConfig = { ...DEFAULT_REWARD_CONFIG, ...o.workflow?.reward };

  const stats = new Map((await workflowSpecStats(db, runId)).map((s) => [s.conductor, s]));
  const topologies = await workflowCounts(db, runId, 'topology');
  const finishes = await workflowCounts(db, runId, 'finish_reason');
  const results: ConductorResult[] = run.specs.map((spec) => {
    const s = stats.get(spec);
    const n = s?.workflows ?? 0;
    return {
      name: spec, kind: 'conductor', workflows: n,
      meanReward: s?.meanReward ?? 0, accuracy: n ? s!.correct / n : 0, parseFailureRate: n ? s!.unparsed / n : 0,
      usdPerItem: { conductor: s?.conductorUsd ?? 0, workers: s?.workerUsd ?? 0 },
      tokensPerItem: { conductor: s?.conductorTokens ?? 0, workers: s?.workerTokens ?? 0 },
      latencyMs: s && s.latencyMeanMs !== null ? { mean: s.latencyMeanMs, p95: s.latencyP95Ms ?? s.latencyMeanMs } : null,
      stepsPerWorkflow: s?.meanSteps ?? 0,
      topologies: topologies[spec] ?? {},
      finishReasons: finishes[spec] ?? {},
    };
  });

  const items = await conductorRunItems(db, runId);
  const taskCounts: Record<string, number> = {};
  for (const it of items) taskCounts[it.task] = (taskCounts[it.task] ?? 0) + 1;
  // a restricted pool (--workers): the references are over its workers only
  const allowed = o.workflow?.workers;
  const refWorkers = allowed ? workers.filter((w) => allowed.includes(w.name)) : workers;
  results.push(...referenceRows(items, refWorkers, o.workflow?.ranking ?? workers.map((w) => w.name), reward));

  const workerDistribution: ConductorReportData['workerDistribution'] = {};
  const totals = new Map<string, number>();
  const steps = await stepWorkerCounts(db, runId);
  for (const r of steps) totals.set(`${r.conductor}\u0000${r.task}`, (totals.get(`${r.conductor}\u0000${r.task}`) ?? 0) + r.steps);
  for (const r of steps) ((workerDistribution[r.conductor] ??= {})[r.task] ??= {})[r.worker] = r.steps / totals.get(`${r.conductor}\u0000${r.task}`)!;

  const examples = (await workflowDetails(db, await exampleWorkflowIds(db, runId, opts.examplesPerSpec ?? 3))).map(shownWorkflow);
  const allReplay = workers.every((w) => w.provider === 'replay');
  const noReplay = workers.every((w) => w.provider !== 'replay');
  const environment = allReplay ? 'replay' : noReplay ? 'live' : 'mixed';
  const replayCfg: ReplayConfig = o.workflow?.replay ?? {};
  return {
    run: {
      id: run.id, dataset: dataset?.name ?? null, pool: `${o.pool ?? String(run.poolId)}${allowed ? ` (restricted to ${allowed.length} of ${workers.length}: ${allowed.join(', ')})` : ''}`, split: o.split ?? null, splitBy: o.splitBy ?? 'prompt', splitSeed: o.splitSeed ?? 0, sample: o.sample ?? null,
      seed: o.seed ?? 0, repeats: o.repeats ?? 1, maxSteps: o.workflow?.maxSteps ?? 5, status: run.status,
      createdAt: run.createdAt.toISOString(), finishedAt: run.finishedAt?.toISOString() ?? null, environment,
      ...(environment !== 'live' && {
        ...(replayCfg.source !== undefined && { replaySource: replayCfg.source }),
        ...(replayCfg.sources !== undefined && { replayBySources: replayCfg.sources }),
        replay: Object.fromEntries(workers.filter((w) => w.provider === 'replay').map((w) => {
          const p = workerReplayParams(replayCfg, w);
          return [w.name, { keep: p.keep, misled: p.misled, adopt: p.adopt, fix: p.fix, herd: p.herd, sizeClass: p.sizeClass }];
        })),
      }),
    },
    results, workerDistribution, taskCounts, examples,
  };
}

type RunItem = Awaited<ReturnType<typeof conductorRunItems>>[number];

/**
 * Reference rows from the recorded outcomes on the run's items (expected values, as the replay
 * environment draws a fractional score as a Bernoulli): 'best single (<w>)', the first of the
 * ranking (train mean), and 'oracle' (correct when any worker is: 1 - prod(1 - s); its cost the
 * cheapest worker with the item's best score). USD from recorded tokens x the pool's prices; where
 * the dataset recorded no token counts, estimated as the replay provider does (the question's
 * text, the recorded answer or its default output: recordedCallTokens).
 * Items without a recorded outcome of every pool worker are left out; none: no rows.
 */
export function referenceRows(items: readonly RunItem[], workers: readonly StoredWorker[], ranking: readonly string[], reward: RewardConfig): ConductorResult[] {
  const full = items.filter((it) => it.recorded && workers.every((w) => it.recorded![w.name] !== undefined));
  if (full.length === 0 || workers.length === 0) return [];
  const byName = new Map(workers.map((w) => [w.name, w]));
  const cost = (it: RunItem, w: StoredWorker): { usd: number; tokens: number } => {
    const t = recordedCallTokens(it.recorded![w.name]!, it.prompt);
    return { usd: usd(tokenCost(t.tokensIn, t.tokensOut, w.prices)), tokens: t.tokensIn + t.tokensOut };
  };
  const expectedReward = (p: number): number => p * reward.correct + (1 - p) * reward.incorrect;
  const row = (name: string, ps: number[], spent: Array<{ usd: number; tokens: number }>): ConductorResult => {
    const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
    return {
      name, kind: 'reference', workflows: ps.length, meanReward: mean(ps.map(expectedReward)), accuracy: mean(ps), parseFailureRate: 0,
      usdPerItem: { conductor: 0, workers: mean(spent.map((c) => c.usd)) }, tokensPerItem: { conductor: 0, workers: mean(spent.map((c) => c.tokens)) },
      latencyMs: null, stepsPerWorkflow: 1, topologies: { single: ps.length }, finishReasons: {},
    };
  };
  const best = byName.get(ranking.find((n) => byName.has(n)) ?? workers[0]!.name)!;
  const score = (it: RunItem, w: StoredWorker): number => it.recorded![w.name]!.score;
  const singleRow = row(`best single (${best.name}, by train mean)`, full.map((it) => score(it, best)), full.map((it) => cost(it, best)));
  const oracle = row(
    'oracle',
    full.map((it) => 1 - workers.reduce((q, w) => q * (1 - score(it, w)), 1)),
    full.map((it) => {
      const top = Math.max(...workers.map((w) => score(it, w)));
      return workers.filter((w) => score(it, w) === top).map((w) => cost(it, w)).sort((a, b) => a.usd - b.usd)[0]!;
    }),
  );
  return [singleRow, oracle];
}

function shownWorkflow(w: WorkflowDetail): ShownWorkflow {
  return {
    conductor: w.conductor, item: w.itemExtId ?? `workflow ${w.id}`, task: w.task ?? '(free)', question: w.question, reward: w.reward, outcome: w.outcome,
    finishReason: w.finishReason, parseError: w.parseError ? `${w.parseError.list}${w.parseError.step !== undefined ? ` step ${w.parseError.step}` : ''}: ${w.parseError.message}` : null,
    topology: w.topology,
    steps: w.steps.map((s) => ({ idx: s.idx, worker: s.worker, subtask: s.subtask, sees: s.sees, answer: s.answer, status: s.status, usd: Number(s.cost) })),
    finalAnswer: w.finalAnswer,
  };
}

const mean = (xs: number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
/** sample standard deviation (0 for one value) */
const sd = (xs: number[]): number => {
  if (xs.length < 2) return 0;
  const m = mean(xs);
  return Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1));
};

/**
 * Several runs (for example the same batch under 3 seeds) as one: per result name the mean of
 * every figure over the runs that have it, with `seeds` (count and sample sd of mean reward,
 * accuracy and total USD per item); counts (topologies, finish reasons, task counts) summed;
 * the worker distribution averaged; the run block and the examples those of the first run.
 */
export async function summarizeUltraRuns(db: Db, runIds: readonly string[]): Promise<ConductorReportData> {
  if (runIds.length === 0) throw new InputError('give at least one conductor run', { field: 'run' });
  const all: ConductorReportData[] = [];
  for (const id of runIds) all.push(await summarizeUltraRun(db, id));
  if (all.length === 1) return all[0]!;
  return combineSummaries(all);
}

export function combineSummaries(all: readonly ConductorReportData[]): ConductorReportData {
  const first = all[0]!;
  const names: string[] = [];
  for (const s of all) for (const r of s.results) if (!names.includes(r.name)) names.push(r.name);
  const sumCounts = (xs: Array<Record<string, number>>): Record<string, number> => {
    const out: Record<string, number> = {};
    for (const x of xs) for (const [k, v] of Object.entries(x)) out[k] = (out[k] ?? 0) + v;
    return out;
  };
  const results = names.map((name): ConductorResult => {
    const rs = all.flatMap((s) => s.results.filter((r) => r.name === name));
    const f = (g: (r: ConductorResult) => number): number => mean(rs.map(g));
    const lat = rs.filter((r) => r.latencyMs !== null);
    return {
      name, kind: rs[0]!.kind, workflows: rs.reduce((a, r) => a + r.workflows, 0),
      meanReward: f((r) => r.meanReward), accuracy: f((r) => r.accuracy), parseFailureRate: f((r) => r.parseFailureRate),
      usdPerItem: { conductor: f((r) => r.usdPerItem.conductor), workers: f((r) => r.usdPerItem.workers) },
      tokensPerItem: { conductor: f((r) => r.tokensPerItem.conductor), workers: f((r) => r.tokensPerItem.workers) },
      latencyMs: lat.length ? { mean: mean(lat.map((r) => r.latencyMs!.mean)), p95: mean(lat.map((r) => r.latencyMs!.p95)) } : null,
      stepsPerWorkflow: f((r) => r.stepsPerWorkflow),
      topologies: sumCounts(rs.map((r) => r.topologies)), finishReasons: sumCounts(rs.map((r) => r.finishReasons)),
      seeds: {
        count: rs.length, meanRewardSd: sd(rs.map((r) => r.meanReward)), accuracySd: sd(rs.map((r) => r.accuracy)),
        usdPerItemSd: sd(rs.map((r) => r.usdPerItem.conductor + r.usdPerItem.workers)),
      },
    };
  });
  const workerDistribution: ConductorReportData['workerDistribution'] = {};
  for (const s of all) {
    for (const [spec, tasks] of Object.entries(s.workerDistribution)) {
      for (const [task, ws] of Object.entries(tasks)) {
        for (const [w, frac] of Object.entries(ws)) ((workerDistribution[spec] ??= {})[task] ??= {})[w] = (workerDistribution[spec][task][w] ?? 0) + frac / all.filter((x) => x.workerDistribution[spec]?.[task]).length;
      }
    }
  }
  return {
    run: { ...first.run, id: all.map((s) => s.run.id).join(','), seed: first.run.seed },
    results, workerDistribution, taskCounts: first.taskCounts, examples: first.examples,
  };
}

/** The summary as a plain-text table (what `fugu ultra eval` prints at the end). */
export function formatUltraSummary(s: ConductorReportData): string {
  const r = s.run;
  const lines = [
    `conductor run ${r.id}: ${r.status}; ${r.dataset ?? '(no dataset)'} ${r.split ?? ''} split${r.split && r.split !== 'all' ? ` (${splitLabel({ by: r.splitBy ?? 'prompt', seed: r.splitSeed ?? 0 })})` : ''}, ${Object.values(s.taskCounts).reduce((a, b) => a + b, 0)} items, ` +
      `${r.repeats} repeat(s), max ${r.maxSteps} steps; environment ${r.environment}${r.environment === 'replay' ? ' (figures from the replay step model)' : ''}`,
  ];
  const rows = s.results.map((x) => {
    const pm = (v: number, d: number | undefined, digits: number): string => `${v.toFixed(digits)}${d !== undefined ? ` ±${d.toFixed(digits)}` : ''}`;
    return [
      x.name, String(x.workflows), pm(x.meanReward, x.seeds?.meanRewardSd, 3), pm(x.accuracy, x.seeds?.accuracySd, 3), x.parseFailureRate.toFixed(3),
      pm(x.usdPerItem.conductor + x.usdPerItem.workers, x.seeds?.usdPerItemSd, 6), x.stepsPerWorkflow.toFixed(2),
      x.latencyMs ? `${Math.round(x.latencyMs.mean)}/${Math.round(x.latencyMs.p95)}` : '-',
    ];
  });
  const head = ['conductor', 'workflows', 'reward', 'accuracy', 'unparsed', '$/item', 'steps', 'latency ms mean/p95'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const fmt = (row: string[]): string => row.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  lines.push(fmt(head), ...rows.map(fmt));
  return `${lines.join('\n')}\n`;
}
