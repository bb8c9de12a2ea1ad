import { describe, expect, it } from 'vitest';
import { type EvalReportData, renderEvalReport, softLabelArgmax } from './eval-report.ts';
import { exampleEvalReportData } from './example.ts';
import { contentWidth, tableMinWidths } from './testing/table-width.ts';

const EVIL = '<script>&"x"';
const EVIL_ESCAPED = '&lt;script&gt;&amp;&quot;x&quot;';

function fixture(): EvalReportData {
  return {
    run: {
      id: 'run-42',
      dataset: 'mini-mix',
      pool: 'pool-three',
      repetitions: 2,
      seed: 7,
      sampleSize: null,
      status: 'completed',
      createdAt: '2025-05-01T10:00:00.000Z',
      finishedAt: '2025-05-01T10:02:05.000Z',
      durationS: 125,
      calls: { total: 1200, ok: 1190, failed: 10 },
      callsPerS: 9.6,
      spendUsd: '1.234500000000',
      spendCapUsd: '5',
    },
    workers: [
      {
        name: 'alpha', provider: 'openai', model: 'gpt-a', inputPerMTok: '0.40', outputPerMTok: '1.60',
        mean: 0.7, calls: 400, failed: 0, tokensIn: 9000, tokensOut: 2500, costUsd: '0.007600000000',
        latencyP50Ms: 820, latencyP95Ms: 2400, oracleShare: 0.55,
      },
      {
        name: EVIL, provider: 'anthropic', model: 'claude-b', inputPerMTok: '3', outputPerMTok: '15',
        mean: 0.8, calls: 400, failed: 10, tokensIn: 1_500_000, tokensOut: 60_000, costUsd: '1.215000000000',
        latencyP50Ms: 1500, latencyP95Ms: null, oracleShare: 0.625,
      },
      {
        name: 'gamma', provider: 'replay', model: 'rec-c', inputPerMTok: '0', outputPerMTok: '0',
        mean: 0.45, calls: 400, failed: 0, tokensIn: 0, tokensOut: 0, costUsd: '0.011900000000',
        latencyP50Ms: null, latencyP95Ms: null, oracleShare: 0.2,
      },
    ],
    tasks: ['arith', 'trivia'],
    perTask: {
      arith: { alpha: 0.9, [EVIL]: 0.6, gamma: 0.5 },
      trivia: { alpha: 0.5, [EVIL]: 0.975, gamma: 0.4 },
    },
    taskCounts: { arith: 100, trivia: 200 },
    reference: { n: 300, bestSingle: { worker: EVIL, mean: 0.8 }, bestPerTask: { mean: 0.883, choice: { arith: 'alpha', trivia: EVIL } }, oracle: 0.95 },
    bySplit: {
      test: { n: 60, bestSingle: { worker: 'alpha', mean: 0.71 }, bestPerTask: { mean: 0.77 }, oracle: 0.93 },
      train: { n: 240, bestSingle: { worker: EVIL, mean: 0.82 }, bestPerTask: { mean: 0.9 }, oracle: 0.96 },
    },
    labels: { tau: 0.1, meanEntropy: 0.4321, argmaxCounts: { alpha: 110, [EVIL]: 150, gamma: 40 } },
  };
}

const count = (s: string, sub: string) => s.split(sub).length - 1;

/** The HTML of the <tr> whose first cell is the given row header text. */
function row(html: string, header: string): string {
  const m = new RegExp(`<tr[^>]*><th scope="row">${header.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?:<span[^<]*</span>)?</th>(.*?)</tr>`).exec(html);
  if (!m) throw new Error(`no row ${header}`);
  return m[1]!;
}

describe('renderEvalReport', () => {
  const html = renderEvalReport(fixture());

  it('is one self-contained HTML document', () => {
    expect(html.startsWith('<!DOCTYPE html>')).toBe(true);
    expect(count(html, '<html')).toBe(1);
    expect(count(html, '</html>')).toBe(1);
    expect(count(html, '<head>')).toBe(1);
    expect(count(html, '<body>')).toBe(1);
    expect(html.trimEnd().endsWith('</html>')).toBe(true);
    expect(html).toContain('<meta charset="utf-8">');
    // nothing to fetch and nothing to run
    expect(html).not.toMatch(/<script|<link|<img|<iframe|@import|\bsrc=|url\(/i);
    const urls = html.match(/https?:\/\/[^\s"'<>)]+/g) ?? [];
    expect(new Set(urls)).toEqual(new Set(['http://www.w3.org/2000/svg']));
  });

  it('escapes names everywhere and never emits NaN', () => {
    expect(html).not.toContain(EVIL);
    expect(html).toContain(EVIL_ESCAPED);
    // in tables, SVG labels and <title> tooltips alike
    expect(count(html, EVIL_ESCAPED)).toBeGreaterThan(8);
    expect(html).not.toMatch(/NaN|Infinity|undefined/);
  });

  it('shows the run facts in the header', () => {
    for (const text of ['run-42', 'mini-mix', 'pool-three', 'completed', 'all items', '2025-05-01 10:00:00 UTC', '2025-05-01 10:02:05 UTC',
      '2 min 05 s', '1,200 total · 1,190 ok · 10 failed (0.8%)', '9.60 calls/s', '$1.2345 of $5.00 cap (24.7%)']) {
      expect(html).toContain(text);
    }
    expect(html).toMatch(/<dt>Seed<\/dt><dd>7<\/dd>/);
    expect(html).toMatch(/<dt>Repetitions<\/dt><dd>2<\/dd>/);
  });

  it('has the reference figures, overall and per split (train before test)', () => {
    const items = row(html, 'Items');
    expect(items).toMatch(/300.*240.*60/);
    expect(html.indexOf('Split: train')).toBeLessThan(html.indexOf('Split: test'));
    const single = row(html, 'Best single model');
    expect(single).toMatch(new RegExp(`0\\.800<span class="who">${EVIL_ESCAPED}</span>.*0\\.820.*0\\.710<span class="who">alpha</span>`));
    expect(row(html, 'Best model per task')).toMatch(/0\.883.*0\.900.*0\.770/);
    expect(row(html, 'Per-question oracle')).toMatch(/0\.950.*0\.960.*0\.930/);
    expect(row(html, 'Oracle headroom')).toMatch(/\+0\.150.*\+0\.140.*\+0\.220/);
  });

  it('has the per-worker table, sorted by mean, with exact money and totals', () => {
    const evil = row(html, EVIL_ESCAPED);
    expect(evil).toContain('$3.00 / $15.00');
    expect(evil).toContain('class="num best">0.800<');
    expect(evil).toContain('10 (2.5%)');
    expect(evil).toContain('1.50 M');
    expect(evil).toContain('60.0 k');
    expect(evil).toContain('$1.215');
    expect(evil).toContain('1.50 s');
    expect(evil).toContain('62.5%');
    const alpha = row(html, 'alpha');
    for (const text of ['$0.40 / $1.60', '>0.700<', '>400<', '9,000', '2,500', '$0.0076', '820 ms', '2.40 s', '55.0%']) expect(alpha).toContain(text);
    const gamma = row(html, 'gamma');
    expect(gamma).toContain('$0.0119');
    const order = ['anthropic · claude-b', 'openai · gpt-a', 'replay · rec-c'].map((s) => html.indexOf(s));
    expect(order).toEqual([...order].sort((a, b) => a - b));
    // 0.0076 + 1.215 + 0.0119, summed exactly
    expect(row(html, 'Total')).toContain('$1.2345');
    expect(row(html, 'Total')).toContain('>1,200<');
  });

  it('has the per-task table with the best worker of each row highlighted and the task counts', () => {
    const arith = row(html, 'arith');
    expect(arith).toMatch(/^<td class="num">100<\/td>/);
    expect(count(arith, 'best')).toBe(1);
    expect(arith).toContain('class="num best">0.900<');
    expect(arith).toContain('<td class="chosen">alpha</td>');
    const trivia = row(html, 'trivia');
    expect(trivia).toMatch(/^<td class="num">200<\/td>/);
    expect(trivia).toContain('class="num best">0.975<');
    expect(trivia).toContain(`<td class="chosen">${EVIL_ESCAPED}</td>`);
    expect(row(html, 'All tasks')).toContain('class="num best">0.800<');
  });

  it('draws five charts with labels and four without', () => {
    expect(count(html, '<svg ')).toBe(5);
    expect(count(html, '</svg>')).toBe(5);
    for (const title of ['Mean reward per worker', 'Mean reward per worker and task', 'Cost vs accuracy', 'Share of oracle wins per worker', 'Soft labels: argmax distribution']) {
      expect(html).toContain(`<title>${title}</title>`);
    }
    expect(html).toContain('τ = 0.1');
    expect(html).toContain('mean entropy 0.432');
    expect(html).toContain('150 (50.0%)');
    const { labels: _, ...noLabels } = fixture();
    const plain = renderEvalReport(noLabels);
    expect(count(plain, '<svg ')).toBe(4);
    expect(plain).not.toContain('Soft labels');
  });

  it('is deterministic unless a generation time is given', () => {
    expect(renderEvalReport(fixture())).toBe(html);
    expect(renderEvalReport(fixture(), { generatedAt: '2025-05-02T00:00:00Z' })).toContain('Generated by fugu on 2025-05-02 00:00:00 UTC');
  });

  it('renders missing and non-finite numbers as dashes, not NaN', () => {
    const d = fixture();
    d.workers[0]!.mean = Number.NaN;
    d.workers[1]!.costUsd = 'not money';
    d.perTask = { arith: { gamma: 0.5 } };
    d.taskCounts = {};
    d.run.durationS = null;
    d.run.callsPerS = null;
    d.run.finishedAt = null;
    d.run.spendCapUsd = null;
    d.bySplit = {};
    const out = renderEvalReport(d);
    expect(out).not.toMatch(/NaN|Infinity|undefined/);
    expect(out).toContain('not finished');
    expect(out).toContain('not money');
    expect(row(out, 'trivia')).toMatch(/^<td class="num">—<\/td><td class="chosen">[^<]*<\/td>(<td class="num">—<\/td>){3}/);
    expect(count(out, '<svg ')).toBe(5);
  });

  it('renders a run without workers or tasks', () => {
    const d = fixture();
    d.workers = [];
    d.tasks = [];
    d.perTask = {};
    delete d.labels;
    const out = renderEvalReport(d);
    expect(out).toContain('No workers in this run.');
    expect(count(out, '<svg ')).toBe(4);
    expect(count(out, 'No data')).toBe(4);
    expect(out).not.toMatch(/NaN|Infinity/);
  });

  it('says a replay worker’s latency is not measured instead of showing 0 ms (issue 28)', () => {
    const d = fixture();
    d.workers[2]!.latencyP50Ms = 0; // gamma: provider replay
    d.workers[2]!.latencyP95Ms = 0;
    d.workers.push({ ...d.workers[0]!, name: 'zero', provider: 'openai', latencyP50Ms: 0, latencyP95Ms: 0 }); // no time recorded
    const out = renderEvalReport(d);
    for (const name of ['gamma', 'zero']) {
      const r = row(out, name);
      expect(r).toContain('<td class="num unmeasured" colspan="2"');
      expect(r).toContain('not measured<sup>*</sup>');
      expect(r).not.toMatch(/>0 ms</);
    }
    expect(out).not.toMatch(/>0 ms</);
    expect(out).toContain('<p class="hint footnote"><sup>*</sup> Latency not measured: the worker is a replay worker');
    // measured latencies stay numbers; a run without replay workers has no footnote
    expect(row(out, 'alpha')).toContain('820 ms');
    d.workers = d.workers.filter((w) => w.provider !== 'replay' && w.name !== 'zero');
    expect(renderEvalReport(d)).not.toContain('not measured');
  });

  it('counts soft-label argmax ties evenly, never by pool order, and says so in the caption (issue 28)', () => {
    // item 1: every worker ties (all got 0): 1/3 each; item 2: b and c tie; item 3: a alone
    const third = 1 / 3;
    const r = softLabelArgmax(['a', 'b', 'c'], [[third, third, third], [0.2, 0.4, 0.4], [0.7, 0.2, 0.1]]);
    expect(r.tiedItems).toBe(2);
    expect(r.argmaxCounts['a']).toBeCloseTo(1 + third, 12);
    expect(r.argmaxCounts['b']).toBeCloseTo(0.5 + third, 12);
    expect(r.argmaxCounts['c']).toBeCloseTo(0.5 + third, 12);
    // the worst worker first in the pool gains nothing from its place
    const pool = softLabelArgmax(['worst', 'best'], [...Array(9).fill([0.5, 0.5]), [0.1, 0.9]]);
    expect(pool.argmaxCounts).toEqual({ worst: 4.5, best: 5.5 });

    const d = fixture();
    d.labels = { tau: 0.1, meanEntropy: 0.5, argmaxCounts: { alpha: 100 + 2 / 3, [EVIL]: 150 + 2 / 3, gamma: 48 + 2 / 3 }, tiedItems: 2 };
    const out = renderEvalReport(d);
    const fig = out.slice(out.indexOf('<title>Soft labels: argmax distribution</title>'));
    expect(fig).toContain('150.7 (50.2%)'); // fractional counts shown with one decimal
    expect(fig).toContain('ties split evenly');
    expect(fig).toMatch(/2 items \(0\.7%\) have labels that peak at several workers at once: each such tie is split evenly/);
    // a producer that does not say how it counted ties: the caption warns about pool order
    const { tiedItems: _, ...legacy } = d.labels;
    const old = renderEvalReport({ ...d, labels: legacy });
    expect(old.slice(old.indexOf('<title>Soft labels'))).toMatch(/first tied worker in pool order, that worker’s bar is inflated/);
  });

  it('keeps every table within the page at 1400 px, also with an 11-worker pool; “Chosen per task” next to the task (issue 28)', () => {
    const d = exampleEvalReportData();
    const extra = ['mixtral-8x22b-instruct', 'llama-3.1-70b-instruct', 'yi-large'];
    d.workers = [...d.workers, ...extra.map((n, i) => ({ ...d.workers[0]!, name: n, model: n, provider: 'replay', mean: 0.5 + i * 0.05 }))];
    for (const t of d.tasks) for (const [i, n] of extra.entries()) d.perTask[t]![n] = 0.5 + i * 0.05;
    const out = renderEvalReport(d);
    const page = contentWidth(out, 1400);
    const widths = tableMinWidths(out);
    expect(widths.map((w) => w.table)).toEqual(['ref', 'workers', 'pertask']);
    for (const w of widths) expect(w.width, w.table).toBeLessThanOrEqual(page);
    expect(out).toMatch(/<th scope="col">Task<\/th><th scope="col" class="num">Items<\/th><th scope="col" class="chosen">Chosen per task<\/th>/);
  });

  it('renders the bundled example', () => {
    const out = renderEvalReport(exampleEvalReportData());
    expect(count(out, '<svg ')).toBe(5);
    expect(out).not.toMatch(/NaN|Infinity|undefined/);
    expect(out).not.toContain('<local>');
  });
});
