// The HTML report of a Conductor run (`fugu ultra eval`, `fugu report <conductor run>`): one
// self-contained file with inline CSS and inline SVG (no scripts, no external assets). Per
// conductor spec (and the reference rows: best single worker, oracle, fugu router): mean reward
// (± sd over seeds), accuracy, parse failures, dollars and tokens per item split between the
// conductor and the workers, latency, steps per workflow; the topologies the conductors wrote,
// their finish reasons, the worker distribution per task, and a few workflows step by step. When
// replay workers answered, the page says plainly that the figures come from the replay step model
// and lists its parameters. This module only renders; @fugu/ultra-training gathers the data.

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
  htmlDocument,
  notMeasuredCell,
  pageFooter,
  pageHeader,
  table,
  toc,
} from './page.ts';
import type { ConductorReportData, ConductorResult, ShownWorkflow } from './conductor-report-data.ts';
import { barChart, paletteColor, paretoFrontier, scatterChart, stackedBarChart } from './svg.ts';

export type ConductorReportOptions = {
  /** shown in the footer; omitted by default so the same data renders to the same bytes */
  generatedAt?: string;
};

/** The note every replayed page carries (the words the docs use). */
export const REPLAY_NOTE =
  'Figures from the replay environment are a simulation from recorded outcomes under the documented step model (parameters below).';

/** Topology labels in the order the charts stack them (libs/conductor's TOPOLOGIES, then the rest). */
const TOPOLOGY_ORDER = ['single', 'chain', 'parallel', 'tree', 'other', 'unparsed'];
const TOPOLOGY_COLORS: Record<string, string> = { single: '#0072B2', chain: '#E69F00', parallel: '#009E73', tree: '#CC79A7', other: '#8C6D1F', unparsed: '#B00020' };

const CONDUCTOR_COLOR = '#0072B2';
const REFERENCE_COLOR = '#A7ADB3';

/** How much of a step's answer and of a question the examples show. */
const ANSWER_CHARS = 280;
const QUESTION_CHARS = 1200;

// ---------------------------------------------------------------------------------------------
// Formatting

const fmt3 = (v: unknown): string => (finite(v) ? v.toFixed(3) : DASH);
const fmtMs = (v: unknown): string => (finite(v) ? (v >= 10_000 ? `${(v / 1000).toFixed(1)} s` : `${Math.round(v).toLocaleString('en-US')} ms`) : DASH);
const fmtSteps = (v: unknown): string => (finite(v) ? v.toFixed(2) : DASH);

/** Text cut to n characters (code points), with an ellipsis and the full length when cut. */
function cut(text: string, n: number): { text: string; cut: boolean } {
  const chars = [...text];
  if (chars.length <= n) return { text, cut: false };
  return { text: `${chars.slice(0, n).join('')}…`, cut: true };
}

/** The mean, and "± sd" under it when an sd is given (HTML): the sd on its own line keeps the column narrow. */
function withSd(mean: unknown, sd: unknown, f: (v: unknown) => string, fSd: (v: unknown) => string = f): string {
  return finite(mean) && finite(sd) ? `${esc(f(mean))}<span class="sd">± ${esc(fSd(sd))}</span>` : esc(f(mean));
}

/** A spread in USD: 2 significant digits are enough ("$0.000040", not "$0.0000400"). */
function fmtCostSd(v: unknown): string {
  if (!finite(v) || v === 0) return fmtCost(v);
  const decimals = Math.min(12, Math.max(2, 1 - Math.floor(Math.log10(Math.abs(v)))));
  return `$${Math.abs(v).toFixed(decimals)}`;
}

/** Why a run's latency columns say "not measured". */
const LATENCY_FOOTNOTE =
  'Latency not measured: replay workers answer at once from recorded outcomes, so a workflow’s time in the replay environment is not a latency anyone would see.';

/** A conductor row's latency is measured unless its workers are replayed (the whole run) or it recorded 0 ms. */
function latencyMeasured(d: ConductorReportData, r: ConductorResult): boolean {
  if (!r.latencyMs) return true; // reference rows: no workflow ran, a dash says so
  if (d.run.environment === 'replay') return false;
  return !(r.latencyMs.mean === 0 && r.latencyMs.p95 === 0);
}

const totalUsd = (r: ConductorResult): number => r.usdPerItem.conductor + r.usdPerItem.workers;
const isReference = (r: ConductorResult): boolean => r.kind === 'reference';

/** Keys in the preferred order first, then the others sorted. */
function ordered(keys: Iterable<string>, preferred: readonly string[]): string[] {
  const set = new Set(keys);
  return [...preferred.filter((k) => set.has(k)), ...[...set].filter((k) => !preferred.includes(k)).sort()];
}

// ---------------------------------------------------------------------------------------------
// Sections

function statusClass(status: string): string {
  if (/^(done|finished|complete|completed|succeeded)$/i.test(status)) return 'ok';
  if (/fail|error|cancel/i.test(status)) return 'bad';
  if (/run|pending|queued|partial/i.test(status)) return 'warn';
  return 'neutral';
}

function header(d: ConductorReportData, after: string): string {
  const r = d.run;
  const facts = [
    fact('Dataset', r.dataset ?? 'free questions'),
    fact('Pool', r.pool),
    fact('Split', r.split === null ? DASH : r.split === 'all' ? r.split : `${r.split} (${r.splitBy === 'dataset' ? "the dataset's own split" : `by unique prompt, split seed ${r.splitSeed ?? 0}`})`),
    fact('Sample', finite(r.sample) ? `${fmtInt(r.sample)} items` : 'all items'),
    fact('Seed / repeats', `seed ${r.seed} · ${fmtInt(r.repeats)} repeat${r.repeats === 1 ? '' : 's'}`),
    fact('Max steps', fmtInt(r.maxSteps)),
    fact('Environment', r.environment === 'replay' ? 'replay (simulated)' : r.environment === 'mixed' ? 'mixed (some workers replayed)' : 'live'),
    fact('Created', fmtTime(r.createdAt), r.createdAt),
    fact('Finished', fmtTime(r.finishedAt), r.finishedAt ?? undefined),
  ];
  const title = `Conductor run <code>${esc(r.id)}</code> <span class="status ${statusClass(r.status)}">${esc(r.status)}</span>`;
  return pageHeader('fugu · conductor evaluation', title, facts, replayNote(d) + after);
}

function replayed(d: ConductorReportData): boolean {
  return d.run.environment === 'replay' || d.run.environment === 'mixed';
}

function replayNote(d: ConductorReportData): string {
  if (!replayed(d)) return '';
  const which = d.run.environment === 'mixed' ? ' Some workers of this run are replay workers, some are live: the figures mix both.' : '';
  const from = d.run.replaySource ? ` Step model: ${d.run.replaySource}.` : '';
  return `<p class="replay-note" role="note"><b>Simulated.</b> ${esc(REPLAY_NOTE)}${esc(which)}${esc(from)} <a href="#replay">Replay step model</a></p>`;
}

function resultsSection(d: ConductorReportData): string {
  if (d.results.length === 0) return `<section id="results"><h2>Results</h2><p class="empty">No results: the run has no finished workflows yet.</p></section>`;
  const anySeeds = d.results.some((r) => r.seeds);
  const seedCount = Math.max(0, ...d.results.map((r) => r.seeds?.count ?? 0));
  const best = Math.max(...d.results.filter((r) => !isReference(r)).map((r) => (finite(r.meanReward) ? r.meanReward : -Infinity)));
  const col = (label: string, unit?: string) => `<th scope="col" class="num">${esc(label)}${unit ? `<span class="unit">${esc(unit)}</span>` : ''}</th>`;
  const head =
    `<tr><th scope="col" rowspan="2">Conductor</th>` +
    `<th scope="col" class="num" rowspan="2">Workflows</th>` +
    `<th scope="col" class="num" rowspan="2">Mean reward${anySeeds ? `<span class="unit">± sd over ${esc(fmtInt(seedCount))} seeds</span>` : ''}</th>` +
    `<th scope="col" class="num" rowspan="2">Accuracy${anySeeds ? '<span class="unit">± sd</span>' : ''}</th>` +
    `<th scope="col" class="num" rowspan="2">Parse failures</th>` +
    `<th scope="colgroup" colspan="3" class="grp">USD per item</th>` +
    `<th scope="colgroup" colspan="2" class="grp">Tokens per item</th>` +
    `<th scope="colgroup" colspan="2" class="grp">Latency</th>` +
    `<th scope="col" class="num" rowspan="2">Steps<span class="unit">per workflow</span></th></tr>` +
    `<tr>${col('conductor')}${col('workers')}${col('total', anySeeds ? '± sd' : undefined)}${col('conductor')}${col('workers')}${col('mean')}${col('p95')}</tr>`;
  const rows = d.results
    .map((r) => {
      const ref = isReference(r);
      const top = !ref && finite(r.meanReward) && r.meanReward === best;
      const s = r.seeds;
      return (
        `<tr class="${ref ? 'reference' : 'conductor'}">` +
        `<th scope="row">${esc(r.name)}${ref ? ' <span class="tag">reference</span>' : ''}</th>` +
        `<td class="num">${esc(fmtInt(r.workflows))}</td>` +
        `<td class="num${top ? ' best' : ''}">${withSd(r.meanReward, s?.meanRewardSd, fmt3)}</td>` +
        `<td class="num">${withSd(r.accuracy, s?.accuracySd, fmtPct)}</td>` +
        `<td class="num${finite(r.parseFailureRate) && r.parseFailureRate > 0 ? ' warn' : ''}">${esc(fmtPct(r.parseFailureRate))}</td>` +
        `<td class="num">${esc(fmtCost(r.usdPerItem.conductor))}</td>` +
        `<td class="num">${esc(fmtCost(r.usdPerItem.workers))}</td>` +
        `<td class="num">${withSd(totalUsd(r), s?.usdPerItemSd, fmtCost, fmtCostSd)}</td>` +
        `<td class="num">${esc(fmtInt(r.tokensPerItem.conductor))}</td>` +
        `<td class="num">${esc(fmtInt(r.tokensPerItem.workers))}</td>` +
        (latencyMeasured(d, r)
          ? `<td class="num">${esc(r.latencyMs ? fmtMs(r.latencyMs.mean) : DASH)}</td><td class="num">${esc(r.latencyMs ? fmtMs(r.latencyMs.p95) : DASH)}</td>`
          : notMeasuredCell(2, LATENCY_FOOTNOTE)) +
        `<td class="num">${esc(fmtSteps(r.stepsPerWorkflow))}</td></tr>`
      );
    })
    .join('');
  return (
    `<section id="results"><h2>Results</h2>` +
    `<p class="hint">One row per conductor spec of the run; grey rows marked “reference” are computed from recorded data ` +
    `(no workflow ran for them, so no latency). Reward: 0 when the workflow does not parse, 1 when the final answer is ` +
    `correct, 0.5 otherwise. The best conductor’s mean reward is marked green.${anySeeds ? ' “± sd”: the standard deviation over the seeds.' : ''}</p>` +
    table('results', head, rows) +
    (d.results.some((r) => !latencyMeasured(d, r)) ? `<p class="hint footnote"><sup>*</sup> ${esc(LATENCY_FOOTNOTE)}</p>` : '') +
    `</section>`
  );
}

function chartsSection(d: ConductorReportData): string {
  const figs: string[] = [];
  const rs = d.results;
  const oracle = rs.find((r) => isReference(r) && /^oracle\b/.test(r.name));

  // 1. mean reward per conductor, with sd whiskers over seeds
  figs.push(
    figure(
      barChart({
        title: 'Mean reward per conductor',
        width: CHART_W,
        labels: rs.map((r) => r.name),
        values: rs.map((r) => r.meanReward),
        errors: rs.map((r) => r.seeds?.meanRewardSd),
        valueLabel: 'mean reward',
        domain: rs.every((r) => !finite(r.meanReward) || (r.meanReward >= 0 && r.meanReward <= 1)) ? [0, 1] : undefined,
        format: (v) => v.toFixed(3),
        colors: rs.map((r) => (isReference(r) ? REFERENCE_COLOR : CONDUCTOR_COLOR)),
        tooltips: rs.map((r) => `${fmtInt(r.workflows)} workflows · accuracy ${fmtPct(r.accuracy)} · ${fmtCost(totalUsd(r))} per item${isReference(r) ? ' · reference' : ''}`),
        refLines: oracle && finite(oracle.meanReward) ? [{ value: oracle.meanReward, label: 'oracle', color: '#B00020' }] : [],
      }),
      'Mean reward of each conductor spec (blue) and of the reference rows (grey); whiskers: ± one sd over seeds where the run has several. Dashed line: the per-question oracle.',
    ),
  );

  // 2. accuracy vs dollars per item; the caption says what the frontier is (a line, or one point beating all)
  const front = paretoFrontier(rs.map((r) => ({ x: totalUsd(r), y: r.accuracy, name: r.name })));
  const frontNote =
    front.length > 1
      ? 'the dashed line joins the rows no other row beats on both (ringed).'
      : front.length === 1 && rs.length > 1
        ? `no dashed line: one row, ${esc(front[0]!.name)}, is at least as cheap and as accurate as every other (ringed), so it alone is the Pareto frontier.`
        : '';
  figs.push(
    figure(
      scatterChart({
        title: 'Accuracy vs USD per item',
        width: CHART_W,
        points: rs.map((r, i) => ({
          x: totalUsd(r),
          y: r.accuracy,
          label: r.name,
          color: isReference(r) ? REFERENCE_COLOR : paletteColor(i),
          tooltip: `conductor ${fmtCost(r.usdPerItem.conductor)} + workers ${fmtCost(r.usdPerItem.workers)}`,
        })),
        xLabel: 'USD per item (conductor + workers)',
        yLabel: 'accuracy',
        xScale: 'auto',
        formatX: fmtCost,
        formatY: (v) => fmtPct(v),
        height: 400,
      }),
      `Each row’s accuracy against its mean cost per item, conductor and workers together; ${frontNote}`,
    ),
  );

  // 3. topologies per conductor (counts, stacked)
  const withTopo = rs.filter((r) => Object.values(r.topologies).some((n) => finite(n) && n > 0));
  const topos = ordered(withTopo.flatMap((r) => Object.keys(r.topologies)), TOPOLOGY_ORDER);
  figs.push(
    figure(
      stackedBarChart({
        title: 'Topologies per conductor',
        width: CHART_W,
        rows: withTopo.map((r) => r.name),
        series: topos.map((t, i) => ({ name: t, color: TOPOLOGY_COLORS[t] ?? paletteColor(i + 5) })),
        values: withTopo.map((r) => topos.map((t) => r.topologies[t])),
        rowTooltips: withTopo.map((r) => `${fmtInt(r.workflows)} workflows`),
        normalize: false,
        valueLabel: 'workflows',
        format: (v) => fmtInt(v),
      }),
      'The shape of the workflows each conductor wrote: single (one step), chain (each step sees the one before), parallel (independent steps, the last one aggregates), tree (any other DAG), unparsed (the completion did not parse).',
    ),
  );

  return `<section id="charts"><h2>Charts</h2>${figs.join('')}${finishReasons(d)}${workerDistribution(d)}</section>`;
}

function finishReasons(d: ConductorReportData): string {
  const rs = d.results.filter((r) => Object.keys(r.finishReasons).length > 0);
  if (rs.length === 0) return `<h3 id="finish">Finish reasons</h3><p class="empty">No finish reasons recorded.</p>`;
  const reasons = ordered(rs.flatMap((r) => Object.keys(r.finishReasons)), ['done', 'final']);
  const head = `<tr><th scope="col">Conductor</th>${reasons.map((k) => `<th scope="col" class="num wk">${esc(k)}</th>`).join('')}</tr>`;
  const body = rs
    .map((r) => {
      const total = reasons.reduce((a, k) => a + (finite(r.finishReasons[k]) ? r.finishReasons[k]! : 0), 0);
      const cells = reasons
        .map((k) => {
          const n = r.finishReasons[k];
          return `<td class="num">${finite(n) && n > 0 ? `${esc(fmtInt(n))}<span class="note">${esc(fmtPct(total > 0 ? n / total : Number.NaN))}</span>` : DASH}</td>`;
        })
        .join('');
      return `<tr><th scope="row">${esc(r.name)}</th>${cells}</tr>`;
    })
    .join('');
  return `<h3 id="finish">Finish reasons</h3><p class="hint">How each conductor’s workflows ended (workflows, and their share).</p>${table('finish', head, body)}`;
}

function workerDistribution(d: ConductorReportData): string {
  const specs = Object.keys(d.workerDistribution);
  if (specs.length === 0) return `<h3 id="workers">Worker distribution per task</h3><p class="empty">No steps ran.</p>`;
  // one colour per worker across every chart
  const workers = [...new Set(specs.flatMap((s) => Object.values(d.workerDistribution[s]!).flatMap((t) => Object.keys(t))))].sort();
  const series = workers.map((w, i) => ({ name: w, color: paletteColor(i) }));
  const figs = specs.map((spec) => {
    const dist = d.workerDistribution[spec]!;
    const tasks = Object.keys(dist).sort();
    const count = (t: string) => (finite(d.taskCounts[t]) ? d.taskCounts[t]! : 0);
    const overall = workers.map((w) => {
      let total = 0;
      let acc = 0;
      for (const t of tasks) {
        const weight = count(t) > 0 ? count(t) : 1;
        total += weight;
        const f = dist[t]![w];
        if (finite(f)) acc += weight * f;
      }
      return total > 0 ? acc / total : 0;
    });
    const many = tasks.length > 1;
    const rows = many ? ['All tasks', ...tasks.map((t) => `${t} (${fmtInt(count(t))})`)] : tasks.map((t) => `${t} (${fmtInt(count(t))})`);
    const values = [...(many ? [overall] : []), ...tasks.map((t) => workers.map((w) => dist[t]![w]))];
    const totalItems = tasks.reduce((a, t) => a + count(t), 0);
    return figure(
      stackedBarChart({
        title: `Workers per task: ${spec}`,
        width: CHART_W,
        rows,
        series,
        values,
        rowTooltips: [...(many ? [`${fmtInt(totalItems)} items`] : []), ...tasks.map((t) => `${fmtInt(count(t))} items`)],
        valueLabel: 'share of the task’s steps',
      }),
      `Which workers <code>${esc(spec)}</code> gave the steps of each task to${many ? '; “All tasks” weights the tasks by their item counts' : ''}.`,
    );
  });
  return `<h3 id="workers">Worker distribution per task</h3><p class="hint">One chart per conductor spec; a worker has the same colour in every chart.</p>${figs.join('')}`;
}

function sees(s: ShownWorkflow['steps'][number]): string {
  return s.sees.length === 0 ? 'none' : s.sees.join(', ');
}

function example(w: ShownWorkflow, i: number): string {
  const q = cut(w.question, QUESTION_CHARS);
  const facts = [
    ['Reward', fmtReward(w.reward)],
    ['Outcome', w.outcome ?? DASH],
    ['Topology', w.topology ?? DASH],
    ['Finish', w.finishReason ?? DASH],
    ['Steps', fmtInt(w.steps.length)],
    ['Steps USD', fmtCost(w.steps.reduce((a, s) => a + (finite(s.usd) ? s.usd : 0), 0))],
  ]
    .map(([k, v]) => `<span class="kv"><b>${esc(k)}</b> ${esc(v)}</span>`)
    .join('');
  const head =
    `<tr><th scope="col" class="num">#</th><th scope="col">Worker</th><th scope="col">Subtask</th><th scope="col">Sees</th>` +
    `<th scope="col">Answer</th><th scope="col">Status</th><th scope="col" class="num">USD</th></tr>`;
  const body = w.steps
    .map((s) => {
      const a = s.answer === null ? null : cut(s.answer, ANSWER_CHARS);
      return (
        `<tr><td class="num">${esc(String(s.idx))}</td><td>${esc(s.worker)}</td><td class="text">${esc(s.subtask)}</td>` +
        `<td>${esc(sees(s))}</td>` +
        `<td class="text">${a === null ? DASH : `${esc(a.text)}${a.cut ? `<span class="note">(${esc(fmtInt([...s.answer!].length))} characters; shortened)</span>` : ''}`}</td>` +
        `<td${/fail|error|timeout|budget/i.test(s.status) ? ' class="warn"' : ''}>${esc(s.status)}</td><td class="num">${esc(fmtCost(s.usd))}</td></tr>`
      );
    })
    .join('');
  const steps = w.steps.length > 0 ? table('steps', head, body) : `<p class="empty">No steps ran.</p>`;
  const parse = w.parseError !== null ? `<p class="parse-error"><b>Parse error:</b> ${esc(w.parseError)}</p>` : '';
  const final = `<p class="final"><b>Final answer:</b> ${w.finalAnswer === null ? `<span class="empty">none</span>` : esc(cut(w.finalAnswer, ANSWER_CHARS * 2).text)}</p>`;
  return (
    `<article class="workflow" id="wf-${i + 1}">` +
    `<h3>${esc(`${i + 1}. ${w.conductor}`)} <span class="sub">${esc(`item ${w.item} · ${w.task}`)}</span></h3>` +
    `<blockquote class="question">${esc(q.text)}</blockquote>` +
    `<p class="kvs">${facts}</p>` +
    parse +
    steps +
    final +
    `</article>`
  );
}

function examplesSection(d: ConductorReportData): string {
  const body = d.examples.length === 0 ? `<p class="empty">No workflows to show.</p>` : d.examples.map(example).join('');
  return (
    `<section id="examples"><h2>Workflows, step by step</h2>` +
    `<p class="hint">A few workflows of the run. “Sees”: the earlier steps (by number) whose subtasks and answers the worker was shown. ` +
    `Answers are shortened to ${fmtInt(ANSWER_CHARS)} characters.</p>` +
    body +
    `</section>`
  );
}

/** The config's parameters for steps that read several other answers (replaying the table measured with that many), when it has them. */
function bySourcesTable(d: ConductorReportData): string {
  const by = d.run.replayBySources;
  if (!by || Object.keys(by).length === 0) return '';
  const names = ['keep', 'misled', 'adopt', 'fix', 'herd'] as const;
  const head = `<tr><th scope="col">Step reads</th>${names.map((n) => `<th scope="col" class="num">${n}</th>`).join('')}</tr>`;
  const body = Object.keys(by).sort((a, b) => Number(a) - Number(b)).map((k) => {
    const p = by[k]!;
    return `<tr><th scope="row">${esc(k)} or more other answers</th>${names.map((n) => `<td class="num">${p[n] === undefined ? 'as above' : esc(fmt3(p[n]))}</td>`).join('')}</tr>`;
  }).join('');
  return `<p class="hint">The table above holds for a step that reads one other worker's answer; a step that reads more takes these values instead (every worker alike):</p>${table('replay-sources', head, body)}`;
}

function replaySection(d: ConductorReportData): string {
  if (!replayed(d)) return '';
  const params = d.run.replay ?? {};
  const workers = Object.keys(params).sort();
  const head =
    `<tr><th scope="col">Worker</th><th scope="col">Size class</th>` +
    `<th scope="col" class="num">keep<span class="unit">P(right | right, all seen right)</span></th>` +
    `<th scope="col" class="num">misled<span class="unit">P(wrong | right, all seen wrong)</span></th>` +
    `<th scope="col" class="num">adopt<span class="unit">P(right | wrong, all seen right)</span></th>` +
    `<th scope="col" class="num">fix<span class="unit">P(right | wrong, all seen wrong)</span></th>` +
    `<th scope="col" class="num">herd<span class="unit">shape between, when some seen are right</span></th></tr>`;
  const body = workers
    .map((w) => {
      const p = params[w]!;
      return `<tr><th scope="row">${esc(w)}</th><td>${esc(p.sizeClass)}</td>${[p.keep, p.misled, p.adopt, p.fix, p.herd].map((v) => `<td class="num">${esc(fmt3(v))}</td>`).join('')}</tr>`;
    })
    .join('');
  return (
    `<section id="replay"><h2>Replay step model</h2>` +
    `<p class="hint">${esc(REPLAY_NOTE.replace(' (parameters below).', '.'))} A step that sees no earlier step gets the worker’s ` +
    `recorded outcome on the item. A step that sees earlier answers is right with a probability set by the worker’s own recorded ` +
    `outcome (“right”/“wrong” below) and the share of the answers it sees that are right, with these parameters per worker ` +
    `(libs/conductor/src/replay/README.md documents the model, its defaults and their sources).</p>` +
    (d.run.replaySource ? `<p class="replay-source"><b>Parameters from:</b> ${esc(d.run.replaySource)}</p>` : '') +
    (workers.length > 0 ? table('replay', head, body) : `<p class="empty">The run did not record the replay parameters.</p>`) +
    bySourcesTable(d) +
    `</section>`
  );
}

// ---------------------------------------------------------------------------------------------

/** This page's own rules, added to the shared stylesheet. */
const CSS = `
h3 { font-size: 16px; margin: 26px 0 6px; }
h3 .sub { font-weight: 400; color: var(--muted); font-size: 13.5px; margin-left: 6px; }
.replay-note { margin: 14px 0 0; padding: 10px 14px; background: #fff3d6; border: 1px solid #e9c76b; border-left: 5px solid #c98a00; border-radius: 4px; color: #4d3300; max-width: 90ch; }
.replay-note a { color: #7a4d00; }
th.grp { text-align: center; border-bottom: 1px solid var(--line); }
table.results tbody th { min-width: 12em; }
.footnote { margin-top: 6px; }
table.results tr.reference th, table.results tr.reference td { color: var(--muted); font-style: italic; }
table.results tr.reference { background: #f3f3f3; }
.tag { display: inline-block; font-size: 11px; font-style: normal; font-weight: 600; padding: 0 6px; border: 1px solid #bbb; border-radius: 999px; color: #555; }
article.workflow { margin: 18px 0 26px; padding: 4px 0 0; border-top: 1px solid var(--line); break-inside: avoid-page; }
blockquote.question { margin: 8px 0; padding: 8px 12px; background: var(--zebra); border-left: 4px solid var(--accent); white-space: pre-wrap; overflow-wrap: anywhere; }
.kvs { font-size: 13.5px; margin: 6px 0; }
.kv { margin-right: 16px; white-space: nowrap; }
.kv b { color: var(--muted); font-weight: 600; }
.parse-error { color: #9b1020; background: #fbe9eb; border: 1px solid #eaa6ae; padding: 6px 10px; border-radius: 4px; overflow-wrap: anywhere; }
table.steps td.text { white-space: pre-wrap; overflow-wrap: anywhere; max-width: 34em; }
.final { overflow-wrap: anywhere; }
`;

/** Render a Conductor run as one HTML document (UTF-8, no scripts, no external resources). */
export function renderConductorReport(data: ConductorReportData, opts: ConductorReportOptions = {}): string {
  const links: Array<[string, string]> = [
    ['results', 'Results'],
    ['charts', 'Charts'],
    ['examples', 'Workflows'],
  ];
  if (replayed(data)) links.push(['replay', 'Replay step model']);
  return htmlDocument(
    `fugu conductor report: ${data.run.id}`,
    header(data, toc(links)) +
      resultsSection(data) +
      chartsSection(data) +
      examplesSection(data) +
      replaySection(data) +
      pageFooter(`conductor run ${data.run.id}${replayed(data) ? ' · replay environment (simulated)' : ''}`, opts.generatedAt),
    CSS,
  );
}
