// The HTML report of one evaluation run (`fugu report <run>`): a single self-contained file with
// inline CSS and inline SVG charts (no scripts, no external assets), readable on screen and on paper.
// This module only renders; gathering EvalReportData from Postgres is the caller's job.

import {
  CHART_W,
  DASH,
  esc,
  fact,
  figure,
  finite,
  fmtInt,
  fmtPct,
  fmtReward,
  fmtTime,
  fmtUsd,
  htmlDocument,
  notMeasuredCell,
  pageFooter,
  pageHeader,
  picoOrNull,
  signed,
  table,
  toc,
  usdText,
} from './page.ts';
import { barChart, heatmap, paletteColor, paretoFrontier, scatterChart } from './svg.ts';

export type EvalReportData = {
  run: {
    id: string;
    dataset: string;
    pool: string;
    repetitions: number;
    seed: number;
    sampleSize: number | null;
    status: string;
    createdAt: string;
    finishedAt: string | null;
    durationS: number | null;
    calls: { total: number; ok: number; failed: number };
    callsPerS: number | null;
    /** exact decimal string */
    spendUsd: string;
    spendCapUsd: string | null;
  };
  workers: Array<{
    name: string;
    provider: string;
    model: string;
    inputPerMTok: string;
    outputPerMTok: string;
    mean: number;
    calls: number;
    failed: number;
    tokensIn: number;
    tokensOut: number;
    costUsd: string;
    latencyP50Ms: number | null;
    latencyP95Ms: number | null;
    /** fraction of items where this worker is among the best */
    oracleShare: number;
  }>;
  tasks: string[];
  /** task -> worker -> mean reward */
  perTask: Record<string, Record<string, number>>;
  taskCounts: Record<string, number>;
  reference: {
    n: number;
    bestSingle: { worker: string; mean: number };
    bestPerTask: { mean: number; choice: Record<string, string> };
    oracle: number;
  };
  bySplit: Record<string, { n: number; bestSingle: { worker: string; mean: number }; bestPerTask: { mean: number }; oracle: number }>;
  labels?: {
    tau: number;
    meanEntropy: number;
    /**
     * worker -> items whose soft label puts the most mass on it. With `tiedItems` given, an item whose
     * label peaks at k workers at once counts 1/k for each of them (see softLabelArgmax), so counts can
     * be fractional; without it, the producer did not say how it counted ties.
     */
    argmaxCounts: Record<string, number>;
    /** items whose soft label has its maximum at several workers (their count is split evenly in argmaxCounts) */
    tiedItems?: number;
  };
};

export type EvalReportOptions = {
  /** shown in the footer; omitted by default so the same data renders to the same bytes */
  generatedAt?: string;
};

type Worker = EvalReportData['workers'][number];

/**
 * The argmax counts of soft labels with ties broken honestly: an item whose label peaks at k workers
 * (equal to within a relative 1e-9) counts 1/k for each of them, never all for the first in pool
 * order (with 0/1 recorded rewards, many items tie: pool order would hand them all to one worker).
 * `labels` holds one probability vector per item, in the order of `names`.
 */
export function softLabelArgmax(names: readonly string[], labels: Iterable<readonly number[]>): { argmaxCounts: Record<string, number>; tiedItems: number } {
  const argmaxCounts: Record<string, number> = Object.fromEntries(names.map((n) => [n, 0]));
  let tiedItems = 0;
  for (const p of labels) {
    const vs = names.map((_, j) => p[j]).filter(finite);
    if (vs.length === 0) continue;
    const max = Math.max(...vs);
    const tol = Math.abs(max) * 1e-9;
    const top = names.filter((_, j) => finite(p[j]) && p[j]! >= max - tol);
    if (top.length > 1) tiedItems++;
    for (const n of top) argmaxCounts[n] = argmaxCounts[n]! + 1 / top.length;
  }
  return { argmaxCounts, tiedItems };
}

/** A worker's latency is not measured when it is a replay worker (recorded outcomes, answered at once) or when both percentiles are 0. */
export function latencyMeasured(w: Pick<Worker, 'provider' | 'latencyP50Ms' | 'latencyP95Ms'>): boolean {
  if (w.provider === 'replay') return false;
  return !(w.latencyP50Ms === 0 && (w.latencyP95Ms === 0 || w.latencyP95Ms === null));
}

/** The footnote under a table with unmeasured latencies. */
const LATENCY_FOOTNOTE = 'Latency not measured: the worker is a replay worker (it answers at once from recorded outcomes) or recorded no time, so 0 ms would be a measurement it never made.';

// ---------------------------------------------------------------------------------------------
// Formatting (the shared formatters are in page.ts)

function fmtMs(ms: unknown): string {
  if (!finite(ms)) return DASH;
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

function fmtDuration(s: unknown): string {
  if (!finite(s) || s < 0) return DASH;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  const total = Math.round(s);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const sec = total % 60;
  const pad = (n: number) => String(n).padStart(2, '0');
  return h > 0 ? `${h} h ${pad(m)} min ${pad(sec)} s` : `${m} min ${pad(sec)} s`;
}

/** Worker order for tables and charts: mean reward descending, then name. */
function byMean(workers: readonly Worker[]): Worker[] {
  return [...workers].sort((a, b) => (finite(b.mean) ? b.mean : -Infinity) - (finite(a.mean) ? a.mean : -Infinity) || a.name.localeCompare(b.name));
}

// ---------------------------------------------------------------------------------------------
// Sections

function statusClass(status: string): string {
  const s = status.toLowerCase();
  if (['completed', 'complete', 'done', 'finished', 'succeeded', 'success'].includes(s)) return 'ok';
  if (['failed', 'error', 'cancelled', 'canceled', 'aborted'].includes(s)) return 'bad';
  if (['running', 'queued', 'pending', 'paused', 'active'].includes(s)) return 'warn';
  return 'neutral';
}

function header(d: EvalReportData, after: string): string {
  const r = d.run;
  const spend = picoOrNull(r.spendUsd);
  const cap = picoOrNull(r.spendCapUsd);
  let spendText = fmtUsd(r.spendUsd);
  if (r.spendCapUsd !== null) {
    spendText += ` of ${fmtUsd(r.spendCapUsd)} cap`;
    // exact share of the cap, in basis points, without going through floats
    if (spend !== null && cap !== null && cap > 0n) spendText += ` (${(Number((spend * 10_000n) / cap) / 100).toFixed(1)}%)`;
  }
  const calls = r.calls;
  const failedShare = calls.total > 0 ? ` (${fmtPct(calls.failed / calls.total)})` : '';
  const facts = [
    fact('Dataset', r.dataset),
    fact('Worker pool', r.pool),
    fact('Repetitions', fmtInt(r.repetitions)),
    fact('Seed', String(r.seed)),
    fact('Sample', r.sampleSize === null ? 'all items' : `${fmtInt(r.sampleSize)} items`),
    fact('Created', fmtTime(r.createdAt), r.createdAt),
    fact('Finished', r.finishedAt === null ? 'not finished' : fmtTime(r.finishedAt), r.finishedAt ?? undefined),
    fact('Duration', fmtDuration(r.durationS)),
    fact('Calls', `${fmtInt(calls.total)} total · ${fmtInt(calls.ok)} ok · ${fmtInt(calls.failed)} failed${failedShare}`),
    fact('Throughput', finite(r.callsPerS) ? `${r.callsPerS.toFixed(r.callsPerS < 10 ? 2 : 1)} calls/s` : DASH),
    fact('Spend', spendText, r.spendUsd),
  ];
  const title = `Run <code>${esc(r.id)}</code> <span class="status ${statusClass(r.status)}">${esc(r.status)}</span>`;
  return pageHeader('fugu · evaluation report', title, facts, after);
}

function summary(d: EvalReportData): string {
  const ref = d.reference;
  const parts: string[] = [];
  if (finite(ref.bestSingle.mean)) {
    parts.push(`The best single model, <b>${esc(ref.bestSingle.worker)}</b>, reaches a mean reward of <b>${esc(fmtReward(ref.bestSingle.mean))}</b> on ${esc(fmtInt(ref.n))} items.`);
  }
  if (finite(ref.bestPerTask.mean) && finite(ref.bestSingle.mean)) {
    const gain = ref.bestPerTask.mean - ref.bestSingle.mean;
    parts.push(`Choosing the best model per task gives <b>${esc(fmtReward(ref.bestPerTask.mean))}</b> (${esc(signed(gain))}).`);
  }
  if (finite(ref.oracle) && finite(ref.bestSingle.mean)) {
    const gain = ref.oracle - ref.bestSingle.mean;
    parts.push(`A per-question oracle, which always picks a best worker, would reach <b>${esc(fmtReward(ref.oracle))}</b> (${esc(signed(gain))}): the headroom a router can aim for.`);
  }
  return parts.length > 0 ? `<p class="summary">${parts.join(' ')}</p>` : '';
}

/** Conventional split order (train, validation, test), then the rest alphabetically. */
function orderSplits(names: string[]): string[] {
  const rank = (n: string) => {
    const i = ['train', 'training', 'dev', 'val', 'valid', 'validation', 'test', 'eval', 'holdout'].indexOf(n.toLowerCase());
    return i < 0 ? 100 : i;
  };
  return [...names].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

function referenceSection(d: EvalReportData): string {
  const splits = orderSplits(Object.keys(d.bySplit));
  const cols: Array<{ name: string; n: number; bestSingle: { worker: string; mean: number }; bestPerTask: number; oracle: number }> = [
    { name: 'All items', n: d.reference.n, bestSingle: d.reference.bestSingle, bestPerTask: d.reference.bestPerTask.mean, oracle: d.reference.oracle },
    ...splits.map((s) => {
      const v = d.bySplit[s]!;
      return { name: `Split: ${s}`, n: v.n, bestSingle: v.bestSingle, bestPerTask: v.bestPerTask.mean, oracle: v.oracle };
    }),
  ];
  const head = `<tr><th scope="col">Reference</th>${cols.map((c) => `<th scope="col" class="num">${esc(c.name)}</th>`).join('')}</tr>`;
  const row = (label: string, note: string, cell: (c: (typeof cols)[number]) => string) =>
    `<tr><th scope="row">${esc(label)}<span class="note">${esc(note)}</span></th>${cols.map((c) => `<td class="num">${cell(c)}</td>`).join('')}</tr>`;
  const body = [
    row('Items', 'questions scored', (c) => esc(fmtInt(c.n))),
    row('Best single model', 'one worker for every item', (c) => `${esc(fmtReward(c.bestSingle.mean))}<span class="who">${esc(c.bestSingle.worker)}</span>`),
    row('Best model per task', 'one worker per task', (c) => esc(fmtReward(c.bestPerTask))),
    row('Per-question oracle', 'a best worker for every item', (c) => esc(fmtReward(c.oracle))),
    row('Oracle headroom', 'oracle − best single', (c) => (finite(c.oracle) && finite(c.bestSingle.mean) ? esc(signed(c.oracle - c.bestSingle.mean)) : DASH)),
  ].join('');
  return (
    `<section id="reference"><h2>Reference figures</h2>` +
    summary(d) +
    table('ref', head, body) +
    `</section>`
  );
}

/** Token counts in short form (2.38 M), the exact count in the tooltip. */
function tokensCell(n: number): string {
  if (!finite(n)) return `<td class="num">${DASH}</td>`;
  const short = n >= 1e6 ? `${(n / 1e6).toFixed(2)} M` : n >= 1e5 ? `${Math.round(n / 1e3)} k` : n >= 1e4 ? `${(n / 1e3).toFixed(1)} k` : fmtInt(n);
  return `<td class="num" title="${esc(fmtInt(n))} tokens">${esc(short)}</td>`;
}

function workerSection(d: EvalReportData): string {
  const ws = byMean(d.workers);
  if (ws.length === 0) return `<section id="workers"><h2>Workers</h2><p class="empty">No workers in this run.</p></section>`;
  const bestMean = Math.max(...ws.map((w) => (finite(w.mean) ? w.mean : -Infinity)));
  const col = (label: string, unit?: string) => `<th scope="col" class="num">${esc(label)}${unit ? `<span class="unit">${esc(unit)}</span>` : ''}</th>`;
  const head =
    `<tr><th scope="col">Worker<span class="unit">provider · model</span></th>` +
    col('Price in / out', 'USD per M tokens') +
    col('Mean', 'reward') +
    col('Calls') +
    col('Failed') +
    col('Tokens', 'in') +
    col('Tokens', 'out') +
    col('Cost', 'USD') +
    col('Latency', 'p50') +
    col('Latency', 'p95') +
    col('Oracle', 'share') +
    `</tr>`;
  const rows = ws
    .map((w) => {
      const best = finite(w.mean) && w.mean === bestMean;
      const failed = w.calls > 0 && w.failed > 0 ? `${fmtInt(w.failed)} (${fmtPct(w.failed / w.calls)})` : fmtInt(w.failed);
      return (
        `<tr><th scope="row">${esc(w.name)}<span class="note">${esc(w.provider)} · ${esc(w.model)}</span></th>` +
        `<td class="num">${esc(fmtUsd(w.inputPerMTok))} / ${esc(fmtUsd(w.outputPerMTok))}</td>` +
        `<td class="num${best ? ' best' : ''}">${esc(fmtReward(w.mean))}</td>` +
        `<td class="num">${esc(fmtInt(w.calls))}</td>` +
        `<td class="num${w.failed > 0 ? ' warn' : ''}">${esc(failed)}</td>` +
        tokensCell(w.tokensIn) +
        tokensCell(w.tokensOut) +
        `<td class="num" title="${esc(w.costUsd)}">${esc(fmtUsd(w.costUsd))}</td>` +
        (latencyMeasured(w)
          ? `<td class="num">${esc(fmtMs(w.latencyP50Ms))}</td><td class="num">${esc(fmtMs(w.latencyP95Ms))}</td>`
          : notMeasuredCell(2, LATENCY_FOOTNOTE)) +
        `<td class="num">${esc(fmtPct(w.oracleShare))}</td></tr>`
      );
    })
    .join('');
  // totals: costs summed exactly in picodollars
  const sum = (f: (w: Worker) => number) => ws.reduce((a, w) => a + (finite(f(w)) ? f(w) : 0), 0);
  let cost: bigint | null = 0n;
  for (const w of ws) {
    const p = picoOrNull(w.costUsd);
    cost = cost === null || p === null ? null : cost + p;
  }
  const foot =
    `<tr><th scope="row">Total</th><td></td><td></td><td class="num">${esc(fmtInt(sum((w) => w.calls)))}</td>` +
    `<td class="num">${esc(fmtInt(sum((w) => w.failed)))}</td>${tokensCell(sum((w) => w.tokensIn))}` +
    `${tokensCell(sum((w) => w.tokensOut))}<td class="num">${esc(cost === null ? DASH : usdText(cost))}</td>` +
    `<td></td><td></td><td></td></tr>`;
  return (
    `<section id="workers"><h2>Workers</h2>` +
    `<p class="hint">Sorted by mean reward; the best is highlighted. Oracle share: the fraction of items on which the worker is among the best.</p>` +
    table('workers', head, rows, foot) +
    (ws.some((w) => !latencyMeasured(w)) ? `<p class="hint footnote"><sup>*</sup> ${esc(LATENCY_FOOTNOTE)}</p>` : '') +
    `</section>`
  );
}

function perTaskSection(d: EvalReportData): string {
  const ws = byMean(d.workers);
  if (d.tasks.length === 0 || ws.length === 0) return `<section id="tasks"><h2>Accuracy per task</h2><p class="empty">No per-task results.</p></section>`;
  const head =
    `<tr><th scope="col">Task</th><th scope="col" class="num">Items</th><th scope="col" class="chosen">Chosen per task</th>` +
    ws.map((w) => `<th scope="col" class="num wk">${esc(w.name)}</th>`).join('') +
    `</tr>`;
  const rowOf = (label: string, count: string, values: Array<number | undefined>, chosen: string, cls = '') => {
    const fin = values.filter(finite);
    const best = fin.length > 0 ? Math.max(...fin) : NaN;
    const cells = values.map((v) => `<td class="num${finite(v) && v === best ? ' best' : ''}">${esc(fmtReward(v))}</td>`).join('');
    // the chosen worker sits next to the task (not after the worker columns, where a wide pool pushes it off the page)
    return `<tr${cls ? ` class="${cls}"` : ''}><th scope="row">${esc(label)}</th><td class="num">${esc(count)}</td><td class="chosen">${esc(chosen)}</td>${cells}</tr>`;
  };
  const rows = d.tasks.map((t) => rowOf(t, fmtInt(d.taskCounts[t]), ws.map((w) => d.perTask[t]?.[w.name]), d.reference.bestPerTask.choice[t] ?? DASH)).join('');
  const total = rowOf('All tasks', fmtInt(d.reference.n), ws.map((w) => w.mean), '', 'total');
  return (
    `<section id="tasks"><h2>Accuracy per task</h2>` +
    `<p class="hint">Mean reward of each worker on each task; the best worker of each row is highlighted. “Chosen per task” is the reference figures’ best-model-per-task choice.</p>` +
    table('pertask', head, rows, total) +
    `</section>`
  );
}

function plotsSection(d: EvalReportData): string {
  const ws = byMean(d.workers);
  const names = ws.map((w) => w.name);
  const ref = d.reference;
  const figs: string[] = [];

  figs.push(
    figure(
      barChart({
        title: 'Mean reward per worker',
        width: CHART_W,
        labels: names,
        values: ws.map((w) => w.mean),
        valueLabel: 'mean reward',
        domain: ws.every((w) => !finite(w.mean) || (w.mean >= 0 && w.mean <= 1)) ? [0, 1] : undefined,
        format: (v) => v.toFixed(3),
        colors: ws.map((_, i) => paletteColor(i)),
        tooltips: ws.map((w) => `${w.provider} · ${w.model}; ${fmtInt(w.calls)} calls`),
        refLines: [
          { value: ref.bestPerTask.mean, label: 'best per task', color: '#7A4FA0' },
          { value: ref.oracle, label: 'oracle', color: '#B00020' },
        ],
      }),
      'Mean reward over all items and repetitions. Dashed lines: best model per task and the per-question oracle.',
    ),
  );

  figs.push(
    figure(
      heatmap({
        title: 'Mean reward per worker and task',
        width: CHART_W,
        rows: names,
        cols: d.tasks,
        values: ws.map((w) => d.tasks.map((t) => d.perTask[t]?.[w.name])),
        xLabel: 'task',
        valueLabel: 'mean reward',
        format: (v) => v.toFixed(2),
        mark: 'col-max',
      }),
      'Each cell is a worker’s mean reward on one task; the best worker of each task is outlined. Grey cells have no data.',
    ),
  );

  const front = paretoFrontier(ws.map((w) => ({ x: Number(w.costUsd), y: w.mean, name: w.name })));
  const frontNote =
    front.length > 1
      ? 'Workers on the dashed Pareto frontier (ringed) are not beaten on both cost and reward by any other.'
      : front.length === 1 && ws.length > 1
        ? `No dashed line: one worker, ${esc(front[0]!.name)}, is at least as cheap and as good as every other (ringed), so it alone is the Pareto frontier.`
        : '';
  figs.push(
    figure(
      scatterChart({
        title: 'Cost vs accuracy',
        width: CHART_W,
        points: ws.map((w, i) => ({
          x: Number(w.costUsd),
          y: w.mean,
          label: w.name,
          color: paletteColor(i),
          tooltip: `cost ${fmtUsd(w.costUsd)}, mean ${fmtReward(w.mean)}`,
        })),
        xLabel: 'cost in this run (USD)',
        yLabel: 'mean reward',
        xScale: 'auto',
        formatX: (v) => `$${Number(v.toPrecision(3))}`,
        formatY: (v) => v.toFixed(3),
      }),
      `Total cost of each worker over this run against its mean reward. ${frontNote}`,
    ),
  );

  figs.push(
    figure(
      barChart({
        title: 'Share of oracle wins per worker',
        width: CHART_W,
        labels: names,
        values: ws.map((w) => w.oracleShare),
        valueLabel: 'fraction of items where the worker is among the best',
        domain: [0, 1],
        format: (v) => fmtPct(v),
        colors: ws.map((_, i) => paletteColor(i)),
      }),
      'Fraction of items on which each worker is among the best (ties count for every tied worker, so shares can sum to more than 100%).',
    ),
  );

  if (d.labels) {
    const l = d.labels;
    // workers of the pool first (in table order), then any other names the labels mention
    const keys = [...names.filter((n) => n in l.argmaxCounts), ...Object.keys(l.argmaxCounts).filter((k) => !names.includes(k)).sort()];
    const totalCount = keys.reduce((a, k) => a + (finite(l.argmaxCounts[k]) ? l.argmaxCounts[k]! : 0), 0);
    // split ties make fractional counts: one decimal where needed
    const fmtCount = (v: number) => v.toLocaleString('en-US', { maximumFractionDigits: 1 });
    const tied = l.tiedItems;
    const ties = finite(tied)
      ? tied > 0
        ? ` ${esc(fmtInt(tied))} items (${esc(fmtPct(totalCount > 0 ? tied / totalCount : Number.NaN))}) have labels that peak at several workers at once: ` +
          `each such tie is split evenly, 1/k to each of its k tied workers, so no worker gains from its place in the pool.`
        : ' No label peaks at two workers at once (ties would be split evenly between the tied workers).'
      : ' The data does not say how items whose label peaks at several workers were counted: if each tie went to the first tied ' +
        'worker in pool order, that worker’s bar is inflated (with 0/1 rewards every item all workers got wrong is such a tie).';
    figs.push(
      figure(
        barChart({
          title: 'Soft labels: argmax distribution',
          width: CHART_W,
          labels: keys,
          values: keys.map((k) => l.argmaxCounts[k] ?? NaN),
          valueLabel: finite(tied) ? 'items whose soft label peaks at the worker (ties split evenly)' : 'items whose soft label peaks at the worker',
          format: (v) => (totalCount > 0 ? `${fmtCount(v)} (${fmtPct(v / totalCount)})` : fmtCount(v)),
          colors: keys.map((k) => paletteColor(Math.max(0, names.indexOf(k)))),
        }),
        `Soft labels p(j) = softmax(r̄ / τ) with τ = ${esc(String(l.tau))}; mean entropy ${esc(finite(l.meanEntropy) ? l.meanEntropy.toFixed(3) : DASH)} nats. Bars count the items whose label puts the most mass on each worker.${ties}`,
      ),
    );
  }
  return `<section id="plots"><h2>Plots</h2>${figs.join('')}</section>`;
}

// ---------------------------------------------------------------------------------------------

/** This page's own table rules, added to the shared stylesheet. */
const CSS = `
table.ref th[scope=row] { min-width: 15em; }
table.workers tbody th { min-width: 12em; }
table.pertask tbody th { min-width: 8em; }
table.pertask .chosen { min-width: 8.5em; max-width: 11em; overflow-wrap: break-word; }
table.pertask thead th.chosen { white-space: normal; }
.footnote { margin-top: 6px; }
`;

/** Render the whole report as one HTML document (UTF-8, no scripts, no external resources). */
export function renderEvalReport(data: EvalReportData, options: EvalReportOptions = {}): string {
  const links = toc([
    ['reference', 'Reference figures'],
    ['workers', 'Workers'],
    ['tasks', 'Accuracy per task'],
    ['plots', 'Plots'],
  ]);
  return htmlDocument(
    `fugu evaluation report: ${data.run.id}`,
    header(data, links) +
      referenceSection(data) +
      workerSection(data) +
      perTaskSection(data) +
      plotsSection(data) +
      pageFooter(`run ${data.run.id}`, options.generatedAt),
    CSS,
  );
}
