import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError, type DatasetItem } from '@fugu/core';
import { datasetContentHash, datasetNameOf, loadDataset, parseDatasetLine, readDatasetJsonl, validateDatasetFile, writeDatasetJsonl } from './format.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'fugu-datasets-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const good = [
  { id: 'q1', task: 'math', prompt: 'What is 2+2?', ground_truth: '4', metric: 'numeric', split: 'train', scores: { a: 1, b: 0 }, tokens: { a: { in: 10, out: 3 } }, answers: { a: '4', b: '5' } },
  { id: 'q2', task: 'mc', prompt: 'Pick one', ground_truth: 'B', metric: 'em_mc', choices: { labels: ['A', 'B'], texts: ['x', 'y'] } },
];

async function file(name: string, text: string): Promise<string> {
  const p = join(dir, name);
  await writeFile(p, text);
  return p;
}

async function errorOf(p: Promise<unknown>): Promise<InputError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    return e as InputError;
  }
  throw new Error('expected an InputError');
}

describe('parsing lines', () => {
  it('converts a line to a DatasetItem with recorded outcomes', () => {
    const item = parseDatasetLine(good[0]);
    expect(item).toEqual({
      id: 'q1',
      task: 'math',
      prompt: 'What is 2+2?',
      groundTruth: '4',
      metric: 'numeric',
      sourceSplit: 'train',
      recorded: { a: { score: 1, tokensIn: 10, tokensOut: 3, answer: '4' }, b: { score: 0, answer: '5' } },
    });
    expect(parseDatasetLine(good[1]).choices).toEqual({ labels: ['A', 'B'], texts: ['x', 'y'] });
  });

  it('treats null optional fields as absent and numbers as ground-truth text', () => {
    const item = parseDatasetLine({ id: 'x', task: 't', prompt: 'p', ground_truth: 42, choices: null, scores: null });
    expect(item).toEqual({ id: 'x', task: 't', prompt: 'p', groundTruth: '42' });
  });
});

describe('reading files', () => {
  it('streams items in order, skipping blank lines and a BOM', async () => {
    const p = await file('ok.jsonl', `\uFEFF${JSON.stringify(good[0])}\n\n${JSON.stringify(good[1])}\r\n`);
    const ids: string[] = [];
    for await (const item of readDatasetJsonl(p)) ids.push(item.id);
    expect(ids).toEqual(['q1', 'q2']);
    const ds = await loadDataset(p);
    expect(ds.name).toBe('ok');
    expect(ds.workers).toEqual(['a', 'b']);
    expect(ds.contentHash).toMatch(/^[0-9a-f]{64}$/);
    expect(await validateDatasetFile(p)).toEqual({ items: 2, tasks: ['math', 'mc'], workers: ['a', 'b'] });
  });

  const bad: Array<[string, string, number, string | undefined, RegExp]> = [
    ['malformed JSON', '{"id": "q3", "task": ', 3, undefined, /malformed JSON/],
    ['missing prompt', JSON.stringify({ id: 'q3', task: 't' }), 3, 'prompt', /missing prompt/],
    ['empty prompt', JSON.stringify({ id: 'q3', task: 't', prompt: '' }), 3, 'prompt', /must not be empty/],
    ['score above 1', JSON.stringify({ id: 'q3', task: 't', prompt: 'p', scores: { gpt: 1.5 } }), 3, 'scores.gpt', /\[0, 1\]/],
    ['negative score', JSON.stringify({ id: 'q3', task: 't', prompt: 'p', scores: { gpt: -0.1 } }), 3, 'scores.gpt', /\[0, 1\]/],
    ['duplicate id', JSON.stringify({ id: 'q1', task: 't', prompt: 'p' }), 3, 'id', /duplicate id "q1" \(first on line 1\)/],
    ['unknown field', JSON.stringify({ id: 'q3', task: 't', prompt: 'p', ground_truht: 'x' }), 3, 'ground_truht', /unknown field/],
    ['not an object', '[1, 2]', 3, undefined, /JSON object/],
    ['fractional tokens', JSON.stringify({ id: 'q3', task: 't', prompt: 'p', scores: { a: 1 }, tokens: { a: { in: 1.5, out: 2 } } }), 3, 'tokens.a.in', /integer/],
    ['answer without score', JSON.stringify({ id: 'q3', task: 't', prompt: 'p', scores: { a: 1 }, answers: { b: 'x' } }), 3, 'answers.b', /no score/],
    ['choices of different lengths', JSON.stringify({ id: 'q3', task: 't', prompt: 'p', choices: { labels: ['A', 'B'], texts: ['x'] } }), 3, 'choices.texts', /same length/],
  ];
  for (const [what, line, lineNo, field, message] of bad) {
    it(`names file, line and field for the first bad line: ${what}`, async () => {
      // line 2 is blank, the bad line is line 3, and a later bad line must not be the one reported
      const p = await file(`bad-${what.replace(/\W+/g, '-')}.jsonl`, `${JSON.stringify(good[0])}\n\n${line}\n{broken\n`);
      const e = await errorOf(validateDatasetFile(p));
      expect(e.file).toBe(p);
      expect(e.line).toBe(lineNo);
      expect(e.field).toBe(field);
      expect(e.message).toMatch(message);
      expect(e.message).toContain(`${p}:${lineNo}`);
      // loading reports the same line
      expect((await errorOf(loadDataset(p))).line).toBe(lineNo);
    });
  }

  it('reports a missing file and an empty file', async () => {
    const missing = join(dir, 'nope.jsonl');
    const e1 = await errorOf(validateDatasetFile(missing));
    expect(e1.message).toContain(missing);
    expect(e1.message).toMatch(/no such file/);
    const empty = await file('empty.jsonl', '\n\n');
    expect((await errorOf(loadDataset(empty))).message).toMatch(/no items/);
  });
});

describe('writing files', () => {
  it('round-trips items and keeps the content hash', async () => {
    const items = good.map((l) => parseDatasetLine(l));
    const p = join(dir, 'sub', 'out.jsonl');
    expect(await writeDatasetJsonl(p, items)).toBe(2);
    const ds = await loadDataset(p);
    expect(ds.items).toEqual(items);
    expect(ds.contentHash).toBe(datasetContentHash(items));
    const text = await readFile(p, 'utf8');
    expect(text.split('\n')[0]).toBe(JSON.stringify(good[0]));
  });

  it('keeps one item a line when texts hold U+2028, U+2029, U+0085 or a carriage return', async () => {
    const items: DatasetItem[] = [
      { id: 'a', task: 't', prompt: 'line\u2028separator\u2029para\u0085next\rreturn' },
      { id: 'b', task: 't', prompt: 'second' },
    ];
    const p = join(dir, 'separators.jsonl');
    await writeDatasetJsonl(p, items);
    expect((await readFile(p, 'utf8')).split('\n')).toHaveLength(3);
    expect((await loadDataset(p)).items).toEqual(items);
    // a file written by another tool with raw U+2028 inside a string still reads as one line
    const raw = await file('raw-separators.jsonl', `{"id":"x","task":"t","prompt":"a\u2028b"}\n`);
    expect((await loadDataset(raw)).items[0]!.prompt).toBe('a\u2028b');
  });

  it('writes from an async iterable', async () => {
    async function* gen(): AsyncGenerator<DatasetItem> {
      for (let k = 0; k < 1000; k++) yield { id: `i${k}`, task: 't', prompt: `p${k}` };
    }
    const p = join(dir, 'many.jsonl');
    expect(await writeDatasetJsonl(p, gen())).toBe(1000);
    expect((await validateDatasetFile(p)).items).toBe(1000);
  });

  it('refuses an invalid item and leaves no file behind', async () => {
    const p = join(dir, 'invalid.jsonl');
    const items: DatasetItem[] = [{ id: 'ok', task: 't', prompt: 'p' }, { id: 'bad', task: 't', prompt: 'p', recorded: { w: { score: 2 } } }];
    const e = await errorOf(writeDatasetJsonl(p, items));
    expect(e.field).toBe('item "bad".scores.w');
    await expect(readFile(p)).rejects.toThrow();
  });

  it('content hash changes when a score changes', () => {
    const a = good.map((l) => parseDatasetLine(l));
    const b = good.map((l) => parseDatasetLine(l));
    b[0]!.recorded!['a']!.score = 0.5;
    expect(datasetContentHash(a)).not.toBe(datasetContentHash(b));
  });
});

describe('datasetNameOf', () => {
  it("names a dataset by its file, and by its folder too where the file's name is a generic one (issue 29)", () => {
    expect(datasetNameOf('/data/mmlu.jsonl')).toBe('mmlu');
    expect(datasetNameOf('/data/gsm8k/dataset.jsonl')).toBe('gsm8k-dataset');
    expect(datasetNameOf('/x/math/test.jsonl')).toBe('math-test');
    expect(datasetNameOf('/x/a/dataset.jsonl')).not.toBe(datasetNameOf('/x/b/dataset.jsonl'));
  });
});
