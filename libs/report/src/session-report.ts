// The HTML report of one client session (`fugu report session:<id>`): a coding harness's turns
// through the gateway, in order (the `requests` rows whose session is the id): per turn the worker
// `fugu` chose for the transcript so far and what the turn cost; a strip of the workers by turn
// (each turn's cost as its bar), the totals per worker. The data is handed in (the CLI reads the
// rows from Postgres); report depends on core only.
import { barChart, escapeXml, paletteColor, textColorOn, truncateText } from './svg.ts';
import { CHART_W, DASH, esc, fact, figure, fmtInt, fmtPct, fmtTime, htmlDocument, pageFooter, pageHeader, table, toc, usdText } from './page.ts';

/** One turn of a session: one request row. */
export type SessionTurn = {
  /** the row's time (ISO) */
  at: string;
  /** the x-request-id the client saw */
  requestId: string;
  /** the route: /v1/chat/completions, /v1/responses, /v1/messages */
  route: string;
  /** the model asked for (fugu, fugu-ultra, a worker) */
  model: string | null;
  /** the worker that answered */
  worker: string | null;
  /** the router's probability of the answering worker, when it routed */
  prob: number | null;
  /** workers that failed before the one that answered */
  fallbacks: string[];
  tokensIn: number;
  tokensOut: number;
  /** picodollars */
  cost: bigint;
  status: number;
  errorCode: string | null;
  /** the tool calls the answer gave the client, by name */
  toolCalls: string[];
  /** fugu-ultra: its workflow */
  workflowId: number | null;
};

export type SessionReportData = { session: string; turns: SessionTurn[] };

/** The API of a route, as a reader names it. */
export function apiOf(route: string): string {
  return route === '/v1/chat/completions' ? 'chat' : route === '/v1/responses' ? 'responses' : route === '/v1/messages' ? 'messages' : route;
}

export type WorkerTotals = { worker: string; turns: number; tokensIn: number; tokensOut: number; cost: bigint };

/** Turns, tokens and cost per worker, in order of first use (a turn without a worker: "(none)"). */
export function workerTotals(turns: readonly SessionTurn[]): WorkerTotals[] {
  const by = new Map<string, WorkerTotals>();
  for (const t of turns) {
    const w = t.worker ?? '(none)';
    const e = by.get(w) ?? { worker: w, turns: 0, tokensIn: 0, tokensOut: 0, cost: 0n };
    e.turns += 1;
    e.tokensIn += t.tokensIn;
    e.tokensOut += t.tokensOut;
    e.cost += t.cost;
    by.set(w, e);
  }
  return [...by.values()];
}

/** Times the worker changed from one turn to the next. */
export function workerSwitches(turns: readonly SessionTurn[]): number {
  let n = 0;
  for (let i = 1; i < turns.length; i++) if (turns[i]!.worker !== turns[i - 1]!.worker) n += 1;
  return n;
}

const CSS = `
.swatch { display: inline-block; width: 11px; height: 11px; border-radius: 2px; margin-right: 6px; vertical-align: -1px; }
table.turns td.tools { max-width: 26em; overflow-wrap: anywhere; }
table.turns td.bad { color: #9b1020; }
`;

/**
 * The strip: one column per turn, coloured by its worker and numbered, above a bar whose height is
 * the turn's cost (the dearest turn the full height); a legend of the workers under it.
 */
function turnStrip(turns: readonly SessionTurn[], color: (w: string | null) => string, workers: readonly string[]): string {
  const width = CHART_W;
  const left = 64;
  const right = 12;
  const top = 34;
  const cellH = 26;
  const barH = 90;
  const n = turns.length;
  const step = (width - left - right) / Math.max(1, n);
  const gap = step > 8 ? 2 : 0;
  const maxCost = turns.reduce((m, t) => (t.cost > m ? t.cost : m), 0n);
  const barTop = top + cellH + 8;
  const legendY = barTop + barH + 22;
  const height = legendY + 26;
  const f = (v: number) => v.toFixed(1);
  let s = '';
  s += `<text x="${f(left - 8)}" y="${f(top + cellH / 2 + 4)}" text-anchor="end" font-size="11" fill="#444">worker</text>`;
  s += `<text x="${f(left - 8)}" y="${f(barTop + barH / 2 + 4)}" text-anchor="end" font-size="11" fill="#444">cost</text>`;
  s += `<line x1="${f(left)}" y1="${f(barTop + barH)}" x2="${f(width - right)}" y2="${f(barTop + barH)}" stroke="#444"/>`;
  turns.forEach((t, i) => {
    const x = left + i * step;
    const w = Math.max(1, step - gap);
    const col = color(t.worker);
    const tipText = `turn ${i + 1}: ${t.worker ?? 'no worker'} · ${usdText(t.cost)} · ${fmtInt(t.tokensIn)} in / ${fmtInt(t.tokensOut)} out${t.toolCalls.length > 0 ? ` · tools ${t.toolCalls.join(', ')}` : ''}`;
    s += `<g class="turn"><title>${escapeXml(tipText)}</title>`;
    s += `<rect x="${f(x)}" y="${f(top)}" width="${f(w)}" height="${cellH}" fill="${col}"/>`;
    if (step >= 18) s += `<text x="${f(x + w / 2)}" y="${f(top + cellH / 2 + 4)}" text-anchor="middle" font-size="11" fill="${textColorOn(col)}">${i + 1}</text>`;
    const h = maxCost > 0n ? Math.max(t.cost > 0n ? 1 : 0, (Number(t.cost) / Number(maxCost)) * barH) : 0;
    s += `<rect x="${f(x)}" y="${f(barTop + barH - h)}" width="${f(w)}" height="${f(h)}" fill="${col}" fill-opacity="0.75"/>`;
    s += `</g>`;
  });
  if (maxCost > 0n) s += `<text x="${f(left - 8)}" y="${f(barTop + 8)}" text-anchor="end" font-size="10" fill="#666">${escapeXml(usdText(maxCost))}</text>`;
  s += `<text x="${f(left)}" y="${f(barTop + barH + 14)}" font-size="11" fill="#444">turn 1</text>`;
  if (n > 1) s += `<text x="${f(width - right)}" y="${f(barTop + barH + 14)}" text-anchor="end" font-size="11" fill="#444">turn ${n}</text>`;
  let lx = left;
  for (const w of workers) {
    const label = truncateText(w, 200);
    s += `<rect x="${f(lx)}" y="${f(legendY)}" width="14" height="10" fill="${color(w)}"/><text x="${f(lx + 20)}" y="${f(legendY + 9)}" fill="#222">${escapeXml(label)}</text>`;
    lx += 20 + label.length * 7 + 18;
  }
  const title = 'Workers by turn';
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${title}" ` +
    `font-family="system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif" font-size="12" style="max-width:100%;height:auto">` +
    `<title>${title}</title><desc>${escapeXml(`the worker of each of the ${n} turns, in order, coloured by worker; under each, the turn's cost`)}</desc>` +
    `<rect x="0" y="0" width="${width}" height="${height}" fill="#fff"/>` +
    `<text x="${f(width / 2)}" y="19" text-anchor="middle" font-size="15" font-weight="600" fill="#111">${title}</text>` +
    s +
    `</svg>`
  );
}

export function renderSessionReport(d: SessionReportData, opts: { generatedAt?: string } = {}): string {
  const turns = d.turns;
  const totals = workerTotals(turns);
  const workers = totals.map((t) => t.worker);
  const color = (w: string | null): string => paletteColor(Math.max(0, workers.indexOf(w ?? '(none)')));
  const cost = turns.reduce((s, t) => s + t.cost, 0n);
  const tokensIn = turns.reduce((s, t) => s + t.tokensIn, 0);
  const tokensOut = turns.reduce((s, t) => s + t.tokensOut, 0);
  const models = [...new Set(turns.map((t) => t.model ?? DASH))];
  const apis = [...new Set(turns.map((t) => apiOf(t.route)))];
  const failed = turns.filter((t) => t.status >= 400).length;
  const facts = [
    fact('turns', `${fmtInt(turns.length)}${failed > 0 ? ` (${fmtInt(failed)} failed)` : ''}`),
    fact('model', models.join(', ')),
    fact('API', apis.join(', ')),
    fact('workers', `${workers.length} (${workers.join(', ')})`),
    fact('worker switches', `${fmtInt(workerSwitches(turns))} of ${fmtInt(Math.max(0, turns.length - 1))} turn changes`),
    fact('cost', usdText(cost)),
    fact('tokens in / out', `${fmtInt(tokensIn)} / ${fmtInt(tokensOut)}`),
    fact('tool calls', fmtInt(turns.reduce((s, t) => s + t.toolCalls.length, 0))),
    fact('first turn', turns[0] ? fmtTime(turns[0].at) : DASH),
    fact('last turn', turns.at(-1) ? fmtTime(turns.at(-1)!.at) : DASH),
  ];
  const swatch = (w: string | null) => `<span class="swatch" style="background:${color(w)}"></span>`;
  const rows = turns
    .map((t, i) => {
      const bad = t.status >= 400;
      return (
        `<tr><td class="num">${i + 1}</td><td>${esc(fmtTime(t.at))}</td><td>${esc(apiOf(t.route))}</td><td>${esc(t.model ?? DASH)}</td>` +
        `<td>${swatch(t.worker)}${esc(t.worker ?? DASH)}${t.fallbacks.length > 0 ? `<span class="note">after ${esc(t.fallbacks.join(', '))} failed</span>` : ''}</td>` +
        `<td class="num">${t.prob === null ? DASH : t.prob.toFixed(3)}</td>` +
        `<td class="num">${fmtInt(t.tokensIn)}</td><td class="num">${fmtInt(t.tokensOut)}</td><td class="num">${esc(usdText(t.cost))}</td>` +
        `<td class="num${bad ? ' bad' : ''}">${t.status}${t.errorCode ? `<span class="note">${esc(t.errorCode)}</span>` : ''}</td>` +
        `<td class="tools">${t.toolCalls.length > 0 ? esc(t.toolCalls.join(', ')) : DASH}</td></tr>`
      );
    })
    .join('');
  const head =
    '<tr><th scope="col" class="num">turn</th><th scope="col">time</th><th scope="col">API</th><th scope="col">model</th><th scope="col">worker</th>' +
    '<th scope="col" class="num">router p</th><th scope="col" class="num">tokens in</th><th scope="col" class="num">tokens out</th><th scope="col" class="num">cost</th>' +
    '<th scope="col" class="num">status</th><th scope="col">tool calls</th></tr>';
  const foot = `<tr><th colspan="6">all ${fmtInt(turns.length)} turns</th><td class="num">${fmtInt(tokensIn)}</td><td class="num">${fmtInt(tokensOut)}</td><td class="num">${esc(usdText(cost))}</td><td></td><td></td></tr>`;
  const wRows = totals
    .map(
      (w) =>
        `<tr><td>${swatch(w.worker)}${esc(w.worker)}</td><td class="num">${fmtInt(w.turns)}</td><td class="num">${fmtPct(turns.length > 0 ? w.turns / turns.length : 0)}</td>` +
        `<td class="num">${fmtInt(w.tokensIn)}</td><td class="num">${fmtInt(w.tokensOut)}</td><td class="num">${esc(usdText(w.cost))}</td>` +
        `<td class="num">${cost > 0n ? fmtPct(Number(w.cost) / Number(cost)) : DASH}</td></tr>`,
    )
    .join('');
  const wHead =
    '<tr><th scope="col">worker</th><th scope="col" class="num">turns</th><th scope="col" class="num">share of turns</th><th scope="col" class="num">tokens in</th>' +
    '<th scope="col" class="num">tokens out</th><th scope="col" class="num">cost</th><th scope="col" class="num">share of cost</th></tr>';
  const wFoot = `<tr><th>all</th><td class="num">${fmtInt(turns.length)}</td><td class="num">${turns.length > 0 ? '100.0%' : DASH}</td><td class="num">${fmtInt(tokensIn)}</td><td class="num">${fmtInt(tokensOut)}</td><td class="num">${esc(usdText(cost))}</td><td class="num">${cost > 0n ? '100.0%' : DASH}</td></tr>`;
  const costChart = barChart({
    title: 'Cost per worker (USD)',
    labels: workers,
    values: totals.map((w) => Number(w.cost) / 1e12),
    colors: workers.map((w) => color(w)),
    format: (v) => usdText(BigInt(Math.round(v * 1e12))),
    valueLabel: 'USD',
    width: CHART_W,
  });
  const body =
    pageHeader('fugu · session', `<code>${esc(d.session)}</code>`, facts, toc([['timeline', 'Workers by turn'], ['turns', 'Turns'], ['workers', 'Per worker']])) +
    `<section id="timeline"><h2>Workers by turn</h2>` +
    (turns.length === 0
      ? '<p class="empty">No request of this session is recorded.</p>'
      : `<p class="hint">Each turn is one request of the session (the client's transcript so far, newest turn first, is what the router scored); its colour is the worker that answered it, its bar what the turn cost.</p>` +
        figure(turnStrip(turns, color, workers), `The ${fmtInt(turns.length)} turns of session <code>${esc(truncateText(d.session, 600))}</code>, oldest first.`)) +
    `</section>` +
    `<section id="turns"><h2>Turns</h2>` +
    `<p class="hint">router p: the router's probability of the worker that answered (${DASH}: the request was not routed by a published router: a worker called by name, fugu-ultra, or the pool's default).</p>` +
    table('turns', head, rows, foot) +
    `</section>` +
    `<section id="workers"><h2>Per worker</h2>` +
    table('workers', wHead, wRows, wFoot) +
    (turns.length > 0 ? figure(costChart, 'What the turns each worker answered cost, together.') : '') +
    `</section>` +
    pageFooter(`session ${d.session}`, opts.generatedAt);
  return htmlDocument(`session ${d.session}`, body, CSS);
}
