// JSON request bodies must be UTF-8: a body that is not is a 400 naming the byte offset of the
// first bad sequence and, when the rest is JSON, the field it is in (never decoded to U+FFFD).
import { isUtf8 } from 'node:buffer';
import { randomUUID } from 'node:crypto';
import { GatewayError } from './errors.ts';
import { MAX_BODY_DEPTH } from './wire.ts';

/** The first sequence of `b` that is not UTF-8 (its offset and its bytes: the longest start of a valid sequence, or one byte), if any. */
export function firstInvalidUtf8(b: Uint8Array): { at: number; length: number } | undefined {
  for (let i = 0; i < b.length; ) {
    const c = b[i]!;
    if (c < 0x80) {
      i++;
      continue;
    }
    // the continuation bytes a lead byte takes, and the range its first one must be in (no overlong forms, surrogates or code points past U+10FFFF)
    const [need, lo, hi] =
      c >= 0xc2 && c <= 0xdf ? [1, 0x80, 0xbf]
      : c === 0xe0 ? [2, 0xa0, 0xbf]
      : c === 0xed ? [2, 0x80, 0x9f]
      : c >= 0xe1 && c <= 0xef ? [2, 0x80, 0xbf]
      : c === 0xf0 ? [3, 0x90, 0xbf]
      : c >= 0xf1 && c <= 0xf3 ? [3, 0x80, 0xbf]
      : c === 0xf4 ? [3, 0x80, 0x8f]
      : [0, 0, 0];
    if (need === 0) return { at: i, length: 1 };
    for (let j = 1; j <= need; j++) {
      const d = b[i + j];
      if (d === undefined || d < (j === 1 ? lo : 0x80) || d > (j === 1 ? hi : 0xbf)) return { at: i, length: j };
    }
    i += need + 1;
  }
  return undefined;
}

/** The 400 for a JSON body that is not UTF-8 (undefined when it is). */
export function invalidUtf8Error(body: Buffer): GatewayError | undefined {
  if (isUtf8(body)) return undefined;
  const bad = firstInvalidUtf8(body)!;
  const where = fieldAt(body, bad);
  const bytes = [...body.subarray(bad.at, bad.at + bad.length)].map((x) => `0x${x.toString(16).padStart(2, '0')}`).join(' ');
  const what = `the request body is not valid UTF-8 at byte ${bad.at} (${bytes})${where?.inKey ? ', in a key' : ''}; send text as UTF-8`;
  const param = where?.path || null;
  return new GatewayError(400, param ? `${param}: ${what}` : what, { param, code: 'invalid_encoding' });
}

/** The field the bad sequence is in: the body parsed with a marker in its place, the marker looked for (a key's: the object's path). */
function fieldAt(body: Buffer, bad: { at: number; length: number }): { path: string; inKey: boolean } | undefined {
  const marker = `\ue000${randomUUID()}`;
  let value: unknown;
  try {
    value = JSON.parse(body.subarray(0, bad.at).toString('utf8') + marker + body.subarray(bad.at + bad.length).toString('utf8'));
  } catch {
    return undefined;
  }
  // (no deeper than a body may be: past that, no field named)
  const find = (v: unknown, path: string, depth = 0): { path: string; inKey: boolean } | undefined => {
    if (depth > MAX_BODY_DEPTH) return undefined;
    if (typeof v === 'string') return v.includes(marker) ? { path, inKey: false } : undefined;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const r = find(v[i], `${path}[${i}]`, depth + 1);
        if (r) return r;
      }
      return undefined;
    }
    if (v === null || typeof v !== 'object') return undefined;
    for (const [k, x] of Object.entries(v)) {
      if (k.includes(marker)) return { path, inKey: true };
      const r = find(x, path === '' ? k : `${path}.${k}`, depth + 1);
      if (r) return r;
    }
    return undefined;
  };
  return find(value, '');
}
