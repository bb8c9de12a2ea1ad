// A realistic example report, for looking at the page without a database:
//   node libs/report/src/example.ts [out.html]     (default /tmp/report-example.html)
// The data is hand-made (8 workers, 6 tasks, two splits, soft labels), not a real run.

import { writeFileSync } from 'node:fs';
import { type EvalReportData, renderEvalReport } from './eval-report.ts';

export function exampleEvalReportData(): EvalReportData {
  const workers: EvalReportData['workers'] = [
    w('gpt-4.1', 'openai', 'gpt-4.1-2025-04-14', '2.00', '8.00', 0.781, 3600, 4, 2_410_000, 610_000, '9.700000000000', 1850, 5200, 0.52),
    w('gpt-4.1-mini', 'openai', 'gpt-4.1-mini', '0.40', '1.60', 0.702, 3600, 2, 2_410_000, 540_000, '1.828000000000', 900, 2600, 0.31),
    w('claude-sonnet-4', 'anthropic', 'claude-sonnet-4-20250514', '3.00', '15.00', 0.804, 3600, 11, 2_530_000, 700_000, '18.090000000000', 2400, 7900, 0.58),
    w('claude-haiku-3.5', 'anthropic', 'claude-3-5-haiku-latest', '0.80', '4.00', 0.655, 3600, 1, 2_530_000, 480_000, '3.944000000000', 1100, 3100, 0.22),
    w('gemini-2.5-flash', 'google', 'gemini-2.5-flash', '0.30', '2.50', 0.744, 3600, 37, 2_380_000, 650_000, '2.339000000000', 1300, 4800, 0.41),
    w('gemini-2.5-pro', 'google', 'gemini-2.5-pro', '1.25', '10.00', 0.812, 3600, 21, 2_380_000, 1_310_000, '16.075000000000', 6100, 19_400, 0.61),
    w('qwen2.5-7b (vLLM)', 'openai-compatible', 'Qwen/Qwen2.5-7B-Instruct', '0', '0', 0.521, 3600, 0, 2_300_000, 520_000, '0.000000000000', 420, 1300, 0.12),
    w('llama-3.1-8b <local> & "fast"', 'openai-compatible', 'meta-llama/Llama-3.1-8B-Instruct', '0.02', '0.05', 0.488, 3600, 96, 2_300_000, 500_000, '0.071000000000', 380, 1150, 0.1),
  ];
  const tasks = ['gsm8k', 'math-500', 'mmlu-pro', 'humaneval+', 'arc-challenge', 'multi-hop QA (hotpot)'];
  const taskCounts: Record<string, number> = { gsm8k: 300, 'math-500': 200, 'mmlu-pro': 250, 'humaneval+': 164, 'arc-challenge': 186, 'multi-hop QA (hotpot)': 100 };
  // per-task means derived from each worker's mean with task-specific skews, kept in [0, 1]
  const skew: Record<string, number[]> = {
    gsm8k: [0.12, 0.14, 0.1, 0.1, 0.13, 0.11, 0.2, 0.18],
    'math-500': [-0.08, -0.12, -0.1, -0.2, 0.02, 0.06, -0.2, -0.22],
    'mmlu-pro': [0.0, -0.03, 0.02, -0.02, -0.04, 0.0, -0.06, -0.05],
    'humaneval+': [0.05, 0.02, 0.1, 0.04, -0.01, 0.0, 0.03, 0.0],
    'arc-challenge': [0.13, 0.15, 0.12, 0.17, 0.14, 0.12, 0.2, 0.21],
    'multi-hop QA (hotpot)': [-0.15, -0.1, -0.12, -0.07, -0.2, -0.14, -0.15, -0.1],
  };
  const perTask: Record<string, Record<string, number>> = {};
  for (const t of tasks) {
    perTask[t] = {};
    workers.forEach((wk, i) => {
      perTask[t]![wk.name] = Math.round(Math.min(1, Math.max(0, wk.mean + skew[t]![i]!)) * 1000) / 1000;
    });
  }
  const choice: Record<string, string> = {};
  for (const t of tasks) {
    const best = workers.reduce((a, b) => (perTask[t]![b.name]! > perTask[t]![a.name]! ? b : a));
    choice[t] = best.name;
  }
  return {
    run: {
      id: 'run-2025-06-01-a7f3c9',
      dataset: 'routerbench-mix-v2 (1,200 items)',
      pool: 'frontier-and-local-8',
      repetitions: 3,
      seed: 20250601,
      sampleSize: 1200,
      status: 'completed',
      createdAt: '2025-06-01T09:12:44.120Z',
      finishedAt: '2025-06-01T10:47:03.551Z',
      durationS: 5659.4,
      calls: { total: 28_800, ok: 28_628, failed: 172 },
      callsPerS: 5.09,
      spendUsd: '52.049000000000',
      spendCapUsd: '75.00',
    },
    workers,
    tasks,
    perTask,
    taskCounts,
    reference: { n: 1200, bestSingle: { worker: 'gemini-2.5-pro', mean: 0.812 }, bestPerTask: { mean: 0.846, choice }, oracle: 0.934 },
    bySplit: {
      train: { n: 960, bestSingle: { worker: 'gemini-2.5-pro', mean: 0.815 }, bestPerTask: { mean: 0.851 }, oracle: 0.936 },
      test: { n: 240, bestSingle: { worker: 'claude-sonnet-4', mean: 0.806 }, bestPerTask: { mean: 0.829 }, oracle: 0.925 },
    },
    labels: {
      tau: 0.1,
      meanEntropy: 1.214,
      argmaxCounts: {
        'gemini-2.5-pro': 301,
        'claude-sonnet-4': 266,
        'gpt-4.1': 205,
        'gemini-2.5-flash': 142,
        'gpt-4.1-mini': 110,
        'claude-haiku-3.5': 71,
        'qwen2.5-7b (vLLM)': 62,
        'llama-3.1-8b <local> & "fast"': 43,
      },
    },
  };
}

function w(
  name: string, provider: string, model: string, inputPerMTok: string, outputPerMTok: string, mean: number, calls: number, failed: number,
  tokensIn: number, tokensOut: number, costUsd: string, latencyP50Ms: number, latencyP95Ms: number, oracleShare: number,
): EvalReportData['workers'][number] {
  return { name, provider, model, inputPerMTok, outputPerMTok, mean, calls, failed, tokensIn, tokensOut, costUsd, latencyP50Ms, latencyP95Ms, oracleShare };
}

if (import.meta.main) {
  const out = process.argv[2] ?? '/tmp/report-example.html';
  writeFileSync(out, renderEvalReport(exampleEvalReportData(), { generatedAt: new Date().toISOString() }));
  console.log(`wrote ${out}`);
}
