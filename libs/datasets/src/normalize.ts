// Text normalisation shared by splits, replay lookups and verifiers.

/** Prompt identity for de-duplication: trimmed, whitespace runs collapsed to one space, lower-cased. */
export function normalizePrompt(text: string): string {
  return text.trim().replace(/\s+/g, ' ').toLowerCase();
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
