// Issue 12, figure 3: the parser on 10,000 random and mutated completions. None throws; every
// failure names the list (and the step where there is one). Every completion made from a
// workflow knows what the parser must make of it: a rewriting that keeps the workflow (other
// spacing, label spellings and casing, separators, brackets, quotes, entry forms, bullet lists,
// list order, JSON; behind prose, fences, think blocks, earlier drafts, line bullets; raw
// characters inside a quoted subtask) must parse to exactly that workflow, and a damage to the
// lists (an entry or a bracket dropped or doubled, a cut, a bad id or access, a lost label, an
// empty subtask, a targeted fault) must be rejected, naming the list and step where the damage
// fixes them, or, where the parser is lenient by design (a doubled closing bracket, an access
// list closed early), parse to the workflow the test states. Only pure junk gets the invariants
// alone (no throw, a failure names its list and step, whatever is accepted is valid and
// round-trips). The mix (per 10: 1 rendering, 3 rewritings, 1 targeted fault, 3 damages, 1 raw
// insertion, 1 junk or huge input) is the generator's; nothing counts it.

import { rng, type Rng } from '@fugu/core';
import { describe, expect, it } from 'vitest';
import { parseWorkflow, quoteString, renderWorkflow, type ParseResult } from './text.ts';
import { canonicalAccess, checkWorkflow, sameWorkflow, type Access, type ListName, type Workflow } from './workflow.ts';

const LISTS: ListName[] = ['model id', 'subtasks', 'access list'];
const pick = <T,>(r: Rng, xs: readonly T[]): T => xs[r.int(xs.length)]!;
const chance = (r: Rng, p: number): boolean => r.next() < p;

// pieces of subtask text: plain words, quotes of every kind, escapes, LaTeX, unicode (emoji,
// CJK, RTL, combining marks, lone surrogates), text that looks like the lists or think tags
const PIECES = [
  'Solve', 'the problem', 'step by step', 'and', 'check', 'answer', 'with', 'a number', ',', '.', ' ', ' ', '\n', '\t',
  '"', "'", '\u201c', '\u201d', '\u2018', '\u2019', '`', '\\', '\\n', '\\"', '\\u0041', '\\frac{1}{2}', '\\neq', '\\times', '$x^2$',
  '[', ']', '(', ')', '{', '}', '[0, 1]', '"all"', '[]', ', ]', '", "', "', '",
  'model id = [1, 2]', 'subtasks = ["x"]', 'access list = [[]]', 'model_id:', '<think>', '</think>', '```', '- ', '* ',
  '\u00e9', 'na\u0308ive', '\u4f60\u597d', '\u05e9\u05dc\u05d5\u05dd', '\u{1f600}', '\u{1f469}\u200d\u{1f52c}', '\ud800', '\udc00', '\u2028', '\u0000', '\u00a0', '\ufeff',
  '\u00ab', '\u00bb', '\u300c', '\u300d', '\u201e',
];
// plain subtasks, which may also be written unquoted (text up to a comma)
const PLAIN = ['Solve the problem', 'Check the answer above', 'Write a short plan', 'Compare both attempts and answer', 'Improve on the work shown'];

function subtask(r: Rng): string {
  if (chance(r, 0.15)) return pick(r, PLAIN);
  const n = 1 + r.int(12);
  let s = '';
  for (let i = 0; i < n; i++) s += pick(r, PIECES);
  return s.trim() === '' ? `${s}x` : s;
}

function access(r: Rng, i: number): Access {
  const u = r.next();
  if (u < 0.3) return 'all';
  if (u < 0.55 || i === 0) return 'none';
  const out = Array.from({ length: i }, (_, j) => j).filter(() => r.next() < 0.5);
  return out.length ? out : 'none';
}

function validWorkflow(r: Rng, k: number, maxSteps: number): Workflow {
  const n = 1 + r.int(maxSteps);
  return { steps: Array.from({ length: n }, (_, i) => ({ worker: r.int(k), subtask: subtask(r), access: access(r, i) })) };
}

// prose with no list label, bracket, quote or think tag in it (so it cannot change what is read)
const PROSE = ['Let me plan this.', 'First I consider the workers.', 'The question needs care.', 'Here is the workflow:', 'Final plan', 'Okay.', 'Caf\u00e9 \u4f60\u597d \u{1f600} done!'];
const SAFE_JUNK = ['a', 'Z', '0', '7', ' ', '\n', ',', '.', ';', '!', '?', '\u00e9', '\u4f60', '\u{1f600}', '\u0301', '\u202e', 'the', 'so'];

function prose(r: Rng): string {
  if (chance(r, 0.3)) {
    let s = 'Note ';
    const n = 1 + r.int(40);
    for (let i = 0; i < n; i++) s += pick(r, SAFE_JUNK);
    return s;
  }
  return Array.from({ length: 1 + r.int(3) }, () => pick(r, PROSE)).join(' ');
}

/** Random text of labels, brackets, quotes and think tags; `opensLists: false` leaves out the brackets, quotes and think tags. */
function junk(r: Rng, len: number, opensLists = true): string {
  const alphabet = ['a', 'Z', '0', '7', ' ', '\n', '[', ']', '"', "'", ',', '=', ':', '\\', '<', '>', '\u201c', '\u{1f600}', '\ud83d', 'model id', 'subtasks', 'access list', 'all', 'none', '<think>', '</think>'];
  const letters = opensLists ? alphabet : alphabet.filter((a) => !/think|[[\]"'\u201c]/.test(a));
  let s = '';
  while (s.length < len) s += pick(r, letters);
  return s;
}

// ---- writing a workflow in another form that keeps it ------------------------------------------

/** Opening quote -> the characters that close it (text.ts's QUOTES): each must be escaped inside. */
const QUOTE_STYLES: Array<[open: string, close: string, closers: string]> = [
  ['"', '"', '"'], ["'", "'", "'"], ['`', '`', '`'], ['\u201c', '\u201d', '\u201d\u201c'], ['\u2018', '\u2019', '\u2019\u2018'],
  ['\u201e', '\u201c', '\u201c\u201d'], ['\u00ab', '\u00bb', '\u00bb'], ['\u300c', '\u300d', '\u300d'],
];

/** A subtask quoted another way that decodes to the same text: quoteString's escapes kept, the new closers escaped. */
function quoteAs(s: string, style: [string, string, string]): string {
  // quoteString's body has no raw `"` (it writes `\"`, which every style decodes as `"`), and its
  // escapes contain no other quote character: escaping each raw closer of the style is enough
  const body = quoteString(s).slice(1, -1);
  let out = '';
  for (const ch of body) out += ch !== '"' && style[2].includes(ch) ? `\\${ch}` : ch;
  return `${style[0]}${out}${style[1]}`;
}

const LABELS: Record<ListName, string[]> = {
  'model id': ['model id', 'model_id', 'model ids', 'Model IDs', 'modelId', 'model-id', 'model  id'],
  subtasks: ['subtasks', 'sub_tasks', 'subtask', 'Sub tasks', 'sub-tasks'],
  'access list': ['access list', 'access_list', 'access lists', 'access', 'Access-List'],
};

function recase(r: Rng, s: string): string {
  const u = r.next();
  if (u < 0.5) return s;
  if (u < 0.65) return s.toUpperCase();
  return [...s].map((c) => (chance(r, 0.5) ? c.toUpperCase() : c.toLowerCase())).join('');
}

type Lists = Record<ListName, string[]>;

/** The entries as renderWorkflow writes them. */
function canonicalEntries(wf: Workflow): Lists {
  return {
    'model id': wf.steps.map((s) => String(s.worker)),
    subtasks: wf.steps.map((s) => quoteString(s.subtask)),
    'access list': wf.steps.map((s) => {
      const a = canonicalAccess(s.access);
      return a === 'all' ? '"all"' : a === 'none' ? '[]' : `[${a.join(', ')}]`;
    }),
  };
}

type ListForm = { label: string; sep: string; open: string; close: string; entries: string[]; joins: string[]; bullets?: string };

/** Three lists, in an order, joined: the list forms are laid out as given. */
function layout(forms: Array<[ListName, ListForm]>, between: string[]): string {
  return forms.map(([, f], li) => {
    let body: string;
    if (f.bullets !== undefined) {
      body = f.entries.map((e, i) => `\n${f.bullets === '1.' ? `${i + 1}.` : f.bullets} ${e}`).join('');
    } else {
      body = f.open + f.entries.map((e, i) => e + (i < f.entries.length - 1 ? f.joins[i]! : '')).join('') + f.close;
    }
    return `${f.label}${f.sep}${body}${li < forms.length - 1 ? between[li]! : ''}`;
  }).join('');
}

/** The canonical forms: what renderWorkflow writes (checked against it). */
function canonicalForms(lists: Lists): Array<[ListName, ListForm]> {
  return LISTS.map((l) => [l, { label: l, sep: ' = ', open: '[', close: ']', entries: [...lists[l]], joins: lists[l].map(() => ', ') }]);
}

const CANON_BETWEEN = ['\n', '\n'];

/**
 * Another writing of the same workflow, each choice drawn. `oneLine`: every list on one line
 * and in brackets, so a bullet may go in front of each line (a `- ` in front of a line inside a
 * list, or between a label and its list, would be an entry of a bullet list).
 */
function rewrite(r: Rng, wf: Workflow): { text: string; oneLine: boolean } {
  const n = wf.steps.length;
  const order = chance(r, 0.25) ? [...LISTS].sort(() => r.next() - 0.5) : [...LISTS];
  const json = chance(r, 0.1);
  let bulletItems = false;
  const forms: Array<[ListName, ListForm]> = order.map((list) => {
    const label0 = recase(r, pick(r, LABELS[list]));
    const deco = json ? '"' : pick(r, ['', '', '', '**', '`', '__', '"']);
    const label = deco === '**' && chance(r, 0.5) ? `**${label0}:**` : `${deco}${label0}${deco}`;
    const hasColon = label.endsWith(':**');
    const sepMark = hasColon ? '' : json ? ':' : pick(r, ['=', '=', ':', ':=']);
    // (not `*`: after a label, `*` is read as bold, and a list written `* [0, 2]` would be read as the list)
    const bullets = !json && chance(r, 0.08) ? pick(r, ['-', '+', '\u2022', '1.']) : undefined;
    if (bullets) bulletItems = true;
    const sep = `${pick(r, ['', ' ', '\t'])}${sepMark}${bullets ? '' : pick(r, ['', ' ', ' ', '  ', '\n', '\n  '])}`;
    const paren = !json && !bullets && chance(r, 0.15);
    let entries: string[];
    let joinable = 'comma' as 'comma' | 'space' | 'newline';
    if (list === 'model id') {
      const plainIds = chance(r, 0.6);
      entries = wf.steps.map((s) => (plainIds ? String(s.worker) : pick(r, [String(s.worker), `"${s.worker}"`, `'${s.worker}'`, `worker ${s.worker}`, `agent ${s.worker}`, `#${s.worker}`, `id ${s.worker}`, `${s.worker}.`, `0${s.worker}`, `[${s.worker}]`])));
      if (plainIds && !bullets && chance(r, 0.3)) joinable = chance(r, 0.5) ? 'space' : 'newline';
    } else if (list === 'subtasks') {
      entries = wf.steps.map((s) => {
        if (PLAIN.includes(s.subtask) && !bullets && chance(r, 0.5)) return s.subtask; // unquoted: text up to a comma
        return chance(r, 0.5) ? quoteString(s.subtask) : quoteAs(s.subtask, pick(r, QUOTE_STYLES));
      });
      if (!bullets && entries.every((e, i) => e !== wf.steps[i]!.subtask) && chance(r, 0.2)) joinable = 'newline';
    } else {
      entries = wf.steps.map((s) => {
        const a = canonicalAccess(s.access);
        if (a === 'all') return pick(r, ['"all"', 'all', "'all'", '["all"]', '"ALL"', 'every', '"*"', 'all steps', '(all)']);
        if (a === 'none') return pick(r, ['[]', '()', 'none', '"none"', 'null', '[ ]', '"[]"', 'nothing', '[none]', 'n/a']);
        const shown = chance(r, 0.3) ? [...a].reverse() : [...a];
        if (chance(r, 0.1)) shown.push(shown[0]!); // a duplicate index: dropped
        const v = r.int(8);
        if (v === 0) return `(${shown.join(', ')})`;
        if (v === 1) return `[${shown.join(' ')}]`;
        if (v === 2) return `[${shown.map((j) => `"${j}"`).join(', ')}]`;
        if (v === 3) return `"${shown.join(', ')}"`;
        if (v === 4) return `[${shown.map((j) => `step ${j}`).join(', ')}]`;
        if (v === 5) return `[${shown.map((j) => `#${j}`).join(',')}]`;
        if (v === 6 && a.length === 1) return String(a[0]); // a bare index
        return `[${shown.join(', ')}]`;
      });
      if (!bullets && entries.every((e) => e.startsWith('[') || e.startsWith('(')) && chance(r, 0.3)) joinable = 'space';
    }
    const join = (): string => {
      if (joinable === 'space') return pick(r, [' ', '  ', '\n']);
      if (joinable === 'newline') return pick(r, ['\n', '\n  ']);
      return pick(r, [', ', ', ', ',', ' , ', ',\n', ',\n    ', ',, ', ', \t']);
    };
    const open = paren ? '(' : '[';
    const close = paren ? ')' : ']';
    return [list, {
      label, sep, bullets,
      open: open + pick(r, ['', '', ' ', '\n  ', chance(r, 0.1) ? ', ' : '']),
      close: pick(r, ['', '', ' ', '\n', chance(r, 0.1) ? ', ' : '']) + close,
      entries, joins: Array.from({ length: n - 1 }, join),
    }];
  });
  const between = [0, 1].map(() => (bulletItems ? pick(r, ['\n\n', '\n\n\n']) : pick(r, ['\n', '\n', '\n\n', ' ', '; ', ' | ', '\n\n---\n'])));
  let t = layout(forms, between);
  if (json) t = `{${pick(r, ['', '\n  '])}${layout(forms, forms.map(() => pick(r, [', ', ',\n  '])))}${pick(r, ['', '\n'])}}`;
  const oneLine = !bulletItems && forms.every(([, f]) => ![f.sep, f.open, f.close, ...f.joins].some((x) => x.includes('\n')));
  return { text: t, oneLine };
}

/** Prose, fences, think blocks, drafts and bullets around a text of the workflow (none changes it). */
function wrap(r: Rng, t: string, other: string, oneLine: boolean): string {
  let out = t;
  const w = r.int(9);
  if (w === 1) out = `${prose(r)}\n\n${out}`;
  if (w === 2) out = `${out}\n\n${prose(r)}`;
  if (w === 3) out = `${prose(r)}\n${pick(r, ['```', '```json', '```python', '```text'])}\n${out}\n\`\`\`\n${chance(r, 0.5) ? `\n${prose(r)}` : ''}`;
  if (w === 4) out = `<${pick(r, ['think', 'thinking', 'reasoning'])}>${prose(r)}\n${other}\n</${pick(r, ['think', 'thinking', 'reasoning'])}>\n${out}`;
  if (w === 5 && oneLine) out = out.split('\n').map((l) => `${pick(r, ['- ', '* ', '\u2022 '])}${l}`).join('\n');
  if (w === 6) out = `${other}\nWait, a better plan:\n${out}`;
  if (w === 7) out = `${other}\n\n${prose(r)}\n\n${out}\n\n${pick(r, ['model id = [0', 'subtasks = ["unfinished', 'access list = [[], '])}`;
  if (w === 8) out = `${prose(r)}\n${other}\n</think>\n${out}`; // a chat template opened the block: all before the stray </think> is thinking
  return out;
}

// ---- damage to the lists, each with what the parser must make of it -----------------------------

type Expect = { workflow: Workflow } | { reject: true; list?: ListName; step?: number };

/** One damage to the canonical lists (maybe behind prose or a fence), and what it must parse to. */
function damage(r: Rng, wf: Workflow, k: number, maxSteps: number): { text: string; expect: Expect; what: string } {
  const n = wf.steps.length;
  const lists = canonicalEntries(wf);
  const forms = canonicalForms(lists);
  const get = (l: ListName): ListForm => forms.find(([name]) => name === l)![1];
  const reject = (list?: ListName, step?: number): Expect => ({ reject: true, ...(list && { list }), ...(step !== undefined && { step }) });
  const fix = (f: ListForm): void => void (f.joins = f.entries.slice(1).map(() => ', '));
  const i = r.int(n);
  // the access entries written in brackets (`[]`, `[0, 2]`), for the inner-bracket damages
  const bracketed = lists['access list'].flatMap((e, j) => (e.startsWith('[') ? [j] : []));
  let expect: Expect;
  let what: string;
  let which = r.int(14);
  if (which >= 6 && which <= 8 && bracketed.length === 0) which = 13;
  // a text whose last list (access) may not close must not be followed by a bracket: prose only
  switch (which) {
    case 0: { // an entry dropped from one list
      const l = pick(r, LISTS);
      get(l).entries.splice(i, 1);
      fix(get(l));
      what = `${l} entry ${i} dropped`;
      expect = l === 'model id' && n === 1 ? reject('model id') : reject(l === 'model id' ? 'subtasks' : l, n);
      break;
    }
    case 1: { // an entry doubled in one list
      const l = pick(r, LISTS);
      get(l).entries.splice(i, 0, get(l).entries[i]!);
      fix(get(l));
      what = `${l} entry ${i} doubled`;
      expect = l === 'model id' ? (n + 1 > maxSteps ? reject('model id', maxSteps + 1) : reject('subtasks', n + 1)) : reject(l, n + 1);
      break;
    }
    case 2: { // a list's opening bracket dropped: that list is not read
      const l = pick(r, LISTS);
      get(l).open = '';
      what = `${l} without its [`;
      expect = reject(l);
      break;
    }
    case 3: { // a list's closing bracket dropped: it runs into the next label, or to the end
      const l = pick(r, LISTS);
      get(l).close = '';
      what = `${l} without its ]`;
      // (a subtasks list without its ] may end inside the access list, at a quoted "all": then
      // the access list is the one missing, so the list named depends on the entries)
      expect = reject(l === 'subtasks' ? undefined : l);
      break;
    }
    case 4: { // a list's opening bracket doubled: a list of one list, never closed
      const l = pick(r, LISTS);
      get(l).open = '[[';
      what = `${l} with [[`;
      expect = reject(l);
      break;
    }
    case 5: { // a list's closing bracket doubled: the extra ] is text after the list (lenient by design)
      const l = pick(r, LISTS);
      get(l).close = ']]';
      what = `${l} with ]]`;
      expect = { workflow: wf };
      break;
    }
    case 6: { // an access entry's inner [ dropped: the list closes at its ], its indices become entries
      const a = get('access list');
      const at = pick(r, bracketed);
      const inner = a.entries[at]!;
      const items = inner === '[]' ? [] : inner.slice(1, -1).split(', ').map(Number);
      a.entries[at] = inner.slice(1);
      what = `access entry ${at} without its [`;
      // read: entries 0..at-1, then each index of the entry as a bare index (one index each), then the list ends
      if (at + items.length === n) {
        expect = { workflow: { steps: wf.steps.map((s, j) => (j < at ? s : { ...s, access: [items[j - at]!] })) } };
      } else expect = reject('access list', Math.min(at + items.length, n) + 1);
      break;
    }
    case 7: { // an access entry's inner ] dropped: the list is never closed
      const a = get('access list');
      const at = pick(r, bracketed);
      a.entries[at] = a.entries[at]!.slice(0, -1);
      what = `access entry ${at} without its ]`;
      expect = reject('access list');
      break;
    }
    case 8: { // an access entry's inner ] doubled: the list closes there; fine only after the last entry
      const a = get('access list');
      const at = pick(r, bracketed);
      a.entries[at] = `${a.entries[at]!}]`;
      what = `access entry ${at} with ]]`;
      expect = at === n - 1 ? { workflow: wf } : reject('access list', at + 2);
      break;
    }
    case 9: { // an id that is not one: out of range, negative, fractional, hex, huge, another script's digit, a list of a list
      const bad = pick(r, [String(k + r.int(5)), '-1', '1.5', '0x1', '99999999999999999999999', '\u0663', 'two', '[[0]]', '""']);
      get('model id').entries[i] = bad;
      what = `id ${i} is ${bad}`;
      expect = reject('model id', i + 1);
      break;
    }
    case 10: { // an access that is not one: an index not earlier, a word, a nested list, all mixed with indices
      const bad = pick(r, [`[${i + r.int(3)}]`, '"some"', '[[0]]', '["all", 0]', '[-1]', '"first"']);
      get('access list').entries[i] = bad;
      what = `access ${i} is ${bad}`;
      expect = reject('access list', i + 1);
      break;
    }
    case 11: { // a subtask emptied
      get('subtasks').entries[i] = pick(r, ['""', '"   "', "''", '"\\n"']);
      what = `subtask ${i} empty`;
      expect = reject('subtasks', i + 1);
      break;
    }
    case 12: { // a label misspelt or lost
      const l = pick(r, LISTS);
      get(l).label = pick(r, { 'model id': ['modl id', 'mode id', '', 'models'], subtasks: ['subtsks', 'sbtasks', '', 'tasks'], 'access list': ['acess list', 'acces', '', 'list'] }[l]);
      what = `${l} label is ${JSON.stringify(get(l).label)}`;
      expect = reject(l);
      break;
    }
    default: { // cut anywhere before the end of the last list
      const full = layout(forms, CANON_BETWEEN);
      const at = r.int(full.length);
      return { text: full.slice(0, at), expect: reject(), what: `cut at ${at} of ${full.length}` };
    }
  }
  let text = layout(forms, CANON_BETWEEN);
  const w = r.int(4);
  if (w === 1) text = `${prose(r)}\n\n${text}`;
  if (w === 2) text = `${text}\n\n${prose(r)}`;
  if (w === 3) text = `<think>${prose(r)}\n${renderWorkflow(validWorkflow(r, k, maxSteps))}\n</think>\n${text}`;
  return { text, expect, what };
}

/** Raw characters inserted into a subtask's quoted text (no escaping): the subtask is the one with them. */
function rawInsert(r: Rng, wf: Workflow): { text: string; workflow: Workflow } {
  const i = r.int(wf.steps.length);
  const s = wf.steps[i]!.subtask;
  // a cut between two code points (never inside a surrogate pair)
  const cuts = [0];
  for (let k = 0; k < s.length; k++) {
    const c = s.charCodeAt(k);
    if (!(c >= 0xd800 && c <= 0xdbff && k + 1 < s.length && s.charCodeAt(k + 1) >= 0xdc00 && s.charCodeAt(k + 1) <= 0xdfff)) cuts.push(k + 1);
  }
  const at = pick(r, cuts);
  const ch = pick(r, ['\u{1f600}', '\u0301', '\u202e', '\uffff', '\u4f60', '\u0000', '\ud800', '\udc00', '\u00e9']);
  const lists = canonicalEntries(wf);
  lists.subtasks[i] = `${quoteString(s.slice(0, at)).slice(0, -1)}${ch}${quoteString(s.slice(at)).slice(1)}`;
  const steps = wf.steps.map((st, j) => (j === i ? { ...st, subtask: s.slice(0, at) + ch + s.slice(at) } : st));
  return { text: layout(canonicalForms(lists), CANON_BETWEEN), workflow: { steps } };
}

// ---- the checks ----------------------------------------------------------------------------------

type Check = { ok: boolean; problem?: string };

/** The invariants of any parse: a failure names a list (and a step, 1-based, in the message); a success is valid and round-trips. */
function checkResult(res: ParseResult, k: number, maxSteps: number): Check {
  if (res.ok) {
    const err = checkWorkflow(res.workflow, { poolSize: k, maxSteps });
    if (err) return { ok: false, problem: `accepted an invalid workflow: ${err.message}` };
    const again = parseWorkflow(renderWorkflow(res.workflow), { poolSize: k, maxSteps });
    if (!again.ok || !sameWorkflow(again.workflow, res.workflow)) return { ok: false, problem: 'an accepted workflow does not round-trip' };
    return { ok: true };
  }
  const e = res.error;
  if (!LISTS.includes(e.list)) return { ok: false, problem: `unknown list ${String(e.list)}` };
  if (!e.message.startsWith(e.list)) return { ok: false, problem: `message does not start with the list: ${e.message}` };
  if (e.message.includes('the parser failed')) return { ok: false, problem: `internal failure: ${e.message}` };
  if (e.step !== undefined) {
    if (!Number.isInteger(e.step) || e.step < 1) return { ok: false, problem: `bad step ${e.step}` };
    if (!e.message.startsWith(`${e.list}, step ${e.step} (1-based`)) return { ok: false, problem: `message does not name step ${e.step}: ${e.message}` };
  }
  return { ok: true };
}

function safeParse(text: string, k: number, maxSteps: number): ParseResult | { thrown: unknown } {
  try {
    return parseWorkflow(text, { poolSize: k, maxSteps });
  } catch (e) {
    return { thrown: e };
  }
}

const show = (t: string): string => JSON.stringify(t.length > 300 ? `${t.slice(0, 300)}...` : t);

describe('parser fuzz (issue 12, figure 3)', () => {
  it('the canonical layout of the test is renderWorkflow', () => {
    const r = rng('conductor-parser-fuzz-layout', 1);
    for (let c = 0; c < 200; c++) {
      const wf = validWorkflow(r, 1 + r.int(6), 5);
      expect(layout(canonicalForms(canonicalEntries(wf)), CANON_BETWEEN)).toBe(renderWorkflow(wf));
    }
  });

  it('10,000 random and mutated completions: no throw, failures name list and step, each parses to the workflow it keeps or is rejected', () => {
    const r = rng('conductor-parser-fuzz', Number(process.env['FUZZ_SEED'] ?? 1));
    const counts = { accepted: 0, rejected: 0 };
    const problems: string[] = [];
    /** Parses and checks the invariants, then what this text must parse to (`expect`; undefined: junk, invariants only). */
    const check = (kind: string, text: string, k: number, maxSteps: number, expected?: Expect): void => {
      const res = safeParse(text, k, maxSteps);
      if ('thrown' in res) {
        problems.push(`${kind}: threw ${String(res.thrown)} on ${show(text)}`);
        return;
      }
      const c = checkResult(res, k, maxSteps);
      if (!c.ok) problems.push(`${kind}: ${c.problem} on ${show(text)}`);
      if (res.ok) counts.accepted++;
      else counts.rejected++;
      if (!expected) return;
      if ('workflow' in expected) {
        if (!res.ok) problems.push(`${kind}: rejected (${res.error.message}) a text of the workflow ${JSON.stringify(expected.workflow)}: ${show(text)}`);
        else if (!sameWorkflow(res.workflow, expected.workflow)) problems.push(`${kind}: read ${JSON.stringify(res.workflow)}, expected ${JSON.stringify(expected.workflow)}: ${show(text)}`);
      } else if (res.ok) {
        problems.push(`${kind}: accepted ${JSON.stringify(res.workflow)}: ${show(text)}`);
      } else if ((expected.list && res.error.list !== expected.list) || (expected.step !== undefined && res.error.step !== expected.step)) {
        problems.push(`${kind}: expected a fault in ${expected.list ?? 'any list'} step ${expected.step ?? 'any'}, got ${res.error.list} step ${res.error.step}: ${res.error.message} on ${show(text)}`);
      }
    };

    for (let c = 0; c < 10_000; c++) {
      const k = 1 + r.int(6);
      const maxSteps = r.next() < 0.8 ? 5 : 1 + r.int(10);
      const wf = validWorkflow(r, k, maxSteps);
      const text = renderWorkflow(wf);
      const kind = c % 10;
      if (kind <= 3) {
        // the same workflow written another way (1-3 rewritings), maybe behind prose, a fence, a
        // think block holding another workflow, an earlier draft, bullets: it must come back the same
        const other = renderWorkflow(validWorkflow(r, k, maxSteps));
        const plain = kind === 0;
        const { text: t, oneLine } = plain ? { text, oneLine: true } : rewrite(r, wf);
        check(plain ? 'rendering' : 'rewriting', wrap(r, t, other, oneLine), k, maxSteps, { workflow: wf });
      } else if (kind === 4) {
        // a targeted fault with a known list and step
        const n = wf.steps.length;
        const i = r.int(n);
        const fault = r.int(4);
        if (fault === 0) {
          const t = renderWorkflow({ steps: wf.steps.map((s, j) => (j === i ? { ...s, worker: k + r.int(5) } : s)) });
          check('out-of-range id', t, k, maxSteps, { reject: true, list: 'model id', step: i + 1 });
        } else if (fault === 1) {
          const t = renderWorkflow({ steps: wf.steps.map((s, j) => (j === i ? { ...s, access: [i + r.int(3)] } : s)) });
          check('forward access', t, k, maxSteps, { reject: true, list: 'access list', step: i + 1 });
        } else if (fault === 2) {
          // one list one entry short (or one too many)
          const list = pick(r, ['subtasks', 'access list'] as const);
          const longer = { steps: [...wf.steps, { worker: 0, subtask: 'extra', access: 'none' as const }] };
          const lines = renderWorkflow(wf).split('\n');
          const li = list === 'subtasks' ? 1 : 2;
          const short = n > 1 && r.next() < 0.5;
          lines[li] = short ? renderWorkflow({ steps: wf.steps.slice(0, -1) }).split('\n')[li]! : renderWorkflow(longer).split('\n')[li]!;
          check('wrong length', lines.join('\n'), k, maxSteps, { reject: true, list, step: short ? n : n + 1 });
        } else {
          const steps = Array.from({ length: maxSteps + 1 }, (_, j) => ({ worker: 0, subtask: `s${j}`, access: 'none' as const }));
          check('too many steps', renderWorkflow({ steps }), k, maxSteps, { reject: true, list: 'model id', step: maxSteps + 1 });
        }
      } else if (kind <= 7) {
        // a damage to the lists: rejected, or (lenient by design) the workflow the damage states
        const d = damage(r, wf, k, maxSteps);
        check(`damage (${d.what})`, d.text, k, maxSteps, d.expect);
      } else if (kind === 8) {
        // raw characters inside a quoted subtask: that subtask with them, the rest the same
        const m = rawInsert(r, wf);
        check('raw characters in a subtask', m.text, k, maxSteps, { workflow: m.workflow });
      } else if (c % 500 === 9) {
        // huge inputs: a megabyte of junk before a valid workflow; unclosed strings and lists by the thousand
        const variant = Math.floor(c / 500) % 4;
        // (junk that opens no list: an unclosed quote or list in it would rightly run on into the
        // workflow, and an unclosed <think> would rightly hide it)
        if (variant === 0) check('huge junk before', `${junk(r, 1_200_000, false)}\n${text}`, k, maxSteps, { workflow: wf });
        else if (variant === 1) check('huge unclosed strings', 'model id = ["'.repeat(40_000), k, maxSteps, { reject: true, list: 'model id' });
        else if (variant === 2) check('huge unclosed list', `model id = [${'0, '.repeat(200_000)}`, k, maxSteps, { reject: true, list: 'model id' });
        else check('huge brackets around', `${'['.repeat(100_000)}${text}${']'.repeat(100_000)}`, k, maxSteps, { workflow: wf });
      } else {
        // pure junk: no workflow to keep, the invariants only
        check('random', junk(r, r.int(400)), k, maxSteps);
      }
    }
    if (process.env['FUZZ_SEED']) console.log(JSON.stringify(counts));
    expect(problems.slice(0, 10)).toEqual([]);
  });
});
