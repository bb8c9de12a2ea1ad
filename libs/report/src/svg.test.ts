import { describe, expect, it } from 'vitest';
import {
  barChart,
  escapeXml,
  groupedBarChart,
  heatmap,
  histogram,
  histogramBins,
  lineChart,
  logTicks,
  niceTicks,
  paretoFrontier,
  scatterChart,
  sequentialColor,
  stackedBarChart,
  textColorOn,
} from './svg.ts';

const EVIL = '<script>&"x"';

/** The chart without its legend (whose swatches are circles and lines too). */
const plotOnly = (svg: string) => svg.replace(/<g class="legend-item">[\s\S]*?<\/g>/g, '');
/** The legend's swatch elements: [tag, attributes] each. */
const swatches = (svg: string) => [...svg.matchAll(/<(line|circle|rect) class="swatch"([^>]*)\/>/g)].map((m) => [m[1]!, m[2]!] as const);
const attr = (attrs: string, name: string) => Number(new RegExp(`${name}="([^"]*)"`).exec(attrs)?.[1]);

// Attributes that carry coordinates or lengths: all must hold finite numbers only.
const GEOMETRY = /\b(x|y|x1|x2|y1|y2|cx|cy|r|width|height|d|points|transform|viewBox)="([^"]*)"/g;

/** Every coordinate is a finite number; tags are balanced; nothing unescaped leaks. */
function assertSaneSvg(svg: string): void {
  expect(svg.startsWith('<svg ')).toBe(true);
  expect(svg.endsWith('</svg>')).toBe(true);
  expect(svg).not.toMatch(/NaN|Infinity|undefined/);
  for (const m of svg.matchAll(GEOMETRY)) {
    const nums = m[2]!.replace(/rotate|[MLHVZ(),]/gi, ' ').trim().split(/\s+/).filter(Boolean);
    expect(nums.length, `${m[1]}="${m[2]}"`).toBeGreaterThan(0);
    for (const n of nums) expect(Number.isFinite(Number(n)), `${m[1]}="${m[2]}"`).toBe(true);
  }
  // tag balance: every open tag is closed in order (self-closing tags excluded)
  const stack: string[] = [];
  for (const m of svg.matchAll(/<(\/?)([a-zA-Z]+)[^>]*?(\/?)>/g)) {
    const [, close, name, self] = m;
    if (self) continue;
    if (close) expect(stack.pop()).toBe(name);
    else stack.push(name!);
  }
  expect(stack).toEqual([]);
  expect(svg).not.toContain('<script');
}

describe('escapeXml', () => {
  it('escapes markup characters and drops control characters', () => {
    expect(escapeXml(EVIL)).toBe('&lt;script&gt;&amp;&quot;x&quot;');
    expect(escapeXml("it's\u0001")).toBe('it&#39;s\uFFFD');
  });
});

describe('niceTicks / logTicks', () => {
  it('covers the data with 1-2-5 steps', () => {
    const t = niceTicks(0.13, 0.87, 5);
    expect(t.lo).toBeLessThanOrEqual(0.13);
    expect(t.hi).toBeGreaterThanOrEqual(0.87);
    expect(t.ticks).toEqual([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]);
  });
  it('pads a degenerate domain', () => {
    expect(niceTicks(0, 0).ticks.length).toBeGreaterThan(1);
    const t = niceTicks(5, 5);
    expect(t.lo).toBeLessThan(5);
    expect(t.hi).toBeGreaterThan(5);
    expect(niceTicks(Number.NaN, Number.NaN).ticks.every(Number.isFinite)).toBe(true);
  });
  it('swaps a reversed domain', () => {
    expect(niceTicks(10, 0).ticks[0]).toBe(0);
  });
  it('gives decades for a log axis', () => {
    expect(logTicks(0.003, 40).ticks).toEqual([0.001, 0.01, 0.1, 1, 10, 100]);
    expect(logTicks(2, 30).ticks).toEqual([1, 2, 5, 10, 20, 50, 100]);
    expect(logTicks(10, 10).ticks.length).toBeGreaterThan(1);
  });
});

describe('colours', () => {
  it('interpolates viridis and picks readable text', () => {
    expect(sequentialColor(0)).toBe('#440154');
    expect(sequentialColor(1)).toBe('#fde725');
    expect(sequentialColor(Number.NaN)).toBe('#440154');
    expect(textColorOn('#440154')).toBe('#fff');
    expect(textColorOn('#fde725')).toBe('#111');
  });
});

describe('barChart', () => {
  it('draws one bar per finite value with escaped labels and tooltips', () => {
    const svg = barChart({ title: `Mean ${EVIL}`, labels: ['a', EVIL, 'c', 'dropped'], values: [0.5, 0.9, 0, Number.NaN], valueLabel: 'mean' });
    assertSaneSvg(svg);
    expect(svg).not.toContain(EVIL);
    expect(svg).toContain('&lt;script&gt;&amp;&quot;x&quot;: 0.9');
    expect(svg).not.toContain('dropped');
    expect(svg.match(/<rect [^>]*height="16"/g)).toHaveLength(3);
  });
  it('handles empty, single, all-equal, negative and reference lines', () => {
    const empty = barChart({ title: 'Empty', labels: [], values: [] });
    assertSaneSvg(empty);
    expect(empty).toContain('No data');
    assertSaneSvg(barChart({ title: 'All missing', labels: ['a'], values: [Number.NaN] }));
    assertSaneSvg(barChart({ title: 'One', labels: ['a'], values: [3] }));
    assertSaneSvg(barChart({ title: 'Zeros', labels: ['a', 'b'], values: [0, 0] }));
    assertSaneSvg(barChart({ title: 'Equal', labels: ['a', 'b'], values: [0.4, 0.4], domain: [0, 1] }));
    const neg = barChart({ title: 'Neg', labels: ['a', 'b'], values: [-2, 3], refLines: [{ value: 1, label: 'ref' }, { value: Number.NaN, label: 'gone' }] });
    assertSaneSvg(neg);
    expect(neg).toContain('ref 1');
    expect(neg).not.toContain('gone');
  });
  it('draws error whiskers around the bar end, only for positive finite errors, inside the axis', () => {
    const svg = barChart({ title: 'Sd', width: 600, labels: ['a', 'b', 'c', 'd'], values: [0.5, 0.8, 0.2, 0.6], errors: [0.1, 0, Number.NaN, 0.5], domain: [0, 1] });
    assertSaneSvg(svg);
    const whiskers = [...svg.matchAll(/<path class="whisker" d="M([\d.]+) ([\d.]+)H([\d.]+)/g)].map((m) => [Number(m[1]), Number(m[3])]);
    expect(whiskers).toHaveLength(2); // a and d
    const bars = [...svg.matchAll(/<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height="16"/g)].map((m) => Number(m[1]) + Number(m[2]));
    const [a0, a1] = whiskers[0]!;
    // the whisker is centred on bar a's end: 0.4 .. 0.6 around 0.5
    expect((a0! + a1!) / 2).toBeCloseTo(bars[0]!, 0);
    // d's whisker (0.1 .. 1.1) is clamped to the domain's end, which bar b (0.8) does not reach
    expect(whiskers[1]![1]).toBeGreaterThan(bars[1]!);
    expect(svg).toContain('a: 0.5 ± 0.1');
    expect(svg).not.toContain('b: 0.8 ±');
    // without a fixed domain the axis takes in the whisker ends
    const wide = barChart({ title: 'Wide', labels: ['a'], values: [1], errors: [2] });
    expect(wide).toMatch(/>3</);
  });
});

describe('groupedBarChart', () => {
  it('draws categories x series with a legend and skips NaN bars', () => {
    const svg = groupedBarChart({
      title: 'Grouped',
      categories: ['t1', 't2', EVIL],
      series: [
        { name: 'w1', values: [0.1, 0.2, 0.3] },
        { name: 'w2', values: [0.4, Number.NaN, 0.6] },
      ],
      yLabel: 'reward',
    });
    assertSaneSvg(svg);
    expect(svg.match(/<rect [^>]*><title>/g)).toHaveLength(5);
    expect(svg).toContain('<title>w2</title>');
  });
  it('handles empty and degenerate input', () => {
    expect(groupedBarChart({ title: 'E', categories: [], series: [] })).toContain('No data');
    expect(groupedBarChart({ title: 'E', categories: ['a'], series: [{ name: 's', values: [Number.NaN] }] })).toContain('No data');
    assertSaneSvg(groupedBarChart({ title: 'One', categories: ['a'], series: [{ name: 's', values: [1] }] }));
    assertSaneSvg(groupedBarChart({ title: 'Long', categories: ['a very long category name indeed', 'another very long one'], series: [{ name: 's', values: [1, 1] }] }));
  });
});

describe('heatmap', () => {
  it('colours cells, marks the best per column and shows missing cells', () => {
    const svg = heatmap({
      title: 'H',
      rows: ['r1', EVIL],
      cols: ['c1', 'c2', 'c3'],
      values: [
        [0.1, 0.9, null],
        [0.5, 0.2, Number.NaN],
      ],
      mark: 'col-max',
      valueLabel: 'reward',
    });
    assertSaneSvg(svg);
    expect(count(svg, 'no data</title>')).toBe(2);
    expect(count(svg, 'stroke="#D55E00"')).toBe(2); // c1 -> row 2, c2 -> row 1; c3 has no data
    expect(svg).toContain('&lt;script&gt;&amp;&quot;x&quot; / c1: 0.5');
  });
  it('handles empty, one cell and all-equal values', () => {
    expect(heatmap({ title: 'E', rows: [], cols: [], values: [] })).toContain('No data');
    expect(heatmap({ title: 'E', rows: ['a'], cols: ['b'], values: [[null]] })).toContain('No data');
    assertSaneSvg(heatmap({ title: 'One', rows: ['a'], cols: ['b'], values: [[0.3]] }));
    assertSaneSvg(heatmap({ title: 'Equal', rows: ['a', 'b'], cols: ['x', 'y'], values: [[1, 1], [1, 1]], mark: 'row-max' }));
    // ragged rows: missing entries are "no data", not a crash
    assertSaneSvg(heatmap({ title: 'Ragged', rows: ['a', 'b'], cols: ['x', 'y'], values: [[1]] }));
  });
});

describe('paretoFrontier', () => {
  it('keeps the non-dominated points, cheapest first', () => {
    const pts = [
      { x: 1, y: 0.5, n: 'a' },
      { x: 2, y: 0.4, n: 'dominated' },
      { x: 3, y: 0.8, n: 'b' },
      { x: 3, y: 0.7, n: 'same cost, worse' },
      { x: 10, y: 0.9, n: 'c' },
      { x: 12, y: 0.9, n: 'tie, dearer' },
      { x: Number.NaN, y: 1, n: 'nan' },
    ];
    expect(paretoFrontier(pts).map((p) => p.n)).toEqual(['a', 'b', 'c']);
    expect(paretoFrontier(pts, { x: 'max', y: 'max' }).map((p) => p.n)).toEqual(['tie, dearer']);
    expect(paretoFrontier([])).toEqual([]);
  });
});

describe('scatterChart', () => {
  it('draws labelled points and the frontier', () => {
    const svg = scatterChart({
      title: 'Cost vs accuracy',
      points: [
        { x: 0.01, y: 0.5, label: 'cheap' },
        { x: 1, y: 0.8, label: EVIL },
        { x: 2, y: 0.6, label: 'dominated' },
        { x: Number.NaN, y: 0.9, label: 'nan' },
      ],
      xLabel: 'cost',
      yLabel: 'reward',
      xScale: 'auto',
    });
    assertSaneSvg(svg);
    expect(count(plotOnly(svg), '<circle')).toBe(3);
    expect(svg).toContain('Pareto frontier');
    expect(svg).not.toContain('>nan<');
    expect(count(svg, '<path ')).toBe(1);
  });
  it('handles empty, one point, equal points and x <= 0 on a log axis', () => {
    expect(scatterChart({ title: 'E', points: [] })).toContain('No data');
    const one = scatterChart({ title: 'One', points: [{ x: 0, y: 0, label: 'only' }] });
    assertSaneSvg(one);
    expect(count(one, '<path ')).toBe(0);
    assertSaneSvg(scatterChart({ title: 'Same', points: [{ x: 1, y: 1, label: 'a' }, { x: 1, y: 1, label: 'b' }] }));
    const log = scatterChart({ title: 'Log', points: [{ x: 0, y: 1 }, { x: 0.1, y: 0.5 }, { x: 100, y: 0.9 }], xScale: 'log' });
    assertSaneSvg(log);
    expect(count(plotOnly(log), '<circle')).toBe(2);
    expect(scatterChart({ title: 'Log', points: [{ x: 0, y: 1 }], xScale: 'log' })).toContain('No data');
  });
  it('draws the Pareto frontier’s legend swatch: a dashed line long and thick enough to see, with the ringed point (issue 28)', () => {
    const svg = scatterChart({ title: 'Pareto', points: [{ x: 1, y: 0.5 }, { x: 2, y: 0.7 }, { x: 3, y: 0.6 }] });
    const sw = swatches(svg);
    expect(sw).toHaveLength(1);
    const [tag, a] = sw[0]!;
    expect(tag).toBe('line');
    expect(a).toContain('stroke="#D55E00"');
    expect(attr(a, 'x2') - attr(a, 'x1')).toBeGreaterThanOrEqual(24); // three dashes of the chart's own 6 4 pattern
    expect(attr(a, 'stroke-width')).toBeGreaterThanOrEqual(2.5);
    expect(a).toContain('stroke-dasharray="6 4"');
    // the frontier line itself uses the same pattern, and the legend shows a ringed marker on the swatch
    expect(plotOnly(svg)).toMatch(/<path d="M[^"]*" fill="none" stroke="#D55E00" stroke-width="2" stroke-dasharray="6 4">/);
    expect(svg).toMatch(/<g class="legend-item"><line class="swatch"[^>]*\/><circle [^>]*fill="#fff" stroke="#D55E00"/);
  });
  it('does not promise a line when the frontier is one point: a ring, and says so (issue 28)', () => {
    const svg = scatterChart({ title: 'One wins', points: [{ x: 1, y: 0.9 }, { x: 2, y: 0.7 }, { x: 3, y: 0.6 }] });
    expect(count(plotOnly(svg), '<path ')).toBe(0);
    const sw = swatches(svg);
    expect(sw).toHaveLength(1);
    expect(sw[0]![0]).toBe('circle');
    expect(sw[0]![1]).toContain('stroke="#D55E00"');
    expect(svg).toContain('Pareto frontier (one point)');
  });
});

describe('lineChart', () => {
  it('draws several series, breaks lines at NaN and supports a right axis', () => {
    const svg = lineChart({
      title: 'Fitness',
      series: [
        { name: 'mean', points: [{ x: 0, y: 0.1 }, { x: 1, y: 0.2 }, { x: 2, y: Number.NaN }, { x: 3, y: 0.4 }, { x: 4, y: 0.5 }] },
        { name: 'best', points: [{ x: 0, y: 0.3 }, { x: 4, y: 0.7 }], dashed: true },
        { name: 'sigma', points: [{ x: 0, y: 0.5 }, { x: 4, y: 0.05 }], axis: 'right' },
      ],
      xLabel: 'generation',
      yLabel: 'fitness',
      y2Label: 'sigma',
    });
    assertSaneSvg(svg);
    expect(count(svg, '<path ')).toBe(4); // mean in two pieces, best, sigma
    expect(svg).toContain('sigma (right axis)');
    expect(svg).toContain('stroke-dasharray');
  });
  it('handles empty, one point, all-equal and all-NaN series', () => {
    expect(lineChart({ title: 'E', series: [] })).toContain('No data');
    expect(lineChart({ title: 'E', series: [{ name: 's', points: [{ x: Number.NaN, y: 1 }] }] })).toContain('No data');
    const one = lineChart({ title: 'One', series: [{ name: 's', points: [{ x: 5, y: 2 }] }] });
    assertSaneSvg(one);
    expect(count(plotOnly(one), '<circle')).toBe(1);
    assertSaneSvg(lineChart({ title: 'Flat', series: [{ name: 's', points: [{ x: 1, y: 2 }, { x: 2, y: 2 }, { x: 3, y: 2 }] }] }));
    assertSaneSvg(lineChart({ title: 'Right only', series: [{ name: 's', points: [{ x: 1, y: 2 }, { x: 2, y: 3 }], axis: 'right' }] }));
  });
  it('draws each legend swatch as its series is drawn: a visible line (dashed when dashed), a dot for a lone point (issue 28)', () => {
    const svg = lineChart({
      title: 'Legend',
      series: [
        { name: 'curve', points: [{ x: 0, y: 1 }, { x: 1, y: 2 }], color: '#0072B2' },
        { name: 'hull', points: [{ x: 0, y: 2 }, { x: 1, y: 3 }], color: '#E69F00', dashed: true },
        { name: 'lone', points: [{ x: 0.5, y: 1.5 }], color: '#009E73' },
      ],
    });
    const sw = swatches(svg);
    expect(sw.map(([tag]) => tag)).toEqual(['line', 'line', 'circle']);
    for (const [, a] of sw.slice(0, 2)) {
      expect(attr(a, 'x2') - attr(a, 'x1')).toBeGreaterThanOrEqual(24);
      expect(attr(a, 'stroke-width')).toBeGreaterThanOrEqual(2.5);
    }
    expect(sw[0]![1]).not.toContain('dasharray');
    expect(sw[1]![1]).toContain('stroke-dasharray="6 4"');
    expect(sw[2]![1]).toContain('fill="#009E73"');
  });
});

describe('histogram', () => {
  it('bins values, last edge inclusive, NaN dropped', () => {
    const bins = histogramBins([0, 0.1, 0.5, 0.99, 1, Number.NaN, Infinity], [0, 0.5, 1]);
    expect(bins).toEqual([
      { x0: 0, x1: 0.5, count: 2 },
      { x0: 0.5, x1: 1, count: 3 },
    ]);
    const auto = histogramBins(Array.from({ length: 100 }, (_, i) => i / 10));
    expect(auto.reduce((a, b) => a + b.count, 0)).toBe(100);
    expect(histogramBins([3, 3, 3])).toEqual([{ x0: 2.5, x1: 3.5, count: 3 }]);
    expect(histogramBins([])).toEqual([]);
  });
  it('draws bars and handles edge cases', () => {
    const svg = histogram({ title: 'Latency', values: [1, 2, 2, 3, 3, 3, Number.NaN], bins: 3, xLabel: 'ms' });
    assertSaneSvg(svg);
    expect(svg).toContain('>count<');
    expect(histogram({ title: 'E', values: [] })).toContain('No data');
    expect(histogram({ title: 'E', values: [Number.NaN] })).toContain('No data');
    assertSaneSvg(histogram({ title: 'One', values: [42] }));
    assertSaneSvg(histogram({ title: 'Equal', values: [7, 7, 7, 7] }));
  });
});

/** The segments (x, width, fill) of every stacked bar, in order. */
function stackedBars(svg: string): Array<Array<{ x: number; w: number; fill: string }>> {
  return [...svg.matchAll(/<g class="bar">([\s\S]*?)<\/g>/g)].map((m) =>
    [...m[1]!.matchAll(/<rect class="seg" x="([^"]+)" y="[^"]+" width="([^"]+)" height="[^"]+" fill="([^"]+)"/g)].map((s) => ({
      x: Number(s[1]),
      w: Number(s[2]),
      fill: s[3]!,
    })),
  );
}

describe('stackedBarChart', () => {
  const series = [{ name: 'alpha' }, { name: EVIL }, { name: 'gamma', color: '#123456' }];

  it('tiles every bar exactly with its segments, in series order and colours, with a legend', () => {
    const svg = stackedBarChart({
      title: 'Routing',
      rows: ['arith', 'trivia', EVIL],
      series,
      values: [
        [0.5, 0.25, 0.25],
        [1 / 3, 1 / 3, 1 / 3],
        [0.1, 0, 0.9],
      ],
      rowTooltips: ['100 items', undefined, '3 items'],
      valueLabel: 'share of items',
    });
    assertSaneSvg(svg);
    const bars = stackedBars(svg);
    expect(bars.map((b) => b.length)).toEqual([3, 3, 2]); // a zero share draws no segment
    const full = bars[0]!.reduce((a, s) => a + s.w, 0);
    expect(full).toBeGreaterThan(300);
    for (const bar of bars) {
      expect(bar.reduce((a, s) => a + s.w, 0)).toBeCloseTo(full, 1);
      // contiguous: each segment starts where the previous one ends
      bar.slice(1).forEach((s, i) => expect(s.x).toBeCloseTo(bar[i]!.x + bar[i]!.w, 1));
      expect(bar[0]!.x).toBeCloseTo(bars[0]![0]!.x, 5);
    }
    expect(bars[0]!.map((s) => s.fill)).toEqual(['#0072B2', '#E69F00', '#123456']);
    expect(bars[0]![0]!.w).toBeCloseTo(full / 2, 1);
    expect(bars[2]!.map((s) => s.fill)).toEqual(['#0072B2', '#123456']);
    // legend names every series; labels, tooltips and values are escaped
    expect(svg).toContain('&lt;script&gt;&amp;&quot;x&quot;');
    expect(svg).not.toContain(EVIL);
    expect(svg).toContain('>50%<');
    expect(svg).toContain('100 items');
    expect(svg).toContain('>100%<'); // axis end
  });

  it('normalizes rows that do not sum to 1 and ignores negative and non-finite values', () => {
    const svg = stackedBarChart({ title: 'Counts', rows: ['a', 'b'], series, values: [[2, 6, 0], [Number.NaN, -1, 5]] });
    assertSaneSvg(svg);
    const [a, b] = stackedBars(svg);
    const full = a!.reduce((s, x) => s + x.w, 0);
    expect(a![0]!.w).toBeCloseTo(full / 4, 1);
    expect(b).toHaveLength(1);
    expect(b![0]!.w).toBeCloseTo(full, 1);
    expect(svg).toContain('>75%<');
  });

  it('draws bars to scale when not normalized', () => {
    const svg = stackedBarChart({ title: 'Raw', rows: ['a', 'b'], series, values: [[2, 2, 0], [1, 0, 0]], normalize: false });
    assertSaneSvg(svg);
    const [a, b] = stackedBars(svg);
    expect(a!.reduce((s, x) => s + x.w, 0)).toBeCloseTo(4 * b![0]!.w, 0);
  });

  it('handles edge cases: empty input, one category, rows of zeros', () => {
    expect(stackedBarChart({ title: 'E', rows: [], series, values: [] })).toContain('No data');
    expect(stackedBarChart({ title: 'E', rows: ['a'], series: [], values: [[]] })).toContain('No data');
    assertSaneSvg(stackedBarChart({ title: 'E', rows: [], series: [], values: [] }));

    const one = stackedBarChart({ title: 'One', rows: ['a', 'b'], series: [{ name: 'only' }], values: [[0.3], [7]] });
    assertSaneSvg(one);
    const bars = stackedBars(one);
    expect(bars.map((b) => b.length)).toEqual([1, 1]);
    expect(bars[0]![0]!.w).toBeCloseTo(bars[1]![0]!.w, 5);
    expect(one).toContain('>100%<');

    // a row without any item: an outlined empty bar, no segments, still the full width
    const zero = stackedBarChart({ title: 'Zero', rows: ['a', 'none'], series, values: [[1, 0, 0], [0, 0, 0]] });
    assertSaneSvg(zero);
    expect(stackedBars(zero).map((b) => b.length)).toEqual([1]);
    expect(zero).toContain('no data');
    const emptyW = Number(/<g class="empty-bar"><title>[^<]*<\/title><rect x="[^"]+" y="[^"]+" width="([^"]+)"/.exec(zero)![1]);
    expect(emptyW).toBeCloseTo(stackedBars(zero)[0]![0]!.w, 5);

    // all rows zero, normalized or not, and missing value rows
    assertSaneSvg(stackedBarChart({ title: 'All zero', rows: ['a'], series, values: [[0, 0, 0]] }));
    assertSaneSvg(stackedBarChart({ title: 'All zero raw', rows: ['a'], series, values: [[0, 0, 0]], normalize: false }));
    assertSaneSvg(stackedBarChart({ title: 'Ragged', rows: ['a', 'b'], series, values: [[1]] }));
  });
});

function count(s: string, sub: string): number {
  return s.split(sub).length - 1;
}
