// Single-step routing: fitness = mean recorded reward (the run's per item-worker mean) of the
// argmax worker over a seeded minibatch of the split. All candidates score the same minibatch
// (common random numbers) from the cached, projected prompt features, in candidate-batched head
// runs (P thetas over the B items in one ONNX run).
import { InputError, rng } from '@fugu/core';
import type { ProjectedFeatures } from '@fugu/router-model';
import { argmaxAt, gatherRows, type TaskData } from './task-data.ts';
import type { CandidateResult, EvalContext } from './types.ts';

/** Most (candidate, input) pairs in one head run (bounds the [P, N, D] intermediates). */
export const MAX_PAIRS_PER_RUN = 16_384;

/**
 * The minibatch of an evaluation: `size` distinct rows of the split drawn by a partial
 * Fisher-Yates shuffle seeded by (seed, generation, replica, split); the whole split (in order)
 * when it has no more than `size` rows.
 */
export function drawMinibatch(rows: readonly number[], size: number, ctx: EvalContext): number[] {
  if (rows.length <= size) return [...rows];
  const r = rng('fugu-single-step', ctx.seed, ctx.split, ctx.generation, ctx.replica);
  const a = rows.slice();
  for (let i = 0; i < size; i++) {
    const j = i + r.int(a.length - i);
    const t = a[i]!;
    a[i] = a[j]!;
    a[j] = t;
  }
  return a.slice(0, size);
}

export async function evaluateSingleStep(task: TaskData, batchSize: number, thetas: readonly Float32Array[], ctx: EvalContext): Promise<CandidateResult[]> {
  const rows = task.split[ctx.split];
  if (rows.length === 0) throw new InputError(`the ${ctx.split} split of run ${task.run} is empty`, { field: 'ctx.split' });
  const batch = drawMinibatch(rows, batchSize, ctx);
  const y = gatherRows(task.promptY, batch);
  const choices = await argmaxChoices(task, y, thetas);
  const K = task.data.workers.length;
  return choices.map((choice) => {
    let sum = 0;
    const picks = new Array<number>(K).fill(0);
    batch.forEach((row, i) => {
      sum += task.data.rewards[row]![choice[i]!]!;
      picks[choice[i]!]!++;
    });
    return {
      fitness: sum / batch.length,
      summary: { items: batch.length, picks: Object.fromEntries(task.data.workers.map((w, j) => [w.name, picks[j]!])) },
    };
  });
}

/** The argmax worker of every input for every candidate ([P][N]), candidates chunked to MAX_PAIRS_PER_RUN. */
export async function argmaxChoices(task: Pick<TaskData, 'head'>, y: ProjectedFeatures, thetas: readonly Float32Array[]): Promise<Int32Array[]> {
  const K = task.head.workers, N = y.n;
  const per = Math.max(1, Math.floor(MAX_PAIRS_PER_RUN / N));
  const out: Int32Array[] = [];
  for (let p0 = 0; p0 < thetas.length; p0 += per) {
    const part = thetas.slice(p0, p0 + per);
    const logits = (await task.head.candidateLogits(y, part)).data; // [P, N, K]
    part.forEach((_, p) => out.push(Int32Array.from({ length: N }, (_, i) => argmaxAt(logits, (p * N + i) * K, K))));
  }
  return out;
}
