// Page scaffolding shared by the HTML reports (evaluation run, router evaluation): the stylesheet,
// the document shell, the header facts, tables, figures, and the value formatters. Every value
// that reaches a page goes through one of the formatters here, then through esc.

import { formatUsd, parseUsd } from '@fugu/core';
import { escapeXml } from './svg.ts';

// ---------------------------------------------------------------------------------------------
// Formatting

export const esc = escapeXml;
export const DASH = '—';
export const finite = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

export const fmtReward = (v: unknown): string => (finite(v) ? v.toFixed(3) : DASH);

export function fmtPct(frac: unknown, digits = 1): string {
  if (!finite(frac)) return DASH;
  const pct = frac * 100;
  const min = 10 ** -digits;
  // a small but non-zero share should not read as 0
  if (pct > 0 && pct < min) return `<${min.toFixed(digits)}%`;
  return `${pct.toFixed(digits)}%`;
}

/** A mean in USD (per call, per item): 3 significant digits, never in exponent notation ("$0.000123", "$0.0412"). */
export function fmtCost(v: unknown): string {
  if (!finite(v)) return DASH;
  if (v === 0) return '$0';
  const a = Math.abs(v);
  const decimals = Math.min(12, Math.max(2, 2 - Math.floor(Math.log10(a))));
  return `${v < 0 ? '−' : ''}$${a.toFixed(decimals)}`;
}

export const fmtInt = (v: unknown): string => (finite(v) ? Math.round(v).toLocaleString('en-US') : DASH);

/** A difference with an explicit sign and a true minus: "+0.042", "−0.013". */
export const signed = (v: number): string => `${v >= 0 ? '+' : '−'}${Math.abs(v).toFixed(3)}`;

/** ISO timestamp as "YYYY-MM-DD HH:MM:SS UTC"; anything unparseable is shown as given. */
export function fmtTime(iso: string | null): string {
  if (!iso) return DASH;
  const t = new Date(iso);
  if (Number.isNaN(t.getTime())) return iso;
  return `${t.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

export function picoOrNull(usd: string | null | undefined): bigint | null {
  if (usd === null || usd === undefined) return null;
  try {
    return parseUsd(usd);
  } catch {
    return null;
  }
}

/** Exact USD for display: trailing zeros dropped, at least 2 decimals ("$0.0012345", "$12.50"). */
export function usdText(pico: bigint): string {
  const s = formatUsd(pico);
  const [whole, frac = ''] = s.split('.');
  const trimmed = frac.replace(/0+$/, '').padEnd(2, '0');
  return `$${whole}.${trimmed}`;
}

/** A money string from the data, exact; shown verbatim (escaped) when it is not a decimal. */
export function fmtUsd(usd: string | null | undefined): string {
  const pico = picoOrNull(usd);
  if (pico !== null) return usdText(pico);
  return usd === null || usd === undefined ? DASH : String(usd);
}

// ---------------------------------------------------------------------------------------------
// Building blocks

/** One label/value pair of the header's fact grid. */
export function fact(label: string, value: string, title?: string): string {
  return `<div class="fact"><dt>${esc(label)}</dt><dd${title ? ` title="${esc(title)}"` : ''}>${esc(value)}</dd></div>`;
}

/** Links to the page's sections: [anchor id, label]. */
export function toc(links: ReadonlyArray<readonly [string, string]>): string {
  return `<nav class="toc" aria-label="Sections">${links.map(([id, label]) => `<a href="#${esc(id)}">${esc(label)}</a>`).join('')}</nav>`;
}

/** The page header: a kicker line, the title (HTML, already escaped), the fact grid, then extra HTML (e.g. the toc). */
export function pageHeader(kicker: string, titleHtml: string, facts: readonly string[], after = ''): string {
  return (
    `<header>` +
    `<p class="kicker">${esc(kicker)}</p>` +
    `<h1>${titleHtml}</h1>` +
    `<dl class="facts">${facts.join('')}</dl>` +
    after +
    `</header>`
  );
}

/** A horizontally scrollable table; head, body and foot are rows of HTML (already escaped). */
export function table(cls: string, head: string, body: string, foot?: string): string {
  return (
    `<div class="scroll"><table class="${esc(cls)}"><thead>${head}</thead><tbody>${body}</tbody>` +
    `${foot === undefined ? '' : `<tfoot>${foot}</tfoot>`}</table></div>`
  );
}

/** A chart with its caption (HTML, already escaped). */
export function figure(svg: string, caption: string): string {
  return `<figure>${svg}<figcaption>${caption}</figcaption></figure>`;
}

/** What a latency cell says when nothing was measured (a replay worker answers from recorded outcomes at once). */
export const NOT_MEASURED = 'not measured';

/** A table cell spanning `span` columns that says the value was not measured, with a footnote mark and a tooltip. */
export function notMeasuredCell(span: number, why: string, mark = '*'): string {
  return `<td class="num unmeasured"${span > 1 ? ` colspan="${span}"` : ''} title="${esc(why)}">${esc(NOT_MEASURED)}${mark ? `<sup>${esc(mark)}</sup>` : ''}</td>`;
}

/** Chart width in px; the SVGs scale down to the page (and to paper) with max-width: 100%. */
export const CHART_W = 840;

/** "Generated by fugu [on <time>] · <what>"; the time is left out by default so equal data gives equal bytes. */
export function pageFooter(what: string, generatedAt?: string): string {
  return `<footer>Generated by fugu${generatedAt ? ` on ${esc(fmtTime(generatedAt))}` : ''} · ${esc(what)}</footer>`;
}

/** The whole document: UTF-8, inline CSS (the base sheet plus the page's own rules), no scripts, no external resources. */
export function htmlDocument(title: string, body: string, extraCss = ''): string {
  return (
    `<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n` +
    `<meta name="viewport" content="width=device-width, initial-scale=1">\n` +
    `<title>${esc(title)}</title>\n` +
    `<style>${BASE_CSS}${extraCss}</style>\n</head>\n<body>\n<main>\n` +
    body +
    `\n</main>\n</body>\n</html>\n`
  );
}

// ---------------------------------------------------------------------------------------------

/** Screen and print styles of every report page; a page adds its own rules for its own tables. */
export const BASE_CSS = `
:root { color-scheme: light; --fg: #1b1b1b; --muted: #5f6368; --line: #dcdcdc; --zebra: #f7f7f8; --accent: #0072B2; --best: #e5f3ea; }
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { margin: 0; background: #fff; color: var(--fg); font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1320px; margin: 0 auto; padding: 28px 32px 48px; }
h1 { font-size: 26px; line-height: 1.25; margin: 4px 0 16px; font-weight: 650; }
h1 code { font: 600 0.9em ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; overflow-wrap: break-word; }
h2 { font-size: 19px; margin: 36px 0 10px; padding-bottom: 4px; border-bottom: 2px solid var(--fg); }
.kicker { margin: 0; text-transform: uppercase; letter-spacing: .08em; font-size: 12px; color: var(--muted); }
.status { display: inline-block; vertical-align: middle; font-size: 13px; font-weight: 600; padding: 2px 10px; border-radius: 999px; border: 1px solid; }
.status.ok { color: #0b6b2f; background: #e5f3ea; border-color: #9fd1b0; }
.status.bad { color: #9b1020; background: #fbe9eb; border-color: #eaa6ae; }
.status.warn { color: #7a4d00; background: #fff3d6; border-color: #e9c76b; }
.status.neutral { color: #333; background: #f1f1f1; border-color: #ccc; }
dl.facts { display: grid; grid-template-columns: repeat(auto-fill, minmax(230px, 1fr)); gap: 10px 24px; margin: 0; padding: 14px 16px; background: var(--zebra); border: 1px solid var(--line); border-radius: 6px; }
.fact dt { font-size: 12px; text-transform: uppercase; letter-spacing: .05em; color: var(--muted); }
.fact dd { margin: 0; font-variant-numeric: tabular-nums; overflow-wrap: break-word; }
nav.toc { margin: 14px 0 0; font-size: 14px; }
nav.toc a { color: var(--accent); margin-right: 16px; text-decoration: none; }
.summary { font-size: 15.5px; max-width: 80ch; }
.hint { color: var(--muted); font-size: 13.5px; margin: 4px 0 10px; max-width: 90ch; }
.empty { color: var(--muted); font-style: italic; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 14px; font-variant-numeric: tabular-nums; }
th, td { padding: 6px 9px; border-bottom: 1px solid var(--line); vertical-align: top; text-align: left; }
thead th { border-bottom: 2px solid var(--fg); font-weight: 600; vertical-align: bottom; }
thead th.num { white-space: normal; }
tbody tr:nth-child(even) { background: var(--zebra); }
tbody th, tfoot th { font-weight: 600; overflow-wrap: break-word; }
tfoot th, tfoot td { border-top: 2px solid var(--fg); border-bottom: none; font-weight: 600; }
.num { text-align: right; white-space: nowrap; }
th.wk { white-space: normal; max-width: 12em; overflow-wrap: break-word; }
td.best { background: var(--best); font-weight: 700; color: #0b5a2a; }
td.warn { color: #9b1020; }
td.unmeasured { color: var(--muted); font-style: italic; text-align: center; }
.sd { display: block; font-size: 12px; color: var(--muted); }
.note, .unit, .who { display: block; font-size: 12px; font-weight: 400; color: var(--muted); white-space: normal; overflow-wrap: break-word; }
.note { overflow-wrap: anywhere; }
.who { text-align: right; }
figure { margin: 22px 0 30px; break-inside: avoid; page-break-inside: avoid; }
figure svg { display: block; max-width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: 13.5px; margin-top: 6px; max-width: 90ch; }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; border-top: 1px solid var(--line); padding-top: 8px; }
@media print {
  @page { size: A4; margin: 14mm 12mm; }
  body { font-size: 10.5pt; }
  main { max-width: none; padding: 0; }
  nav.toc { display: none; }
  h2 { break-after: avoid; page-break-after: avoid; }
  .scroll { overflow: visible; }
  table { font-size: 9pt; }
  thead { display: table-header-group; }
  tr { break-inside: avoid; page-break-inside: avoid; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
`;
