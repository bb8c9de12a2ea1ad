// The replay model on the real recorded outcomes (data/llmrouter: 9 LLMs on LLMRouter's 500 test
// questions), in exact expectation over every draw: what moves that add no information gain (nothing),
// and what the best fixed workflow gains over the best single worker (README "What a fixed
// workflow can gain", beside the published evidence it must agree with).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectedWorkflowCorrect, replayWorkflow, type ReplayItem, type ReplayWorkflowStep } from './model.ts';
import { resolveWorkerParams } from './params.ts';
import { searchFixedWorkflows } from './search.ts';
import { accessOf, ACCESS_CHOICES } from '../policy/policy.ts';

const dir = path.resolve(import.meta.dirname, '../../../../data/llmrouter');
const load = (file: string): ReplayItem[] =>
  (JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as Array<{ scores: Record<string, number> }>).map((q, i) => ({ id: `${file}:${i}`, recorded: q.scores }));
const test = load('scores_test.json');
const train = load('scores_train.json');
const workers = Object.keys(test[0]!.recorded);
const params = (w: string) => resolveWorkerParams({}, w);
const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
const expected = (steps: ReplayWorkflowStep[]): number => mean(test.map((item) => expectedWorkflowCorrect({ params, item, steps })));
const solo = (w: string): number => expected([{ worker: w, sees: [] }]);
const chain = (w: string, n: number): ReplayWorkflowStep[] => Array.from({ length: n }, (_, i) => ({ worker: w, sees: i === 0 ? [] : [i - 1] }));
const ranking = [...workers].sort((a, b) => mean(train.map((i) => i.recorded[b]!)) - mean(train.map((i) => i.recorded[a]!)));

describe('the replay model on LLMRouter (exact expectations over the recorded outcomes)', () => {
  it('has the data it reads: 500 test questions, 9 workers', () => {
    expect(test).toHaveLength(500);
    expect(workers).toHaveLength(9);
  });

  it('a self-chain of length 2-10 never beats the worker alone by more than 0.002 (every worker)', () => {
    for (const w of workers) {
      const alone = solo(w);
      for (let n = 2; n <= 10; n++) expect(expected(chain(w, n)) - alone, `${w}, chain of ${n}`).toBeLessThanOrEqual(0.002);
    }
  });

  it('sampled as the issue measured it (seeds 0-19): the 51b chain scores what the 51b alone scores, at every length', () => {
    const w = 'llama-3.1-nemotron-51b-instruct';
    const acc = (steps: ReplayWorkflowStep[]): number => {
      let k = 0;
      for (let seed = 0; seed < 20; seed++) for (const item of test) if (replayWorkflow({ params, item, steps, seed }).correct) k++;
      return k / (20 * test.length);
    };
    const alone = acc(chain(w, 1));
    expect(alone).toBeGreaterThan(0.5);
    for (const n of [2, 5, 10]) expect(acc(chain(w, n))).toBe(alone);
  });

  it('the same information through different access shapes gives the same accuracy', () => {
    const [a, b, c, agg] = ranking;
    const shapes: ReplayWorkflowStep[][] = [
      // mixture: three proposers, the aggregator sees all
      [{ worker: a!, sees: [] }, { worker: b!, sees: [] }, { worker: c!, sees: [] }, { worker: agg!, sees: [0, 1, 2] }],
      // a chain a -> b -> c -> agg, each seeing the one before
      [{ worker: a!, sees: [] }, { worker: b!, sees: [0] }, { worker: c!, sees: [1] }, { worker: agg!, sees: [2] }],
      // a -> b, then c sees both, then agg sees c only; and a repeat of a on the way
      [{ worker: a!, sees: [] }, { worker: b!, sees: [0] }, { worker: a!, sees: [1] }, { worker: c!, sees: [1, 2] }, { worker: agg!, sees: [3] }],
    ];
    const accs = shapes.map(expected);
    for (const x of accs) expect(x).toBe(accs[0]);
    // and a different information set does differ (the test can tell them apart)
    expect(expected([{ worker: a!, sees: [] }, { worker: agg!, sees: [0] }])).not.toBe(accs[0]);
  });

  it('the exhaustive search over the embedded policy\'s fixed workflows (top-5 workers, up to 5 steps, access all/none/previous/first) gains little over the best single worker', () => {
    const top5 = ranking.slice(0, 5);
    const access = ACCESS_CHOICES.map((choice) => (i: number): number[] => {
      const a = accessOf(choice, i);
      return a === 'none' ? [] : a === 'all' ? Array.from({ length: i }, (_, j) => j) : [...a];
    });
    const r = searchFixedWorkflows({ items: test, workers: top5, params, maxSteps: 5, access });
    // 5 workers at step 1, then 5 x 4 choices per further step
    expect(r.workflows).toBe(5 * (1 + 20 + 20 ** 2 + 20 ** 3 + 20 ** 4));
    // last worker x subsets of the other four
    expect(r.signatures).toBe(5 * 16);
    expect(r.bestSingle.accuracy).toBeCloseTo(Math.max(...top5.map(solo)), 12);
    console.log(`best fixed workflow: ${r.best.worker} over [${r.best.sources.join(', ')}] in ${r.best.steps.length} steps, ${r.best.accuracy.toFixed(4)}; best single ${r.bestSingle.worker} ${r.bestSingle.accuracy.toFixed(4)}; gain ${r.gain.toFixed(4)}`);
    // the published evidence: a strong aggregator over diverse proposers gains about 1 to 3 points
    // over the best proposer, a fixed mixture can lose (README "What a fixed workflow can gain")
    expect(r.gain).toBeGreaterThan(0.005);
    expect(r.gain).toBeLessThan(0.03);
    // the best workflow aggregates other workers' answers: information, not repetition
    expect(r.best.sources.length).toBeGreaterThan(0);
  });
});
