// The warm start of a GRPO run (`--start router:<checkpoint>`): the documented initialisation,
// then its first-step worker head fitted to the router checkpoint's choices on the train
// questions (cross-entropy of the step-1 worker decision against the router's pick, Adam), so
// training starts at the router's level and learns where more steps pay. Only the worker head
// moves; every other decision keeps the initialisation. Deterministic (seeded order).
import { rng } from '@fugu/core';
import { type ConductorPolicy, type PolicyDecisions } from '@fugu/conductor';
import { adamInit, adamStep } from '@fugu/grpo';

export type WarmStartResult = { policy: ConductorPolicy; epochs: number; agreement: number };

/** The step-1 argmax worker of the policy for these features. */
const firstWorker = (p: ConductorPolicy, x: Float32Array): number => p.decide(x, { argmax: true, maxSteps: 1 }).decisions.steps[0]!.worker;

/**
 * Fits the step-1 worker head to `targets` (a worker index per question) until the argmax agrees
 * on `until` of the questions or `maxEpochs` pass; returns the policy and the agreement reached.
 */
export function warmStartPolicy(o: { policy: ConductorPolicy; features: readonly Float32Array[]; targets: readonly number[]; lr?: number; maxEpochs?: number; until?: number; seed: number; batch?: number }): WarmStartResult {
  const lr = o.lr ?? 0.01;
  const maxEpochs = o.maxEpochs ?? 50;
  const until = o.until ?? 0.98;
  const batch = o.batch ?? 64;
  let theta = Float32Array.from(o.policy.theta);
  let state = adamInit(theta.length);
  const agreement = (p: ConductorPolicy): number => o.features.filter((x, i) => firstWorker(p, x) === o.targets[i]).length / o.features.length;
  let policy = o.policy.withTheta(theta);
  let agree = agreement(policy);
  let epoch = 0;
  for (; epoch < maxEpochs && agree < until; epoch++) {
    const r = rng('grpo-warm-start', o.seed, epoch);
    const order = o.features.map((_, i) => i);
    for (let i = order.length - 1; i > 0; i--) {
      const j = r.int(i + 1);
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    for (let b = 0; b < order.length; b += batch) {
      const grad = new Float64Array(theta.length);
      const idx = order.slice(b, b + batch);
      for (const i of idx) {
        // a one-step solve by the router's pick: only its worker decision is weighted
        const d: PolicyDecisions = { steps: [{ worker: o.targets[i]!, kind: 'solve', access: 'none' }] };
        const lps = policy.decisionLogprobs(o.features[i]!, d, { maxSteps: 1 });
        const w = lps.map((x) => (x.head === 'worker' && x.step === 0 ? -1 / idx.length : 0));
        const g = policy.gradLogprobWeighted(o.features[i]!, d, w, { maxSteps: 1, heads: ['worker'] });
        for (let k = 0; k < g.length; k++) grad[k]! += g[k]!;
      }
      state = adamStep(theta, grad, state, { lr });
      policy = o.policy.withTheta(theta);
    }
    agree = agreement(policy);
  }
  theta = Float32Array.from(theta);
  return { policy: o.policy.withTheta(theta), epochs: epoch, agreement: agree };
}
