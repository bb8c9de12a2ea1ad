// Text normalisation shared by splits, replay lookups and verifiers.

/** Prompt identity for de-duplication: trimmed, whitespace runs collapsed to one space, lower-cased. */
export function normalizePrompt(text: string): string {
  return text.trim().replace(/\s+/g, ' ').toLowerCase();
}

/** What a replay key drops from a prompt's end: whitespace, `. ? ! , ; :` and closing quotes. */
const TRAILING_PUNCTUATION = /[\s.?!,;:"'\u2019\u201d\u00bb]+$/u;

/**
 * A prompt's key for finding its dataset item (the replay workers' lookup and the gateway's
 * `itemOf`, the same function on both sides): Unicode NFC, lower case, whitespace runs collapsed
 * to one space and trimmed, trailing punctuation (`. ? ! , ; :` and closing quotes) removed. So
 * `Who won the most gold metals in Olympics?` finds `who won the most gold metals in olympics`.
 */
export function replayKey(text: string): string {
  return text.normalize('NFC').toLowerCase().replace(/\s+/g, ' ').trim().replace(TRAILING_PUNCTUATION, '');
}

/**
 * Finds an item by its prompt: the exact text (trimmed) first, else its replayKey. Where several
 * items have the same prompt, or prompts with the same key, the first in order wins (pass an
 * item id to get another one). A prompt whose key is empty (only punctuation) finds nothing by key.
 */
export function promptIndex<T extends { prompt: string }>(items: Iterable<T>): (prompt: string) => T | undefined {
  const exact = new Map<string, T>();
  const byKey = new Map<string, T>();
  for (const item of items) {
    const p = item.prompt.trim();
    if (!exact.has(p)) exact.set(p, item);
    const k = replayKey(item.prompt);
    if (k !== '' && !byKey.has(k)) byKey.set(k, item);
  }
  return (prompt) => {
    const hit = exact.get(prompt.trim());
    if (hit !== undefined) return hit;
    const k = replayKey(prompt);
    return k === '' ? undefined : byKey.get(k);
  };
}

/** Shorten a text for an error message (never the whole question). */
export function clip(text: string, max = 80): string {
  const one = text.replace(/\s+/g, ' ').trim();
  return one.length <= max ? one : `${one.slice(0, max - 1)}…`;
}

/** A zod/JSON path as people write it: `workers[2].price.input`. */
export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else {
      const k = String(key);
      out += out === '' ? k : `.${k}`;
    }
  }
  return out;
}
