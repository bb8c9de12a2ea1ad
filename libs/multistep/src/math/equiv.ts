// The MATH benchmark's answer normalisation and equivalence check, ported line by line from the
// Python that scored DyLAN's MATH runs (SALT-NLP/DyLAN, commit 572341b, code/MATH/util.py, MIT; its
// functions come from the MATH repository's `math_equivalence.py` and PHP's `extract_math_answer`).
// A string check, not a mathematical one: "0.5" and "\frac{1}{2}" are equal, "1/2" and "0.5" not
// (equiv.test.ts lists the known misses). Same operations in the same order as the Python; where
// Python and JavaScript semantics differ the port follows Python:
// - Python indexes strings by code point, JavaScript by UTF-16 unit: the places that take single
//   characters (`_fix_fracs`, `_fix_sqrt`, `len(...) <= 2` in `_strip_string`) work on code points;
// - Python's `\d` in a str pattern is any Unicode decimal digit (category Nd), JavaScript's only
//   0-9: the number pattern of `extract_math_answer` is `\p{Nd}` under the `u` flag;
// - `str.strip()` strips Python's whitespace (which includes \x1c-\x1f and \x85 but not \ufeff,
//   unlike `String.prototype.trim`): `pyStrip`;
// - `str.replace` on a string replaces every occurrence, with no `$` patterns: `split().join()`;
// - where the Python raises (an IndexError on an empty string: "\sqrt" at the very end, "boxed" at
//   the very end, "The answer is ." and the like) the port throws a `PythonError`, so a caller can
//   do what the Python did: `is_equiv` catches it and compares the raw strings, `extract_math_answer`
//   lets it through (in DyLAN's scripts that would have stopped the run).
// `"\%"` in the Python is an unknown escape, kept as backslash-percent: the same as `"\\%"`, so
// that replacement runs twice, as here. `delete_extra_zero` is ported for completeness: neither
// `is_equiv` nor DyLAN's scoring calls it. Pure.

/** What the Python would have raised (an IndexError from indexing an empty string). */
export class PythonError extends Error {
  override name = 'PythonError';
}

/** Python's str.replace(old, new) for a non-empty `old`: every occurrence, left to right. */
function replaceAll(s: string, old: string, rep: string): string {
  return s.split(old).join(rep);
}

/** The characters Python's str.isspace() accepts (str.strip() with no argument strips these). */
const PY_WHITESPACE = '\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000';

/** Python's str.strip() with no argument. */
export function pyStrip(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && PY_WHITESPACE.includes(s[start]!)) start++;
  while (end > start && PY_WHITESPACE.includes(s[end - 1]!)) end--;
  return s.slice(start, end);
}

/** `_fix_fracs`: \frac12 -> \frac{1}{2}, \frac1{72} -> \frac{1}{72}, \frac{a}b left as it is. */
function fixFracs(string: string): string {
  const substrs = string.split('\\frac');
  let newStr = substrs[0]!;
  if (substrs.length > 1) {
    for (const substr of substrs.slice(1)) {
      newStr += '\\frac';
      const chars = Array.from(substr);
      if (chars.length === 0) continue;
      if (chars[0] === '{') {
        newStr += substr;
      } else {
        // `assert len(substr) >= 2` inside a try whose except returns the input unchanged
        if (chars.length < 2) return string;
        const a = chars[0]!;
        const b = chars[1]!;
        const post = chars.slice(2).join('');
        if (b !== '{') {
          newStr += chars.length > 2 ? '{' + a + '}{' + b + '}' + post : '{' + a + '}{' + b + '}';
        } else {
          newStr += chars.length > 2 ? '{' + a + '}' + b + post : '{' + a + '}' + b;
        }
      }
    }
  }
  return newStr;
}

/**
 * `_fix_a_slash_b`: "a/b" of two integers -> \frac{a}{b}. The Python converts both sides with
 * int() and asserts that "{a}/{b}" gives the string back, so only canonical integers pass: no
 * sign other than a leading minus, no leading zeros, no "-0", no spaces, underscores or non-ASCII
 * digits (which int() would accept but the formatting would not give back). (Python 3.11's limit of
 * 4300 digits for int() is not reproduced: DyLAN predates it.)
 */
function fixASlashB(string: string): string {
  const parts = string.split('/');
  if (parts.length !== 2) return string;
  const canonicalInt = /^(?:0|-?[1-9][0-9]*)$/;
  const [a, b] = parts as [string, string];
  if (!canonicalInt.test(a) || !canonicalInt.test(b)) return string;
  return '\\frac{' + a + '}{' + b + '}';
}

/** `_remove_right_units`: everything from the first "\text{ " on is dropped (units on the right). */
function removeRightUnits(string: string): string {
  if (string.includes('\\text{ ')) return string.split('\\text{ ')[0]!;
  return string;
}

/** `_fix_sqrt`: \sqrt3 -> \sqrt{3}. Throws where the Python raises: "\sqrt" at the end of the string or directly followed by another "\sqrt". */
function fixSqrt(string: string): string {
  if (!string.includes('\\sqrt')) return string;
  const splits = string.split('\\sqrt');
  let newString = splits[0]!;
  for (const split of splits.slice(1)) {
    const chars = Array.from(split);
    if (chars.length === 0) throw new PythonError('IndexError: string index out of range (_fix_sqrt)');
    if (chars[0] !== '{') newString += '\\sqrt{' + chars[0]! + '}' + chars.slice(1).join('');
    else newString += '\\sqrt' + split;
  }
  return newString;
}

/**
 * `_strip_string`: the MATH benchmark's normalisation of an answer, step for step as the Python
 * has it. Throws a `PythonError` where the Python raises (see `fixSqrt`).
 */
export function stripString(input: string): string {
  let string = input;
  // linebreaks
  string = replaceAll(string, '\n', '');
  // remove inverse spaces
  string = replaceAll(string, '\\!', '');
  // replace \\ with \
  string = replaceAll(string, '\\\\', '\\');
  // replace tfrac and dfrac with frac
  string = replaceAll(string, 'tfrac', 'frac');
  string = replaceAll(string, 'dfrac', 'frac');
  // remove \left and \right (also the prefix of \leftarrow, \rightarrow: as in the Python)
  string = replaceAll(string, '\\left', '');
  string = replaceAll(string, '\\right', '');
  // remove circ (degrees)
  string = replaceAll(string, '^{\\circ}', '');
  string = replaceAll(string, '^\\circ', '');
  // remove dollar signs (only the escaped "\$"; a bare "$" stays)
  string = replaceAll(string, '\\$', '');
  // remove units (on the right)
  string = removeRightUnits(string);
  // remove percentage: the Python's "\\%" and "\%" are the same string
  string = replaceAll(string, '\\%', '');
  string = replaceAll(string, '\\%', '');
  // " 0." equivalent to " ." and "{0." equivalent to "{."; add "0" if "." starts the string
  string = replaceAll(string, ' .', ' 0.');
  string = replaceAll(string, '{.', '{0.');
  if (string.length === 0) return string;
  if (string[0] === '.') string = '0' + string;
  // get rid of e.g. "k = " or "q = " at the beginning (a left side of at most 2 characters)
  const sides = string.split('=');
  if (sides.length === 2 && Array.from(sides[0]!).length <= 2) string = sides[1]!;
  // fix sqrt3 --> sqrt{3} (before the spaces go: "\sqrt 3" becomes "\sqrt{ }3", then "\sqrt{}3")
  string = fixSqrt(string);
  // remove spaces
  string = replaceAll(string, ' ', '');
  // \frac1b or \frac12 --> \frac{1}{b} and \frac{1}{2}, etc.
  string = fixFracs(string);
  // manually change 0.5 --> \frac{1}{2}
  if (string === '0.5') string = '\\frac{1}{2}';
  // X/Y changed to \frac{X}{Y} in dataset, but in simple cases fix in case the model output is X/Y
  string = fixASlashB(string);
  return string;
}

/**
 * `is_equiv`: both normalised by `stripString`, then compared as strings; where normalising
 * raises (in the Python, an exception the `try` catches) the raw strings are compared. Two
 * nulls (Python's None) are equal, as in the Python (which also prints a warning).
 */
export function isEquiv(str1: string | null, str2: string | null): boolean {
  if (str1 === null && str2 === null) return true;
  if (str1 === null || str2 === null) return false;
  try {
    return stripString(str1) === stripString(str2);
  } catch (e) {
    if (e instanceof PythonError) return str1 === str2;
    throw e;
  }
}

/** The contents of the braces that open `ans` (unbalanced: everything after the first brace), else the text before the first "$", stripped: both places of `extract_math_answer` that read after "boxed". */
function afterBoxed(ans: string, where: string): string {
  if (ans.length === 0) throw new PythonError(`IndexError: string index out of range (${where})`);
  if (ans[0] === '{') {
    let stack = 1;
    let a = '';
    for (const c of ans.slice(1)) {
      if (c === '{') {
        stack += 1;
        a += c;
      } else if (c === '}') {
        stack -= 1;
        if (stack === 0) break;
        a += c;
      } else {
        a += c;
      }
    }
    return a;
  }
  return pyStrip(ans.split('$')[0]!);
}

/**
 * `extract_math_answer`: the answer of a solution text, as DyLAN read it: after the last
 * "The answer is " (else "the answer is "), else after the last "boxed" (\boxed{...} with nested
 * braces; "\fbox" is not read), else the last number; a trailing "." and then "/" dropped;
 * normalised by `stripString`; and if the result still contains "boxed", the boxed part of it.
 * '' where nothing was found. Throws a `PythonError` where the Python raises.
 */
export function extractMathAnswer(predStr: string): string {
  let pred: string;
  if (predStr.includes('The answer is ')) {
    pred = pyStrip(predStr.split('The answer is ').at(-1)!);
  } else if (predStr.includes('the answer is ')) {
    pred = pyStrip(predStr.split('the answer is ').at(-1)!);
  } else if (predStr.includes('boxed')) {
    pred = stripString(afterBoxed(predStr.split('boxed').at(-1)!, 'extract_math_answer, boxed'));
  } else {
    // Python: re.findall('-?\d*\.?\d+', pred_str), \d any Unicode decimal digit
    const matches = predStr.match(/-?\p{Nd}*\.?\p{Nd}+/gu);
    pred = matches !== null && matches.length >= 1 ? matches.at(-1)! : '';
  }
  if (pred !== '') {
    if (pred.endsWith('.')) pred = pred.slice(0, -1);
    // `pred[-1]` on what is left: an IndexError when the answer was just "."
    if (pred.length === 0) throw new PythonError('IndexError: string index out of range (extract_math_answer, "/")');
    if (pred.endsWith('/')) pred = pred.slice(0, -1);
  }
  pred = stripString(pred);
  if (pred.includes('boxed')) {
    pred = stripString(afterBoxed(pred.split('boxed').at(-1)!, 'extract_math_answer, boxed in the answer'));
  }
  return pred;
}

/** Python's repr() of a float (the shortest round-tripping digits; exponent form below 1e-4 and from 1e16). */
export function pyFloatRepr(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (x === Infinity) return 'inf';
  if (x === -Infinity) return '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const sign = x < 0 ? '-' : '';
  // toExponential() with no argument gives as many digits as it takes to tell the value apart: Python's repr digits
  const m = /^(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(Math.abs(x).toExponential());
  if (m === null) throw new Error(`pyFloatRepr: unexpected ${Math.abs(x).toExponential()}`);
  const digits = m[1]! + (m[2] ?? '');
  const exp = Number(m[3]);
  if (exp >= -4 && exp < 16) {
    // fixed notation, with ".0" when there is no fractional part
    if (exp < 0) return sign + '0.' + '0'.repeat(-exp - 1) + digits;
    const intPart = digits.slice(0, exp + 1).padEnd(exp + 1, '0');
    const frac = digits.slice(exp + 1);
    return sign + intPart + '.' + (frac === '' ? '0' : frac);
  }
  const mantissa = digits.length > 1 ? digits[0] + '.' + digits.slice(1) : digits;
  const e = Math.abs(exp).toString().padStart(2, '0');
  return sign + mantissa + 'e' + (exp < 0 ? '-' : '+') + e;
}

const ND = /\p{Nd}/u;

/** The value of a Unicode decimal digit: its place in its run of digits (the runs of category Nd come in tens, each from its zero). */
function digitValue(d: string): number {
  const cp = d.codePointAt(0)!;
  let start = cp;
  while (start > 0 && ND.test(String.fromCodePoint(start - 1))) start--;
  return (cp - start) % 10;
}

/** Python's float() of a string, or null where it raises ValueError. */
export function pyFloat(s: string): number | null {
  // float() strips whitespace and reads any Unicode decimal digit as its ASCII counterpart
  const t = pyStrip(s).replace(/\p{Nd}/gu, (d) => String(digitValue(d)));
  if (/^[+-]?(?:inf|infinity)$/i.test(t)) return t.startsWith('-') ? -Infinity : Infinity;
  if (/^[+-]?nan$/i.test(t)) return NaN;
  const digitpart = '[0-9](?:_?[0-9])*';
  const re = new RegExp(`^[+-]?(?:${digitpart}(?:\\.(?:${digitpart})?)?|\\.${digitpart})(?:[eE][+-]?${digitpart})?$`);
  if (!re.test(t)) return null;
  return Number(t.replaceAll('_', ''));
}

/**
 * `delete_extra_zero`: a number's trailing zeros after the point dropped ("2.50" -> "2.5",
 * "3.0" -> "3"), through Python's float and its repr, quirks included ("1e+20" -> "100.0": the
 * Python strips the zero of the exponent); the input unchanged where float() raises.
 */
export function deleteExtraZero(n: string): string {
  const x = pyFloat(n);
  if (x === null) return n;
  let s = pyFloatRepr(x).replace(/0+$/, '');
  if (s.endsWith('.')) return BigInt(s.replace(/\.+$/, '')).toString();
  const y = pyFloat(s);
  // float() of what rstrip('0') left: it always parses (a repr without its trailing zeros)
  s = pyFloatRepr(y!);
  return s;
}
