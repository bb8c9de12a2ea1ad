// One line of a batch input file, as OpenAI's Batch API defines it:
// {"custom_id": "...", "method": "POST", "url": "/v1/chat/completions", "body": {...}}.
// The envelope is checked here; the body is the endpoint's (the gateway's codec checks it).

export type LineError = { code: string; message: string; param?: string | null };

export type ParsedLine =
  | { line: number; ok: true; customId: string; body: Record<string, unknown> }
  | { line: number; ok: false; customId: string | null; error: LineError };

const MAX_CUSTOM_ID = 512;

/** The envelope of line `line` (1-based) of a batch for `endpoint`. */
export function parseLine(text: string, line: number, endpoint: string): ParsedLine {
  const fail = (code: string, message: string, customId: string | null = null, param: string | null = null): ParsedLine => ({ line, ok: false, customId, error: { code, message: `line ${line}: ${message}`, param } });
  if (text.trim() === '') return fail('invalid_json_line', 'the line is empty (each line is one JSON request)');
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    return fail('invalid_json_line', `not valid JSON (${(e as Error).message})`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return fail('invalid_json_line', 'not a JSON object');
  const o = v as Record<string, unknown>;
  const customId = typeof o.custom_id === 'string' && o.custom_id.length > 0 && o.custom_id.length <= MAX_CUSTOM_ID ? o.custom_id : null;
  if (o.custom_id === undefined) return fail('missing_required_parameter', 'custom_id is missing', null, 'custom_id');
  if (customId === null) return fail('invalid_value', `custom_id must be a string of 1 to ${MAX_CUSTOM_ID} characters`, null, 'custom_id');
  if (o.method !== 'POST') return fail('invalid_value', `method must be "POST", got ${JSON.stringify(o.method)}`, customId, 'method');
  if (o.url !== endpoint) return fail('invalid_value', `url must be the batch's endpoint "${endpoint}", got ${JSON.stringify(o.url)}`, customId, 'url');
  if (typeof o.body !== 'object' || o.body === null || Array.isArray(o.body)) return fail('invalid_value', 'body must be a JSON object (the request)', customId, 'body');
  for (const k of Object.keys(o)) if (!['custom_id', 'method', 'url', 'body'].includes(k)) return fail('invalid_value', `unknown field "${k}" (a line has custom_id, method, url and body)`, customId, k);
  return { line, ok: true, customId, body: o.body as Record<string, unknown> };
}

/** The custom_id of a line, as far as it can be read (for the error file of lines never run). */
export function customIdOf(text: string): string | null {
  try {
    const o = JSON.parse(text) as { custom_id?: unknown };
    return typeof o?.custom_id === 'string' ? o.custom_id : null;
  } catch {
    return null;
  }
}
