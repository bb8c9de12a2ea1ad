// The text form of a workflow: three lists, as a Conductor writes them.
//
//   model id = [0, 2, 1]
//   subtasks = ["Solve the problem.", "Solve it another way.", "Compare both and answer."]
//   access list = [[], [], "all"]
//
// `renderWorkflow` writes exactly this; `parseWorkflow` reads it back from a free-form
// completion, tolerantly (README: "The text form"), and validates it. The parser never throws
// on the completion: every fault comes back as `{ ok: false, error }` naming the list and step.

import { InputError } from '@fugu/core';
import { canonicalAccess, checkWorkflow, resolveMaxSteps, stepLabel, type Access, type ListName, type Step, type Workflow, type WorkflowError } from './workflow.ts';

export type ParseResult = { ok: true; workflow: Workflow } | { ok: false; error: WorkflowError };

export type ParseOptions = {
  /** K, the number of workers: ids are 0..K-1 */
  poolSize: number;
  /** default 5 (DEFAULT_MAX_STEPS) */
  maxSteps?: number;
};

/** Limits that keep the parser linear on any input (README). */
export const PARSE_LIMITS = {
  /** only the last this many characters (after think blocks are dropped) are read */
  completionChars: 1_000_000,
  /** a list not closed within this many characters of its `[` is incomplete */
  listChars: 200_000,
  /** only the last this many list labels are considered */
  labels: 64,
  /** brackets nested deeper than this are a fault */
  depth: 3,
} as const;

// ---- rendering -------------------------------------------------------------------------------

/** The three lists, one a line, exactly as the parser reads them back (same workflow). */
export function renderWorkflow(workflow: Workflow): string {
  const ids = workflow.steps.map((s) => String(s.worker)).join(', ');
  const subtasks = workflow.steps.map((s) => quoteString(s.subtask)).join(', ');
  const access = workflow.steps.map((s) => renderAccess(s.access)).join(', ');
  return `model id = [${ids}]\nsubtasks = [${subtasks}]\naccess list = [${access}]`;
}

function renderAccess(access: Access): string {
  const a = canonicalAccess(access);
  if (a === 'all') return '"all"';
  if (a === 'none') return '[]';
  return `[${a.join(', ')}]`;
}

/**
 * A double-quoted string the parser decodes to `s` exactly: backslash and double quote escaped,
 * control characters, U+2028/9 and lone surrogates as \uXXXX (\n, \t, \r where no letter
 * follows, so that they never read as LaTeX commands such as \neq or \times), and the `=`/`:`
 * of anything that reads as a list label and the `<` of a think tag as \uXXXX too.
 */
export function quoteString(s: string): string {
  // characters that would make the parser see structure inside the string: the "=" or ":" of
  // a list label ("model id = [") and the "<" of a think tag, written as \uXXXX
  const hide = new Set<number>();
  for (const m of s.matchAll(LABEL)) for (let k = m.index + m[0].length - 1; k >= m.index && (s[k] === '=' || s[k] === ':'); k--) hide.add(k);
  for (const m of s.matchAll(THINK_TAG)) hide.add(m.index);
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ch = s[i]!;
    if (hide.has(i)) out += uEscape(c);
    else if (ch === '\\') out += '\\\\';
    else if (ch === '"') out += '\\"';
    else if (c < 0x20 || c === 0x7f || c === 0x2028 || c === 0x2029) {
      const short = ch === '\n' ? '\\n' : ch === '\t' ? '\\t' : ch === '\r' ? '\\r' : undefined;
      out += short && !/[A-Za-z]/.test(s[i + 1] ?? '') ? short : uEscape(c);
    } else if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        out += ch + s[i + 1]!;
        i++;
      } else out += uEscape(c);
    } else if (c >= 0xdc00 && c <= 0xdfff) out += uEscape(c);
    else out += ch;
  }
  return `${out}"`;
}

function uEscape(c: number): string {
  return `\\u${c.toString(16).padStart(4, '0')}`;
}

// ---- parsing: the value tree -----------------------------------------------------------------

type Node = { t: 'str'; v: string } | { t: 'word'; v: string } | { t: 'list'; items: Node[] };

type ListRead = { ok: true; node: Extract<Node, { t: 'list' }>; end: number } | { ok: false; reason: string; item: number };

/** Opening quote -> the characters that close it. */
const QUOTES: Record<string, string> = {
  '"': '"',
  "'": "'",
  '`': '`',
  '\u201c': '\u201d\u201c', // “ -> ” (or “)
  '\u201d': '\u201d', // ” used both ways
  '\u2018': '\u2019\u2018', // ‘ -> ’ (or ‘)
  '\u2019': '\u2019',
  '\u201e': '\u201c\u201d', // „ -> “ or ”
  '\u00ab': '\u00bb', // « -> »
  '\u300c': '\u300d', // 「 -> 」
};

const SIMPLE_ESCAPES: Record<string, string> = { '\\': '\\', '"': '"', "'": "'", '/': '/', '`': '`', n: '\n', t: '\t', r: '\r' };

// LaTeX commands a model may write unescaped inside a quoted subtask: `\neq` stays `\neq`
// rather than becoming a newline and "eq" (\b and \f are never decoded, so \frac, \beta stay).
const LATEX_WORDS = new Set([
  'ne', 'neq', 'nabla', 'not', 'notin', 'nu', 'ni', 'newline', 'nolimits', 'nmid', 'neg', 'nleq', 'ngeq',
  'times', 'text', 'textbf', 'textit', 'textrm', 'texttt', 'theta', 'tau', 'tan', 'tanh', 'to', 'tfrac', 'triangle', 'top', 'tilde', 'therefore', 'tbinom',
  'right', 'rightarrow', 'rho', 'rangle', 'rm', 'rceil', 'rfloor', 'rbrace', 'rvert', 'rVert', 'rbrack',
]);

class Reader {
  readonly text: string;
  readonly limit: number;
  constructor(text: string, limit: number) {
    this.text = text;
    this.limit = limit;
  }

  /** Index of the next character after whitespace. */
  skipWs(i: number): number {
    while (i < this.limit && /\s/.test(this.text[i]!)) i++;
    return i;
  }

  /** A list opened at `i` (`[` or `(`). */
  list(i: number, depth: number): ListRead {
    const closer = this.text[i] === '(' ? ')' : ']';
    const items: Node[] = [];
    i++;
    for (;;) {
      i = this.skipWs(i);
      // bullets inside a list: "- ", "* ", "• "
      if ((this.text[i] === '-' || this.text[i] === '*' || this.text[i] === '\u2022') && /\s/.test(this.text[i + 1] ?? '')) {
        i = this.skipWs(i + 1);
      }
      if (i >= this.limit) return { ok: false, reason: 'the list is not closed', item: items.length };
      const c = this.text[i]!;
      if (c === closer) return { ok: true, node: { t: 'list', items }, end: i + 1 };
      if (c === ',') {
        i++;
        continue;
      }
      if (c === '[' || c === '(') {
        if (depth >= PARSE_LIMITS.depth) return { ok: false, reason: `brackets nested more than ${PARSE_LIMITS.depth} deep`, item: items.length };
        const inner = this.list(i, depth + 1);
        if (!inner.ok) return { ok: false, reason: inner.reason, item: items.length };
        items.push(inner.node);
        i = inner.end;
        continue;
      }
      if (QUOTES[c] !== undefined) {
        const s = this.string(i);
        if (!s) return { ok: false, reason: 'a quoted entry is not closed', item: items.length };
        items.push({ t: 'str', v: s.value });
        i = s.end;
        continue;
      }
      // bare text up to a comma, the closer, a newline or a bracket
      let j = i;
      while (j < this.limit && !',\n['.includes(this.text[j]!) && this.text[j] !== closer) j++;
      const word = this.text.slice(i, j).trim();
      if (depth === 1 && LABEL_ONLY.test(word)) return { ok: false, reason: `the list is not closed before the next list ("${word}")`, item: items.length };
      // numbers without commas between them ("[0 2 1]") are several entries
      if (/^\d+(?:\s+\d+)+$/.test(word)) for (const d of word.split(/\s+/)) items.push({ t: 'word', v: d });
      else if (word) items.push({ t: 'word', v: word });
      i = j > i ? j : i + 1;
    }
  }

  /** A quoted string opened at `i`; it closes at a closing quote followed by `,`, a bracket or the end (or by a line break and another quoted entry). */
  string(i: number): { value: string; end: number } | undefined {
    const closers = QUOTES[this.text[i]!]!;
    let out = '';
    let k = i + 1;
    while (k < this.limit) {
      const ch = this.text[k]!;
      if (ch === '\\' && k + 1 < this.limit) {
        const e = this.text[k + 1]!;
        if (e === 'u' && /^[0-9a-fA-F]{4}$/.test(this.text.slice(k + 2, k + 6))) {
          out += String.fromCharCode(parseInt(this.text.slice(k + 2, k + 6), 16));
          k += 6;
          continue;
        }
        if ((e === 'n' || e === 't' || e === 'r') && LATEX_WORDS.has(/^[A-Za-z]*/.exec(this.text.slice(k + 1, k + 20))![0])) {
          out += '\\';
          k += 1;
          continue;
        }
        const simple = SIMPLE_ESCAPES[e] ?? (QUOTES[e] !== undefined || closers.includes(e) ? e : undefined);
        if (simple !== undefined) {
          out += simple;
          k += 2;
          continue;
        }
        out += '\\';
        k += 1;
        continue;
      }
      if (closers.includes(ch)) {
        const next = this.skipWs(k + 1);
        if (next >= this.text.length || ',])}'.includes(this.text[next]!)) return { value: out, end: k + 1 };
        // entries one a line without commas: a closing quote, a line break, an opening quote
        if (QUOTES[this.text[next]!] !== undefined && this.text.slice(k + 1, next).includes('\n')) return { value: out, end: k + 1 };
      }
      out += ch;
      k++;
    }
    return undefined;
  }
}

// ---- parsing: finding the lists ----------------------------------------------------------------

// "model id", "model_id", "model ids", "Model IDs", "modelId"; "subtasks", "sub_tasks",
// "subtask"; "access list", "access_list", "access lists", "access"; then quotes, bold or
// backticks, then "=", ":" or ":=".
const LABEL_SOURCE = String.raw`(?<![\p{L}\p{N}])(model[ \t_-]*ids?|sub[ \t_-]*tasks?|access(?:[ \t_-]*lists?)?)(?![\p{L}\p{N}])[ \t*_\x60'"\u201c\u201d\u2018\u2019]*(?::=|=|:)`;
const LABEL = new RegExp(LABEL_SOURCE, 'giu');
const LABEL_ONLY = new RegExp(`^${LABEL_SOURCE}\\s*$`, 'iu');

const BULLET_LINE = /^[ \t]*(?:[-*+\u2022]|\d{1,2}[.)])[ \t]+(.*?)[ \t]*$/;

function listOf(label: string): ListName {
  const l = label[0]!.toLowerCase();
  return l === 'm' ? 'model id' : l === 's' ? 'subtasks' : 'access list';
}

type Found = {
  complete?: Node[];
  /** the last incomplete occurrence after the last complete one */
  broken?: { reason: string; item: number };
};

/** Drops <think>/<thinking>/<reasoning> blocks; text before a stray closing tag is thinking too. */
const THINK_TAG = /<(\/?)(?:think|thinking|reasoning)\s*>/giu;

export function dropThinking(text: string): { text: string; dropped: boolean; unclosed: boolean } {
  const tag = new RegExp(THINK_TAG.source, THINK_TAG.flags);
  let kept = '';
  let from = 0;
  let depth = 0;
  let dropped = false;
  for (let m = tag.exec(text); m; m = tag.exec(text)) {
    dropped = true;
    if (m[1] === '') {
      if (depth === 0) kept += text.slice(from, m.index);
      depth++;
    } else if (depth > 0) {
      depth--;
    } else {
      kept = ''; // a closing tag with no opening one: everything before it was thinking
    }
    from = m.index + m[0].length;
  }
  if (depth === 0) kept += text.slice(from);
  return { text: kept, dropped, unclosed: depth > 0 };
}

function findLists(text: string): Record<ListName, Found> {
  const found: Record<ListName, Found> = { 'model id': {}, subtasks: {}, 'access list': {} };
  const matches = [...text.matchAll(LABEL)].slice(-PARSE_LIMITS.labels);
  let cursor = 0;
  for (const m of matches) {
    if (m.index < cursor) continue;
    const list = listOf(m[1]!);
    const f = found[list];
    let p = m.index + m[0].length;
    let sawNewline = false;
    while (p < text.length && /[\s*`]/.test(text[p]!)) {
      if (text[p] === '\n') sawNewline = true;
      p++;
    }
    if (text[p] === '[' || text[p] === '(') {
      const reader = new Reader(text, Math.min(text.length, p + PARSE_LIMITS.listChars));
      const r = reader.list(p, 1);
      if (r.ok) {
        f.complete = r.node.items;
        delete f.broken;
        cursor = r.end;
      } else {
        f.broken = { reason: r.reason, item: r.item };
      }
    } else if (sawNewline) {
      const items = bulletItems(text, m.index + m[0].length);
      if (items) {
        f.complete = items.items;
        delete f.broken;
        cursor = items.end;
      }
    }
  }
  return found;
}

/** Entries written as bullet lines under the label ("- 0", "1. Solve it"), one entry a line. */
function bulletItems(text: string, from: number): { items: Node[]; end: number } | undefined {
  let p = text.indexOf('\n', from);
  if (p < 0) return undefined;
  if (!/^[\s*`]*$/.test(text.slice(from, p))) return undefined;
  const items: Node[] = [];
  let end = p;
  for (let n = 0; n < 64 && p < text.length; n++) {
    const q = text.indexOf('\n', p + 1);
    const lineEnd = q < 0 ? text.length : q;
    const line = text.slice(p + 1, lineEnd);
    if (line.trim() === '' && items.length === 0) {
      p = lineEnd;
      continue;
    }
    const b = BULLET_LINE.exec(line);
    if (!b) break;
    const body = b[1]!;
    const reader = new Reader(body, body.length);
    const first = body[0];
    if (first === '[' || first === '(') {
      const r = reader.list(0, 2);
      items.push(r.ok ? r.node : { t: 'word', v: body });
    } else if (first !== undefined && QUOTES[first] !== undefined) {
      const s = reader.string(0);
      items.push(s && s.end === body.length ? { t: 'str', v: s.value } : { t: 'word', v: body });
    } else {
      items.push({ t: 'word', v: body });
    }
    end = lineEnd;
    p = lineEnd;
  }
  return items.length > 0 ? { items, end } : undefined;
}

// ---- parsing: entries to steps ------------------------------------------------------------------

const quoteShow = (s: string): string => JSON.stringify(s.length > 40 ? `${s.slice(0, 40)}...` : s);

function describe(n: Node): string {
  return n.t === 'list' ? 'a list' : quoteShow(n.v);
}

function fail(list: ListName, message: string, step?: number): { ok: false; error: WorkflowError } {
  const where = step === undefined ? list : `${list}, ${stepLabel(step - 1)}`;
  return { ok: false, error: { list, ...(step !== undefined && { step }), message: `${where}: ${message}` } };
}

const ID_TEXT = /^(?:(?:agent|worker|model|id)\s*)?#?\s*(\d+)\.?$/i;

function workerOf(n: Node, poolSize: number): number | string {
  if (n.t === 'list') {
    if (n.items.length === 1 && n.items[0]!.t !== 'list') return workerOf(n.items[0]!, poolSize);
    return `expected a worker id, found ${describe(n)}`;
  }
  const m = ID_TEXT.exec(n.v.trim());
  if (!m) return `expected a worker id (an integer 0 to ${poolSize - 1}), found ${describe(n)}`;
  const digits = m[1]!.replace(/^0+(?=\d)/, '');
  if (digits.length > 6 || Number(digits) >= poolSize) return `worker ${digits.length > 12 ? `${digits.slice(0, 12)}...` : digits} is not in the pool (ids 0 to ${poolSize - 1})`;
  return Number(digits);
}

function subtaskOf(n: Node): string | { error: string } {
  if (n.t === 'list') {
    if (n.items.length === 1 && n.items[0]!.t !== 'list') return subtaskOf(n.items[0]!);
    return { error: `expected a quoted subtask, found ${describe(n)}` };
  }
  return n.t === 'word' ? n.v.trim() : n.v;
}

const ALL_WORDS = new Set(['all', '*', 'every', 'everything', 'all steps', 'all previous', 'all earlier']);
const NONE_WORDS = new Set(['none', 'null', 'nil', 'nothing', '', '[]', '()', 'no', 'n/a', '-']);

type AccessRead = { access: Access } | { error: string };

function accessOf(n: Node): AccessRead {
  if (n.t !== 'list') {
    const w = n.v.trim().toLowerCase();
    if (ALL_WORDS.has(w)) return { access: 'all' };
    if (NONE_WORDS.has(w)) return { access: 'none' };
    const nums = /^[[(]?\s*(\d+(?:\s*,\s*\d+)*)\s*[\])]?$/.exec(w);
    if (nums) return indices(nums[1]!.split(',').map((x) => x.trim()), n);
    return { error: `expected "all", [] (none) or a list of earlier step indices, found ${describe(n)}` };
  }
  if (n.items.length === 0) return { access: 'none' };
  if (n.items.length === 1 && n.items[0]!.t !== 'list') {
    const w = n.items[0]!.v.trim().toLowerCase();
    if (ALL_WORDS.has(w)) return { access: 'all' };
    if (NONE_WORDS.has(w)) return { access: 'none' };
  }
  const parts: string[] = [];
  for (const it of n.items) {
    if (it.t === 'list') return { error: 'expected step indices, found a nested list' };
    const w = it.v.trim().toLowerCase();
    if (ALL_WORDS.has(w) || NONE_WORDS.has(w)) return { error: `${quoteShow(it.v)} mixed with step indices` };
    parts.push(w);
  }
  return indices(parts, n);
}

function indices(parts: string[], n: Node): AccessRead {
  const out: number[] = [];
  for (const p of parts) {
    const m = /^(?:step\s*)?#?(\d+)$/i.exec(p);
    if (!m) return { error: `expected step indices (0-based integers), found ${quoteShow(p)} in ${describe(n)}` };
    const digits = m[1]!.replace(/^0+(?=\d)/, '');
    out.push(digits.length > 6 ? Number.MAX_SAFE_INTEGER : Number(digits));
  }
  return { access: canonicalAccess(out) };
}

/**
 * Reads a workflow from a completion and validates it (README: "The text form"). Never throws
 * on the completion; the options are checked first (an InputError naming `maxSteps` or
 * `poolSize`, as any bad setting).
 */
export function parseWorkflow(completion: string, opts: ParseOptions): ParseResult {
  const maxSteps = resolveMaxSteps(opts.maxSteps);
  checkPoolSize(opts.poolSize);
  try {
    return parseChecked(typeof completion === 'string' ? completion : String(completion), opts.poolSize, maxSteps);
  } catch (e) {
    // a bug of ours, never the input's fault: still no throw, and the message says so
    return fail('model id', `the parser failed (${e instanceof Error ? e.message : String(e)}); please report this completion`);
  }
}

function checkPoolSize(poolSize: number): void {
  if (!Number.isInteger(poolSize) || poolSize < 1) throw new InputError(`poolSize must be a positive integer, got ${String(poolSize)}`, { field: 'poolSize' });
}

function parseChecked(completion: string, poolSize: number, maxSteps: number): ParseResult {
  const thought = dropThinking(completion);
  const text = thought.text.length > PARSE_LIMITS.completionChars ? thought.text.slice(-PARSE_LIMITS.completionChars) : thought.text;
  const found = findLists(text);
  const lists: ListName[] = ['model id', 'subtasks', 'access list'];
  const entries = {} as Record<ListName, Node[]>;
  for (const list of lists) {
    const f = found[list];
    if (f.complete) {
      entries[list] = f.complete;
      continue;
    }
    if (f.broken) return fail(list, `${f.broken.reason} (while reading entry ${f.broken.item + 1})`, f.broken.item + 1);
    const hint = thought.unclosed ? ' (an unclosed <think> block hides the rest of the text)' : thought.dropped ? ' outside <think> blocks' : '';
    return fail(list, `no \`${list} = [...]\` list found${hint}`);
  }
  const n = entries['model id'].length;
  if (n === 0) return fail('model id', `the list is empty (a workflow has 1 to ${maxSteps} steps)`);
  if (n > maxSteps) return fail('model id', `${n} steps, more than the maximum of ${maxSteps}`, maxSteps + 1);
  for (const list of ['subtasks', 'access list'] as const) {
    const m = entries[list].length;
    if (m !== n) {
      const step = Math.min(m, n) + 1;
      const detail = m < n ? `step ${step} has no entry` : `entry ${step} has no step`;
      return fail(list, `${m} entries but model id has ${n} (${detail})`, step);
    }
  }
  const steps: Step[] = [];
  for (let i = 0; i < n; i++) {
    const worker = workerOf(entries['model id'][i]!, poolSize);
    if (typeof worker === 'string') return fail('model id', worker, i + 1);
    const subtask = subtaskOf(entries.subtasks[i]!);
    if (typeof subtask !== 'string') return fail('subtasks', subtask.error, i + 1);
    if (subtask.trim() === '') return fail('subtasks', 'the subtask is empty', i + 1);
    const access = accessOf(entries['access list'][i]!);
    if ('error' in access) return fail('access list', access.error, i + 1);
    steps.push({ worker, subtask, access: access.access });
  }
  const workflow: Workflow = { steps };
  const error = checkWorkflow(workflow, { poolSize, maxSteps });
  return error ? { ok: false, error } : { ok: true, workflow };
}
