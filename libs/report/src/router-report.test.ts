import { describe, expect, it } from 'vitest';
import type { RouterReportData } from './router-report-data.ts';
import { exampleRouterReportData } from './router-report-example.ts';
import { renderRouterReport } from './router-report.ts';

const EVIL = '<script>&"x"';
const EVIL_ESCAPED = '&lt;script&gt;&amp;&quot;x&quot;';

function fixture(): RouterReportData {
  return {
    checkpoint: { id: `ck-${EVIL}`, stage: 'sft', backboneId: `bb-${EVIL}`, parentId: 'ck-parent-1', tau: 0.25, createdAt: '2025-06-03T14:20:11.000Z' },
    data: { run: `run-${EVIL}`, split: 'test', splitSeed: 17, items: 300, trainItems: 1200 },
    workers: [
      { name: 'alpha', inputPerMTok: '0.40', outputPerMTok: '1.60' },
      { name: EVIL, inputPerMTok: '3', outputPerMTok: '15' },
      { name: 'gamma', inputPerMTok: '0', outputPerMTok: '0' },
    ],
    methods: [
      { name: 'router', meanReward: 0.8125, meanCost: 0.00042 },
      { name: 'best single', meanReward: 0.75, meanCost: 0.0009, note: EVIL },
      { name: 'kNN (k=10)', meanReward: 0.7, meanCost: 0.0005 },
      { name: 'random', meanReward: 0.55, meanCost: 0.0004 },
      { name: 'oracle', meanReward: 0.9, meanCost: 0.0003 },
    ],
    gapClosed: 0.4167,
    strongWeak: { strong: EVIL, weak: 'gamma', apgr: 0.6789, cpt50: 0.2345, cpt80: 0.5678, curve: { calls: [0, 0.25, 0.5, 1], pgr: [0, 0.55, 0.85, 1] } },
    aiq: 0.7711,
    sweep: {
      points: [
        { lambda: 0, cost: 0.00042, reward: 0.8125 },
        { lambda: 1, cost: 0.0002, reward: 0.7 },
        { lambda: 2, cost: 0.0001, reward: 0.6 },
      ],
      hull: [
        { cost: 0.0001, reward: 0.6 },
        { cost: 0.0002, reward: 0.7 },
        { cost: 0.00042, reward: 0.8125 },
      ],
    },
    routing: {
      arith: { alpha: 0.5, [EVIL]: 0.25, gamma: 0.25 },
      trivia: { alpha: 0.1, [EVIL]: 0.9, gamma: 0 },
      [EVIL]: { alpha: 1 / 3, [EVIL]: 1 / 3, gamma: 1 / 3 },
    },
    taskCounts: { arith: 100, trivia: 200, [EVIL]: 0 },
    training: [
      { epoch: 1, trainLoss: 0.5, valLoss: 0.55 },
      { epoch: 2, trainLoss: 0.3, valLoss: 0.41 },
      { epoch: 3, trainLoss: 0.2, valLoss: 0.39 },
    ],
    seeds: { count: 5, methods: [{ name: 'router', mean: 0.8043, sd: 0.0121 }, { name: 'best single', mean: 0.7511, sd: 0.0087 }] },
  };
}

const count = (s: string, sub: string) => s.split(sub).length - 1;

/** The HTML of the <tr> whose row header is the given (escaped) text. */
function row(html: string, header: string): string {
  const m = new RegExp(`<tr[^>]*><th scope="row">${header.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}</th>.*?</tr>`).exec(html);
  expect(m, `row ${header}`).not.toBeNull();
  return m![0];
}

/** The segment widths of every stacked bar of the page's routing plot. */
function stackedBars(html: string): number[][] {
  return [...html.matchAll(/<g class="bar">([\s\S]*?)<\/g>/g)].map((m) =>
    [...m[1]!.matchAll(/<rect class="seg" x="[^"]+" y="[^"]+" width="([^"]+)"/g)].map((s) => Number(s[1])),
  );
}

describe('renderRouterReport', () => {
  const html = renderRouterReport(fixture());

  it('is one self-contained HTML document', () => {
    expect(html.startsWith('<!DOCTYPE html>')).toBe(true);
    expect(count(html, '<html')).toBe(1);
    expect(count(html, '</html>')).toBe(1);
    expect(count(html, '<body>')).toBe(1);
    expect(html).not.toMatch(/<script|<link|<img|@import|url\(|https?:\/\/(?!www\.w3\.org\/2000\/svg)/i);
  });

  it('escapes names everywhere and never emits NaN or undefined', () => {
    expect(html).not.toContain(EVIL);
    expect(html).toContain(`ck-${EVIL_ESCAPED}`);
    expect(html).toContain(`bb-${EVIL_ESCAPED}`);
    expect(html).toContain(`run-${EVIL_ESCAPED}`);
    expect(count(html, EVIL_ESCAPED)).toBeGreaterThan(10);
    expect(html).not.toMatch(/NaN|undefined|Infinity|\[object/);
  });

  it('shows the checkpoint and data facts in the header', () => {
    const head = html.slice(html.indexOf('<header>'), html.indexOf('</header>'));
    for (const text of ['sft', 'ck-parent-1', '0.25', '2025-06-03 14:20:11 UTC', 'test (by unique prompt, split seed 17)', '300 evaluated · 1,200 for training']) {
      expect(head).toContain(text);
    }
  });

  it('compares every method, highlights the router and shows the seed means', () => {
    const r = row(html, 'router');
    expect(r).toMatch(/^<tr class="router">/);
    expect(r).toContain('0.813'); // 0.8125 to 3 decimals
    expect(r).toContain('+0.063'); // vs best single
    expect(r).toContain('$0.000420');
    expect(r).toContain('0.804 ± 0.012');
    expect(r).toContain('class="num best"'); // the best short of the oracle
    const best = row(html, 'best single');
    expect(best).toContain('0.750');
    expect(best).toContain('$0.000900');
    expect(best).toContain(EVIL_ESCAPED);
    expect(best).toContain('0.751 ± 0.009');
    expect(row(html, 'kNN (k=10)')).toContain('—'); // no seed figure for it
    expect(row(html, 'oracle')).toMatch(/^<tr class="oracle">/);
    expect(row(html, 'random')).toContain('−0.200');
  });

  it('shows the gap closed, APGR, CPT and AIQ', () => {
    expect(html).toMatch(/Gap closed toward the oracle.*?<td class="num">41\.7%<\/td>/);
    expect(html).toMatch(/APGR<span.*?<td class="num">0\.679<\/td>/);
    expect(html).toMatch(/CPT\(50%\)<span.*?<td class="num">23\.4%<\/td>/);
    expect(html).toMatch(/CPT\(80%\)<span.*?<td class="num">56\.8%<\/td>/);
    expect(html).toMatch(/AIQ<span.*?<td class="num">0\.771<\/td>/);
    expect(html).toContain(`<b>${EVIL_ESCAPED}</b> and <b>gamma</b>`);
  });

  it('draws five charts, one per plot', () => {
    expect(count(html, '<svg ')).toBe(5);
    for (const title of ['Mean reward per method', 'Cost vs mean reward', 'Performance gap recovered', 'Routing distribution per task', 'SFT loss per epoch']) {
      expect(html).toContain(`aria-label="${title}`);
    }
    expect(html).toContain('>oracle 0.900<'); // reference line on the bar chart
    expect(html).toContain('>random<'); // the PGR chart's diagonal, in the legend
    expect(html).toContain('>router λ sweep (hull)<');
    expect(html).toContain('>train KL<');
    expect(html).toContain('>validation KL<');
  });

  it('draws the routing distribution as stacked bars that fill the bar width', () => {
    const bars = stackedBars(html);
    expect(bars).toHaveLength(4); // all tasks + 3 tasks
    const full = bars[0]!.reduce((a, b) => a + b, 0);
    expect(full).toBeGreaterThan(300);
    for (const b of bars) expect(b.reduce((a, x) => a + x, 0)).toBeCloseTo(full, 1);
    expect(bars.map((b) => b.length)).toEqual([3, 3, 3, 2]); // tasks sorted: the evil one ('<' first), arith, trivia
    expect(html).toContain('>arith (100)<');
    // over all items, tasks weighted by item count: alpha (100 * 0.5 + 200 * 0.1) / 300
    expect(html).toMatch(/All tasks \/ alpha: 23\.3%/);
    expect(html).toMatch(/All tasks \/ gamma: 8\.3%/);
    // workers table: routed share over all items and prices
    const alpha = row(html, '<span class="swatch" style="background:#0072B2"></span>alpha');
    expect(alpha).toContain('$0.40 / $1.60');
    expect(alpha).toContain('23.3%');
  });

  it('leaves out the loss curve and the seed column when not given, and is deterministic', () => {
    const d = fixture();
    delete d.training;
    delete d.seeds;
    const h = renderRouterReport(d);
    expect(count(h, '<svg ')).toBe(4);
    expect(h).not.toContain('SFT loss');
    expect(h).not.toContain('split seeds');
    expect(renderRouterReport(d)).toBe(h);
    expect(h).not.toContain('Generated by fugu on');
    expect(renderRouterReport(d, { generatedAt: '2025-06-04T00:00:00Z' })).toContain('Generated by fugu on 2025-06-04 00:00:00 UTC');
  });

  it('renders NaN metrics, an empty routing and no methods without NaN', () => {
    const d = fixture();
    d.gapClosed = Number.NaN;
    d.aiq = Number.NaN;
    d.strongWeak = { strong: 'a', weak: 'b', apgr: Number.NaN, cpt50: Number.NaN, cpt80: Number.NaN, curve: { calls: [0, 1], pgr: [Number.NaN, Number.NaN] } };
    d.sweep = { points: [], hull: [] };
    d.routing = {};
    d.taskCounts = {};
    d.methods = [];
    d.checkpoint.tau = null;
    d.checkpoint.parentId = null;
    const h = renderRouterReport(d);
    expect(h).not.toMatch(/NaN|undefined|Infinity/);
    expect(h).toContain('No methods to compare.');
    expect(h).toContain('No data');
  });

  it('renders the bundled example', () => {
    const h = renderRouterReport(exampleRouterReportData());
    expect(h).not.toMatch(/NaN|undefined|Infinity/);
    expect(count(h, '<svg ')).toBe(5);
    expect(stackedBars(h)).toHaveLength(7);
  });
});
