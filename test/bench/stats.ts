// What the benches share: the p-th percentile of their samples, and their prompts.
import { defaultLlmRouterDir, loadLlmRouter } from '@fugu/datasets';

/** The p-th percentile (nearest rank below) of xs. */
export const pct = (xs: readonly number[], p: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

/** Prompts of varied lengths: LLMRouter's test questions (median about 40 tokens), else 500 synthetic ones. */
export async function benchPrompts(): Promise<string[]> {
  try {
    const ds = await loadLlmRouter(defaultLlmRouterDir());
    return ds.items.filter((i) => i.sourceSplit === 'test').map((i) => i.prompt);
  } catch {
    return Array.from({ length: 500 }, (_, i) => `Question ${i}: what is ${i} times ${i + 7}, and why does the answer end in that digit?`);
  }
}
