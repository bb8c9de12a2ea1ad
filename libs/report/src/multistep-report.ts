// The HTML report of `fugu multistep fit --report` (issue 29): the replay step model measured on
// recorded multi-agent runs. Predicted against observed (the out-of-sample check, as interval
// charts), the parameters with their intervals, and the fixed-workflow ceiling across the
// intervals. The data is handed in (libs/multistep gathers it); report depends on core only.
import { CHART_W, esc, fact, figure, htmlDocument, pageFooter, pageHeader, table, toc } from './page.ts';
import { escapeXml, niceTicks, PALETTE, truncateText } from './svg.ts';

export type MultistepInterval = { estimate: number; lo: number; hi: number };

export type MultistepReportData = {
  seed: number;
  samples: number;
  /** per table and group: the five parameters (null: no data, the preset's value) */
  params: Array<{ table: string; group: string; questions: number; steps: number; values: Record<'keep' | 'misled' | 'adopt' | 'fix' | 'herd', MultistepInterval | null> }>;
  /** the out-of-sample check: one row per table, model variant, group and statistic */
  predictions: Array<{ table: string; model: string; group: string; questions: number; statistic: string; predicted: number; lo: number; hi: number; observed: number; p: number }>;
  /** the fixed-workflow ceiling's gain (points) per table at its pessimistic, point and optimistic parameters; the presets' gain */
  ceilings: { presets: number; rows: Array<{ table: string; pessimistic: number; point: number; optimistic: number }> };
  /** the Conductor's margin over the router (points) per conductor, table and split, at the table's corners (`fugu ultra analyse ... --json`, given by --margins) */
  margins?: Array<{ conductor: string; table: string; split: string; pessimistic: number; point: number; optimistic: number }>;
};

type Row = { label: string; lo: number; hi: number; mid: number; mark?: number; miss?: boolean; title?: string };

/** Horizontal intervals, one per row: a bar from lo to hi, a dot at mid, and a diamond at mark (red where outside the interval). */
function intervalChart(rows: readonly Row[], o: { domain?: [number, number]; axis: string; refLine?: { value: number; label: string } }): string {
  // (a reference line's label sits above the rows)
  const labelW = 260, right = 30, rowH = 20, top = o.refLine ? 26 : 12, axisH = 40;
  const width = CHART_W;
  const plotW = width - labelW - right;
  const lo = o.domain?.[0] ?? Math.min(...rows.map((r) => Math.min(r.lo, r.mark ?? r.lo)), o.refLine?.value ?? Infinity);
  const hi = o.domain?.[1] ?? Math.max(...rows.map((r) => Math.max(r.hi, r.mark ?? r.hi)), o.refLine?.value ?? -Infinity);
  const t = niceTicks(lo, hi, 6);
  const x = (v: number) => labelW + ((v - t.lo) / (t.hi - t.lo || 1)) * plotW;
  const height = top + rows.length * rowH + axisH;
  const parts: string[] = [];
  for (const tick of t.ticks) {
    parts.push(`<line x1="${x(tick)}" x2="${x(tick)}" y1="${top}" y2="${top + rows.length * rowH}" stroke="#e5e5e5"/>`);
    parts.push(`<text x="${x(tick)}" y="${top + rows.length * rowH + 16}" text-anchor="middle" font-size="11" fill="#444">${escapeXml(Number(tick.toFixed(4)))}</text>`);
  }
  if (o.refLine) {
    const rx = x(o.refLine.value);
    parts.push(`<line x1="${rx}" x2="${rx}" y1="${top}" y2="${top + rows.length * rowH}" stroke="#888" stroke-dasharray="4 3"/>`);
    parts.push(`<text x="${rx}" y="${top - 8}" text-anchor="middle" font-size="11" fill="#555">${escapeXml(o.refLine.label)}</text>`);
  }
  rows.forEach((r, i) => {
    const y = top + i * rowH + rowH / 2;
    parts.push(`<g><title>${escapeXml(r.title ?? r.label)}</title>`);
    parts.push(`<text x="${labelW - 8}" y="${y + 4}" text-anchor="end" font-size="12" fill="#222">${escapeXml(truncateText(r.label, labelW - 12))}</text>`);
    parts.push(`<line x1="${x(r.lo)}" x2="${x(r.hi)}" y1="${y}" y2="${y}" stroke="${PALETTE[0]}" stroke-width="6" stroke-opacity="0.35" stroke-linecap="round"/>`);
    parts.push(`<circle cx="${x(r.mid)}" cy="${y}" r="4" fill="${PALETTE[0]}"/>`);
    if (r.mark !== undefined) {
      const mx = x(r.mark), c = r.miss ? PALETTE[3] : '#222';
      parts.push(`<path d="M${mx} ${y - 6} L${mx + 6} ${y} L${mx} ${y + 6} L${mx - 6} ${y} Z" fill="${c}"/>`);
    }
    parts.push('</g>');
  });
  parts.push(`<text x="${labelW + plotW / 2}" y="${height - 6}" text-anchor="middle" font-size="12" fill="#333">${escapeXml(o.axis)}</text>`);
  return `<svg viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" xmlns="http://www.w3.org/2000/svg" font-family="system-ui, sans-serif">${parts.join('')}</svg>`;
}

const f3 = (v: number) => v.toFixed(3);

export function renderMultistepReport(d: MultistepReportData, opts: { generatedAt?: string } = {}): string {
  const tables = [...new Set(d.params.map((p) => p.table))];
  const models = [...new Set(d.predictions.map((p) => p.model))];
  const outside = (m: string, s: string) => d.predictions.filter((p) => p.model === m && p.statistic === s && (p.observed < p.lo - 1e-12 || p.observed > p.hi + 1e-12)).length;
  const count = (m: string, s: string) => d.predictions.filter((p) => p.model === m && p.statistic === s).length;
  const facts = [
    fact('tables', String(tables.length)),
    fact('what', 'recorded runs of other systems (gpt-3.5 debates), not fugu\'s pool'),
    fact('bootstrap', `${d.samples} resamples of questions, seed ${d.seed}`),
    ...models.map((m) => fact(`outside 95%: ${m}`, `any ${outside(m, 'any')}/${count(m, 'any')}, accuracy ${outside(m, 'accuracy')}/${count(m, 'accuracy')}, majority ${outside(m, 'majority')}/${count(m, 'majority')}`)),
  ];
  const sections: string[] = [];
  // predicted against observed
  const predictionFigures = models.flatMap((m) =>
    ['any', 'accuracy'].map((stat) => {
      const rows: Row[] = d.predictions
        .filter((p) => p.model === m && p.statistic === stat)
        .map((p) => ({
          label: `${p.table} · ${p.group} (${p.questions})`, lo: p.lo, hi: p.hi, mid: p.predicted, mark: p.observed, miss: p.observed < p.lo - 1e-12 || p.observed > p.hi + 1e-12,
          title: `${p.table} ${p.group}: predicted ${f3(p.predicted)} (${f3(p.lo)}-${f3(p.hi)}), observed ${f3(p.observed)}, p ${p.p < 0.001 ? '<0.001' : p.p.toFixed(3)}`,
        }));
      return figure(
        intervalChart(rows, { domain: [0, 1], axis: stat === 'any' ? 'share of questions with any agent right in round 2' : 'accuracy of round 2\'s answers' }),
        `${esc(m)}: ${stat === 'any' ? 'any agent right' : 'accuracy'}, predicted (dot, 95% interval as the bar) against observed (diamond; red: outside the interval). Fitted on one half of the questions, predicted on the other from its first round's recorded outcomes.`,
      );
    }),
  );
  sections.push(`<section id="check"><h2>Predicted against observed</h2>${predictionFigures.join('')}</section>`);
  // the parameters
  const names = ['keep', 'misled', 'adopt', 'fix', 'herd'] as const;
  const head = `<tr><th>table</th><th>group</th><th class="num">questions</th><th class="num">steps</th>${names.map((n) => `<th class="num">${n}</th>`).join('')}</tr>`;
  const body = d.params
    .map((p) => `<tr><td>${esc(p.table)}</td><td>${esc(p.group)}</td><td class="num">${p.questions}</td><td class="num">${p.steps}</td>${names.map((n) => {
      const v = p.values[n];
      return v ? `<td class="num">${f3(v.estimate)}<br><span class="sub">${f3(v.lo)}–${f3(v.hi)}</span></td>` : '<td class="num unmeasured" title="no observation informs it: the preset\'s value">no data</td>';
    }).join('')}</tr>`)
    .join('');
  sections.push(`<section id="params"><h2>The parameters</h2><p>Maximum likelihood of all five together on each table's second round; 95% intervals from ${d.samples} resamples of questions. Same-model gpt-3.5 agents on MATH and MMLU.</p>${table('params', head, body)}</section>`);
  // the ceiling
  const ceilingRows: Row[] = d.ceilings.rows.map((c) => ({ label: c.table, lo: c.pessimistic, hi: c.optimistic, mid: c.point, title: `${c.table}: ${c.pessimistic.toFixed(2)} / ${c.point.toFixed(2)} / ${c.optimistic.toFixed(2)} points` }));
  sections.push(
    `<section id="ceiling"><h2>The fixed-workflow ceiling across the intervals</h2>${figure(
      intervalChart(ceilingRows, { axis: 'gain of the best fixed workflow over the best single worker (points)', refLine: { value: d.ceilings.presets, label: `presets ${d.ceilings.presets.toFixed(2)}` } }),
      "LLMRouter's 500 test questions, replay in exact expectation (a simulation from recorded outcomes; chosen on the test split: an upper bound). Dot: the table's point estimate; bar: from the interval bounds that disfavour reading others to those that favour it.",
    )}</section>`,
  );
  // the Conductor's margin over the router
  if (d.margins && d.margins.length > 0) {
    const splits = [...new Set(d.margins.map((m) => m.split))];
    const charts = splits.map((sp) => {
      const rows: Row[] = d.margins!.filter((m) => m.split === sp).map((m) => ({
        label: `${m.table.replace(/^dylan-/, '')} · ${m.conductor}`, lo: m.pessimistic, hi: m.optimistic, mid: m.point, miss: m.pessimistic < 0,
        title: `${m.conductor} under ${m.table}: ${m.pessimistic.toFixed(2)} / ${m.point.toFixed(2)} / ${m.optimistic.toFixed(2)} points over the router (${sp})`,
      }));
      return figure(
        intervalChart(rows, { axis: `margin over the router, ${sp} split (points of expected accuracy)`, refLine: { value: 0, label: 'the router' } }),
        `${esc(sp)} split. Planner: the model-based ceiling (per-worker regressions on the router's features, per question a single worker or "A, then B reading A"); anchored planner: the router's pick alone or a helper read first. Each conductor chooses (or was trained) under the table's point estimate; dot: scored there; bar: scored at the interval bounds that disfavour and favour reading others. A bar that crosses the dashed line is a gain that does not survive every corner.`,
      );
    });
    const mHead = '<tr><th>conductor</th><th>step model (table)</th><th>split</th><th class="num">pessimistic</th><th class="num">point</th><th class="num">optimistic</th></tr>';
    const mBody = d.margins.map((m) => `<tr${m.pessimistic < 0 ? ' class="miss"' : ''}><td>${esc(m.conductor)}</td><td>${esc(m.table)}</td><td>${esc(m.split)}</td><td class="num">${m.pessimistic.toFixed(2)}</td><td class="num">${m.point.toFixed(2)}</td><td class="num">${m.optimistic.toFixed(2)}</td></tr>`).join('');
    sections.push(
      `<section id="margins"><h2>The Conductor's margin over the router across the intervals</h2><p>LLMRouter, the router's splits, replay in exact expectation (a simulation from recorded outcomes) under parameters measured on same-model gpt-3.5 agents, not LLMRouter's workers; rows shaded where the margin is below 0 at the pessimistic corner.</p>${charts.join('')}${table('margins', mHead, mBody)}</section>`,
    );
  }
  // the full check
  const oHead = '<tr><th>table</th><th>parameters</th><th>group</th><th class="num">questions</th><th>statistic</th><th class="num">predicted</th><th class="num">95% interval</th><th class="num">observed</th><th class="num">p</th></tr>';
  const oBody = d.predictions
    .map((p) => {
      const miss = p.observed < p.lo - 1e-12 || p.observed > p.hi + 1e-12;
      return `<tr${miss ? ' class="miss"' : ''}><td>${esc(p.table)}</td><td>${esc(p.model)}</td><td>${esc(p.group)}</td><td class="num">${p.questions}</td><td>${esc(p.statistic)}</td><td class="num">${f3(p.predicted)}</td><td class="num">${f3(p.lo)}–${f3(p.hi)}</td><td class="num">${f3(p.observed)}</td><td class="num">${p.p < 0.001 ? '&lt;0.001' : p.p.toFixed(3)}</td></tr>`;
    })
    .join('');
  sections.push(`<section id="table"><h2>Every figure of the check</h2>${table('oos', oHead, oBody)}</section>`);
  const title = 'The replay step model on recorded multi-agent runs';
  return htmlDocument(
    title,
    pageHeader('fugu multistep fit', esc(title), facts, toc([['check', 'Predicted against observed'], ['params', 'Parameters'], ['ceiling', 'Ceiling'], ...(d.margins?.length ? [['margins', 'Margin over the router'] as [string, string]] : []), ['table', 'Every figure']])) +
      sections.join('') +
      pageFooter('a measurement on recorded runs of other systems; replay figures are simulations from recorded outcomes', opts.generatedAt),
    '.sub{color:#666;font-size:11px}.unmeasured{color:#888}tr.miss td{background:#fdecea}',
  );
}
