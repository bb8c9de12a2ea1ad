import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { loadDataset, type Dataset } from './format.ts';
import { defaultLlmRouterDir, llmRouterToJsonl, loadLlmRouter, loadLlmRouterPool } from './llmrouter.ts';
import { normalizePrompt } from './normalize.ts';
import { resolvePool } from './pool.ts';
import { replayStoreFor } from './replay.ts';
import { sourceSplitDedup, splitByPrompt, splitCounts } from './splits.ts';
import { recordedRewardRows, routingSummary } from './summary.ts';
import { verify } from './verifiers.ts';

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'fugu-llmrouter-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe('defaultLlmRouterDir', () => {
  it('is data/llmrouter in the repository, overridable by FUGU_LLMROUTER_DIR', () => {
    const repoRoot = resolve(import.meta.dirname, '../../..');
    expect(defaultLlmRouterDir({})).toBe(resolve(repoRoot, 'data/llmrouter'));
    expect(defaultLlmRouterDir({ FUGU_LLMROUTER_DIR: '/data/lr' })).toBe('/data/lr');
    expect(defaultLlmRouterDir({ FUGU_LLMROUTER_DIR: '  ' })).toBe(resolve(repoRoot, 'data/llmrouter'));
  });
});

// A small directory in the LLMRouter layout, to test the loader on any path and its errors.
async function fixture(name: string, over: Partial<Record<string, string>> = {}): Promise<string> {
  const dir = join(tmp, name);
  await mkdir(dir, { recursive: true });
  const q = (o: object): string => JSON.stringify(o);
  const files: Record<string, string> = {
    'queries_train.jsonl': [
      q({ task_name: 'arc', query: 'Q1?', ground_truth: 'B', metric: 'em_mc', choices: "{'text': [\"it's red\", 'blue'], 'label': ['A', 'B']}", task_id: null }),
      q({ task_name: 'mbpp', query: 'Write f.', ground_truth: "['assert f() == 1']", metric: 'code_eval', choices: "['assert f() == 1']", task_id: null }),
      q({ task_name: 'mmlu', query: 'Q3?', ground_truth: 'A', metric: 'em_mc', choices: "['x', 'y']", task_id: null }),
      q({ task_name: 'dup-second', query: 'Q1?', ground_truth: 'A', metric: 'em_mc', choices: null, task_id: null }),
      q({ task_name: 'gsm8k', query: 'unscored', ground_truth: '#### 1', metric: 'GSM8K', choices: null, task_id: null }),
    ].join('\n'),
    'queries_test.jsonl': q({ task_name: 'gsm8k', query: 'How many?', ground_truth: 'so\n#### 1,200', metric: 'GSM8K', choices: null, task_id: null }) + '\n',
    'scores_train.json': JSON.stringify([
      { question: 'Q3?', scores: { m1: 1, m2: 0 }, cluster_id: 3 },
      { question: 'Q1?', scores: { m2: 0.5, m1: 0 }, cluster_id: 1 },
      { question: 'Write f.', scores: { m1: 0, m2: 1 }, cluster_id: 2 },
    ]),
    'scores_test.json': JSON.stringify([{ question: 'How many?', scores: { m1: 1, m2: 1 } }]),
    'llm_candidates.json': JSON.stringify({
      m1: { model: 'org/m1', input_price: 0.2, output_price: 0.6 },
      m2: { model: 'org/m2', input_price: '1.25', output_price: 10 },
      unused: { model: 'org/x', input_price: 1, output_price: 1 },
    }),
  };
  for (const [f, text] of Object.entries({ ...files, ...over })) if (text !== undefined) await writeFile(join(dir, f), text);
  return dir;
}

describe('loadLlmRouter on a directory of its layout', () => {
  it('joins scores to queries on the question text, in scores order', async () => {
    const ds = await loadLlmRouter(await fixture('ok'));
    expect(ds.items.map((i) => i.id)).toEqual(['train-000000', 'train-000001', 'train-000002', 'test-000000']);
    expect(ds.workers).toEqual(['m1', 'm2']);
    expect(ds.items[0]).toEqual({
      id: 'train-000000',
      task: 'mmlu',
      prompt: 'Q3?',
      groundTruth: 'A',
      metric: 'em_mc',
      sourceSplit: 'train',
      choices: { labels: ['A', 'B'], texts: ['x', 'y'] },
      recorded: { m1: { score: 1 }, m2: { score: 0 } },
    });
    // the first query row of a duplicated question wins; apostrophes survive the choices parser
    expect(ds.items[1]!.task).toBe('arc');
    expect(ds.items[1]!.choices).toEqual({ labels: ['A', 'B'], texts: ["it's red", 'blue'] });
    // MBPP's list of asserts is not a set of options
    expect(ds.items[2]!.choices).toBeUndefined();
    expect(ds.items[3]).toMatchObject({ id: 'test-000000', sourceSplit: 'test', groundTruth: 'so\n#### 1,200' });
  });

  it('builds the replay pool in the order of the scores keys with exact prices', async () => {
    const pool = await loadLlmRouterPool(await fixture('ok'));
    expect(pool).toEqual({
      name: 'llmrouter',
      workers: [
        { name: 'm1', provider: 'replay', model: 'org/m1', settings: {}, prices: { inputPerMTok: '0.2', outputPerMTok: '0.6' } },
        { name: 'm2', provider: 'replay', model: 'org/m2', settings: {}, prices: { inputPerMTok: '1.25', outputPerMTok: '10' } },
      ],
    });
    expect((await resolvePool(`llmrouter:${join(tmp, 'ok')}`)).workers).toHaveLength(2);
  });

  it('names a missing file', async () => {
    const dir = await fixture('missing');
    await rm(join(dir, 'scores_test.json'));
    const e = await loadLlmRouter(dir).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(InputError);
    expect((e as InputError).file).toBe(join(dir, 'scores_test.json'));
    expect((e as InputError).message).toMatch(/missing file/);
    await expect(loadLlmRouter(join(tmp, 'no-such-dir'))).rejects.toThrow(/no such directory/);
  });

  it('names a score row without a matching query', async () => {
    const dir = await fixture('orphan', { 'scores_test.json': JSON.stringify([{ question: 'How many?', scores: { m1: 1 } }, { question: 'Never asked', scores: { m1: 0 } }]) });
    const e = (await loadLlmRouter(dir).catch((x: unknown) => x)) as InputError;
    expect(e).toBeInstanceOf(InputError);
    expect(e.file).toBe(join(dir, 'scores_test.json'));
    expect(e.field).toBe('[1].question');
    expect(e.message).toMatch(/no row of queries_test\.jsonl has this question: "Never asked"/);
  });

  it('names a bad score, a malformed query line and a missing model card', async () => {
    const bad = await fixture('bad-score', { 'scores_test.json': JSON.stringify([{ question: 'How many?', scores: { m1: 2 } }]) });
    await expect(loadLlmRouter(bad)).rejects.toThrow(/scores_test\.json, field \[0\]\.scores\.m1: score must be in \[0, 1\]/);
    const badLine = await fixture('bad-line', { 'queries_test.jsonl': '{"task_name": "x", "query": "How many?"}\n{oops\n' });
    await expect(loadLlmRouter(badLine)).rejects.toThrow(/queries_test\.jsonl:2: malformed JSON/);
    const noCard = await fixture('no-card', { 'llm_candidates.json': JSON.stringify({ m1: { model: 'org/m1', input_price: 0.2, output_price: 0.6 } }) });
    await expect(loadLlmRouterPool(noCard)).rejects.toThrow(/field m2: no model card for worker "m2"/);
  });
});

describe('the real LLMRouter data', () => {
  const dir = defaultLlmRouterDir();
  let ds: Dataset;
  beforeAll(async () => {
    ds = await loadLlmRouter(dir);
  });

  it('has 6,108 scored questions (5,608 train + 500 test), 14 tasks, 9 workers', () => {
    expect(ds.items).toHaveLength(6108);
    expect(ds.items.filter((i) => i.sourceSplit === 'train')).toHaveLength(5608);
    expect(ds.items.filter((i) => i.sourceSplit === 'test')).toHaveLength(500);
    expect(new Set(ds.items.map((i) => i.task)).size).toBe(14);
    expect(ds.workers).toHaveLength(9);
    expect(ds.workers).toContain('llama-3.1-nemotron-51b-instruct');
    expect(new Set(ds.items.map((i) => i.id)).size).toBe(6108);
    expect(ds.items[0]!.id).toBe('train-000000');
    expect(ds.items[6107]!.id).toBe('test-000499');
    for (const item of ds.items) expect(Object.keys(item.recorded!).sort()).toEqual([...ds.workers].sort());
  });

  it('parses choices for every multiple-choice question and for no other', () => {
    const mc = ds.items.filter((i) => i.metric === 'em_mc');
    expect(mc.length).toBeGreaterThan(2000);
    for (const i of mc) expect(i.choices?.labels.length).toBeGreaterThanOrEqual(2);
    expect(ds.items.filter((i) => i.metric !== 'em_mc' && i.choices)).toHaveLength(0);
    expect(new Set(ds.items.map((i) => i.metric))).toEqual(new Set(['em_mc', 'f1_score', 'MATH', 'GSM8K', 'code_eval', 'commongen_coverage']));
  });

  it('has 119 test questions that also appear in train', () => {
    const split = sourceSplitDedup(ds.items);
    const moved = ds.items.filter((i) => i.sourceSplit === 'test' && split.get(i.id) === 'train');
    expect(moved).toHaveLength(119);
    expect(splitCounts(split)).toEqual({ train: 5727, test: 381 });
  });

  it('reproduces the README reference figures to 3 decimals', () => {
    const s = routingSummary(recordedRewardRows(ds.items), ds.workers);
    const train = s.bySplit['train']!;
    const test = s.bySplit['test']!;
    expect(train.n).toBe(5608);
    expect(train.bestSingle.worker).toBe('llama-3.1-nemotron-51b-instruct');
    expect([train.bestSingle.mean, train.bestPerTask.mean, train.oracle].map((x) => x.toFixed(3))).toEqual(['0.621', '0.670', '0.802']);
    expect(test.n).toBe(500);
    expect([test.bestSingle.mean, test.bestPerTask.mean, test.oracle].map((x) => x.toFixed(3))).toEqual(['0.563', '0.615', '0.743']);
  });

  it('re-splits by prompt without leaking a question across splits', () => {
    const split = splitByPrompt(ds.items, { seed: 42 });
    const where = new Map<string, string>();
    for (const item of ds.items) {
      const key = normalizePrompt(item.prompt);
      const s = split.get(item.id)!;
      expect(where.get(key) ?? s).toBe(s);
      where.set(key, s);
    }
    expect(splitCounts(split)['train']).toBeGreaterThan(4800);
  });

  it('verifies its own ground truths as correct answers', () => {
    let checked = 0;
    for (const item of ds.items) {
      if (item.metric === 'code_eval' || item.metric === 'commongen_coverage') continue;
      const answer = item.metric === 'em_mc' ? `The answer is (${item.groundTruth})` : item.groundTruth!;
      expect(verify(item, answer).score, item.id).toBe(1);
      checked++;
    }
    expect(checked).toBeGreaterThan(5000);
    const code = ds.items.find((i) => i.metric === 'code_eval')!;
    expect(verify(code, 'def f(): pass', { replay: { score: code.recorded!['gemma-2-9b-it']!.score } }).verifier).toBe('recorded');
  });

  it('replays recorded outcomes by id and by prompt', () => {
    const store = replayStoreFor(ds, 'gemma-2-9b-it');
    const item = ds.items[1234]!;
    expect(store.lookup(item.prompt, item.id)).toEqual({ itemId: item.id, outcome: item.recorded!['gemma-2-9b-it'] });
    expect(store.lookup(item.prompt)?.outcome.score).toBe(item.recorded!['gemma-2-9b-it']!.score);
  });

  it('gives a replay pool of the 9 scored models with their card prices', async () => {
    const pool = await loadLlmRouterPool(dir);
    expect(pool.workers.map((w) => w.name)).toEqual(ds.workers);
    const byName = Object.fromEntries(pool.workers.map((w) => [w.name, w]));
    expect(byName['gemma-2-9b-it']).toEqual({
      name: 'gemma-2-9b-it',
      provider: 'replay',
      model: 'google/gemma-2-9b-it',
      settings: {},
      prices: { inputPerMTok: '0.1', outputPerMTok: '0.1' },
      description: expect.stringMatching(/^Gemma-2-9B-IT is a .*instruction-tuned model/),
      size: '9B',
    });
    expect(pool.workers.every((w) => typeof w.description === 'string' && w.description.length > 20 && /^\d/.test(w.size ?? ''))).toBe(true);
    expect(byName['llama-3.1-nemotron-51b-instruct']!.prices.inputPerMTok).toBe('0.9');
    expect(await resolvePool('llmrouter')).toEqual(pool);
    expect(await resolvePool(`llmrouter:${dir}`)).toEqual(pool);
  });

  it('exports to fugu JSONL that loads back to the same items and hash', async () => {
    const out = join(tmp, 'llmrouter.jsonl');
    const written = await llmRouterToJsonl(dir, out);
    expect(written.contentHash).toBe(ds.contentHash);
    const back = await loadDataset(out);
    expect(back.items).toEqual(ds.items);
    expect(back.contentHash).toBe(ds.contentHash);
    expect(back.workers).toEqual(ds.workers);
  });
});
