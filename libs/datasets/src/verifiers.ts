// Verifiers: score a worker's answer to an item in [0, 1].
//
//   exact-match      SQuAD-normalised equality (case, punctuation, articles, whitespace)
//   numeric          the final number (\boxed{}, "#### 42", "the answer is 42", else the last
//                    number), with commas, $, %, fractions; relative tolerance 1e-6; a
//                    non-numeric final answer (MATH's "\frac{\sqrt3}{2}") is compared as
//                    normalised LaTeX
//   multiple-choice  the chosen label ("(B)", "Answer: B", "the answer is b", or the option text)
//   f1               SQuAD token F1
//   recorded         the replay provider's recorded score (providerMetadata.replay.score)
//
// Models answer verbosely, so exact-match and f1 also try the "final answer" parts of the text
// (after "answer is"/"answer:", inside \boxed{}, the last line) and keep the best.

import { InputError, type DatasetItem } from '@fugu/core';

export const VERIFIERS = ['exact-match', 'numeric', 'multiple-choice', 'f1', 'recorded'] as const;
export type VerifierName = (typeof VERIFIERS)[number];
export type Verdict = { score: number; verifier: VerifierName };

/** What a verifier needs of an item. */
export type VerifiableItem = Pick<DatasetItem, 'id' | 'groundTruth' | 'metric' | 'choices'>;

const METRIC_TO_VERIFIER: Record<string, VerifierName> = {
  // LLMRouter's metric names
  em_mc: 'multiple-choice',
  gsm8k: 'numeric',
  math: 'numeric',
  f1_score: 'f1',
  code_eval: 'recorded',
  commongen_coverage: 'recorded',
  // verifier names and common spellings
  'exact-match': 'exact-match',
  exact_match: 'exact-match',
  em: 'exact-match',
  numeric: 'numeric',
  'multiple-choice': 'multiple-choice',
  multiple_choice: 'multiple-choice',
  mc: 'multiple-choice',
  f1: 'f1',
  recorded: 'recorded',
};

/** The recorded score carried by a replayed answer, or undefined when the answer is not a replay. */
export function replayScore(providerMetadata?: Record<string, unknown>): number | undefined {
  const replay = providerMetadata?.['replay'];
  if (replay === undefined || replay === null) return undefined;
  const score = typeof replay === 'object' ? (replay as Record<string, unknown>)['score'] : undefined;
  if (typeof score !== 'number' || !(score >= 0 && score <= 1)) {
    throw new InputError('replayed answer without a recorded score in [0, 1]', { field: 'providerMetadata.replay.score' });
  }
  return score;
}

/** Which verifier scores answers to this item: from its metric, except that a replayed answer keeps its recorded score. */
export function verifierFor(item: Pick<DatasetItem, 'metric'>, providerMetadata?: Record<string, unknown>): VerifierName {
  const replay = providerMetadata?.['replay'];
  if (replay !== undefined && replay !== null) return 'recorded';
  if (item.metric === undefined) return 'exact-match';
  return METRIC_TO_VERIFIER[item.metric.trim().toLowerCase()] ?? 'exact-match';
}

/** Score an answer to an item with the verifier `verifierFor` picks. */
export function verify(item: VerifiableItem, answerText: string, providerMetadata?: Record<string, unknown>): Verdict {
  return runVerifier(verifierFor(item, providerMetadata), item, answerText, providerMetadata);
}

/** Score an answer with a named verifier. */
export function runVerifier(name: VerifierName, item: VerifiableItem, answerText: string, providerMetadata?: Record<string, unknown>): Verdict {
  const gt = item.groundTruth;
  const needGt = (): string => {
    if (gt === undefined) throw new InputError(`item ${item.id} has no ground truth for the ${name} verifier`, { field: 'ground_truth' });
    return gt;
  };
  switch (name) {
    case 'recorded': {
      const s = replayScore(providerMetadata);
      if (s === undefined) {
        throw new InputError(
          `item ${item.id} (metric ${item.metric ?? 'none'}) can only be scored from a recorded outcome: the answer did not come from the replay provider`,
          { field: 'metric' },
        );
      }
      return { score: s, verifier: 'recorded' };
    }
    case 'exact-match':
      return { score: exactMatch(answerText, needGt()), verifier: name };
    case 'f1':
      return { score: bestF1(answerText, needGt()), verifier: name };
    case 'numeric':
      return { score: numericMatch(answerText, needGt()), verifier: name };
    case 'multiple-choice':
      return { score: multipleChoiceMatch(answerText, needGt(), item.choices), verifier: name };
  }
}

// ---------------------------------------------------------------------------------------------
// Text normalisation (SQuAD's normalize_answer, with Unicode punctuation and symbols)

/** Lower-case, drop punctuation and symbols, drop articles (a, an, the), collapse whitespace. */
export function normalizeAnswer(s: string): string {
  return s
    .toLowerCase()
    .replace(/[\p{P}\p{S}]/gu, ' ')
    .replace(/\b(a|an|the)\b/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

/** Content of the last \boxed{...} (or \fbox{...}), braces balanced; undefined if none. */
export function lastBoxed(text: string): string | undefined {
  const re = /\\(?:boxed|fbox)\s*\{/g;
  let start = -1;
  for (let m = re.exec(text); m; m = re.exec(text)) start = m.index + m[0].length;
  if (start < 0) return undefined;
  let depth = 1;
  for (let k = start; k < text.length; k++) {
    if (text[k] === '{') depth++;
    else if (text[k] === '}' && --depth === 0) return text.slice(start, k);
  }
  return undefined;
}

/**
 * Text after the last "answer is" / "answer:" on its line, without a trailing full stop; with
 * `sentence`, only up to the end of that sentence ("7. (I also considered 8.)" -> "7").
 */
function afterAnswerPhrase(text: string, sentence = false): string | undefined {
  const re = /\banswer\s*(?:is|:|：|=)\s*:?\s*([^\n]*)/gi;
  let last: string | undefined;
  for (let m = re.exec(text); m; m = re.exec(text)) last = m[1];
  if (last !== undefined && sentence) last = last.split(/[.!?。](?=\s|$)/)[0];
  const s = last?.trim().replace(/[.。]+$/, '').trim();
  return s ? s : undefined;
}

/** The whole answer and its likely "final answer" parts, for exact-match and F1. */
export function answerCandidates(text: string): string[] {
  const out = [text];
  const boxed = lastBoxed(text);
  if (boxed !== undefined) out.push(boxed);
  for (const sentence of [false, true]) {
    const phrase = afterAnswerPhrase(text, sentence);
    if (phrase !== undefined && !out.includes(phrase)) out.push(phrase);
  }
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l !== '');
  if (lines.length > 1) out.push(lines[lines.length - 1]!);
  return out;
}

export function exactMatch(answer: string, groundTruth: string): number {
  const gt = normalizeAnswer(groundTruth);
  return answerCandidates(answer).some((c) => normalizeAnswer(c) === gt) ? 1 : 0;
}

/** SQuAD token F1 between a prediction and a ground truth. */
export function tokenF1(prediction: string, groundTruth: string): number {
  const p = normalizeAnswer(prediction).split(' ').filter(Boolean);
  const g = normalizeAnswer(groundTruth).split(' ').filter(Boolean);
  if (p.length === 0 || g.length === 0) return p.length === g.length ? 1 : 0;
  const counts = new Map<string, number>();
  for (const t of g) counts.set(t, (counts.get(t) ?? 0) + 1);
  let common = 0;
  for (const t of p) {
    const c = counts.get(t) ?? 0;
    if (c > 0) {
      common++;
      counts.set(t, c - 1);
    }
  }
  if (common === 0) return 0;
  const precision = common / p.length;
  const recall = common / g.length;
  return (2 * precision * recall) / (precision + recall);
}

function bestF1(answer: string, groundTruth: string): number {
  return Math.max(...answerCandidates(answer).map((c) => tokenF1(c, groundTruth)));
}

// ---------------------------------------------------------------------------------------------
// Numbers

const NUM = String.raw`(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)`;

function toNumber(s: string): number {
  return Number(s.replace(/,/g, ''));
}

/** Tidy LaTeX and units so that "$1,000", "45\%", "\dfrac{3}{4}", "10^\circ" read as numbers. */
function tidyMath(s: string): string {
  return s
    .replace(/−/g, '-')
    .replace(/\\[dt]frac/g, '\\frac')
    .replace(/\\frac\s*(\d)\s*(\d)/g, '\\frac{$1}{$2}') // \frac32
    .replace(/\\left|\\right|\\[!,;: ]|\\quad/g, '')
    .replace(/\\(?:text|mbox|mathrm|textbf)\s*\{([^{}]*)\}/g, '$1')
    .replace(/\^\s*\{?\\circ\}?|°/g, '')
    .replace(/\\%|%/g, '')
    .replace(/\\\$|\$/g, '')
    .trim();
}

/** The value of a text that is only a number (with $, %, commas, a fraction a/b or \frac{a}{b}). */
export function parseNumberExact(text: string): number | undefined {
  // a unit in \text{} ("5\text{ cm}") is not part of the value
  const s = tidyMath(text.replace(/\\(?:text|mbox|mathrm)\s*\{\s*[A-Za-z ]*\}/g, ''))
    .replace(/\s+/g, '')
    .replace(/\.$/, '');
  let m = new RegExp(`^([+-]?)(${NUM})$`).exec(s);
  if (m) return (m[1] === '-' ? -1 : 1) * toNumber(m[2]!);
  m = new RegExp(`^([+-]?)\\\\frac\\{([+-]?)(${NUM})\\}\\{([+-]?)(${NUM})\\}$`).exec(s);
  if (m) return fraction(m[1]! + m[2]! + m[4]!, m[3]!, m[5]!);
  m = new RegExp(`^([+-]?)(${NUM})/([+-]?)(${NUM})$`).exec(s);
  if (m) return fraction(m[1]! + m[3]!, m[2]!, m[4]!);
  return undefined;
}

function fraction(signs: string, num: string, den: string): number | undefined {
  const d = toNumber(den);
  if (d === 0) return undefined;
  const neg = (signs.match(/-/g)?.length ?? 0) % 2 === 1;
  return ((neg ? -1 : 1) * toNumber(num)) / d;
}

/** The last number in a text (fractions and \frac included), or undefined. */
export function lastNumber(text: string): number | undefined {
  const s = tidyMath(text);
  // a minus sign counts only where it cannot be a subtraction ("3-5" is 3 and 5)
  const re = new RegExp(
    String.raw`(?<![\w)\]}])(-?)\\frac\{(-?)(${NUM})\}\{(-?)(${NUM})\}` +
      String.raw`|(?<![\w)\]}.])(-?)(${NUM})\s*/\s*(${NUM})(?![\d.])` +
      String.raw`|(?<![\w)\]}.])(-?)(${NUM})`,
    'g',
  );
  let value: number | undefined;
  for (let m = re.exec(s); m; m = re.exec(s)) {
    if (m[3] !== undefined) value = fraction(m[1]! + m[2]! + m[4]!, m[3], m[5]!);
    else if (m[7] !== undefined) value = fraction(m[6]!, m[7], m[8]!);
    else value = (m[9] === '-' ? -1 : 1) * toNumber(m[10]!);
  }
  return value;
}

/** The part of a text that holds its final answer: \boxed{}, after "####", after "answer is", else all of it. */
export function finalAnswerRegion(text: string): string {
  const boxed = lastBoxed(text);
  if (boxed !== undefined) return boxed;
  const hashes = text.lastIndexOf('####');
  if (hashes >= 0) return text.slice(hashes + 4).trim();
  return afterAnswerPhrase(text, true) ?? text;
}

/** The final numeric answer of a text, or undefined. */
export function extractNumber(text: string): number | undefined {
  const region = finalAnswerRegion(text);
  return parseNumberExact(region) ?? lastNumber(region) ?? (region === text ? undefined : lastNumber(text));
}

export function numbersClose(a: number, b: number, relTol = 1e-6): boolean {
  if (a === b) return true;
  return Math.abs(a - b) <= relTol * Math.max(Math.abs(a), Math.abs(b));
}

/** LaTeX final answers compared as text: no spaces, no \left/\right, dfrac = frac, no $ or trailing full stop. */
function normalizeMath(s: string): string {
  return tidyMath(s).replace(/\s+/g, '').replace(/\.$/, '').replace(/^([a-z]\w*)=/i, '').toLowerCase();
}

export function numericMatch(answer: string, groundTruth: string): number {
  const gtRegion = finalAnswerRegion(groundTruth);
  const gtValue = parseNumberExact(gtRegion);
  if (gtValue !== undefined) {
    const a = extractNumber(answer);
    return a !== undefined && numbersClose(a, gtValue) ? 1 : 0;
  }
  // a non-numeric final answer (an expression, an interval): compare normalised LaTeX
  const target = normalizeMath(gtRegion);
  if (target === '') return 0;
  return normalizeMath(finalAnswerRegion(answer)) === target ? 1 : 0;
}

// ---------------------------------------------------------------------------------------------
// Multiple choice

const DEFAULT_LABELS = ['A', 'B', 'C', 'D', 'E'];

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function lastMatch(re: RegExp, text: string): RegExpExecArray | undefined {
  let last: RegExpExecArray | undefined;
  for (let m = re.exec(text); m; m = re.exec(text)) last = m;
  return last;
}

/**
 * The option label an answer chose, or undefined. Tried in order: "answer is B" / "Answer: (B)"
 * (the last one), \boxed{B}, an answer that is just a label ("B", "(B)", "B. text"), the last
 * "(B)", and finally the option text when exactly one option's text appears in the answer.
 */
export function extractChoice(answer: string, choices?: { labels: string[]; texts: string[] }): string | undefined {
  const labels = choices?.labels.length ? choices.labels : DEFAULT_LABELS;
  const byLower = new Map(labels.map((l) => [l.toLowerCase(), l]));
  const canon = (s: string | undefined): string | undefined => (s === undefined ? undefined : byLower.get(s.toLowerCase()));
  const alt = [...labels].sort((a, b) => b.length - a.length).map(escapeRe).join('|');
  const text = answer.replace(/\*\*|__/g, ''); // markdown bold around "Answer: **B**"

  const lead = String.raw`\banswer(?:\s+is)?\s*[:：=]?\s*(?:option\s+|choice\s+)?[(\[]?\s*`;
  // exact case: "the answer is B because ..." is B
  let m = lastMatch(new RegExp(`${lead}(${alt})(?![\\w])`, 'gi'), text);
  if (m && labels.includes(m[1]!)) return m[1];
  // other case only when nothing but punctuation follows: "the answer is b." but not "the answer is a cat"
  m = lastMatch(new RegExp(`${lead}(${alt})\\s*[)\\].:]?\\s*(?=$|\\n|[.,;!?])`, 'gi'), text);
  if (m) return canon(m[1]);

  const boxed = lastBoxed(text);
  if (boxed !== undefined) {
    const b = /^\s*(?:\\text\{)?\s*\(?\s*([^(){}\s]+?)\s*\)?\s*\}?\s*$/.exec(boxed);
    const l = canon(b?.[1]);
    if (l) return l;
  }

  const whole = new RegExp(`^\\s*[(\\[]?(${alt})(?:[)\\].:]|$|\\s*$)`, 'i').exec(text.trim());
  if (whole) {
    const exact = labels.includes(whole[1]!) ? whole[1] : undefined;
    // a lone lower-case letter ("a") may be an article: accept it only when it is the whole answer
    if (exact || /^\s*[([]?\w+[)\].:]?\s*$/.test(text.trim())) return canon(whole[1]);
  }

  m = lastMatch(new RegExp(`\\((${alt})\\)`, 'g'), text);
  if (m) return m[1];

  if (choices && choices.texts.length === choices.labels.length) {
    const norm = ` ${normalizeAnswer(text)} `;
    const texts = choices.texts.map((t) => normalizeAnswer(t));
    const exact = texts.findIndex((t) => t !== '' && ` ${t} ` === norm);
    if (exact >= 0) return choices.labels[exact];
    const hits = texts.map((t, k) => (t !== '' && norm.includes(` ${t} `) ? k : -1)).filter((k) => k >= 0);
    // when texts nest ("red" inside "dark red"), the longest hit is the meant one if it contains the others
    if (hits.length > 0) {
      const longest = hits.reduce((a, b) => (texts[b]!.length > texts[a]!.length ? b : a));
      if (hits.every((k) => texts[longest]!.includes(texts[k]!))) return choices.labels[longest];
    }
  }
  return undefined;
}

/** The label the ground truth names: a label (any case), or an option's text. */
function groundTruthLabel(groundTruth: string, choices?: { labels: string[]; texts: string[] }): string {
  const g = groundTruth.trim().replace(/^\(|\)$/g, '');
  const labels = choices?.labels.length ? choices.labels : DEFAULT_LABELS;
  const l = labels.find((x) => x.toLowerCase() === g.toLowerCase());
  if (l) return l;
  if (choices) {
    const k = choices.texts.findIndex((t) => normalizeAnswer(t) === normalizeAnswer(g));
    if (k >= 0) return choices.labels[k]!;
  }
  return g;
}

export function multipleChoiceMatch(answer: string, groundTruth: string, choices?: { labels: string[]; texts: string[] }): number {
  const chosen = extractChoice(answer, choices);
  if (chosen === undefined) return 0;
  return chosen.toLowerCase() === groundTruthLabel(groundTruth, choices).toLowerCase() ? 1 : 0;
}
