// Issue 12, figure 3: the parser on 10,000 random and mutated completions. None throws; every
// failure names the list (and the step where there is one); every valid workflow round-trips
// (render, parse, same workflow), and whatever the parser accepts is valid and round-trips too.

import { rng, type Rng } from '@fugu/core';
import { describe, expect, it } from 'vitest';
import { parseWorkflow, renderWorkflow, type ParseResult } from './text.ts';
import { checkWorkflow, sameWorkflow, type Access, type ListName, type Workflow } from './workflow.ts';

const LISTS: ListName[] = ['model id', 'subtasks', 'access list'];
const pick = <T,>(r: Rng, xs: readonly T[]): T => xs[r.int(xs.length)]!;

// pieces of subtask text: plain words, quotes of every kind, escapes, LaTeX, unicode (emoji,
// CJK, RTL, combining marks, lone surrogates), text that looks like the lists or think tags
const PIECES = [
  'Solve', 'the problem', 'step by step', 'and', 'check', 'answer', 'with', 'a number', ',', '.', ' ', ' ', '\n', '\t',
  '"', "'", '\u201c', '\u201d', '\u2018', '\u2019', '`', '\\', '\\n', '\\"', '\\u0041', '\\frac{1}{2}', '\\neq', '\\times', '$x^2$',
  '[', ']', '(', ')', '{', '}', '[0, 1]', '"all"', '[]', ', ]', '", "', "', '",
  'model id = [1, 2]', 'subtasks = ["x"]', 'access list = [[]]', 'model_id:', '<think>', '</think>', '```', '- ', '* ',
  '\u00e9', 'na\u0308ive', '\u4f60\u597d', '\u05e9\u05dc\u05d5\u05dd', '\u{1f600}', '\u{1f469}\u200d\u{1f52c}', '\ud800', '\udc00', '\u2028', '\u0000', '\u00a0', '\ufeff',
];

function subtask(r: Rng): string {
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

const PROSE = ['Let me plan this.', 'First I consider the workers.', 'The question needs care.', 'Here is the workflow:', 'Final plan', 'Okay.'];

function junk(r: Rng, len: number, thinkTags = true): string {
  const alphabet = ['a', 'Z', '0', '7', ' ', '\n', '[', ']', '"', "'", ',', '=', ':', '\\', '<', '>', '\u201c', '\u{1f600}', '\ud83d', 'model id', 'subtasks', 'access list', 'all', 'none', '<think>', '</think>'];
  const letters = thinkTags ? alphabet : alphabet.filter((a) => !a.includes('think'));
  let s = '';
  while (s.length < len) s += pick(r, letters);
  return s;
}

/** One random mutation of a text (the workflow generators' outputs and each other's). */
function mutate(r: Rng, t: string): string {
  const at = r.int(t.length + 1);
  switch (r.int(12)) {
    case 0: // drop a bracket
    case 1: {
      const idx = [...t.matchAll(/[[\]]/g)].map((m) => m.index);
      if (!idx.length) return t;
      const i = pick(r, idx);
      return t.slice(0, i) + t.slice(i + 1);
    }
    case 2: { // duplicate a bracket
      const idx = [...t.matchAll(/[[\]]/g)].map((m) => m.index);
      if (!idx.length) return t;
      const i = pick(r, idx);
      return t.slice(0, i) + t[i] + t.slice(i);
    }
    case 3: { // swap quotes
      const q = pick(r, ["'", '\u201c', '\u201d', '`', '']);
      return r.next() < 0.5 ? t.replaceAll('"', q) : t.replace('"', q);
    }
    case 4: // truncate
      return t.slice(0, at);
    case 5: // insert junk
      return t.slice(0, at) + junk(r, 1 + r.int(30)) + t.slice(at);
    case 6: { // delete a span
      const len = r.int(20);
      return t.slice(0, at) + t.slice(at + len);
    }
    case 7: { // duplicate a span
      const len = r.int(40);
      return t.slice(0, at) + t.slice(at, at + len) + t.slice(at);
    }
    case 8: // digits: other ids, huge numbers, negatives
      return t.replace(/\d+/, pick(r, ['9', '12', '-1', '1.5', '99999999999999999999999', '0x1', '\u0663']));
    case 9: // unicode at a random place
      return t.slice(0, at) + pick(r, ['\u{1f600}', '\ud800', '\u0301', '\u202e', '\u0000', '\uffff', '\u2028']) + t.slice(at);
    case 10: // drop an entry between commas
      return t.replace(/, [^,\]]*(?=[,\]])/, '');
    default: // a label in another spelling, or lost
      return t.replace(pick(r, ['model id', 'subtasks', 'access list']), pick(r, ['model_id', 'Model IDs', 'sub tasks', 'access_list', 'acess list', '']));
  }
}

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

describe('parser fuzz (issue 12, figure 3)', () => {
  it('10,000 random and mutated completions: no throw, failures name list and step, valid workflows round-trip', () => {
    const r = rng('conductor-parser-fuzz', Number(process.env['FUZZ_SEED'] ?? 1));
    const counts = { cases: 0, roundTrips: 0, targeted: 0, mutated: 0, random: 0, huge: 0, accepted: 0, rejected: 0 };
    const problems: string[] = [];
    const record = (kind: string, text: string, res: ParseResult | { thrown: unknown }, k: number, maxSteps: number): ParseResult | undefined => {
      counts.cases++;
      if ('thrown' in res) {
        problems.push(`${kind}: threw ${String(res.thrown)} on ${JSON.stringify(text.slice(0, 200))}`);
        return undefined;
      }
      const c = checkResult(res, k, maxSteps);
      if (!c.ok) problems.push(`${kind}: ${c.problem} on ${JSON.stringify(text.slice(0, 200))}`);
      if (res.ok) counts.accepted++;
      else counts.rejected++;
      return res;
    };
    const expectFault = (kind: string, res: ParseResult | undefined, list: ListName, step: number | undefined, text: string): void => {
      if (!res) return;
      if (res.ok) problems.push(`${kind}: accepted ${JSON.stringify(text.slice(0, 200))}`);
      else if (res.error.list !== list || res.error.step !== step) {
        problems.push(`${kind}: expected ${list} step ${step}, got ${res.error.list} step ${res.error.step}: ${res.error.message}`);
      }
    };

    for (let c = 0; c < 10_000; c++) {
      const k = 1 + r.int(6);
      const maxSteps = r.next() < 0.8 ? 5 : 1 + r.int(10);
      const wf = validWorkflow(r, k, maxSteps);
      const text = renderWorkflow(wf);
      const kind = c % 10;
      if (kind <= 2) {
        // a valid workflow, maybe with reasoning before it, a think block holding another
        // workflow, an earlier draft it repeats, a code fence or bullets: it must come back the same
        let t = text;
        const other = renderWorkflow(validWorkflow(r, k, maxSteps));
        const wrap = r.int(6);
        if (wrap === 1) t = `${pick(r, PROSE)} ${pick(r, PROSE)}\n\n${t}`;
        if (wrap === 2) t = `<think>${pick(r, PROSE)}\n${other}\n</think>\n${t}`;
        if (wrap === 3) t = `${other}\nWait, a better plan:\n${t}\n${pick(r, ['', 'model id = [0', 'subtasks = ["unfinished'])}`;
        if (wrap === 4) t = `\`\`\`python\n${t}\n\`\`\``;
        if (wrap === 5) t = t.split('\n').map((l) => `${pick(r, ['- ', '* ', '• '])}${l}`).join('\n');
        const res = record('valid', t, safeParse(t, k, maxSteps), k, maxSteps);
        counts.roundTrips++;
        if (res && (!res.ok || !sameWorkflow(res.workflow, wf))) problems.push(`valid: did not round-trip (${res.ok ? 'other workflow' : res.error.message}) on ${JSON.stringify(t.slice(0, 300))}`);
      } else if (kind === 3) {
        // a targeted fault with a known list and step
        counts.targeted++;
        const n = wf.steps.length;
        const i = r.int(n);
        const fault = r.int(4);
        if (fault === 0) {
          const bad = { steps: wf.steps.map((s, j) => (j === i ? { ...s, worker: k + r.int(5) } : s)) };
          const t = renderWorkflow(bad);
          expectFault('out-of-range id', record('targeted', t, safeParse(t, k, maxSteps), k, maxSteps), 'model id', i + 1, t);
        } else if (fault === 1) {
          const bad = { steps: wf.steps.map((s, j) => (j === i ? { ...s, access: [i + r.int(3)] } : s)) };
          const t = renderWorkflow(bad);
          expectFault('forward access', record('targeted', t, safeParse(t, k, maxSteps), k, maxSteps), 'access list', i + 1, t);
        } else if (fault === 2 && n >= 1) {
          // one list one entry short (or one too many)
          const list = pick(r, ['subtasks', 'access list'] as const);
          const longer = { steps: [...wf.steps, { worker: 0, subtask: 'extra', access: 'none' as const }] };
          const lines = renderWorkflow(wf).split('\n');
          const moreLines = renderWorkflow(longer).split('\n');
          const li = list === 'subtasks' ? 1 : 2;
          const short = n > 1 && r.next() < 0.5;
          if (short) {
            lines[li] = renderWorkflow({ steps: wf.steps.slice(0, -1) }).split('\n')[li]!;
          } else lines[li] = moreLines[li]!;
          const t = lines.join('\n');
          expectFault('wrong length', record('targeted', t, safeParse(t, k, maxSteps), k, maxSteps), list, short ? n : n + 1, t);
        } else {
          const steps = Array.from({ length: maxSteps + 1 }, (_, j) => ({ worker: 0, subtask: `s${j}`, access: 'none' as const }));
          const t = renderWorkflow({ steps });
          expectFault('too many steps', record('targeted', t, safeParse(t, k, maxSteps), k, maxSteps), 'model id', maxSteps + 1, t);
        }
      } else if (kind <= 8) {
        counts.mutated++;
        let t = text;
        const times = 1 + r.int(4);
        for (let m = 0; m < times; m++) t = mutate(r, t);
        record('mutated', t, safeParse(t, k, maxSteps), k, maxSteps);
      } else if (c % 500 === 9) {
        // huge inputs: a megabyte of junk before a valid workflow; unclosed strings and lists by the thousand
        counts.huge++;
        const variant = Math.floor(c / 500) % 4;
        let t: string;
        if (variant === 0) t = `${junk(r, 1_200_000, false)}\n${text}`; // (an unclosed <think> in the junk would rightly hide the rest)
        else if (variant === 1) t = 'model id = ["'.repeat(40_000);
        else if (variant === 2) t = `model id = [${'0, '.repeat(200_000)}`;
        else t = `${'['.repeat(100_000)}${text}${']'.repeat(100_000)}`;
        const res = record('huge', t, safeParse(t, k, maxSteps), k, maxSteps);
        if (variant === 0 && res && (!res.ok || !sameWorkflow(res.workflow, wf))) problems.push('huge: a valid workflow after a megabyte of junk did not parse');
      } else {
        counts.random++;
        const t = junk(r, r.int(400));
        record('random', t, safeParse(t, k, maxSteps), k, maxSteps);
      }
    }
    if (process.env['FUZZ_SEED']) console.log(JSON.stringify(counts));
    expect(problems.slice(0, 10)).toEqual([]);
    expect(counts.cases).toBe(10_000);
    // the mix is what the test says it is
    expect(counts.roundTrips).toBe(3000);
    expect(counts.targeted).toBe(1000);
    expect(counts.huge).toBe(20);
    expect(counts.rejected).toBeGreaterThan(2000);
  });
});
