// docs/parameters.md stays true: its table is the code's (FUGU_UPDATE_DOCS=1 writes it), and every
// field the request schemas know or refuse has a row.
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REQUEST_PARAMS } from '@fugu/providers';
import { BEGIN_MARK, CHAT_FIELDS, END_MARK, RESPONSES_FIELDS, parametersMarkdown } from './parameters.ts';
import { REFUSED as RESPONSES_REFUSED, responsesRequestSchema } from './responses-wire.ts';
import { REFUSED as CHAT_REFUSED, chatRequestSchema } from './wire.ts';

const DOC = path.resolve(import.meta.dirname, '../../../docs/parameters.md');

describe('docs/parameters.md', () => {
  it('holds the table the adapters declare', async () => {
    const text = await readFile(DOC, 'utf8');
    const from = text.indexOf(BEGIN_MARK);
    const to = text.indexOf(END_MARK);
    expect(from, 'the begin marker').not.toBe(-1);
    expect(to, 'the end marker').toBeGreaterThan(from);
    const want = `${BEGIN_MARK}\n\n${parametersMarkdown()}\n\n`;
    const have = text.slice(from, to);
    if (have !== want && process.env.FUGU_UPDATE_DOCS === '1') {
      await writeFile(DOC, text.slice(0, from) + want + text.slice(to));
      return;
    }
    expect(have, 'docs/parameters.md is out of date: run FUGU_UPDATE_DOCS=1 npx vitest run apps/gateway/src/parameters.test.ts').toBe(want);
  });

  it('has a row for every field each endpoint knows or refuses', () => {
    const chatNames = new Set<string>(Object.values(REQUEST_PARAMS).map((p) => p.chat));
    for (const k of Object.keys(chatRequestSchema.shape)) expect(chatNames.has(k) || k in CHAT_FIELDS, `chat field ${k}`).toBe(true);
    for (const k of Object.keys(CHAT_FIELDS)) expect(k in chatRequestSchema.shape, `documented chat field ${k}`).toBe(true);
    for (const k of Object.keys(CHAT_REFUSED)) expect(k in chatRequestSchema.shape, `refused chat field ${k}`).toBe(false);
    const respNames = new Set(Object.values(REQUEST_PARAMS).flatMap((p) => (p.responses === null ? [] : [p.responses.split('.')[0]!])));
    for (const k of Object.keys(responsesRequestSchema.shape)) expect(respNames.has(k) || k in RESPONSES_FIELDS, `responses field ${k}`).toBe(true);
    for (const k of Object.keys(RESPONSES_FIELDS)) expect(k in responsesRequestSchema.shape, `documented responses field ${k}`).toBe(true);
    for (const k of Object.keys(RESPONSES_REFUSED)) expect(k in responsesRequestSchema.shape, `refused responses field ${k}`).toBe(false);
  });
});
