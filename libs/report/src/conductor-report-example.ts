// A realistic example Conductor report, for looking at the page without a database:
//   node libs/report/src/conductor-report-example.ts [out.html]     (default /tmp/conductor-report.html)
// The data is hand-made (an LLMRouter-like replay pool of 6 workers, 5 tasks, 3 seeds), not a real run.

import { writeFileSync } from 'node:fs';
import type { ConductorReportData, ConductorResult } from './conductor-report-data.ts';
import { renderConductorReport } from './conductor-report.ts';

const WORKERS = ['llama-3.3-nemotron-super-49b-v1', 'llama3-70b-instruct', 'mixtral-8x22b-instruct-v0.1', 'qwen2.5-7b-instruct', 'gemma-2-9b-it', 'mistral-7b-instruct-v0.3'];
const LARGE = new Set(WORKERS.slice(0, 3));

type Row = Omit<ConductorResult, 'topologies' | 'finishReasons' | 'latencyMs'> & Partial<Pick<ConductorResult, 'topologies' | 'finishReasons' | 'latencyMs'>>;

function result(r: Row): ConductorResult {
  return { topologies: {}, finishReasons: {}, latencyMs: null, ...r };
}

export function exampleConductorReportData(): ConductorReportData {
  const n = 600;
  const seeds = (meanRewardSd: number, accuracySd: number, usdPerItemSd: number) => ({ count: 3, meanRewardSd, accuracySd, usdPerItemSd });
  const results: ConductorResult[] = [
    result({
      name: 'fixed:single:llama-3.3-nemotron-super-49b-v1', kind: 'conductor', workflows: n, meanReward: 0.842, accuracy: 0.684, parseFailureRate: 0,
      usdPerItem: { conductor: 0, workers: 0.00041 }, tokensPerItem: { conductor: 0, workers: 912 }, latencyMs: { mean: 1840, p95: 4120 }, stepsPerWorkflow: 1,
      topologies: { single: n }, finishReasons: { done: n }, seeds: seeds(0.004, 0.008, 0.000002),
    }),
    result({
      name: 'fixed:moa:3', kind: 'conductor', workflows: n, meanReward: 0.851, accuracy: 0.702, parseFailureRate: 0,
      usdPerItem: { conductor: 0, workers: 0.00137 }, tokensPerItem: { conductor: 0, workers: 3620 }, latencyMs: { mean: 3910, p95: 8650 }, stepsPerWorkflow: 4,
      topologies: { parallel: n }, finishReasons: { done: 597, 'max-usd': 3 }, seeds: seeds(0.006, 0.012, 0.00001),
    }),
    result({
      name: 'fixed:chain', kind: 'conductor', workflows: n, meanReward: 0.836, accuracy: 0.672, parseFailureRate: 0,
      usdPerItem: { conductor: 0, workers: 0.00078 }, tokensPerItem: { conductor: 0, workers: 2010 }, latencyMs: { mean: 3720, p95: 7990 }, stepsPerWorkflow: 2,
      topologies: { chain: n }, finishReasons: { done: n }, seeds: seeds(0.005, 0.01, 0.000004),
    }),
    result({
      name: 'policy:ckpt-init-3f2a', kind: 'conductor', workflows: n, meanReward: 0.781, accuracy: 0.588, parseFailureRate: 0,
      usdPerItem: { conductor: 0, workers: 0.00052 }, tokensPerItem: { conductor: 0, workers: 1480 }, latencyMs: { mean: 2950, p95: 7410 }, stepsPerWorkflow: 2.61,
      topologies: { single: 188, chain: 171, parallel: 96, tree: 145 }, finishReasons: { done: 594, 'max-steps': 6 }, seeds: seeds(0.011, 0.019, 0.00003),
    }),
    result({
      name: 'llm:llama3-70b-instruct', kind: 'conductor', workflows: n, meanReward: 0.702, accuracy: 0.531, parseFailureRate: 0.085,
      usdPerItem: { conductor: 0.00034, workers: 0.00069 }, tokensPerItem: { conductor: 1630, workers: 1760 }, latencyMs: { mean: 6120, p95: 13400 }, stepsPerWorkflow: 2.2,
      topologies: { single: 131, chain: 210, parallel: 118, tree: 90, unparsed: 51 }, finishReasons: { done: 549, unparsed: 51 }, seeds: seeds(0.014, 0.017, 0.00004),
    }),
    result({
      name: 'fixed:router:ckpt-2025-06-03-sft-7c1e', kind: 'conductor', workflows: n, meanReward: 0.859, accuracy: 0.719, parseFailureRate: 0,
      usdPerItem: { conductor: 0, workers: 0.00029 }, tokensPerItem: { conductor: 0, workers: 840 }, latencyMs: { mean: 1710, p95: 3980 }, stepsPerWorkflow: 1,
      topologies: { single: n }, finishReasons: { done: n }, seeds: seeds(0.005, 0.009, 0.000003),
    }),
    result({
      name: 'best single (llama-3.3-nemotron-super-49b-v1)', kind: 'reference', workflows: n, meanReward: 0.842, accuracy: 0.684, parseFailureRate: 0,
      usdPerItem: { conductor: 0, workers: 0.00041 }, tokensPerItem: { conductor: 0, workers: 912 }, stepsPerWorkflow: 1, seeds: seeds(0.004, 0.008, 0.000002),
    }),
    result({
      name: 'oracle', kind: 'reference', workflows: n, meanReward: 0.947, accuracy: 0.894, parseFailureRate: 0,
      usdPerItem: { conductor: 0, workers: 0.00012 }, tokensPerItem: { conductor: 0, workers: 690 }, stepsPerWorkflow: 1, seeds: seeds(0.003, 0.006, 0.000001),
    }),
  ];

  const taskCounts: Record<string, number> = { 'agentverse-logicgrid': 90, gsm8k: 150, 'mmlu-pro': 160, humaneval: 80, 'math-500': 120 };
  const skew: Record<string, number[]> = {
    'agentverse-logicgrid': [0.42, 0.2, 0.16, 0.1, 0.07, 0.05],
    gsm8k: [0.22, 0.18, 0.12, 0.3, 0.1, 0.08],
    'mmlu-pro': [0.3, 0.28, 0.2, 0.08, 0.1, 0.04],
    humaneval: [0.25, 0.15, 0.35, 0.15, 0.05, 0.05],
    'math-500': [0.5, 0.2, 0.15, 0.1, 0.03, 0.02],
  };
  const dist = (s: (task: string) => number[]) => Object.fromEntries(Object.keys(taskCounts).map((t) => [t, Object.fromEntries(WORKERS.map((w, j) => [w, s(t)[j]!]))]));
  const workerDistribution: ConductorReportData['workerDistribution'] = {
    'fixed:moa:3': dist(() => [0.5, 0.25, 0.25, 0, 0, 0]),
    'policy:ckpt-init-3f2a': dist((t) => skew[t]!),
    'llm:llama3-70b-instruct': dist((t) => [...skew[t]!].reverse()),
  };

  return {
    run: {
      id: 'ultra-2025-06-10-b41d',
      dataset: 'llmrouter',
      pool: 'llmrouter-replay',
      split: 'test',
      sample: n,
      seed: 7,
      repeats: 1,
      maxSteps: 5,
      status: 'done',
      createdAt: '2025-06-10T09:12:44.000Z',
      finishedAt: '2025-06-10T09:31:02.000Z',
      environment: 'replay',
      replay: Object.fromEntries(
        WORKERS.map((w) => [w, LARGE.has(w) ? { keep: 0.95, misled: 0.2, adopt: 0.6, fix: 0.05, herd: 2, sizeClass: 'large' } : { keep: 0.8, misled: 0.5, adopt: 0.5, fix: 0.07, herd: 2, sizeClass: 'small' }]),
      ),
    },
    results,
    workerDistribution,
    taskCounts,
    examples: [
      {
        conductor: 'fixed:moa:3',
        item: 'gsm8k-0412',
        task: 'gsm8k',
        question: 'A baker sells 3 loaves for $5 & a cake for $12. If Ana buys 9 loaves and 2 cakes, and pays with a $50 bill, how much change does she get? (Is it < $10?)',
        reward: 1,
        outcome: 'correct',
        finishReason: 'done',
        parseError: null,
        topology: 'parallel',
        steps: [
          { idx: 0, worker: WORKERS[0]!, subtask: 'Solve the problem step by step and give the final number.', sees: [], answer: '9 loaves = 3 x $5 = $15; 2 cakes = $24; total $39; change $50 - $39 = $11. Final answer: 11', status: 'done', usd: 0.00019 },
          { idx: 1, worker: WORKERS[1]!, subtask: 'Solve the problem step by step and give the final number.', sees: [], answer: 'Total = 15 + 24 = 39, change = 11. Final answer: 11', status: 'done', usd: 0.00031 },
          { idx: 2, worker: WORKERS[2]!, subtask: 'Solve the problem step by step and give the final number.', sees: [], answer: '9 loaves cost 9 x 5 = 45 ... total 69, she cannot pay. Final answer: -19', status: 'done', usd: 0.00028 },
          { idx: 3, worker: WORKERS[0]!, subtask: 'Read the three solutions, check each, and give the one correct final answer.', sees: [0, 1, 2], answer: 'Solutions 0 and 1 agree; solution 2 prices loaves singly. Final answer: 11', status: 'done', usd: 0.00042 },
        ],
        finalAnswer: '11',
      },
      {
        conductor: 'llm:llama3-70b-instruct',
        item: 'mmlu-pro-1187',
        task: 'mmlu-pro',
        question: 'Which of the following best describes the role of the enzyme helicase in DNA replication?\nA) joins Okazaki fragments\nB) unwinds the double helix\nC) synthesizes RNA primers\nD) proofreads new strands',
        reward: 0.5,
        outcome: 'wrong',
        finishReason: 'done',
        parseError: null,
        topology: 'chain',
        steps: [
          { idx: 0, worker: WORKERS[3]!, subtask: 'Answer the multiple-choice question with one letter.', sees: [], answer: 'C', status: 'done', usd: 0.00002 },
          { idx: 1, worker: WORKERS[4]!, subtask: 'Check the previous answer and correct it if needed; answer with one letter.', sees: [0], answer: 'The previous answer C is right: primase... Answer: C', status: 'done', usd: 0.00003 },
        ],
        finalAnswer: 'C',
      },
      {
        conductor: 'llm:llama3-70b-instruct',
        item: 'math-500-0033',
        task: 'math-500',
        question: 'Find all real x with |x - 3| < 2 and x^2 > 4.',
        reward: 0,
        outcome: null,
        finishReason: 'unparsed',
        parseError: 'access list, step 3: may only see earlier steps (0, 1), not 3',
        topology: 'unparsed',
        steps: [],
        finalAnswer: null,
      },
    ],
  };
}

if (import.meta.main) {
  const out = process.argv[2] ?? '/tmp/conductor-report.html';
  writeFileSync(out, renderConductorReport(exampleConductorReportData(), { generatedAt: new Date().toISOString() }));
  console.log(`wrote ${out}`);
}
