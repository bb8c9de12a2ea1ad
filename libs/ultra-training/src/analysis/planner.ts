// A model-based Conductor, as a ceiling for what the question's features let a Conductor learn in
// the replay model (a simulation from recorded outcomes; issue 16, "a model-based ceiling"): per
// worker, a logistic regression of its recorded score on the router backbone's features (fitted on
// the train split); per question, the candidate workflow with the highest expected correctness
// when the item's outcomes are those predicted probabilities (a "virtual item"), under the step
// model it plans with; the chosen workflows are then scored in exact expectation on the real items
// under every step model given (the world it may really be).
import { expectedWorkflowCorrect, type ReplayItem, type StepParams } from '@fugu/conductor';
import type { Workflows } from './exact.ts';

export type Regression = { w: Float64Array; b: number };

/**
 * Per target vector (one per worker), a logistic regression of soft targets in [0, 1] on x by
 * full-batch Adam (lr 0.05) with an L2 penalty on the weights; deterministic.
 */
export function fitRegressions(x: readonly Float32Array[], targets: readonly number[][], o: { l2: number; iterations: number; onIteration?: (t: number) => void }): Regression[] {
  const n = x.length;
  const dim = x[0]?.length ?? 0;
  const k = targets.length;
  const w = targets.map(() => new Float64Array(dim));
  const b = new Float64Array(k);
  const m = targets.map(() => new Float64Array(dim + 1));
  const v = targets.map(() => new Float64Array(dim + 1));
  const lr = 0.05;
  for (let t = 1; t <= o.iterations; t++) {
    const g = targets.map(() => new Float64Array(dim + 1));
    for (let i = 0; i < n; i++) {
      const xi = x[i]!;
      for (let j = 0; j < k; j++) {
        const wj = w[j]!;
        let z = b[j]!;
        for (let d = 0; d < dim; d++) z += wj[d]! * xi[d]!;
        const err = 1 / (1 + Math.exp(-z)) - targets[j]![i]!;
        const gj = g[j]!;
        for (let d = 0; d < dim; d++) gj[d]! += err * xi[d]!;
        gj[dim]! += err;
      }
    }
    for (let j = 0; j < k; j++) {
      const [gj, mj, vj, wj] = [g[j]!, m[j]!, v[j]!, w[j]!];
      for (let d = 0; d <= dim; d++) {
        const grad = gj[d]! / n + (d < dim ? o.l2 * wj[d]! : 0);
        mj[d] = 0.9 * mj[d]! + 0.1 * grad;
        vj[d] = 0.999 * vj[d]! + 0.001 * grad * grad;
        const step = (lr * (mj[d]! / (1 - 0.9 ** t))) / (Math.sqrt(vj[d]! / (1 - 0.999 ** t)) + 1e-8);
        if (d < dim) wj[d]! -= step;
        else b[j]! -= step;
      }
    }
    o.onIteration?.(t);
  }
  return w.map((wj, j) => ({ w: wj, b: b[j]! }));
}

/** Each regression's predicted probability for one feature vector. */
export function predictAll(models: readonly Regression[], x: Float32Array): number[] {
  return models.map(({ w, b }) => {
    let z = b;
    for (let d = 0; d < w.length; d++) z += w[d]! * x[d]!;
    return 1 / (1 + Math.exp(-z));
  });
}

/** The candidate with the highest expected correctness on the virtual item (first on ties: candidates come singles first). */
export function planWorkflow(params: StepParams, virtual: ReplayItem, candidates: Workflows): Workflows[number] {
  let chosen = candidates[0]!;
  let top = -1;
  for (const c of candidates) {
    const v = expectedWorkflowCorrect({ params, item: virtual, steps: c });
    if (v > top) [top, chosen] = [v, c];
  }
  return chosen;
}
