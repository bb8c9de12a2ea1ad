// The reward service's wire format: both request shapes read into entries, the completion cut
// from OpenRLHF's query, and every bad input an InputError naming its field and index.
import { describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { completionOfQuery, parseRewardsRequest, REWARD_LIMITS } from './protocol.ts';

const fieldOf = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (e) {
    if (e instanceof InputError) return e.field;
    throw e;
  }
  return undefined;
};

const PROMPT = '<|im_start|>system\nYou write workflows.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n';
const WF = 'model id = [0]\nsubtasks = ["solve it"]\naccess list = [[]]';

describe('OpenRLHF shape', () => {
  it('cuts the completion after the prompt, drops trailing special tokens, reads ids and JSON labels', () => {
    const r = parseRewardsRequest({
      query: [PROMPT + WF + '<|im_end|><|endoftext|>', `<pad><pad>${PROMPT}${WF}</s>`, PROMPT + 'no lists here'],
      prompts: [PROMPT, PROMPT, PROMPT],
      labels: ['train-000001', '{"question": "What is 2+2?", "ground_truth": "4", "metric": "numeric", "seed": 9}', { question_id: 'x7' }],
    }, { seed: '3' });
    expect(r.shape).toBe('openrlhf');
    expect(r.entries.map((e) => e.completion)).toEqual([WF, WF, 'no lists here']);
    expect(r.entries.map((e) => e.seed)).toEqual([3, 9, 3]);
    expect(r.entries[0]!.target).toEqual({ kind: 'id', id: 'train-000001' });
    expect(r.entries[1]!.target).toEqual({ kind: 'inline', question: 'What is 2+2?', groundTruth: '4', metric: 'numeric' });
    expect(r.entries[2]!.target).toEqual({ kind: 'id', id: 'x7' });
    expect(r).toMatchObject({ deadlineMs: REWARD_LIMITS.defaultDeadlineS * 1000, maxSteps: 5, unscored: 'null' });
  });

  it('names the field of every bad input', () => {
    const ok = { query: [PROMPT + WF], prompts: [PROMPT], labels: ['a'] };
    expect(fieldOf(() => parseRewardsRequest({ query: [], prompts: [], labels: [] }))).toBe('query');
    expect(fieldOf(() => parseRewardsRequest({ ...ok, prompts: [PROMPT, PROMPT] }))).toBe('prompts');
    expect(fieldOf(() => parseRewardsRequest({ ...ok, labels: [] }))).toBe('labels');
    expect(fieldOf(() => parseRewardsRequest({ query: ok.query, labels: ok.labels }))).toBe('prompts');
    expect(fieldOf(() => parseRewardsRequest({ query: ['x', 'other text'], prompts: ['x', PROMPT], labels: ['a', 'b'] }))).toBe('query[1]');
    expect(fieldOf(() => parseRewardsRequest({ ...ok, labels: [''] }))).toBe('labels[0]');
    expect(fieldOf(() => parseRewardsRequest({ ...ok, labels: ['{"question": "q?"}'] }))).toBe('labels[0].ground_truth');
    expect(fieldOf(() => parseRewardsRequest({ ...ok, labels: [{ question: 'q?', ground_truth: '1', metric: 'recorded' }] }))).toBe('labels[0].metric');
    expect(fieldOf(() => parseRewardsRequest({ ...ok, labels: [{ id: 'a' }] }))).toBe('labels[0].id');
    expect(fieldOf(() => parseRewardsRequest({ ...ok, labels: ['{not json'] }))).toBe('labels[0]');
    expect(fieldOf(() => parseRewardsRequest(ok, { deadline_s: '0' }))).toBe('deadline_s');
    expect(fieldOf(() => parseRewardsRequest(ok, { seed: '-1' }))).toBe('seed');
    expect(fieldOf(() => parseRewardsRequest(ok, { max_steps: '11' }))).toBe('max_steps');
    expect(fieldOf(() => parseRewardsRequest(ok, { unscored: 'zero' }))).toBe('unscored');
    expect(fieldOf(() => parseRewardsRequest(ok, { api_key: 'x' }))).toBe('api_key');
    expect(fieldOf(() => parseRewardsRequest({ ...ok, seed: 1 }, { seed: '2' }))).toBe('seed');
    const n = REWARD_LIMITS.maxCompletions;
    expect(parseRewardsRequest({ query: Array(n).fill(PROMPT + WF), prompts: Array(n).fill(PROMPT), labels: Array(n).fill('a') }).entries).toHaveLength(n);
    expect(fieldOf(() => parseRewardsRequest({ query: Array(n + 1).fill(PROMPT + WF), prompts: Array(n + 1).fill(PROMPT), labels: Array(n + 1).fill('a') }))).toBe('query');
    expect(fieldOf(() => parseRewardsRequest({ ...ok, query: [PROMPT + 'x'.repeat(REWARD_LIMITS.maxCompletionChars + 1)] }))).toBe('query[0]');
  });
});

describe("fugu's shape", () => {
  it('reads completions with ids or inline questions, options from the body', () => {
    const r = parseRewardsRequest({
      completions: [{ completion: WF, question_id: 'q1' }, { completion: '', question: 'Capital of France?', ground_truth: 'Paris', seed: 4 }],
      seed: 2, deadline_s: 1.5, max_steps: 3, unscored: 'error',
    });
    expect(r).toMatchObject({ shape: 'fugu', deadlineMs: 1500, maxSteps: 3, unscored: 'error' });
    expect(r.entries.map((e) => [e.field, e.completion, e.seed])).toEqual([['completions[0]', WF, 2], ['completions[1]', '', 4]]);
    expect(r.entries[1]!.target).toEqual({ kind: 'inline', question: 'Capital of France?', groundTruth: 'Paris', metric: 'exact-match' });
  });

  it('names the field of every bad input', () => {
    expect(fieldOf(() => parseRewardsRequest({ completions: [] }))).toBe('completions');
    expect(fieldOf(() => parseRewardsRequest({ completions: [{ question_id: 'q' }] }))).toBe('completions[0].completion');
    expect(fieldOf(() => parseRewardsRequest({ completions: [{ completion: WF }] }))).toBe('completions[0].question');
    expect(fieldOf(() => parseRewardsRequest({ completions: [{ completion: WF, question: 'q?', ground_truth: '' }] }))).toBe('completions[0].ground_truth');
    expect(fieldOf(() => parseRewardsRequest({ completions: [{ completion: WF, question_id: 'q', question: 'x' }] }))).toBe('completions[0].question_id');
    expect(fieldOf(() => parseRewardsRequest({ completions: [{ completion: WF, question_id: 'q' }], query: ['x'] }))).toBe('completions');
    expect(fieldOf(() => parseRewardsRequest({ completions: [{ completion: WF, question_id: 'q' }], extra: 1 }))).toBe('extra');
    expect(fieldOf(() => parseRewardsRequest([]))).toBe('body');
  });
});

it('completionOfQuery: the first occurrence of the prompt, or undefined', () => {
  expect(completionOfQuery('PPcompletion PP', 'PP')).toBe('completion PP');
  expect(completionOfQuery('abc', 'x')).toBeUndefined();
  expect(completionOfQuery('P done <|eot_id|>\n', 'P')).toBe(' done');
});
