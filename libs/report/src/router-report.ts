// The HTML report of a router evaluation (`fugu router eval`): one self-contained file with inline
// CSS and inline SVG (no scripts, no external assets). It compares the router with the baselines
// (best single worker, best per task, kNN, random, oracle), shows RouteLLM's APGR/CPT for a
// strong/weak pair and RouterBench's AIQ, the router's cost-quality sweep, its routing
// distribution per task (a stacked bar per task, as in the Fugu report's Figure 5) and, when
// known, the checkpoint's SFT loss curve. This module only renders; the data comes from the caller.

import {
  CHART_W,
  DASH,
  esc,
  fact,
  figure,
  finite,
  fmtCost,
  fmtInt,
  fmtPct,
  fmtReward,
  fmtTime,
  fmtUsd,
  htmlDocument,
  pageFooter,
  pageHeader,
  signed,
  table,
  toc,
} from './page.ts';
import type { MethodResult, RouterReportData } from './router-report-data.ts';
import { barChart, lineChart, type LineSeries, paletteColor, stackedBarChart } from './svg.ts';

export type RouterReportOptions = {
  /** shown in the footer; omitted by default so the same data renders to the same bytes */
  generatedAt?: string;
};

// Method names the producer uses for the rows the page treats specially.
const ROUTER = 'router';
const BEST_SINGLE = 'best single';
const ORACLE = 'oracle';

const ROUTER_COLOR = '#0072B2';
const OTHER_COLOR = '#A7ADB3';
const ORACLE_COLOR = '#B00020';

// ---------------------------------------------------------------------------------------------
// Formatting

const fmt3 = (v: unknown): string => (finite(v) ? v.toFixed(3) : DASH);

/** The values' range widened by 6% of its span on each side (not below 0 for costs); undefined without two distinct values. */
function padded(values: readonly number[], nonNegative: boolean): [number, number] | undefined {
  const vs = values.filter(finite);
  if (vs.length === 0) return undefined;
  const lo = Math.min(...vs);
  const hi = Math.max(...vs);
  if (!(hi > lo)) return undefined;
  const pad = (hi - lo) * 0.06;
  return [nonNegative && lo >= 0 ? Math.max(0, lo - pad) : lo - pad, hi + pad];
}

function findMethod(d: RouterReportData, name: string): MethodResult | undefined {
  return d.methods.find((m) => m.name === name);
}

/** The router's row: the method named "router", else the first whose name starts with it. */
function routerMethod(d: RouterReportData): MethodResult | undefined {
  return findMethod(d, ROUTER) ?? d.methods.find((m) => m.name.startsWith(ROUTER));
}

/** Routing columns: the workers in the data's order, then any other worker the routing names. */
function routedWorkers(d: RouterReportData): string[] {
  const names = d.workers.map((w) => w.name);
  const extra = new Set<string>();
  for (const dist of Object.values(d.routing)) for (const w of Object.keys(dist)) if (!names.includes(w)) extra.add(w);
  return [...names, ...[...extra].sort()];
}

/** Share of all evaluated items routed to each worker (tasks weighted by item count; 1 each where a count is missing). */
function overallRouting(d: RouterReportData, workers: readonly string[]): Map<string, number> {
  const out = new Map(workers.map((w) => [w, 0]));
  let total = 0;
  for (const [task, dist] of Object.entries(d.routing)) {
    const n = d.taskCounts[task];
    const weight = finite(n) && n >= 0 ? n : 1;
    total += weight;
    for (const w of workers) {
      const f = dist[w];
      if (finite(f)) out.set(w, out.get(w)! + weight * f);
    }
  }
  if (total > 0) for (const w of workers) out.set(w, out.get(w)! / total);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Sections

function header(d: RouterReportData, after: string): string {
  const ck = d.checkpoint;
  const facts = [
    fact('Stage', ck.stage),
    fact('Backbone', ck.backboneId),
    fact('Parent checkpoint', ck.parentId ?? 'none'),
    fact('Soft-label τ', finite(ck.tau) ? String(ck.tau) : DASH),
    fact('Checkpoint created', fmtTime(ck.createdAt), ck.createdAt),
    fact('Evaluation run', d.data.run),
    fact('Split', `${d.data.split} (${d.data.splitBy === 'dataset' ? `the dataset's own split, seed ${d.data.splitSeed} for a val part carved from train` : `by unique prompt, split seed ${d.data.splitSeed}`})`),
    fact('Items', `${fmtInt(d.data.items)} evaluated · ${fmtInt(d.data.trainItems)} for training`),
    fact('Workers', fmtInt(d.workers.length)),
  ];
  const title = `Router <code>${esc(ck.id)}</code> <span class="status neutral">${esc(ck.stage)}</span>`;
  return pageHeader('fugu · router evaluation', title, facts, after);
}

function summary(d: RouterReportData): string {
  const router = routerMethod(d);
  const best = findMethod(d, BEST_SINGLE);
  const oracle = findMethod(d, ORACLE);
  if (!router || !finite(router.meanReward)) return '';
  let s = `The router reaches a mean reward of <b>${esc(fmtReward(router.meanReward))}</b> at <b>${esc(fmtCost(router.meanCost))}</b> per call`;
  if (best && finite(best.meanReward)) {
    s += `, against <b>${esc(fmtReward(best.meanReward))}</b> for the best single worker${best.note ? ` (${esc(best.note)})` : ''}`;
  }
  s += '.';
  if (oracle && finite(oracle.meanReward) && finite(d.gapClosed)) {
    s += ` It closes <b>${esc(fmtPct(d.gapClosed))}</b> of the gap to the per-question oracle (${esc(fmtReward(oracle.meanReward))}).`;
  }
  return `<p class="summary">${s}</p>`;
}

function methodsSection(d: RouterReportData): string {
  if (d.methods.length === 0) return `<section id="methods"><h2>Comparison</h2><p class="empty">No methods to compare.</p></section>`;
  const router = routerMethod(d);
  const best = findMethod(d, BEST_SINGLE);
  const seeds = d.seeds && d.seeds.methods.length > 0 ? d.seeds : undefined;
  const bestReward = Math.max(...d.methods.filter((m) => m.name !== ORACLE).map((m) => (finite(m.meanReward) ? m.meanReward : -Infinity)));
  const col = (label: string, unit?: string) => `<th scope="col" class="num">${esc(label)}${unit ? `<span class="unit">${esc(unit)}</span>` : ''}</th>`;
  const head =
    `<tr><th scope="col">Method</th>` +
    col('Mean reward') +
    col('vs best single') +
    col('Mean cost', 'USD per call') +
    (seeds ? col('Mean reward', `over ${fmtInt(seeds.count)} split seeds, mean ± sd`) : '') +
    `<th scope="col">Note</th></tr>`;
  const rows = d.methods
    .map((m) => {
      const isRouter = m === router;
      const delta = best && m !== best && finite(m.meanReward) && finite(best.meanReward) ? signed(m.meanReward - best.meanReward) : DASH;
      const top = m.name !== ORACLE && finite(m.meanReward) && m.meanReward === bestReward;
      let seedCell = '';
      if (seeds) {
        const s = seeds.methods.find((x) => x.name === m.name);
        seedCell = `<td class="num">${s && finite(s.mean) ? `${esc(fmt3(s.mean))} ± ${esc(fmt3(s.sd))}` : DASH}</td>`;
      }
      return (
        `<tr${isRouter ? ' class="router"' : m.name === ORACLE ? ' class="oracle"' : ''}>` +
        `<th scope="row">${esc(m.name)}</th>` +
        `<td class="num${top ? ' best' : ''}">${esc(fmtReward(m.meanReward))}</td>` +
        `<td class="num">${esc(delta)}</td>` +
        `<td class="num">${esc(fmtCost(m.meanCost))}</td>` +
        seedCell +
        `<td class="notecell">${esc(m.note ?? '')}</td></tr>`
      );
    })
    .join('');
  return (
    `<section id="methods"><h2>Comparison</h2>` +
    summary(d) +
    `<p class="hint">The router's row is highlighted; the best mean reward short of the oracle is marked green. ` +
    `“vs best single” is the difference in mean reward to the best single worker.</p>` +
    table('methods', head, rows) +
    metricsTable(d) +
    `</section>`
  );
}

function metricsTable(d: RouterReportData): string {
  const sw = d.strongWeak;
  const pair = `${sw.strong} (strong) vs ${sw.weak} (weak)`;
  const row = (label: string, value: string, note: string) =>
    `<tr><th scope="row">${esc(label)}<span class="note">${esc(note)}</span></th><td class="num">${esc(value)}</td></tr>`;
  const body = [
    row('Gap closed toward the oracle', fmtPct(d.gapClosed), '(router − best single) / (oracle − best single); 100% = as good as the oracle'),
    row('APGR', fmt3(sw.apgr), `area under the PGR curve, ${pair}; 0.5 = random`),
    row('CPT(50%)', fmtPct(sw.cpt50), 'fraction of calls to the strong worker needed to recover 50% of the performance gap'),
    row('CPT(80%)', fmtPct(sw.cpt80), 'the same for 80% of the gap'),
    row('AIQ', fmt3(d.aiq), 'mean reward of the router’s cost-quality hull, averaged over its cost range'),
  ].join('');
  return (
    `<h3>Router metrics</h3>` +
    `<p class="hint">Strong/weak pair: <b>${esc(sw.strong)}</b> and <b>${esc(sw.weak)}</b> (RouteLLM’s APGR and CPT); AIQ as in RouterBench.</p>` +
    table('metrics', `<tr><th scope="col">Metric</th><th scope="col" class="num">Value</th></tr>`, body)
  );
}

function workersSection(d: RouterReportData): string {
  const names = routedWorkers(d);
  if (names.length === 0) return `<section id="workers"><h2>Workers</h2><p class="empty">No workers.</p></section>`;
  const share = overallRouting(d, names);
  const price = new Map(d.workers.map((w) => [w.name, `${fmtUsd(w.inputPerMTok)} / ${fmtUsd(w.outputPerMTok)}`]));
  const head =
    `<tr><th scope="col">Worker</th><th scope="col" class="num">Price in / out<span class="unit">USD per M tokens</span></th>` +
    `<th scope="col" class="num">Routed<span class="unit">share of evaluated items</span></th></tr>`;
  const rows = names
    .map(
      (w, i) =>
        `<tr><th scope="row"><span class="swatch" style="background:${paletteColor(i)}"></span>${esc(w)}</th>` +
        `<td class="num">${esc(price.get(w) ?? DASH)}</td><td class="num">${esc(fmtPct(share.get(w)))}</td></tr>`,
    )
    .join('');
  return (
    `<section id="workers"><h2>Workers</h2>` +
    `<p class="hint">The worker pool in routing order; the colour is the worker’s colour in the routing plot.</p>` +
    table('workers', head, rows) +
    `</section>`
  );
}

function plotsSection(d: RouterReportData): string {
  const router = routerMethod(d);
  const oracle = findMethod(d, ORACLE);
  const figs: string[] = [];

  // 1. mean reward per method
  figs.push(
    figure(
      barChart({
        title: 'Mean reward per method',
        width: CHART_W,
        labels: d.methods.map((m) => m.name),
        values: d.methods.map((m) => m.meanReward),
        valueLabel: 'mean reward',
        domain: d.methods.every((m) => !finite(m.meanReward) || (m.meanReward >= 0 && m.meanReward <= 1)) ? [0, 1] : undefined,
        format: (v) => v.toFixed(3),
        colors: d.methods.map((m) => (m === router ? ROUTER_COLOR : OTHER_COLOR)),
        tooltips: d.methods.map((m) => `mean cost ${fmtCost(m.meanCost)} per call${m.note ? `; ${m.note}` : ''}`),
        refLines: oracle ? [{ value: oracle.meanReward, label: 'oracle', color: ORACLE_COLOR }] : [],
      }),
      'Mean reward of each method on the evaluated items; the router in blue. Dashed line: the per-question oracle.',
    ),
  );

  // 2. cost vs reward: every method as a point, the router's sweep hull as a line
  const hull = [...d.sweep.hull].sort((a, b) => a.cost - b.cost);
  const costSeries: LineSeries[] = [];
  if (hull.length > 0) {
    costSeries.push({ name: 'router λ sweep (hull)', points: hull.map((h) => ({ x: h.cost, y: h.reward })), color: ROUTER_COLOR, dashed: true });
  }
  let other = 0;
  for (const m of d.methods) {
    const color = m === router ? ROUTER_COLOR : m.name === ORACLE ? ORACLE_COLOR : paletteColor(1 + other++);
    costSeries.push({ name: m.name, points: [{ x: m.meanCost, y: m.meanReward }], color });
  }
  const hullNote =
    hull.length > 0
      ? ` Dashed: the non-decreasing convex hull of the router’s ${esc(fmtInt(d.sweep.points.length))} operating points when the cost weight λ is swept.`
      : '';
  figs.push(
    figure(
      lineChart({
        title: 'Cost vs mean reward',
        width: CHART_W,
        series: costSeries,
        xLabel: 'mean cost per call (USD)',
        yLabel: 'mean reward',
        formatX: fmtCost,
        formatY: (v) => v.toFixed(3),
        // lone points would sit on the frame at the data's extremes: pad both axes
        xDomain: padded(costSeries.flatMap((se) => se.points.map((p) => p.x)), true),
        yDomain: padded(costSeries.flatMap((se) => se.points.map((p) => p.y)), false),
        markers: true,
        height: 400,
      }),
      `Each method’s mean cost per call against its mean reward.${hullNote}`,
    ),
  );

  // 3. PGR curve of the strong/weak pair
  const sw = d.strongWeak;
  const curve = sw.curve.calls.map((c, i) => ({ x: c, y: sw.curve.pgr[i] ?? Number.NaN }));
  const pgrSeries: LineSeries[] = [
    { name: 'router', points: curve, color: ROUTER_COLOR },
    { name: 'random', points: [{ x: 0, y: 0 }, { x: 1, y: 1 }], color: '#777', dashed: true },
  ];
  if (finite(sw.cpt50)) pgrSeries.push({ name: `CPT(50%) = ${fmtPct(sw.cpt50)}`, points: [{ x: sw.cpt50, y: 0.5 }], color: '#E69F00' });
  if (finite(sw.cpt80)) pgrSeries.push({ name: `CPT(80%) = ${fmtPct(sw.cpt80)}`, points: [{ x: sw.cpt80, y: 0.8 }], color: '#D55E00' });
  figs.push(
    figure(
      lineChart({
        title: `Performance gap recovered: ${sw.strong} vs ${sw.weak}`,
        width: CHART_W,
        series: pgrSeries,
        xLabel: `fraction of calls to the strong worker (${sw.strong})`,
        yLabel: 'PGR',
        xDomain: [0, 1],
        formatX: (v) => fmtPct(v),
        formatY: (v) => v.toFixed(3),
        markers: curve.length <= 40,
        height: 400,
      }),
      `The router thresholded between the strong and the weak worker: PGR = (reward − weak) / (strong − weak) at each ` +
        `fraction of calls to the strong worker. The dashed diagonal is random routing; APGR (the area under the curve) is ` +
        `${esc(fmt3(sw.apgr))}.`,
    ),
  );

  // 4. routing distribution per task (stacked bars)
  const workers = routedWorkers(d);
  const tasks = Object.keys(d.routing).sort();
  const overall = overallRouting(d, workers);
  const rows = tasks.length > 1 ? ['All tasks', ...tasks] : tasks;
  const totalItems = tasks.reduce((a, t) => a + (finite(d.taskCounts[t]) ? d.taskCounts[t]! : 0), 0);
  figs.push(
    figure(
      stackedBarChart({
        title: 'Routing distribution per task',
        width: CHART_W,
        rows: rows.map((t, i) => (tasks.length > 1 && i === 0 ? t : `${t} (${fmtInt(d.taskCounts[t])})`)),
        series: workers.map((w, i) => ({ name: w, color: paletteColor(i) })),
        values: rows.map((t, i) => (tasks.length > 1 && i === 0 ? workers.map((w) => overall.get(w)) : workers.map((w) => d.routing[t]?.[w]))),
        rowTooltips: rows.map((t, i) => (tasks.length > 1 && i === 0 ? `${fmtInt(totalItems)} items` : `${fmtInt(d.taskCounts[t])} items`)),
        valueLabel: 'share of the task’s items routed to each worker',
      }),
      'For each task (item count in brackets), the share of its items the router sends to each worker; the top bar is over all items.',
    ),
  );

  // 5. SFT loss curve
  if (d.training && d.training.length > 0) {
    const t = [...d.training].sort((a, b) => a.epoch - b.epoch);
    figs.push(
      figure(
        lineChart({
          title: 'SFT loss per epoch',
          width: CHART_W,
          series: [
            { name: 'train KL', points: t.map((e) => ({ x: e.epoch, y: e.trainLoss })), color: ROUTER_COLOR },
            { name: 'validation KL', points: t.map((e) => ({ x: e.epoch, y: e.valLoss })), color: '#D55E00', dashed: true },
          ],
          xLabel: 'epoch',
          yLabel: 'KL(soft label ‖ router)',
          formatY: (v) => v.toFixed(4),
        }),
        'Mean KL divergence from the soft labels to the router’s distribution, on the training and the validation items.',
      ),
    );
  }
  return `<section id="plots"><h2>Plots</h2>${figs.join('')}</section>`;
}

// ---------------------------------------------------------------------------------------------

/** This page's own rules, added to the shared stylesheet. */
const CSS = `
h3 { font-size: 16px; margin: 26px 0 6px; }
table.methods tbody th { min-width: 12em; }
table.methods tr.router { background: #e3eef8; }
table.methods tr.router th { box-shadow: inset 4px 0 0 ${ROUTER_COLOR}; }
table.methods tr.router th, table.methods tr.router td { font-weight: 700; }
table.methods tr.oracle th, table.methods tr.oracle td { color: var(--muted); }
td.notecell { color: var(--muted); font-size: 13px; overflow-wrap: anywhere; max-width: 28em; }
table.metrics th[scope=row] { min-width: 18em; max-width: 44em; }
table.workers tbody th { min-width: 12em; }
.swatch { display: inline-block; width: 11px; height: 11px; margin-right: 7px; vertical-align: baseline; border-radius: 2px; }
`;

/** Render the router evaluation as one HTML document (UTF-8, no scripts, no external resources). */
export function renderRouterReport(data: RouterReportData, opts: RouterReportOptions = {}): string {
  const links = toc([
    ['methods', 'Comparison'],
    ['workers', 'Workers'],
    ['plots', 'Plots'],
  ]);
  return htmlDocument(
    `fugu router report: ${data.checkpoint.id}`,
    header(data, links) + methodsSection(data) + workersSection(data) + plotsSection(data) + pageFooter(`checkpoint ${data.checkpoint.id} · run ${data.data.run}`, opts.generatedAt),
    CSS,
  );
}
