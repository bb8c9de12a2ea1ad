// `fugu multistep ceiling`: what a fixed multi-step workflow can gain over the best single worker
// on LLMRouter's 500 test questions (the replay model in exact expectation over the recorded
// outcomes: a simulation), under the evidence note's presets and under each measured parameter
// set with the bounds of its intervals (issue 29, 6). The search is the replay README's: every
// workflow of the embedded policy's shapes over the top-5 workers by train mean, up to 5 steps,
// chosen on the test split itself, so the gain is an upper bound for a fixed topology.

import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { accessOf, ACCESS_CHOICES, resolveWorkerParams, searchFixedWorkflows, type ReplayConfig, type ReplayItem } from '@fugu/conductor';

/** The repository's LLMRouter scores (data/llmrouter). */
export const DEFAULT_LLMROUTER_DIR = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../../data/llmrouter');

export type Ceiling = { config: string; bestSingle: { worker: string; accuracy: number }; best: { worker: string; sources: string[]; steps: number; accuracy: number }; gain: number };

async function load(dir: string, file: string): Promise<ReplayItem[]> {
  const rows = JSON.parse(await readFile(path.join(dir, file), 'utf8')) as Array<{ scores: Record<string, number> }>;
  return rows.map((q, i) => ({ id: `${file}:${i}`, recorded: q.scores }));
}

/** The fixed-workflow ceiling under each named ReplayConfig. */
export async function fixedWorkflowCeilings(configs: ReadonlyArray<[string, ReplayConfig]>, dir: string = DEFAULT_LLMROUTER_DIR): Promise<Ceiling[]> {
  const test = await load(dir, 'scores_test.json');
  const train = await load(dir, 'scores_train.json');
  const workers = Object.keys(test[0]!.recorded);
  const mean = (w: string) => train.reduce((t, i) => t + i.recorded[w]!, 0) / train.length;
  const top5 = [...workers].sort((a, b) => mean(b) - mean(a)).slice(0, 5);
  const access = ACCESS_CHOICES.map((choice) => (i: number): number[] => {
    const a = accessOf(choice, i);
    return a === 'none' ? [] : a === 'all' ? Array.from({ length: i }, (_, j) => j) : [...a];
  });
  return configs.map(([name, config]) => {
    const r = searchFixedWorkflows({ items: test, workers: top5, params: (w, k) => resolveWorkerParams(config, w, { sources: k }), maxSteps: 5, access });
    return {
      config: name,
      bestSingle: { worker: r.bestSingle.worker, accuracy: r.bestSingle.accuracy },
      best: { worker: r.best.worker, sources: r.best.sources, steps: r.best.steps.length, accuracy: r.best.accuracy },
      gain: r.gain,
    };
  });
}

export function formatCeilings(cs: readonly Ceiling[]): string {
  const head = ['parameters', 'best single', 'best fixed workflow', 'accuracy', 'gain (points)'];
  const rows = cs.map((c) => [c.config, `${c.bestSingle.worker} ${c.bestSingle.accuracy.toFixed(4)}`, c.best.sources.length === 0 ? '(a single worker)' : `${c.best.worker} reading ${c.best.sources.join(', ')} (${c.best.steps} steps)`, c.best.accuracy.toFixed(4), (100 * c.gain).toFixed(2)]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((x, i) => x.padEnd(widths[i]!)).join('  ').trimEnd();
  return [
    "The best fixed workflow against the best single worker on LLMRouter's 500 test questions (replay, exact expectation: a simulation from recorded outcomes; chosen on the test split, an upper bound), per parameter set",
    line(head),
    ...rows.map(line),
  ].join('\n');
}
