// A realistic example router report, for looking at the page without a database:
//   node libs/report/src/router-report-example.ts [out.html]     (default /tmp/router-report.html)
// The data is hand-made (7 workers, 6 tasks, a lambda sweep, an SFT history), not a real evaluation.

import { writeFileSync } from 'node:fs';
import type { RouterReportData } from './router-report-data.ts';
import { renderRouterReport } from './router-report.ts';

export function exampleRouterReportData(): RouterReportData {
  const workers: RouterReportData['workers'] = [
    { name: 'gpt-4.1', inputPerMTok: '2.00', outputPerMTok: '8.00' },
    { name: 'gpt-4.1-mini', inputPerMTok: '0.40', outputPerMTok: '1.60' },
    { name: 'claude-sonnet-4', inputPerMTok: '3.00', outputPerMTok: '15.00' },
    { name: 'claude-haiku-3.5', inputPerMTok: '0.80', outputPerMTok: '4.00' },
    { name: 'gemini-2.5-flash', inputPerMTok: '0.30', outputPerMTok: '2.50' },
    { name: 'gemini-2.5-pro', inputPerMTok: '1.25', outputPerMTok: '10.00' },
    { name: 'qwen2.5-7b (vLLM)', inputPerMTok: '0', outputPerMTok: '0' },
  ];
  const taskCounts: Record<string, number> = { gsm8k: 300, 'math-500': 200, 'mmlu-pro': 250, 'humaneval+': 164, 'arc-challenge': 186, 'multi-hop QA (hotpot)': 100 };
  const shares: Record<string, number[]> = {
    gsm8k: [0.08, 0.3, 0.02, 0.05, 0.25, 0.05, 0.25],
    'math-500': [0.12, 0.04, 0.18, 0.0, 0.16, 0.5, 0.0],
    'mmlu-pro': [0.2, 0.12, 0.3, 0.06, 0.08, 0.22, 0.02],
    'humaneval+': [0.15, 0.05, 0.55, 0.05, 0.05, 0.15, 0.0],
    'arc-challenge': [0.03, 0.2, 0.02, 0.15, 0.2, 0.0, 0.4],
    'multi-hop QA (hotpot)': [0.25, 0.1, 0.25, 0.0, 0.1, 0.3, 0.0],
  };
  const routing: RouterReportData['routing'] = {};
  for (const [task, s] of Object.entries(shares)) routing[task] = Object.fromEntries(workers.map((w, j) => [w.name, s[j]!]));
  // a concave PGR curve over 120 thresholds, ending at (1, 1)
  const calls = Array.from({ length: 121 }, (_, i) => i / 120);
  const pgr = calls.map((c) => Math.min(1, 1 - (1 - c) ** 2.4 + 0.04 * Math.sin(9 * c) * c * (1 - c)));
  const sweepPoints = [0, 0.5, 1, 2, 4, 8, 16, 32, 64].map((lambda, i) => ({
    lambda,
    cost: 0.0042 / (1 + 0.55 * i) + 0.00004 * i,
    reward: 0.861 - 0.018 * i ** 1.3 + (i === 3 ? -0.012 : 0),
  }));
  const hull = [...sweepPoints]
    .filter((p, i) => i !== 3)
    .map((p) => ({ cost: p.cost, reward: p.reward }))
    .sort((a, b) => a.cost - b.cost);
  return {
    checkpoint: {
      id: 'ckpt-2025-06-03-sft-7c1e',
      stage: 'sft',
      backboneId: 'qwen3-embedding-0.6b',
      parentId: null,
      tau: 0.1,
      createdAt: '2025-06-03T14:20:11.000Z',
    },
    data: { run: 'run-2025-06-01-a7f3c9', split: 'test', splitSeed: 17, items: 1200, trainItems: 4908 },
    workers,
    methods: [
      { name: 'router', meanReward: 0.861, meanCost: 0.0042, note: 'λ = 0' },
      { name: 'router (head only)', meanReward: 0.842, meanCost: 0.0047 },
      { name: 'best single', meanReward: 0.812, meanCost: 0.0093, note: 'gemini-2.5-pro' },
      { name: 'best per task', meanReward: 0.846, meanCost: 0.0101, note: 'one worker per task (train split)' },
      { name: 'kNN (k=10)', meanReward: 0.829, meanCost: 0.0064 },
      { name: 'random', meanReward: 0.684, meanCost: 0.0038 },
      { name: 'oracle', meanReward: 0.934, meanCost: 0.0031, note: 'cheapest best worker per item' },
    ],
    gapClosed: (0.861 - 0.812) / (0.934 - 0.812),
    strongWeak: { strong: 'gemini-2.5-pro', weak: 'qwen2.5-7b (vLLM)', apgr: 0.671, cpt50: 0.246, cpt80: 0.487, curve: { calls, pgr } },
    aiq: 0.803,
    sweep: { points: sweepPoints, hull },
    routing,
    taskCounts,
    training: Array.from({ length: 14 }, (_, i) => ({
      epoch: i + 1,
      trainLoss: 0.42 * Math.exp(-i / 3.2) + 0.061,
      valLoss: 0.4 * Math.exp(-i / 3.6) + 0.088 + 0.0015 * Math.max(0, i - 8) ** 1.5,
    })),
    seeds: {
      count: 5,
      methods: [
        { name: 'router', mean: 0.857, sd: 0.006 },
        { name: 'router (head only)', mean: 0.839, sd: 0.008 },
        { name: 'best single', mean: 0.809, sd: 0.007 },
        { name: 'best per task', mean: 0.843, sd: 0.009 },
        { name: 'kNN (k=10)', mean: 0.825, sd: 0.01 },
        { name: 'random', mean: 0.683, sd: 0.012 },
        { name: 'oracle', mean: 0.932, sd: 0.004 },
      ],
    },
  };
}

if (import.meta.main) {
  const out = process.argv[2] ?? '/tmp/router-report.html';
  writeFileSync(out, renderRouterReport(exampleRouterReportData(), { generatedAt: new Date().toISOString() }));
  console.log(`wrote ${out}`);
}
