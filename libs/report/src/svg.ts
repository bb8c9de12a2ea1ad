// Small, dependency-free SVG chart primitives for the HTML reports (eval runs now; fitness curves
// and routing distributions later). Each primitive takes plain arrays, axis labels and a title and
// returns one self-contained <svg> string: no scripts, no external fonts or stylesheets, no ids
// (so any number of charts can sit in one page). Every mark carries a <title> tooltip.
//
// Robustness rules shared by all primitives:
// - all text goes through escapeXml (names may contain <, &, quotes);
// - non-finite numbers (NaN, +-Infinity) are dropped before layout, never drawn;
// - empty input gives a small "No data" chart instead of throwing;
// - a degenerate domain (one point, all-equal values) is padded so scales never divide by 0.

// ---------------------------------------------------------------------------------------------
// Text, numbers, colours

/** Escape text for XML/HTML text and attribute values; control characters XML forbids become U+FFFD. */
export function escapeXml(value: unknown): string {
  return (
    String(value)
      // eslint-disable-next-line no-control-regex
      .replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/g, '\uFFFD')
      .replace(/&/g, '&amp;')
      .replace(/</g, '&lt;')
      .replace(/>/g, '&gt;')
      .replace(/"/g, '&quot;')
      .replace(/'/g, '&#39;')
  );
}

/** A coordinate for an attribute: 2 decimals, never "NaN" (callers filter; this is the last guard). */
function c(v: number): string {
  if (!Number.isFinite(v)) return '0';
  const r = Math.round(v * 100) / 100;
  return Object.is(r, -0) ? '0' : String(r);
}

export const isFiniteNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** Default number format: up to 3 significant decimals, thousands as k/M. */
export function formatNumber(v: number): string {
  if (!Number.isFinite(v)) return '—';
  const a = Math.abs(v);
  if (a >= 1e9) return `${trimZeros((v / 1e9).toFixed(2))}G`;
  if (a >= 1e6) return `${trimZeros((v / 1e6).toFixed(2))}M`;
  if (a >= 1e4) return `${trimZeros((v / 1e3).toFixed(1))}k`;
  if (a >= 100) return String(Math.round(v));
  if (a >= 1 || a === 0) return trimZeros(v.toFixed(2));
  return String(Number(v.toPrecision(3)));
}

function trimZeros(s: string): string {
  return s.includes('.') ? s.replace(/\.?0+$/, '') : s;
}

/** Tick label format: as many decimals as the tick step needs. */
function tickFormatter(step: number): (v: number) => string {
  if (!(step > 0) || step >= 1e4) return formatNumber;
  const decimals = Math.max(0, Math.min(10, -Math.floor(Math.log10(step) + 1e-9)));
  return (v) => {
    const s = v.toFixed(decimals);
    return s === `-${(0).toFixed(decimals)}` ? s.slice(1) : s;
  };
}

/** The fewest decimals (up to 6) that print every value exactly, e.g. bin edges 4.5 and 5.5. */
function exactFormatter(values: readonly number[]): (v: number) => string {
  for (let d = 0; d <= 6; d++) {
    if (values.every((v) => Math.abs(Number(v.toFixed(d)) - v) < 1e-9 * Math.max(1, Math.abs(v)))) return (v) => v.toFixed(d);
  }
  return formatNumber;
}

/** Approximate rendered width of text in a sans-serif font (no DOM to measure with). */
export function textWidth(text: string, fontSize = 12): number {
  let w = 0;
  for (const ch of text) {
    if (/[il.,:;'|!ıj]/.test(ch)) w += 0.3;
    else if (/[mwMW@%]/.test(ch)) w += 0.9;
    else if (/[A-Z0-9_#&]/.test(ch)) w += 0.68;
    else if (ch === ' ') w += 0.3;
    else if (ch.codePointAt(0)! > 0x2e80) w += 1; // CJK and the like: full width
    else w += 0.56;
  }
  return w * fontSize;
}

/** Shorten text to fit maxWidth, ending in an ellipsis. */
export function truncateText(text: string, maxWidth: number, fontSize = 12): string {
  if (textWidth(text, fontSize) <= maxWidth) return text;
  const chars = [...text];
  while (chars.length > 1 && textWidth(`${chars.join('')}…`, fontSize) > maxWidth) chars.pop();
  return `${chars.join('')}…`;
}

/** Okabe-Ito based categorical palette: distinguishable for colour-blind readers and in print. */
export const PALETTE = ['#0072B2', '#E69F00', '#009E73', '#D55E00', '#CC79A7', '#56B4E9', '#8C6D1F', '#5B5B5B', '#F0E442', '#000000'];
export const paletteColor = (i: number): string => PALETTE[((i % PALETTE.length) + PALETTE.length) % PALETTE.length]!;

// Viridis at 9 stops: perceptually uniform, readable in greyscale print.
const VIRIDIS: Array<[number, number, number]> = [
  [68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
  [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37],
];

/** Sequential colour for t in [0,1] (clamped). */
export function sequentialColor(t: number): string {
  const x = Number.isFinite(t) ? Math.min(1, Math.max(0, t)) : 0;
  const pos = x * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(pos));
  const f = pos - i;
  const a = VIRIDIS[i]!;
  const b = VIRIDIS[i + 1]!;
  const ch = (k: 0 | 1 | 2) => Math.round(a[k] + (b[k] - a[k]) * f).toString(16).padStart(2, '0');
  return `#${ch(0)}${ch(1)}${ch(2)}`;
}

/** Black or white, whichever reads better on the given #rrggbb background. */
export function textColorOn(hex: string): string {
  const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(hex);
  if (!m) return '#111';
  const lin = (h: string) => {
    const s = parseInt(h, 16) / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  };
  const lum = 0.2126 * lin(m[1]!) + 0.7152 * lin(m[2]!) + 0.0722 * lin(m[3]!);
  return lum > 0.23 ? '#111' : '#fff';
}

// ---------------------------------------------------------------------------------------------
// Scales and ticks

export type Ticks = { lo: number; hi: number; step: number; ticks: number[] };

const clean = (v: number) => Number(v.toPrecision(12));

/** "Nice" axis: a domain covering [lo, hi] rounded out to steps of 1, 2 or 5 x 10^k. */
export function niceTicks(lo: number, hi: number, count = 5): Ticks {
  let a = Number.isFinite(lo) ? lo : 0;
  let b = Number.isFinite(hi) ? hi : 1;
  if (a > b) [a, b] = [b, a];
  if (a === b) {
    if (a === 0) b = 1;
    else {
      const pad = Math.abs(a) * 0.1;
      a -= pad;
      b += pad;
    }
  }
  const raw = (b - a) / Math.max(1, count);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / mag;
  const step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  const nlo = clean(Math.floor(a / step + 1e-9) * step);
  const nhi = clean(Math.ceil(b / step - 1e-9) * step);
  const ticks: number[] = [];
  for (let i = 0; i <= 1000; i++) {
    const t = clean(nlo + i * step);
    if (t > nhi + step * 1e-6) break;
    ticks.push(t);
  }
  return { lo: nlo, hi: nhi, step, ticks };
}

/** Ticks for a fixed domain (no rounding out): nice steps inside [lo, hi]. */
function ticksInside(lo: number, hi: number, count = 5): Ticks {
  const n = niceTicks(lo, hi, count);
  const ticks = n.ticks.filter((t) => t >= lo - n.step * 1e-6 && t <= hi + n.step * 1e-6);
  return { lo, hi, step: n.step, ticks };
}

/** Powers of ten covering [lo, hi] (both > 0); with 1-2 decades, also 2x and 5x. */
export function logTicks(lo: number, hi: number): Ticks {
  const e0 = Math.floor(Math.log10(lo));
  let e1 = Math.ceil(Math.log10(hi));
  if (e1 <= e0) e1 = e0 + 1;
  const ticks: number[] = [];
  const dense = e1 - e0 <= 2;
  for (let e = e0; e <= e1; e++) {
    for (const m of dense ? [1, 2, 5] : [1]) {
      const t = clean(m * 10 ** e);
      if (t <= clean(10 ** e1)) ticks.push(t);
    }
  }
  return { lo: 10 ** e0, hi: 10 ** e1, step: 0, ticks };
}

type Scale = ((v: number) => number) & { lo: number; hi: number };

function linearScale(d0: number, d1: number, r0: number, r1: number): Scale {
  const span = d1 - d0 || 1;
  const f = ((v: number) => r0 + ((v - d0) / span) * (r1 - r0)) as Scale;
  f.lo = d0;
  f.hi = d1;
  return f;
}

function logScale(d0: number, d1: number, r0: number, r1: number): Scale {
  const l0 = Math.log10(d0);
  const span = Math.log10(d1) - l0 || 1;
  const f = ((v: number) => r0 + ((Math.log10(v) - l0) / span) * (r1 - r0)) as Scale;
  f.lo = d0;
  f.hi = d1;
  return f;
}

function extent(values: readonly number[]): [number, number] | null {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (!Number.isFinite(v)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  return lo <= hi ? [lo, hi] : null;
}

/** Axis ticks for values, optionally anchored at zero (bars) or pinned to a given domain. */
function axisTicks(values: readonly number[], opts: { domain?: readonly [number, number]; includeZero?: boolean; count?: number }): Ticks {
  const d = opts.domain;
  if (d && Number.isFinite(d[0]) && Number.isFinite(d[1]) && d[1] > d[0]) return ticksInside(d[0], d[1], opts.count);
  const e = extent(values) ?? [0, 1];
  let [lo, hi] = e;
  if (opts.includeZero) {
    lo = Math.min(0, lo);
    hi = Math.max(0, hi);
  }
  return niceTicks(lo, hi, opts.count);
}

// ---------------------------------------------------------------------------------------------
// Frame pieces

const FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif";
const AXIS = '#444';
const GRID = '#e3e3e3';
const MUTED = '#666';
const TITLE_H = 28;

export type ChartBase = {
  title: string;
  /** longer text for screen readers (<desc>) */
  description?: string;
  /** outer width in px (the SVG scales down with CSS max-width:100%) */
  width?: number;
};

function svgDoc(width: number, height: number, base: ChartBase, body: string): string {
  const w = c(width);
  const h = c(height);
  const desc = base.description ? `<desc>${escapeXml(base.description)}</desc>` : '';
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" ` +
    `role="img" aria-label="${escapeXml(base.title)}" font-family="${escapeXml(FONT)}" font-size="12" ` +
    `style="max-width:100%;height:auto">` +
    `<title>${escapeXml(base.title)}</title>${desc}` +
    `<rect x="0" y="0" width="${w}" height="${h}" fill="#fff"/>` +
    `<text x="${c(width / 2)}" y="19" text-anchor="middle" font-size="15" font-weight="600" fill="#111">` +
    `${escapeXml(truncateText(base.title, width - 16, 15))}</text>` +
    body +
    `</svg>`
  );
}

function noData(base: ChartBase, width: number, message = 'No data'): string {
  const h = 110;
  return svgDoc(
    width,
    h,
    base,
    `<rect x="8" y="${TITLE_H + 4}" width="${c(width - 16)}" height="${c(h - TITLE_H - 12)}" fill="#fafafa" stroke="${GRID}"/>` +
      `<text x="${c(width / 2)}" y="${c((h + TITLE_H) / 2 + 4)}" text-anchor="middle" fill="${MUTED}">${escapeXml(message)}</text>`,
  );
}

function tip(text: string): string {
  return `<title>${escapeXml(text)}</title>`;
}

type Plot = { x0: number; x1: number; y0: number; y1: number }; // y0 top, y1 bottom

/** Horizontal axis along the bottom of the plot with vertical grid lines. */
function bottomAxis(p: Plot, scale: Scale, ticks: Ticks, label: string | undefined, fmt: (v: number) => string, grid = true): string {
  let s = `<line x1="${c(p.x0)}" y1="${c(p.y1)}" x2="${c(p.x1)}" y2="${c(p.y1)}" stroke="${AXIS}"/>`;
  let lastRight = -Infinity;
  for (const t of ticks.ticks) {
    const x = scale(t);
    if (!Number.isFinite(x)) continue;
    if (grid) s += `<line x1="${c(x)}" y1="${c(p.y0)}" x2="${c(x)}" y2="${c(p.y1)}" stroke="${GRID}"/>`;
    s += `<line x1="${c(x)}" y1="${c(p.y1)}" x2="${c(x)}" y2="${c(p.y1 + 5)}" stroke="${AXIS}"/>`;
    const text = fmt(t);
    const w = textWidth(text, 11);
    if (x - w / 2 < lastRight + 4) continue; // skip a label that would overlap the previous one
    lastRight = x + w / 2;
    s += `<text x="${c(x)}" y="${c(p.y1 + 17)}" text-anchor="middle" font-size="11" fill="${AXIS}">${escapeXml(text)}</text>`;
  }
  if (label) {
    s += `<text x="${c((p.x0 + p.x1) / 2)}" y="${c(p.y1 + 36)}" text-anchor="middle" fill="#222">${escapeXml(truncateText(label, p.x1 - p.x0))}</text>`;
  }
  return s;
}

/** Vertical axis on the left (or right) of the plot with horizontal grid lines. */
function sideAxis(p: Plot, scale: Scale, ticks: Ticks, label: string | undefined, fmt: (v: number) => string, side: 'left' | 'right', labelOffset: number, grid = true): string {
  const x = side === 'left' ? p.x0 : p.x1;
  const dir = side === 'left' ? -1 : 1;
  let s = `<line x1="${c(x)}" y1="${c(p.y0)}" x2="${c(x)}" y2="${c(p.y1)}" stroke="${AXIS}"/>`;
  for (const t of ticks.ticks) {
    const y = scale(t);
    if (!Number.isFinite(y)) continue;
    if (grid) s += `<line x1="${c(p.x0)}" y1="${c(y)}" x2="${c(p.x1)}" y2="${c(y)}" stroke="${GRID}"/>`;
    s += `<line x1="${c(x)}" y1="${c(y)}" x2="${c(x + dir * 5)}" y2="${c(y)}" stroke="${AXIS}"/>`;
    s +=
      `<text x="${c(x + dir * 8)}" y="${c(y + 4)}" text-anchor="${side === 'left' ? 'end' : 'start'}" font-size="11" fill="${AXIS}">` +
      `${escapeXml(fmt(t))}</text>`;
  }
  if (label) {
    const lx = x + dir * labelOffset;
    const ly = (p.y0 + p.y1) / 2;
    s +=
      `<text x="${c(lx)}" y="${c(ly)}" text-anchor="middle" transform="rotate(${side === 'left' ? -90 : 90} ${c(lx)} ${c(ly)})" fill="#222">` +
      `${escapeXml(truncateText(label, p.y1 - p.y0))}</text>`;
  }
  return s;
}

function tickLabelWidth(ticks: Ticks, fmt: (v: number) => string): number {
  return Math.max(0, ...ticks.ticks.map((t) => textWidth(fmt(t), 11)));
}

export type LegendItem = {
  name: string;
  color: string;
  /**
   * The swatch: a box (bars), a line or a dashed line (curves; with `dot`, a marker on it), a dot
   * (a series drawn as a lone point), a ring (points outlined in the colour, e.g. the Pareto points).
   */
  kind?: 'box' | 'line' | 'dashed' | 'dot' | 'ring';
  /** for 'line' and 'dashed': also a marker on the line (a ringed one with 'ring'), as the chart draws its points */
  dot?: boolean | 'ring';
};

/** Width of a line swatch in the legends: long enough to show the dash pattern (three dashes) at a glance. */
export const LEGEND_LINE_W = 28;

/** One legend swatch at (x, mid): class="swatch", drawn with the series' colour and dash pattern. */
function swatch(it: LegendItem, x: number, mid: number): string {
  const kind = it.kind ?? 'box';
  if (kind === 'box') return `<rect class="swatch" x="${c(x)}" y="${c(mid - 5)}" width="14" height="10" fill="${it.color}"/>`;
  if (kind === 'dot') return `<circle class="swatch" cx="${c(x + 7)}" cy="${c(mid)}" r="4.5" fill="${it.color}"/>`;
  if (kind === 'ring') return `<circle class="swatch" cx="${c(x + 7)}" cy="${c(mid)}" r="4.5" fill="#fff" stroke="${it.color}" stroke-width="2"/>`;
  // a line 3 px thick with the chart's dash pattern (6 4: three dashes), so it reads as a line even scaled down
  let s =
    `<line class="swatch" x1="${c(x)}" y1="${c(mid)}" x2="${c(x + LEGEND_LINE_W - 2)}" y2="${c(mid)}" stroke="${it.color}" stroke-width="3"` +
    `${kind === 'dashed' ? ' stroke-dasharray="6 4"' : ''}/>`;
  if (it.dot === 'ring') s += `<circle cx="${c(x + LEGEND_LINE_W / 2)}" cy="${c(mid)}" r="4" fill="#fff" stroke="${it.color}" stroke-width="2"/>`;
  else if (it.dot) s += `<circle cx="${c(x + LEGEND_LINE_W / 2)}" cy="${c(mid)}" r="3" fill="${it.color}"/>`;
  return s;
}

/** Legend rows starting at (x, y), wrapped to maxWidth. Returns the markup and the height used. */
function legend(items: readonly LegendItem[], x: number, y: number, maxWidth: number): { svg: string; height: number } {
  if (items.length === 0) return { svg: '', height: 0 };
  const rowH = 18;
  let cx = x;
  let cy = y;
  let s = '';
  for (const it of items) {
    const kind = it.kind ?? 'box';
    const sw = kind === 'line' || kind === 'dashed' ? LEGEND_LINE_W : 16;
    const label = truncateText(it.name, Math.min(220, maxWidth - sw - 14));
    const w = sw + 6 + textWidth(label) + 14;
    if (cx > x && cx + w > x + maxWidth) {
      cx = x;
      cy += rowH;
    }
    const mid = cy + 9;
    s += `<g class="legend-item">${swatch(it, cx, mid)}`;
    s += `<text x="${c(cx + sw + 6)}" y="${c(mid + 4)}" fill="#222">${tip(it.name)}${escapeXml(label)}</text></g>`;
    cx += w;
  }
  return { svg: s, height: cy - y + rowH };
}

// ---------------------------------------------------------------------------------------------
// Horizontal bar chart

export type RefLine = { value: number; label: string; color?: string };

export type BarChartOptions = ChartBase & {
  labels: readonly string[];
  values: readonly number[];
  /** label of the value axis (bottom) */
  valueLabel?: string;
  /** label of the category axis (left) */
  categoryLabel?: string;
  /** fixed value domain, e.g. [0, 1] for rewards */
  domain?: readonly [number, number];
  format?: (v: number) => string;
  /** per-bar colour (default: first palette colour) */
  colors?: readonly (string | undefined)[];
  /** extra tooltip text per bar */
  tooltips?: readonly (string | undefined)[];
  /** vertical reference lines (e.g. "oracle 0.91") */
  refLines?: readonly RefLine[];
  /** per-bar error (e.g. the sd over seeds): a whisker from value − error to value + error; missing, non-finite or ≤ 0: none */
  errors?: readonly (number | null | undefined)[];
};

/** Horizontal bars, one per label, with values printed at the bar ends. Non-finite values are dropped. */
export function barChart(o: BarChartOptions): string {
  const width = o.width ?? 720;
  const fmt = o.format ?? formatNumber;
  const rows: Array<{ label: string; value: number; color: string; tooltip?: string; error: number }> = [];
  o.labels.forEach((label, i) => {
    const v = o.values[i];
    if (!isFiniteNumber(v)) return;
    const e = o.errors?.[i];
    rows.push({ label, value: v, color: o.colors?.[i] ?? PALETTE[0]!, tooltip: o.tooltips?.[i], error: isFiniteNumber(e) && e > 0 ? e : 0 });
  });
  if (rows.length === 0) return noData(o, width);
  const refs = (o.refLines ?? []).filter((r) => isFiniteNumber(r.value));

  const whiskerEnds = rows.filter((r) => r.error > 0).flatMap((r) => [r.value - r.error, r.value + r.error]);
  const ticks = axisTicks([...rows.map((r) => r.value), ...whiskerEnds, ...refs.map((r) => r.value)], { domain: o.domain, includeZero: true });
  const catAxisW = o.categoryLabel ? 20 : 0;
  // up to 40% of the width: long spec names (fixed:single:llama-3.3-nemotron-super-49b-v1) then show whole
  const labelW = Math.min(width * 0.4, Math.max(...rows.map((r) => textWidth(r.label))) + 4);
  const valueW = Math.max(...rows.map((r) => textWidth(fmt(r.value), 11))) + 10;
  const refRowH = 14;
  const rowH = 24;
  const p: Plot = {
    x0: 10 + catAxisW + labelW + 8,
    x1: width - Math.max(valueW, 14),
    y0: TITLE_H + 8 + refs.length * refRowH,
    y1: 0,
  };
  p.y1 = p.y0 + rows.length * rowH;
  const height = p.y1 + (o.valueLabel ? 46 : 30);
  const x = linearScale(ticks.lo, ticks.hi, p.x0, p.x1);
  const zero = x(Math.min(Math.max(0, ticks.lo), ticks.hi));

  let s = bottomAxis(p, x, ticks, o.valueLabel, tickFormatter(ticks.step));
  rows.forEach((r, i) => {
    const yTop = p.y0 + i * rowH + 4;
    const bh = rowH - 8;
    const vx = x(Math.min(Math.max(r.value, ticks.lo), ticks.hi));
    const bx = Math.min(zero, vx);
    const bw = Math.max(Math.abs(vx - zero), r.value === 0 ? 0 : 1);
    const t = `${r.label}: ${fmt(r.value)}${r.error > 0 ? ` ± ${fmt(r.error)}` : ''}${r.tooltip ? `\n${r.tooltip}` : ''}`;
    s += `<g>${tip(t)}`;
    s += `<text x="${c(p.x0 - 8)}" y="${c(yTop + bh / 2 + 4)}" text-anchor="end" fill="#222">${escapeXml(truncateText(r.label, labelW))}</text>`;
    s += `<rect x="${c(bx)}" y="${c(yTop)}" width="${c(bw)}" height="${c(bh)}" fill="${r.color}"/>`;
    // the whisker's far end, where the value label starts (clamped to the axis like the bar)
    let endX = vx;
    if (r.error > 0) {
      const clamp = (v: number) => x(Math.min(Math.max(v, ticks.lo), ticks.hi));
      const lo = clamp(r.value - r.error);
      const hi = clamp(r.value + r.error);
      const my = yTop + bh / 2;
      s += `<path class="whisker" d="M${c(lo)} ${c(my)}H${c(hi)}M${c(lo)} ${c(my - 5)}V${c(my + 5)}M${c(hi)} ${c(my - 5)}V${c(my + 5)}" stroke="#222" stroke-width="1.3" fill="none"/>`;
      endX = r.value >= 0 ? hi : lo;
    }
    const text = fmt(r.value);
    const tw = textWidth(text, 11);
    // value label beyond the bar end (and its whisker); inside the bar when it would leave the chart
    const outsideX = r.value >= 0 ? endX + 4 : endX - 4;
    const fitsOutside = r.value >= 0 ? outsideX + tw <= width - 2 : outsideX - tw >= p.x0;
    const anchor = (r.value >= 0) === fitsOutside ? 'start' : 'end';
    const tx = fitsOutside ? outsideX : r.value >= 0 ? vx - 4 : vx + 4;
    const fill = fitsOutside ? '#222' : textColorOn(r.color);
    // a white halo keeps the value readable where a reference line crosses it
    const halo = fitsOutside ? ' stroke="#fff" stroke-width="3" paint-order="stroke"' : '';
    s += `<text x="${c(tx)}" y="${c(yTop + bh / 2 + 4)}" text-anchor="${anchor}" font-size="11" fill="${fill}"${halo}>${escapeXml(text)}</text>`;
    s += `</g>`;
  });
  s += `<line x1="${c(zero)}" y1="${c(p.y0)}" x2="${c(zero)}" y2="${c(p.y1)}" stroke="${AXIS}"/>`;
  refs.forEach((r, i) => {
    const rx = x(Math.min(Math.max(r.value, ticks.lo), ticks.hi));
    const color = r.color ?? '#B00020';
    const ly = TITLE_H + 4 + i * refRowH + 10;
    const text = `${r.label} ${fmt(r.value)}`;
    const anchor = rx + textWidth(text, 11) / 2 > width - 4 ? 'end' : rx - textWidth(text, 11) / 2 < 4 ? 'start' : 'middle';
    s += `<g>${tip(`${r.label}: ${fmt(r.value)}`)}`;
    s += `<line x1="${c(rx)}" y1="${c(ly + 3)}" x2="${c(rx)}" y2="${c(p.y1)}" stroke="${color}" stroke-width="1.5" stroke-dasharray="5 3"/>`;
    s += `<text x="${c(rx)}" y="${c(ly)}" text-anchor="${anchor}" font-size="11" fill="${color}">${escapeXml(text)}</text></g>`;
  });
  if (o.categoryLabel) {
    const lx = 14;
    const ly = (p.y0 + p.y1) / 2;
    s += `<text x="${c(lx)}" y="${c(ly)}" text-anchor="middle" transform="rotate(-90 ${c(lx)} ${c(ly)})" fill="#222">${escapeXml(truncateText(o.categoryLabel, p.y1 - p.y0))}</text>`;
  }
  return svgDoc(width, height, o, s);
}

// ---------------------------------------------------------------------------------------------
// Grouped vertical bars

export type BarSeries = { name: string; values: readonly number[]; color?: string };

export type GroupedBarOptions = ChartBase & {
  categories: readonly string[];
  series: readonly BarSeries[];
  xLabel?: string;
  yLabel?: string;
  domain?: readonly [number, number];
  format?: (v: number) => string;
  height?: number;
};

/** Vertical bars grouped by category, one colour per series, legend on top. */
export function groupedBarChart(o: GroupedBarOptions): string {
  const width = o.width ?? 720;
  const fmt = o.format ?? formatNumber;
  const all = o.series.flatMap((se) => se.values.slice(0, o.categories.length)).filter(isFiniteNumber);
  if (o.categories.length === 0 || o.series.length === 0 || all.length === 0) return noData(o, width);

  const ticks = axisTicks(all, { domain: o.domain, includeZero: true });
  const tfmt = tickFormatter(ticks.step);
  const items = o.series.map((se, i) => ({ name: se.name, color: se.color ?? paletteColor(i) }));
  const leftW = 12 + (o.yLabel ? 18 : 0) + tickLabelWidth(ticks, tfmt) + 8;
  const lg = legend(items, leftW, TITLE_H + 2, width - leftW - 10);
  const plotW = width - leftW - 12;
  const groupW = plotW / o.categories.length;
  const maxCat = Math.max(...o.categories.map((k) => textWidth(k, 11)));
  const rotate = maxCat > groupW - 6;
  const catSpace = rotate ? Math.min(130, maxCat * 0.64 + 14) : 22;
  const plotH = o.height ? Math.max(80, o.height - (TITLE_H + lg.height + 10) - catSpace - (o.xLabel ? 24 : 6)) : 240;
  const p: Plot = { x0: leftW, x1: width - 12, y0: TITLE_H + lg.height + 10, y1: 0 };
  p.y1 = p.y0 + plotH;
  const height = p.y1 + catSpace + (o.xLabel ? 24 : 6);
  const y = linearScale(ticks.lo, ticks.hi, p.y1, p.y0);
  const zero = y(Math.min(Math.max(0, ticks.lo), ticks.hi));

  let s = lg.svg + sideAxis(p, y, ticks, o.yLabel, tfmt, 'left', leftW - 18);
  const inner = groupW * 0.8;
  const barW = inner / o.series.length;
  o.categories.forEach((cat, ci) => {
    const gx = p.x0 + ci * groupW + (groupW - inner) / 2;
    o.series.forEach((se, si) => {
      const v = se.values[ci];
      if (!isFiniteNumber(v)) return;
      const vy = y(Math.min(Math.max(v, ticks.lo), ticks.hi));
      const top = Math.min(vy, zero);
      const h = Math.max(Math.abs(zero - vy), v === 0 ? 0 : 1);
      s += `<rect x="${c(gx + si * barW + 0.5)}" y="${c(top)}" width="${c(Math.max(1, barW - 1))}" height="${c(h)}" fill="${items[si]!.color}">${tip(`${cat} / ${se.name}: ${fmt(v)}`)}</rect>`;
    });
    const cx = p.x0 + (ci + 0.5) * groupW;
    if (rotate) {
      const label = truncateText(cat, (catSpace - 14) / 0.64, 11);
      s += `<text x="${c(cx)}" y="${c(p.y1 + 14)}" text-anchor="end" font-size="11" fill="#222" transform="rotate(-40 ${c(cx)} ${c(p.y1 + 14)})">${tip(cat)}${escapeXml(label)}</text>`;
    } else {
      s += `<text x="${c(cx)}" y="${c(p.y1 + 16)}" text-anchor="middle" font-size="11" fill="#222">${tip(cat)}${escapeXml(cat)}</text>`;
    }
  });
  s += `<line x1="${c(p.x0)}" y1="${c(zero)}" x2="${c(p.x1)}" y2="${c(zero)}" stroke="${AXIS}"/>`;
  if (o.xLabel) s += `<text x="${c((p.x0 + p.x1) / 2)}" y="${c(height - 8)}" text-anchor="middle" fill="#222">${escapeXml(o.xLabel)}</text>`;
  return svgDoc(width, height, o, s);
}

// ---------------------------------------------------------------------------------------------
// Heatmap

export type HeatmapOptions = ChartBase & {
  rows: readonly string[];
  cols: readonly string[];
  /** values[row][col]; null/undefined/NaN cells are drawn as "no data" */
  values: readonly (readonly (number | null | undefined)[])[];
  xLabel?: string;
  yLabel?: string;
  /** colour domain; default: the data's min and max */
  domain?: readonly [number, number];
  format?: (v: number) => string;
  /** print the value in each cell (default true) */
  showValues?: boolean;
  /** outline the largest value of each column or row */
  mark?: 'col-max' | 'row-max';
  colorScale?: (t: number) => string;
  /** name of the quantity, shown next to the colour legend */
  valueLabel?: string;
};

/** Matrix of coloured cells with row/column labels and a colour-scale legend. */
export function heatmap(o: HeatmapOptions): string {
  const width = o.width ?? 720;
  const fmt = o.format ?? formatNumber;
  const color = o.colorScale ?? sequentialColor;
  const cell = (r: number, k: number): number | null => {
    const v = o.values[r]?.[k];
    return isFiniteNumber(v) ? v : null;
  };
  const finite: number[] = [];
  o.rows.forEach((_, r) => o.cols.forEach((__, k) => {
    const v = cell(r, k);
    if (v !== null) finite.push(v);
  }));
  if (o.rows.length === 0 || o.cols.length === 0 || finite.length === 0) return noData(o, width);

  let [lo, hi] = o.domain && o.domain[1] > o.domain[0] ? [o.domain[0], o.domain[1]] : extent(finite)!;
  if (lo === hi) {
    // all equal: centre the colour so the one value is a mid tone
    lo -= 0.5;
    hi += 0.5;
  }
  const norm = (v: number) => (v - lo) / (hi - lo);

  const yAxisW = o.yLabel ? 20 : 0;
  const labelW = Math.min(width * 0.3, Math.max(...o.rows.map((r) => textWidth(r))) + 4);
  const x0 = 10 + yAxisW + labelW + 8;
  const cellW = Math.max(14, Math.min(110, (width - x0 - 12) / o.cols.length));
  const maxCol = Math.max(...o.cols.map((k) => textWidth(k, 11)));
  const rotate = maxCol > cellW - 6;
  const colSpace = rotate ? Math.min(130, maxCol * 0.64 + 16) : 22;
  const cellH = 26;
  const p: Plot = { x0, x1: x0 + cellW * o.cols.length, y0: TITLE_H + 8, y1: 0 };
  p.y1 = p.y0 + cellH * o.rows.length;
  const legendY = p.y1 + colSpace + (o.xLabel ? 24 : 4) + 8;
  const height = legendY + 44;

  // print values only when every one fits its cell; a clipped number would mislead (tooltips keep them)
  const showValues = (o.showValues ?? true) && finite.every((v) => textWidth(fmt(v), 11) <= cellW - 6);
  const marked = new Set<string>();
  if (o.mark) {
    const outer = o.mark === 'col-max' ? o.cols.length : o.rows.length;
    const innerN = o.mark === 'col-max' ? o.rows.length : o.cols.length;
    for (let a = 0; a < outer; a++) {
      let best = -Infinity;
      for (let b = 0; b < innerN; b++) {
        const v = o.mark === 'col-max' ? cell(b, a) : cell(a, b);
        if (v !== null && v > best) best = v;
      }
      for (let b = 0; b < innerN; b++) {
        const v = o.mark === 'col-max' ? cell(b, a) : cell(a, b);
        if (v !== null && v === best) marked.add(o.mark === 'col-max' ? `${b},${a}` : `${a},${b}`);
      }
    }
  }

  let s = '';
  o.rows.forEach((row, r) => {
    const cy = p.y0 + r * cellH;
    s += `<text x="${c(x0 - 8)}" y="${c(cy + cellH / 2 + 4)}" text-anchor="end" fill="#222">${tip(row)}${escapeXml(truncateText(row, labelW))}</text>`;
    o.cols.forEach((col, k) => {
      const cx = x0 + k * cellW;
      const v = cell(r, k);
      if (v === null) {
        s += `<g>${tip(`${row} / ${col}: no data`)}<rect x="${c(cx)}" y="${c(cy)}" width="${c(cellW)}" height="${c(cellH)}" fill="#f2f2f2" stroke="#fff"/>`;
        if (showValues) s += `<text x="${c(cx + cellW / 2)}" y="${c(cy + cellH / 2 + 4)}" text-anchor="middle" font-size="11" fill="#999">—</text>`;
        s += `</g>`;
        return;
      }
      const fill = color(norm(v));
      s += `<g>${tip(`${row} / ${col}: ${fmt(v)}`)}<rect x="${c(cx)}" y="${c(cy)}" width="${c(cellW)}" height="${c(cellH)}" fill="${fill}" stroke="#fff"/>`;
      if (showValues) {
        const text = fmt(v);
        const bold = marked.has(`${r},${k}`) ? ' font-weight="700"' : '';
        s += `<text x="${c(cx + cellW / 2)}" y="${c(cy + cellH / 2 + 4)}" text-anchor="middle" font-size="11"${bold} fill="${textColorOn(fill)}">${escapeXml(text)}</text>`;
      }
      s += `</g>`;
    });
  });
  for (const key of marked) {
    const [r, k] = key.split(',').map(Number) as [number, number];
    s += `<rect x="${c(x0 + k * cellW + 1.5)}" y="${c(p.y0 + r * cellH + 1.5)}" width="${c(cellW - 3)}" height="${c(cellH - 3)}" fill="none" stroke="#D55E00" stroke-width="2.5"/>`;
  }
  o.cols.forEach((col, k) => {
    const cx = x0 + (k + 0.5) * cellW;
    if (rotate) {
      const label = truncateText(col, (colSpace - 16) / 0.64, 11);
      s += `<text x="${c(cx)}" y="${c(p.y1 + 14)}" text-anchor="end" font-size="11" fill="#222" transform="rotate(-40 ${c(cx)} ${c(p.y1 + 14)})">${tip(col)}${escapeXml(label)}</text>`;
    } else {
      s += `<text x="${c(cx)}" y="${c(p.y1 + 16)}" text-anchor="middle" font-size="11" fill="#222">${tip(col)}${escapeXml(col)}</text>`;
    }
  });
  if (o.xLabel) s += `<text x="${c((p.x0 + p.x1) / 2)}" y="${c(p.y1 + colSpace + 18)}" text-anchor="middle" fill="#222">${escapeXml(o.xLabel)}</text>`;
  if (o.yLabel) {
    const lx = 14;
    const ly = (p.y0 + p.y1) / 2;
    s += `<text x="${c(lx)}" y="${c(ly)}" text-anchor="middle" transform="rotate(-90 ${c(lx)} ${c(ly)})" fill="#222">${escapeXml(truncateText(o.yLabel, p.y1 - p.y0 + 40))}</text>`;
  }

  // colour legend: a strip of discrete steps (no gradient ids needed) with the domain's ticks
  const lgW = Math.min(260, width - 40);
  const lgX = Math.max(10, Math.min(p.x0, width - lgW - 10));
  const steps = 40;
  s += `<g>${tip(`colour scale: ${fmt(lo)} to ${fmt(hi)}`)}`;
  if (o.valueLabel) s += `<text x="${c(lgX)}" y="${c(legendY - 3)}" font-size="11" fill="#222">${escapeXml(o.valueLabel)}</text>`;
  for (let i = 0; i < steps; i++) {
    s += `<rect x="${c(lgX + (i * lgW) / steps)}" y="${c(legendY)}" width="${c(lgW / steps + 0.5)}" height="10" fill="${color((i + 0.5) / steps)}"/>`;
  }
  s += `<rect x="${c(lgX)}" y="${c(legendY)}" width="${c(lgW)}" height="10" fill="none" stroke="#999"/>`;
  const lt = ticksInside(lo, hi, 4);
  const ltf = tickFormatter(lt.step);
  const tickValues = lt.ticks.length >= 2 ? lt.ticks : [lo, hi];
  for (const t of tickValues) {
    const tx = lgX + norm(t) * lgW;
    s += `<line x1="${c(tx)}" y1="${c(legendY + 10)}" x2="${c(tx)}" y2="${c(legendY + 14)}" stroke="${AXIS}"/>`;
    s += `<text x="${c(tx)}" y="${c(legendY + 26)}" text-anchor="middle" font-size="10" fill="${AXIS}">${escapeXml(lt.ticks.length >= 2 ? ltf(t) : fmt(t))}</text>`;
  }
  s += `</g>`;
  const fullW = Math.max(width, p.x1 + 12);
  return svgDoc(fullW, height, o, s);
}

// ---------------------------------------------------------------------------------------------
// Scatter with labels and a Pareto frontier

export type ScatterPoint = { x: number; y: number; label?: string; color?: string; tooltip?: string };
export type FrontierSense = { x: 'min' | 'max'; y: 'min' | 'max' };

/**
 * The points no other point dominates (at least as good on both axes, better on one), sorted by
 * x ascending. Default sense: low x (cost) and high y (accuracy) are better.
 */
export function paretoFrontier<P extends { x: number; y: number }>(points: readonly P[], sense: FrontierSense = { x: 'min', y: 'max' }): P[] {
  const sx = sense.x === 'min' ? 1 : -1;
  const sy = sense.y === 'max' ? 1 : -1;
  const pts = points.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y));
  // walk from the best x to the worst; keep a point when its y beats everything seen so far
  const sorted = [...pts].sort((a, b) => sx * (a.x - b.x) || sy * (b.y - a.y));
  const out: P[] = [];
  let bestY = -Infinity;
  for (const p of sorted) {
    const y = sy * p.y;
    if (y > bestY) {
      out.push(p);
      bestY = y;
    }
  }
  return out.sort((a, b) => a.x - b.x);
}

export type ScatterOptions = ChartBase & {
  points: readonly ScatterPoint[];
  xLabel?: string;
  yLabel?: string;
  /** 'auto' uses a log x axis when all x > 0 and they span more than 30x */
  xScale?: 'linear' | 'log' | 'auto';
  xDomain?: readonly [number, number];
  yDomain?: readonly [number, number];
  formatX?: (v: number) => string;
  formatY?: (v: number) => string;
  /** draw the Pareto frontier (default: low x, high y is better); false for none */
  frontier?: FrontierSense | false;
  height?: number;
};

type Box = { x: number; y: number; w: number; h: number };
const overlap = (a: Box, b: Box) =>
  Math.max(0, Math.min(a.x + a.w, b.x + b.w) - Math.max(a.x, b.x)) * Math.max(0, Math.min(a.y + a.h, b.y + b.h) - Math.max(a.y, b.y));

/** Points with text labels placed to avoid each other, optional Pareto frontier line. */
export function scatterChart(o: ScatterOptions): string {
  const width = o.width ?? 720;
  const fmtX = o.formatX ?? formatNumber;
  const fmtY = o.formatY ?? formatNumber;
  let pts = o.points.filter((p) => isFiniteNumber(p.x) && isFiniteNumber(p.y));
  const wantLog = o.xScale === 'log' || (o.xScale === 'auto' && pts.length > 1 && pts.every((p) => p.x > 0) && (() => {
    const e = extent(pts.map((p) => p.x))!;
    return e[1] / e[0] > 30;
  })());
  if (wantLog) pts = pts.filter((p) => p.x > 0); // log axis cannot show x <= 0
  if (pts.length === 0) return noData(o, width);

  const yt = axisTicks(pts.map((p) => p.y), { domain: o.yDomain });
  const ytf = tickFormatter(yt.step);
  let xt: Ticks;
  if (wantLog) {
    const e = extent(pts.map((p) => p.x))!;
    xt = o.xDomain && o.xDomain[0] > 0 && o.xDomain[1] > o.xDomain[0] ? logTicks(o.xDomain[0], o.xDomain[1]) : logTicks(e[0], e[1]);
  } else {
    xt = axisTicks(pts.map((p) => p.x), { domain: o.xDomain });
  }
  const xtf = wantLog ? fmtX : tickFormatter(xt.step);
  const frontier = o.frontier === false ? [] : paretoFrontier(pts, o.frontier ?? { x: 'min', y: 'max' });
  // the legend shows what is drawn: the dashed line through the ringed frontier points, or the one ringed point
  const legendItems: LegendItem[] =
    frontier.length > 1
      ? [{ name: 'Pareto frontier', color: '#D55E00', kind: 'dashed', dot: 'ring' }]
      : frontier.length === 1 && pts.length > 1
        ? [{ name: 'Pareto frontier (one point)', color: '#D55E00', kind: 'ring' }]
        : [];
  const leftW = 12 + (o.yLabel ? 18 : 0) + tickLabelWidth(yt, ytf) + 8;
  const lg = legend(legendItems, leftW, TITLE_H + 2, width - leftW - 16);
  const p: Plot = { x0: leftW, x1: width - 24, y0: TITLE_H + lg.height + 12, y1: 0 };
  p.y1 = (o.height ?? 380) - (o.xLabel ? 46 : 30);
  if (p.y1 - p.y0 < 80) p.y1 = p.y0 + 80;
  const height = p.y1 + (o.xLabel ? 46 : 30);
  // keep points off the frame: 12px inset inside the axes
  const x = (wantLog ? logScale : linearScale)(xt.lo, xt.hi, p.x0 + 12, p.x1 - 12);
  const y = linearScale(yt.lo, yt.hi, p.y1 - 12, p.y0 + 12);

  let s = lg.svg;
  s += bottomAxis(p, x, xt, o.xLabel, xtf);
  s += sideAxis(p, y, yt, o.yLabel, ytf, 'left', leftW - 18);
  s += `<rect x="${c(p.x0)}" y="${c(p.y0)}" width="${c(p.x1 - p.x0)}" height="${c(p.y1 - p.y0)}" fill="none" stroke="${GRID}"/>`;
  if (frontier.length > 1) {
    const d = frontier.map((f, i) => `${i === 0 ? 'M' : 'L'}${c(x(f.x))} ${c(y(f.y))}`).join(' ');
    s += `<path d="${d}" fill="none" stroke="#D55E00" stroke-width="2" stroke-dasharray="6 4">${tip('Pareto frontier')}</path>`;
  }
  const onFrontier = new Set<ScatterPoint>(frontier);
  const placed: Box[] = pts.map((pt) => ({ x: x(pt.x) - 5, y: y(pt.y) - 5, w: 10, h: 10 }));
  const bounds: Box = { x: p.x0, y: p.y0, w: p.x1 - p.x0, h: p.y1 - p.y0 };
  // the frontier line is an obstacle too: sample it every few px as small boxes
  const lineBoxes: Box[] = [];
  for (let i = 1; i < frontier.length; i++) {
    const ax = x(frontier[i - 1]!.x);
    const ay = y(frontier[i - 1]!.y);
    const bx = x(frontier[i]!.x);
    const by = y(frontier[i]!.y);
    const n = Math.min(500, Math.ceil(Math.hypot(bx - ax, by - ay) / 4));
    for (let k = 0; k <= n; k++) lineBoxes.push({ x: ax + ((bx - ax) * k) / n - 1.5, y: ay + ((by - ay) * k) / n - 1.5, w: 3, h: 3 });
  }
  // draw labels after all markers so markers never hide text; place each label greedily
  let marks = '';
  let labels = '';
  pts.forEach((pt, i) => {
    const px = x(pt.x);
    const py = y(pt.y);
    const color = pt.color ?? paletteColor(i);
    const name = pt.label ?? '';
    const t = `${name ? `${name}: ` : ''}${o.xLabel ?? 'x'} ${fmtX(pt.x)}, ${o.yLabel ?? 'y'} ${fmtY(pt.y)}${pt.tooltip ? `\n${pt.tooltip}` : ''}`;
    marks += `<g>${tip(t)}<circle cx="${c(px)}" cy="${c(py)}" r="5" fill="${color}" stroke="${onFrontier.has(pt) ? '#D55E00' : '#fff'}" stroke-width="${onFrontier.has(pt) ? 2 : 1}"/></g>`;
    if (!name) return;
    const text = truncateText(name, 180);
    const w = textWidth(text) + 2;
    const h = 14;
    const candidates: Box[] = [
      { x: px + 8, y: py - h / 2, w, h },
      { x: px - 8 - w, y: py - h / 2, w, h },
      { x: px - w / 2, y: py - 8 - h, w, h },
      { x: px - w / 2, y: py + 8, w, h },
      { x: px + 6, y: py - 6 - h, w, h },
      { x: px + 6, y: py + 6, w, h },
      { x: px - 6 - w, y: py - 6 - h, w, h },
      { x: px - 6 - w, y: py + 6, w, h },
      { x: px + 8, y: py - 1.5 * h - 8, w, h },
      { x: px + 8, y: py + 0.5 * h + 8, w, h },
    ];
    let best = candidates[0]!;
    let bestCost = Infinity;
    for (const cand of candidates) {
      const outside = cand.w * cand.h - overlap(cand, bounds);
      let cost = outside * 10;
      placed.forEach((b, j) => {
        if (j !== i) cost += overlap(cand, b);
      });
      for (const b of lineBoxes) cost += overlap(cand, b) * 0.5;
      if (cost < bestCost) {
        best = cand;
        bestCost = cost;
        if (cost === 0) break;
      }
    }
    placed.push(best);
    labels += `<text x="${c(best.x + 1)}" y="${c(best.y + h - 3)}" fill="#222" stroke="#fff" stroke-width="3" paint-order="stroke">${tip(t)}${escapeXml(text)}</text>`;
  });
  s += marks + labels;
  return svgDoc(width, height, o, s);
}

// ---------------------------------------------------------------------------------------------
// Line chart (curves over x, several series, optional right axis)

export type LineSeries = {
  name: string;
  points: readonly { x: number; y: number }[];
  color?: string;
  dashed?: boolean;
  /** plot against the right-hand axis (e.g. sigma next to fitness) */
  axis?: 'left' | 'right';
};

export type LineChartOptions = ChartBase & {
  series: readonly LineSeries[];
  xLabel?: string;
  yLabel?: string;
  /** label of the right axis, used when a series has axis: 'right' */
  y2Label?: string;
  xDomain?: readonly [number, number];
  yDomain?: readonly [number, number];
  y2Domain?: readonly [number, number];
  formatX?: (v: number) => string;
  formatY?: (v: number) => string;
  /** draw a dot at each point (default: when a series has at most 40 points) */
  markers?: boolean;
  height?: number;
};

/** Curves over x with a legend; a non-finite point breaks the line (a gap), it is not drawn. */
export function lineChart(o: LineChartOptions): string {
  const width = o.width ?? 720;
  const fmtX = o.formatX ?? formatNumber;
  const fmtY = o.formatY ?? formatNumber;
  const series = o.series.map((se, i) => ({
    ...se,
    color: se.color ?? paletteColor(i),
    finite: se.points.filter((pt) => isFiniteNumber(pt.x) && isFiniteNumber(pt.y)),
  }));
  const left = series.filter((se) => se.axis !== 'right');
  const right = series.filter((se) => se.axis === 'right');
  const allX = series.flatMap((se) => se.finite.map((pt) => pt.x));
  if (allX.length === 0) return noData(o, width);

  const xt = axisTicks(allX, { domain: o.xDomain, count: 8 });
  const yt = axisTicks(left.flatMap((se) => se.finite.map((pt) => pt.y)), { domain: o.yDomain });
  const hasRight = right.some((se) => se.finite.length > 0);
  const y2t = hasRight ? axisTicks(right.flatMap((se) => se.finite.map((pt) => pt.y)), { domain: o.y2Domain }) : null;
  const ytf = tickFormatter(yt.step);
  const y2tf = y2t ? tickFormatter(y2t.step) : ytf;
  const leftW = 12 + (o.yLabel ? 18 : 0) + tickLabelWidth(yt, ytf) + 8;
  const rightW = y2t ? 12 + (o.y2Label ? 18 : 0) + tickLabelWidth(y2t, y2tf) + 8 : 20;
  const items: LegendItem[] = series.map((se) => ({
    name: se.axis === 'right' && o.y2Label ? `${se.name} (right axis)` : se.name,
    color: se.color,
    // a series of one point is drawn as a dot, so its swatch is a dot; a curve with markers shows one on its line
    kind: se.finite.length <= 1 ? 'dot' : se.dashed ? 'dashed' : 'line',
    dot: (o.markers ?? se.finite.length <= 40) && se.finite.length > 1,
  }));
  const lg = legend(items, leftW, TITLE_H + 2, width - leftW - rightW);
  const p: Plot = { x0: leftW, x1: width - rightW, y0: TITLE_H + lg.height + 10, y1: 0 };
  p.y1 = (o.height ?? 360) - (o.xLabel ? 46 : 30);
  if (p.y1 - p.y0 < 80) p.y1 = p.y0 + 80;
  const height = p.y1 + (o.xLabel ? 46 : 30);
  const x = linearScale(xt.lo, xt.hi, p.x0, p.x1);
  const y = linearScale(yt.lo, yt.hi, p.y1, p.y0);
  const y2 = y2t ? linearScale(y2t.lo, y2t.hi, p.y1, p.y0) : y;

  // integer x (generations, steps) gets integer ticks only
  const intX = allX.every((v) => Number.isInteger(v));
  const xTicks: Ticks = intX ? { ...xt, ticks: xt.ticks.filter((t) => Number.isInteger(t)) } : xt;
  let s = lg.svg;
  s += bottomAxis(p, x, xTicks, o.xLabel, intX ? (v) => String(v) : tickFormatter(xt.step));
  s += sideAxis(p, y, yt, o.yLabel, ytf, 'left', leftW - 18);
  if (y2t) s += sideAxis(p, y2, y2t, o.y2Label, y2tf, 'right', rightW - 18, false);

  for (const se of series) {
    const sy = se.axis === 'right' && y2t ? y2 : y;
    const markers = o.markers ?? se.finite.length <= 40;
    // split at non-finite points so a missing generation shows as a gap
    const segments: Array<Array<{ x: number; y: number }>> = [[]];
    for (const pt of se.points) {
      if (isFiniteNumber(pt.x) && isFiniteNumber(pt.y)) segments[segments.length - 1]!.push(pt);
      else if (segments[segments.length - 1]!.length > 0) segments.push([]);
    }
    let g = `<g>${tip(se.name)}`;
    for (const seg of segments) {
      if (seg.length < 2) continue;
      const sorted = [...seg].sort((a, b) => a.x - b.x);
      const d = sorted.map((pt, i) => `${i === 0 ? 'M' : 'L'}${c(x(pt.x))} ${c(sy(pt.y))}`).join(' ');
      g += `<path d="${d}" fill="none" stroke="${se.color}" stroke-width="2"${se.dashed ? ' stroke-dasharray="6 4"' : ''} stroke-linejoin="round"/>`;
    }
    for (const seg of segments) {
      // a lone point has no line: always give it a marker so it is visible
      for (const pt of seg) {
        if (!markers && seg.length > 1) continue;
        g += `<circle cx="${c(x(pt.x))}" cy="${c(sy(pt.y))}" r="3" fill="${se.color}">${tip(`${se.name}: ${o.xLabel ?? 'x'} ${fmtX(pt.x)}, ${fmtY(pt.y)}`)}</circle>`;
      }
    }
    s += `${g}</g>`;
  }
  return svgDoc(width, height, o, s);
}

// ---------------------------------------------------------------------------------------------
// Histogram

export type Bin = { x0: number; x1: number; count: number };

/**
 * Count values into bins: `bins` is a count (nice equal-width bins, Sturges' rule by default)
 * or explicit ascending edges. The last bin includes its upper edge. Non-finite values are dropped.
 */
export function histogramBins(values: readonly number[], bins?: number | readonly number[]): Bin[] {
  const vs = values.filter(isFiniteNumber);
  let edges: number[];
  if (Array.isArray(bins)) {
    edges = (bins as readonly number[]).filter(isFiniteNumber);
    edges = edges.filter((e, i) => i === 0 || e > edges[i - 1]!);
    if (edges.length < 2) return [];
  } else {
    if (vs.length === 0) return [];
    const [lo, hi] = extent(vs)!;
    const n = typeof bins === 'number' && bins >= 1 ? Math.floor(bins) : Math.ceil(Math.log2(vs.length)) + 1;
    const t = lo === hi ? { lo: lo - 0.5, hi: hi + 0.5, step: 1 } : niceTicks(lo, hi, n);
    edges = [];
    for (let e = t.lo, i = 0; e <= t.hi + t.step * 1e-6 && i < 10_000; i++, e = clean(t.lo + i * t.step)) edges.push(e);
    if (edges.length < 2) edges = [t.lo, t.hi];
  }
  const out: Bin[] = edges.slice(0, -1).map((e, i) => ({ x0: e, x1: edges[i + 1]!, count: 0 }));
  const last = edges[edges.length - 1]!;
  for (const v of vs) {
    if (v < edges[0]! || v > last) continue;
    // binary search for the bin: edges[i] <= v < edges[i+1]
    let a = 0;
    let b = out.length - 1;
    while (a < b) {
      const m = (a + b + 1) >> 1;
      if (out[m]!.x0 <= v) a = m;
      else b = m - 1;
    }
    out[a]!.count++;
  }
  return out;
}

export type HistogramOptions = ChartBase & {
  values: readonly number[];
  bins?: number | readonly number[];
  xLabel?: string;
  /** default "count" */
  yLabel?: string;
  format?: (v: number) => string;
  color?: string;
  height?: number;
};

/** Distribution of values as adjacent bars over equal-width (or given) bins. */
export function histogram(o: HistogramOptions): string {
  const width = o.width ?? 720;
  const fmt = o.format ?? formatNumber;
  const bins = histogramBins(o.values, o.bins);
  if (bins.length === 0) return noData(o, width);
  const color = o.color ?? PALETTE[0]!;
  const yLabel = o.yLabel ?? 'count';
  const yt = niceTicks(0, Math.max(1, ...bins.map((b) => b.count)), 5);
  const intTicks: Ticks = { ...yt, ticks: yt.ticks.filter((t) => Number.isInteger(t)) };
  const ytf = (v: number) => String(v);
  const leftW = 12 + 18 + tickLabelWidth(intTicks, ytf) + 8;
  const p: Plot = { x0: leftW, x1: width - 20, y0: TITLE_H + 10, y1: 0 };
  p.y1 = (o.height ?? 300) - (o.xLabel ? 46 : 30);
  if (p.y1 - p.y0 < 80) p.y1 = p.y0 + 80;
  const height = p.y1 + (o.xLabel ? 46 : 30);
  const lo = bins[0]!.x0;
  const hi = bins[bins.length - 1]!.x1;
  const x = linearScale(lo, hi, p.x0, p.x1);
  const y = linearScale(yt.lo, yt.hi, p.y1, p.y0);
  const edges = [lo, ...bins.map((b) => b.x1)];
  const step = bins.length > 0 ? (hi - lo) / bins.length : 1;
  // label the edges, thinned out by bottomAxis when crowded
  const xt: Ticks = { lo, hi, step, ticks: edges };
  const xtf = o.format ?? exactFormatter(edges);

  let s = sideAxis(p, y, intTicks, yLabel, ytf, 'left', leftW - 18);
  s += bottomAxis(p, x, xt, o.xLabel, xtf, false);
  bins.forEach((b, i) => {
    const bx = x(b.x0);
    const bw = Math.max(1, x(b.x1) - bx - 1);
    const top = y(b.count);
    const close = i === bins.length - 1 ? ']' : ')'; // the last bin includes its upper edge
    s += `<rect x="${c(bx + 0.5)}" y="${c(top)}" width="${c(bw)}" height="${c(p.y1 - top)}" fill="${color}">${tip(`[${fmt(b.x0)}, ${fmt(b.x1)}${close}: ${b.count}`)}</rect>`;
  });
  return svgDoc(width, height, o, s);
}

// ---------------------------------------------------------------------------------------------
// Stacked horizontal bars (a distribution per row, e.g. the routing distribution per task)

export type StackedBarOptions = ChartBase & {
  /** one bar per row, top to bottom */
  rows: readonly string[];
  /** the segments of every bar, left to right, with their legend names and colours */
  series: readonly { name: string; color?: string }[];
  /** values[row][series]; missing, non-finite and negative values count as 0 */
  values: readonly (readonly (number | null | undefined)[])[];
  /** extra tooltip text per row (e.g. "300 items") */
  rowTooltips?: readonly (string | undefined)[];
  /**
   * true (default): every bar shows its row's shares and spans the full width (fractions summing
   * to 1, axis 0-100%); false: bars are drawn to scale on a common value axis.
   */
  normalize?: boolean;
  valueLabel?: string;
  /** format of a segment's value in its label and tooltip (default: a percentage when normalized) */
  format?: (v: number) => string;
};

/**
 * Horizontal bars made of one segment per series, legend on top. Segment edges are computed from
 * cumulative sums, so the segments of a bar tile it exactly. A row whose values are all 0 is drawn
 * as an empty outlined bar marked "no data". Segments wide enough carry their value as a label.
 */
export function stackedBarChart(o: StackedBarOptions): string {
  const width = o.width ?? 720;
  const normalize = o.normalize ?? true;
  const fmt = o.format ?? (normalize ? (v: number) => `${trimZeros((v * 100).toFixed(1))}%` : formatNumber);
  if (o.rows.length === 0 || o.series.length === 0) return noData(o, width);

  const items = o.series.map((se, i) => ({ name: se.name, color: se.color ?? paletteColor(i), kind: 'box' as const }));
  const rows = o.rows.map((label, ri) => {
    const raw = o.series.map((_, si) => {
      const v = o.values[ri]?.[si];
      return isFiniteNumber(v) && v > 0 ? v : 0;
    });
    const total = raw.reduce((a, b) => a + b, 0);
    return { label, raw, total, shares: raw.map((v) => (total > 0 ? v / total : 0)), tooltip: o.rowTooltips?.[ri] };
  });

  const ticks = normalize ? ticksInside(0, 1, 5) : niceTicks(0, Math.max(...rows.map((r) => r.total)), 5);
  const tfmt = normalize ? (v: number) => `${Math.round(v * 100)}%` : tickFormatter(ticks.step);
  const labelW = Math.min(width * 0.4, Math.max(...rows.map((r) => textWidth(r.label))) + 4);
  const x0 = 10 + labelW + 8;
  const lg = legend(items, x0, TITLE_H + 2, width - x0 - 16);
  const rowH = 26;
  const p: Plot = { x0, x1: width - 16, y0: TITLE_H + lg.height + 10, y1: 0 };
  p.y1 = p.y0 + rows.length * rowH;
  const height = p.y1 + (o.valueLabel ? 46 : 30);
  const x = linearScale(ticks.lo, ticks.hi, p.x0, p.x1);
  // round edges once, then take widths as differences: the segments then sum to the bar exactly
  const edge = (v: number) => Math.round(x(v) * 100) / 100;

  let s = lg.svg + bottomAxis(p, x, ticks, o.valueLabel, tfmt);
  rows.forEach((r, ri) => {
    const yTop = p.y0 + ri * rowH + 4;
    const bh = rowH - 8;
    const rowTip = r.tooltip ? `\n${r.tooltip}` : '';
    s += `<text x="${c(p.x0 - 8)}" y="${c(yTop + bh / 2 + 4)}" text-anchor="end" fill="#222">${tip(`${r.label}${rowTip}`)}${escapeXml(truncateText(r.label, labelW))}</text>`;
    if (r.total === 0) {
      const w = edge(normalize ? 1 : ticks.hi) - edge(0);
      s += `<g class="empty-bar">${tip(`${r.label}: no data${rowTip}`)}<rect x="${c(edge(0))}" y="${c(yTop)}" width="${c(w)}" height="${c(bh)}" fill="#fafafa" stroke="${GRID}"/>`;
      s += `<text x="${c(edge(0) + 6)}" y="${c(yTop + bh / 2 + 4)}" font-size="11" fill="${MUTED}">no data</text></g>`;
      return;
    }
    const parts = normalize ? r.shares : r.raw;
    let acc = 0;
    let segs = '';
    parts.forEach((v, si) => {
      if (v <= 0) return;
      const left = edge(acc);
      acc += v;
      // the last segment ends exactly at the bar's end, whatever the float sum says
      const right = edge(si === lastPositive(parts) ? (normalize ? 1 : r.total) : acc);
      const w = right - left;
      const item = items[si]!;
      const value = normalize ? r.shares[si]! : r.raw[si]!;
      const share = normalize ? '' : ` (${trimZeros((r.shares[si]! * 100).toFixed(1))}%)`;
      segs += `<rect class="seg" x="${c(left)}" y="${c(yTop)}" width="${c(w)}" height="${c(bh)}" fill="${item.color}">${tip(`${r.label} / ${item.name}: ${fmt(value)}${share}${rowTip}`)}</rect>`;
      const text = fmt(value);
      if (textWidth(text, 10.5) + 6 <= w) {
        segs += `<text x="${c(left + w / 2)}" y="${c(yTop + bh / 2 + 4)}" text-anchor="middle" font-size="10.5" fill="${textColorOn(item.color)}" pointer-events="none">${escapeXml(text)}</text>`;
      }
    });
    s += `<g class="bar">${segs}</g>`;
  });
  s += `<line x1="${c(p.x0)}" y1="${c(p.y0)}" x2="${c(p.x0)}" y2="${c(p.y1)}" stroke="${AXIS}"/>`;
  return svgDoc(width, height, o, s);
}

function lastPositive(values: readonly number[]): number {
  for (let i = values.length - 1; i >= 0; i--) if (values[i]! > 0) return i;
  return -1;
}
