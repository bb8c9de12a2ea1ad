// Test helper: a page's tables against the page's width, without a browser. It estimates each
// table's min-content width (the narrowest the browser can lay it out: every column as wide as its
// widest unbreakable run of text, plus padding) from the HTML and the stylesheet's rules, with the
// chart kit's text-width estimate, and the width the page gives its content in a window of a given
// width. A table wider than that is cut off on screen (its scroll container hides the rest) and on
// paper. Calibrated against Chromium at 1400 px: the estimate errs on the wide side.
import { textWidth } from '../svg.ts';

const FONT = 14; // table text, px
const SMALL = 12; // .note, .unit, .who, .sd
const BOLD = 1.1; // header cells are bold
const PAD = 18; // 9 px on each side
const SLACK = 1.16; // textWidth's sans-serif estimate against the fallback fonts of a bare Linux box

/** The width main's content gets in a window `viewport` px wide (main's max-width and side padding from the CSS). */
export function contentWidth(html: string, viewport = 1400): number {
  const m = /main \{[^}]*max-width: (\d+)px;[^}]*padding: \d+px (\d+)px/.exec(html);
  if (!m) throw new Error('no main rule in the stylesheet');
  return Math.min(viewport, Number(m[1])) - 2 * Number(m[2]);
}

const decode = (s: string) =>
  s.replace(/<[^>]+>/g, '').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, '&');

/** The widest run of text that cannot wrap: split at spaces and after hyphens, or nowhere. */
function widest(text: string, size: number, nowrap: boolean): number {
  const runs = nowrap ? [text.trim()] : text.split(/\s+|(?<=-)/);
  return Math.max(0, ...runs.map((r) => textWidth(r, size))) * SLACK;
}

/** Estimated min-content width of every table on the page, by table class. */
export function tableMinWidths(html: string): Array<{ table: string; width: number }> {
  const out: Array<{ table: string; width: number }> = [];
  for (const t of html.matchAll(/<table class="([^"]*)">([\s\S]*?)<\/table>/g)) {
    const cls = t[1]!;
    // min-width rules of this table's row headers ("table.x tbody th { min-width: 12em; }")
    const minRe = new RegExp(`table\\.${cls} (?:tbody th|th\\[scope=row\\])[^{]*\\{ min-width: ([\\d.]+)em`);
    const rowHeadMin = Number(minRe.exec(html)?.[1] ?? 0) * FONT;
    const cols: number[] = [];
    for (const sec of t[2]!.matchAll(/<(thead|tbody|tfoot)>([\s\S]*?)<\/\1>/g)) {
      const head = sec[1] === 'thead';
      for (const tr of sec[2]!.matchAll(/<tr[^>]*>([\s\S]*?)<\/tr>/g)) {
        let col = 0;
        for (const cell of tr[1]!.matchAll(/<(th|td)([^>]*)>([\s\S]*?)<\/\1>/g)) {
          const attrs = cell[2]!;
          const span = Number(/colspan="(\d+)"/.exec(attrs)?.[1] ?? 1);
          const c = /class="([^"]*)"/.exec(attrs)?.[1]?.split(' ') ?? [];
          let body = cell[3]!;
          let w = 0;
          // block spans wrap on their own lines in small type
          body = body.replace(/<span class="(?:note|unit|who|sd)">([\s\S]*?)<\/span>/g, (_, inner: string) => {
            w = Math.max(w, widest(decode(inner), SMALL, false));
            return ' ';
          });
          const nowrap = c.includes('num') && !(head && cell[1] === 'th');
          w = Math.max(w, widest(decode(body), FONT, nowrap) * (cell[1] === 'th' ? BOLD : 1));
          if (cell[1] === 'th' && /scope="row"/.test(attrs)) w = Math.max(w, rowHeadMin);
          if (span === 1) cols[col] = Math.max(cols[col] ?? 0, w + PAD);
          col += span;
        }
      }
    }
    out.push({ table: cls, width: Math.round(cols.reduce((a, b) => a + (b ?? 0), 0)) });
  }
  return out;
}
