import { describe, expect, it } from 'vitest';
import { parseChoices, parsePythonLiteral, tryParsePythonLiteral } from './pylit.ts';

describe('parsePythonLiteral', () => {
  it('reads dicts, lists, tuples, None/True/False and numbers', () => {
    expect(parsePythonLiteral("{'a': [1, 2.5, -3], 'b': (None, True, False), \"c\": {}}")).toEqual({
      a: [1, 2.5, -3],
      b: [null, true, false],
      c: {},
    });
  });

  it('keeps apostrophes and escapes inside strings', () => {
    expect(parsePythonLiteral(`["don't", 'it\\'s', 'a\\nb', 'tab\\there', '\\x41\\u00e9']`)).toEqual(["don't", "it's", 'a\nb', 'tab\there', 'Aé']);
  });

  it('accepts trailing commas and adjacent string literals', () => {
    expect(parsePythonLiteral("['a' 'b', 'c',]")).toEqual(['ab', 'c']);
  });

  it('rejects broken input', () => {
    expect(tryParsePythonLiteral("{'a': [1, 2}")).toBeUndefined();
    expect(tryParsePythonLiteral("'unterminated")).toBeUndefined();
    expect(tryParsePythonLiteral('[1, 2] extra')).toBeUndefined();
    expect(() => parsePythonLiteral('{')).toThrow(/offset/);
  });
});

describe('parseChoices', () => {
  it('reads the LLMRouter dict forms (text + labels or label, any key order)', () => {
    expect(parseChoices("{'text': ['1', '2'], 'labels': ['A', 'B']}")).toEqual({ labels: ['A', 'B'], texts: ['1', '2'] });
    expect(parseChoices("{'label': ['A', 'B', 'C'], 'text': ['garden shed', \"farmer's market\", 'x']}")).toEqual({
      labels: ['A', 'B', 'C'],
      texts: ['garden shed', "farmer's market", 'x'],
    });
  });

  it('gives a bare list labels A, B, C only when allowed', () => {
    expect(parseChoices("['Calcutta.', 'Bombay.']", { allowBareList: true })).toEqual({ labels: ['A', 'B'], texts: ['Calcutta.', 'Bombay.'] });
    expect(parseChoices("['assert f(1) == 2']")).toBeUndefined();
  });

  it('is undefined for what is not a set of options', () => {
    expect(parseChoices(null)).toBeUndefined();
    expect(parseChoices('')).toBeUndefined();
    expect(parseChoices("{'text': ['a', 'b'], 'labels': ['A']}")).toBeUndefined(); // lengths differ
    expect(parseChoices("{'text': ['a'")).toBeUndefined();
    expect(parseChoices("{'foo': 1}")).toBeUndefined();
  });
});
