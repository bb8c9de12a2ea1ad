// A small parser for Python literals (the `repr` of dicts, lists, strings, numbers, None,
// True, False), as LLMRouter stores multiple-choice options:
//   "{'text': ['1', '2'], 'labels': ['A', 'B']}"  or  "['Calcutta.', 'Bombay.']"
// JSON.parse cannot read single quotes, and a regex rewrite of quotes breaks on apostrophes
// inside the texts ("don't"), so this is a real (tiny) recursive-descent parser.

export type PyValue = string | number | boolean | null | PyValue[] | { [key: string]: PyValue };

class PyLiteralError extends Error {}

/** Parse a Python literal; throws an Error naming the offset on bad input. */
export function parsePythonLiteral(src: string): PyValue {
  let i = 0;
  const fail = (what: string): never => {
    throw new PyLiteralError(`${what} at offset ${i}`);
  };
  const ws = (): void => {
    while (i < src.length && /\s/.test(src[i]!)) i++;
  };

  const parseString = (): string => {
    // optional prefixes u/r/b (r: raw, no escapes)
    let raw = false;
    while (/[uUrRbB]/.test(src[i] ?? '')) {
      if (src[i] === 'r' || src[i] === 'R') raw = true;
      i++;
    }
    const q = src[i];
    if (q !== "'" && q !== '"') return fail('expected a string');
    const triple = src.startsWith(q.repeat(3), i);
    const close = triple ? q.repeat(3) : q;
    i += close.length;
    let out = '';
    for (;;) {
      if (i >= src.length) return fail('unterminated string');
      if (src.startsWith(close, i)) {
        i += close.length;
        return out;
      }
      const c = src[i]!;
      if (c === '\\' && !raw) {
        const e = src[i + 1];
        i += 2;
        switch (e) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          case '0': out += '\0'; break;
          case 'a': out += '\x07'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'v': out += '\v'; break;
          case '\\': out += '\\'; break;
          case "'": out += "'"; break;
          case '"': out += '"'; break;
          case '\n': break; // line continuation
          case 'x': out += hexChar(2); break;
          case 'u': out += hexChar(4); break;
          case 'U': out += hexChar(8); break;
          default:
            // Python keeps unknown escapes verbatim
            out += `\\${e ?? ''}`;
        }
        continue;
      }
      if (!triple && c === '\n') return fail('newline in string');
      out += c;
      i++;
    }
  };
  const hexChar = (n: number): string => {
    const h = src.slice(i, i + n);
    if (!/^[0-9a-fA-F]+$/.test(h) || h.length !== n) return fail('bad escape');
    i += n;
    return String.fromCodePoint(parseInt(h, 16));
  };

  const parseValue = (): PyValue => {
    ws();
    const c = src[i];
    if (c === undefined) return fail('unexpected end');
    if (c === '[' || c === '(') {
      const end = c === '[' ? ']' : ')';
      i++;
      const out: PyValue[] = [];
      for (;;) {
        ws();
        if (src[i] === end) {
          i++;
          return out;
        }
        out.push(parseValue());
        ws();
        if (src[i] === ',') i++;
        else if (src[i] !== end) return fail(`expected , or ${end}`);
      }
    }
    if (c === '{') {
      i++;
      const out: { [key: string]: PyValue } = {};
      for (;;) {
        ws();
        if (src[i] === '}') {
          i++;
          return out;
        }
        const key = parseValue();
        if (typeof key === 'object' && key !== null) return fail('unhashable key');
        ws();
        if (src[i] !== ':') return fail('expected :');
        i++;
        out[String(key)] = parseValue();
        ws();
        if (src[i] === ',') i++;
        else if (src[i] !== '}') return fail('expected , or }');
      }
    }
    if (c === "'" || c === '"' || (/[uUrRbB]/.test(c) && /['"]/.test(src[i + 1] ?? ''))) {
      let s = parseString();
      // adjacent literals concatenate: 'a' 'b'
      for (;;) {
        const save = i;
        ws();
        if (/['"]/.test(src[i] ?? '')) s += parseString();
        else {
          i = save;
          return s;
        }
      }
    }
    const word = /^(None|True|False)\b/.exec(src.slice(i));
    if (word) {
      i += word[1]!.length;
      return word[1] === 'None' ? null : word[1] === 'True';
    }
    const num = /^[+-]?(\d[\d_]*)?(\.\d*)?([eE][+-]?\d+)?/.exec(src.slice(i));
    if (num && num[0] !== '' && /\d/.test(num[0])) {
      i += num[0].length;
      return Number(num[0].replace(/_/g, ''));
    }
    return fail(`unexpected ${JSON.stringify(c)}`);
  };

  const v = parseValue();
  ws();
  if (i !== src.length) fail('trailing text');
  return v;
}

/** Parse a Python literal, or undefined when it is not one. */
export function tryParsePythonLiteral(src: string): PyValue | undefined {
  try {
    return parsePythonLiteral(src);
  } catch (e) {
    if (e instanceof PyLiteralError) return undefined;
    throw e;
  }
}

export type Choices = { labels: string[]; texts: string[] };

const LETTERS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';

/**
 * Multiple-choice options from a dict `{text: [...], label(s): [...]}` or, when `allowBareList`,
 * a bare list of texts (labels A, B, C, ...). A JSON string or an already-parsed value also works.
 * Returns undefined when the value is not recognisably a set of options.
 */
export function parseChoices(raw: unknown, opts: { allowBareList?: boolean } = {}): Choices | undefined {
  let v: unknown = raw;
  if (typeof raw === 'string') {
    const s = raw.trim();
    if (s === '') return undefined;
    v = tryParsePythonLiteral(s);
    if (v === undefined) return undefined;
  }
  if (v === null || v === undefined) return undefined;
  const isStrList = (x: unknown): x is Array<string | number> =>
    Array.isArray(x) && x.every((e) => typeof e === 'string' || typeof e === 'number');
  if (Array.isArray(v)) {
    if (!opts.allowBareList || !isStrList(v) || v.length === 0 || v.length > LETTERS.length) return undefined;
    return { labels: v.map((_, k) => LETTERS[k]!), texts: v.map(String) };
  }
  if (typeof v === 'object') {
    const o = v as Record<string, unknown>;
    const texts = o['text'] ?? o['texts'];
    const labels = o['labels'] ?? o['label'];
    if (!isStrList(texts) || texts.length === 0) return undefined;
    if (labels === undefined) {
      if (texts.length > LETTERS.length) return undefined;
      return { labels: texts.map((_, k) => LETTERS[k]!), texts: texts.map(String) };
    }
    if (!isStrList(labels) || labels.length !== texts.length) return undefined;
    return { labels: labels.map(String), texts: texts.map(String) };
  }
  return undefined;
}
