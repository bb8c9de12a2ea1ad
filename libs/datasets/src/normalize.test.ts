import { describe, expect, it } from 'vitest';
import { normalizePrompt, promptIndex, replayKey } from './normalize.ts';

describe('replayKey', () => {
  it('forgives case, whitespace and trailing punctuation', () => {
    const key = replayKey('who won the most gold metals in olympics');
    expect(replayKey('Who won the most gold metals in Olympics?')).toBe(key);
    expect(replayKey('  WHO  won the\tmost gold metals\nin Olympics ?!  ')).toBe(key);
    for (const end of ['.', '?', '!', ',', ';', ':', '"', "'", '\u201d', '\u2019', '\u00bb', '?"', '...', ' ?']) {
      expect(replayKey(`who won the most gold metals in olympics${end}`), JSON.stringify(end)).toBe(key);
    }
  });

  it('keeps punctuation inside the text and what is not trailing punctuation', () => {
    expect(replayKey('What is 2+2? Explain.')).toBe('what is 2+2? explain');
    expect(replayKey('f(x) = x^2)')).toBe('f(x) = x^2)');
    expect(replayKey('"Quoted" start')).toBe('"quoted" start');
  });

  it('is Unicode NFC: a composed and a decomposed accent are the same key', () => {
    expect(replayKey('Caf\u00e9?')).toBe(replayKey('Cafe\u0301'));
    expect(replayKey('Cafe\u0301')).toBe('caf\u00e9');
  });

  it('leaves the de-duplication key of splits as it was (no punctuation removed)', () => {
    expect(normalizePrompt('What is 2+2?')).toBe('what is 2+2?');
  });
});

describe('promptIndex', () => {
  const items = [
    { id: 'a', prompt: 'What is 2+2?' },
    { id: 'b', prompt: 'what is 2+2' },
    { id: 'c', prompt: 'Name a colour.' },
    { id: 'd', prompt: '?' },
  ];
  const find = promptIndex(items);

  it('finds the exact prompt first, then by key', () => {
    expect(find('What is 2+2?')?.id).toBe('a');
    expect(find('what is 2+2')?.id).toBe('b');
    expect(find('  name A COLOUR  ')?.id).toBe('c');
    expect(find('What is 3+3?')).toBeUndefined();
  });

  it('two dataset prompts with the same key: the first in order is kept', () => {
    expect(replayKey(items[0]!.prompt)).toBe(replayKey(items[1]!.prompt));
    expect(find('WHAT IS 2+2!')?.id).toBe('a');
    expect(promptIndex([items[1]!, items[0]!])('WHAT IS 2+2!')?.id).toBe('b');
  });

  it('a prompt of punctuation only finds nothing by key', () => {
    expect(find('?')?.id).toBe('d'); // exact
    expect(find('!')).toBeUndefined();
  });
});
