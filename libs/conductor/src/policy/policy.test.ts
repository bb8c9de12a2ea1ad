import { InputError, rng } from '@fugu/core';
import { describe, expect, it } from 'vitest';
import { policyConductor, policyCheckpoint, policyFromCheckpoint } from './checkpoint.ts';
import { ACCESS_CHOICES, ConductorPolicy, POLICY_INIT, policyThetaLayout, policyThetaSize, type PolicyDecisions } from './policy.ts';
import { POLICY_TEMPLATES, SUBTASK_KINDS } from './templates.ts';
import { parseWorkflow } from '../text.ts';
import { conductorPool, sameWorkflow, visibleSteps } from '../workflow.ts';

const names = ['gpt-4o', 'llama-8b', 'qwen-7b', 'mistral-7b', 'phi-3'];
const pool = conductorPool(names.map((name) => ({ name, description: `${name} model` })));
const ranking = ['qwen-7b', 'gpt-4o', 'mistral-7b'];
const D = 16;

function features(seed: number, dim = D, scale = 1): Float32Array {
  const r = rng('policy-test-features', seed);
  return Float32Array.from({ length: dim }, () => scale * r.normal());
}

/** A policy with random θ everywhere (biases too), so every branch gets real probability. */
function randomPolicy(seed: number, maxSteps = 5, scale = 0.5): ConductorPolicy {
  const base = ConductorPolicy.init({ workers: names, featureDim: D, seed, maxSteps });
  const r = rng('policy-test-theta', seed);
  return base.withTheta(Float32Array.from(base.theta, () => scale * r.normal()));
}

function inputError(f: () => unknown, field: string): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    expect((e as InputError).field).toBe(field);
    return (e as InputError).message;
  }
  throw new Error('expected an InputError');
}

/** Sum of the chosen log-softmax entries, recomputed naively from θ (no shared code with the policy's walk). */
function naiveLogprob(p: ConductorPolicy, x: Float32Array, d: PolicyDecisions): number {
  const K = names.length, S = SUBTASK_KINDS.length, M = p.maxSteps;
  const at = new Map(p.layout.map((b) => [b.name, b]));
  const c = new Float64Array(M + 3 * K + 3 * S);
  const head = (h: string, allowed: boolean[], chosen: number): number => {
    const W = at.get(`${h}.W`)!, b = at.get(`${h}.b`)!;
    const cols = W.shape[1]!;
    const z = [...x, ...c];
    const logits = allowed.map((_, j) => p.theta[b.offset + j]! + z.reduce((s, v, k) => s + p.theta[W.offset + j * cols + k]! * v, 0));
    const live = logits.filter((_, j) => allowed[j]);
    if (live.length === 1) return 0;
    const m = Math.max(...live);
    return logits[chosen]! - m - Math.log(live.reduce((s, l) => s + Math.exp(l - m), 0));
  };
  let lp = 0;
  const n = d.steps.length;
  for (let i = 0; i <= Math.min(n, M - 1); i++) {
    c.fill(0);
    c[i] = 1;
    for (let j = 0; j < i; j++) {
      c[M + d.steps[j]!.worker]! += 1;
      c[M + K + SUBTASK_KINDS.indexOf(d.steps[j]!.kind)]! += 1;
    }
    if (i > 0) {
      c[M + K + S + d.steps[i - 1]!.worker] = 1;
      c[M + 2 * K + S + SUBTASK_KINDS.indexOf(d.steps[i - 1]!.kind)] = 1;
      lp += head('stop', [true, d.steps[i - 1]!.kind !== 'plan'], i < n ? 0 : 1);
    }
    if (i === n) break;
    const s = d.steps[i]!;
    lp += head('worker', names.map(() => true), s.worker);
    c[M + 2 * K + 2 * S + s.worker] = 1;
    lp += head('kind', SUBTASK_KINDS.map((k) => !(i === 0 && ['verify', 'refine', 'aggregate'].includes(k)) && !(k === 'plan' && i === M - 1)), SUBTASK_KINDS.indexOf(s.kind));
    c[M + 3 * K + 2 * S + SUBTASK_KINDS.indexOf(s.kind)] = 1;
    if (i > 0) {
      const needs = ['verify', 'refine', 'aggregate'].includes(s.kind);
      lp += head('access', [true, !needs, i >= 2, i >= 2], ACCESS_CHOICES.indexOf(s.access));
    }
  }
  return lp;
}

describe('ConductorPolicy', () => {
  it('lays θ out per head: W [out, D + C] then b [out]', () => {
    const layout = policyThetaLayout({ workers: 5, featureDim: D, maxSteps: 5 });
    const C = 5 + 3 * 5 + 3 * 5;
    expect(layout.map((b) => b.name)).toEqual(['stop.W', 'stop.b', 'worker.W', 'worker.b', 'kind.W', 'kind.b', 'access.W', 'access.b']);
    expect(layout[0]).toEqual({ name: 'stop.W', offset: 0, shape: [2, D + C] });
    expect(policyThetaSize(layout)).toBe((2 + 5 + 5 + 4) * (D + C + 1));
  });

  it('every sampled workflow renders to text that parses back to the same workflow; the masks hold', () => {
    const question = 'Is 7 prime? Say "yes" or \'no\'.\nmodel id = [9]';
    let multi = 0;
    const kinds = new Set<string>(), access = new Set<string>();
    for (let s = 0; s < 3000; s++) {
      const maxSteps = 1 + (s % 5);
      const p = randomPolicy(s % 7, maxSteps === 1 ? 1 : 5);
      const out = p.write({ features: features(s), question, pool, seed: s, maxSteps });
      const parsed = parseWorkflow(out.text, { poolSize: names.length, maxSteps });
      expect(parsed.ok).toBe(true);
      if (!parsed.ok) continue;
      expect(sameWorkflow(parsed.workflow, out.workflow)).toBe(true);
      const steps = out.decisions.steps;
      expect(steps.length).toBeGreaterThanOrEqual(1);
      expect(steps.length).toBeLessThanOrEqual(maxSteps);
      if (steps.length > 1) multi++;
      expect(['verify', 'refine', 'aggregate']).not.toContain(steps[0]!.kind);
      expect(steps[0]!.access).toBe('none');
      expect(steps.at(-1)!.kind).not.toBe('plan');
      steps.forEach((st, i) => {
        kinds.add(st.kind);
        access.add(st.access);
        const vis = visibleSteps(out.workflow, i);
        expect(vis.every((j) => j < i)).toBe(true);
        if (['verify', 'refine', 'aggregate'].includes(st.kind)) expect(vis.length).toBeGreaterThan(0);
        expect(out.workflow.steps[i]!.subtask).toBe(POLICY_TEMPLATES[st.kind].replace('{{question}}', question.trim()));
      });
      expect(out.logprob).toBeLessThanOrEqual(0);
    }
    expect(multi).toBeGreaterThan(500);
    expect([...kinds].sort()).toEqual([...SUBTASK_KINDS].sort());
    expect([...access].sort()).toEqual([...ACCESS_CHOICES].sort());
  });

  it('logprob is exact: the sum of the chosen log-softmax entries, and decide() = logprob()', () => {
    for (let s = 0; s < 300; s++) {
      const p = randomPolicy(s);
      const x = features(s);
      const { decisions, logprob } = p.decide(x, { seed: s });
      expect(p.logprob(x, decisions)).toBe(logprob);
      expect(logprob).toBeCloseTo(naiveLogprob(p, x, decisions), 4);
    }
  });

  it('the probabilities of all workflows sum to 1 (exhaustive, 2 workers, 3 steps)', () => {
    const w2 = ['a', 'b'];
    const base = ConductorPolicy.init({ workers: w2, featureDim: 3, seed: 1, maxSteps: 3 });
    const r = rng('sum-to-one', 1);
    const p = base.withTheta(Float32Array.from(base.theta, () => 0.7 * r.normal()));
    const x = Float32Array.from([0.3, -1, 2]);
    const seen = new Map<string, number>();
    for (let s = 0; s < 4000; s++) {
      const d = p.decide(x, { seed: s });
      seen.set(JSON.stringify(d.decisions), d.logprob);
    }
    const total = [...seen.values()].reduce((a, lp) => a + Math.exp(lp), 0);
    // every workflow of this small space is found in 4000 samples but the rarest; the mass found is close to 1 and never above
    expect(total).toBeLessThanOrEqual(1 + 1e-9);
    expect(total).toBeGreaterThan(0.97);
  });

  it('gradLogprob matches central finite differences', () => {
    for (const s of [1, 2, 3]) {
      const p = randomPolicy(s, 4);
      const x = features(100 + s);
      const { decisions } = p.decide(x, { seed: s + 10 });
      const g = p.gradLogprob(x, decisions);
      expect(g.length).toBe(p.theta.length);
      const r = rng('fd', s);
      const idx = new Set<number>();
      // the biases and every context column of every head, and random feature weights
      for (const b of p.layout) if (b.name.endsWith('.b')) for (let j = 0; j < b.shape[0]!; j++) idx.add(b.offset + j);
      for (let k = 0; k < 300; k++) idx.add(r.int(p.theta.length));
      const eps = 1e-2;
      let nonzero = 0;
      for (const i of idx) {
        const plus = Float32Array.from(p.theta), minus = Float32Array.from(p.theta);
        plus[i]! += eps;
        minus[i]! -= eps;
        const fd = (p.withTheta(plus).logprob(x, decisions) - p.withTheta(minus).logprob(x, decisions)) / (plus[i]! - minus[i]!);
        expect(Math.abs(g[i]! - fd)).toBeLessThan(2e-3 + 1e-3 * Math.abs(fd));
        if (Math.abs(g[i]!) > 1e-3) nonzero++;
      }
      expect(nonzero).toBeGreaterThan(20);
    }
  });

  it('same seed -> same workflow; argmax is deterministic; other seeds differ', () => {
    const p = randomPolicy(3);
    const x = features(3);
    expect(p.decide(x, { seed: 42 })).toEqual(p.decide(x, { seed: 42 }));
    expect(p.decide(x, { seed: 'item-7' })).toEqual(p.decide(x, { seed: 'item-7' }));
    expect(p.decide(x, { argmax: true })).toEqual(p.decide(x, { argmax: true }));
    const texts = new Set(Array.from({ length: 50 }, (_, s) => JSON.stringify(p.decide(x, { seed: s }).decisions)));
    expect(texts.size).toBeGreaterThan(5);
  });

  it("the init's argmax on any features is one step by ranking[0] with solve; other workflows keep real probability", () => {
    const p = ConductorPolicy.init({ workers: names, featureDim: D, seed: 5, ranking });
    const best = names.indexOf('qwen-7b');
    for (let s = 0; s < 200; s++) {
      const x = features(s, D, s % 2 ? 1000 : 1);
      expect(p.decide(x, { argmax: true }).decisions).toEqual({ steps: [{ worker: best, kind: 'solve', access: 'none' }] });
    }
    // P(one step by the best worker, solve) = P(solve at step 1) P(worker rank 0) P(stop after a solve)
    const pWorker0 = 1 / [0, 1, 2, 3, 4].reduce((a, r) => a + Math.exp(r * POLICY_INIT.workerRankBias), 0);
    const pSolve1 = 8 / 9, pStop = 4 / 5;
    const lp = p.logprob(features(1), { steps: [{ worker: best, kind: 'solve', access: 'none' }] });
    expect(Math.exp(lp)).toBeCloseTo(pSolve1 * pWorker0 * pStop, 6);
    expect(Math.exp(lp)).toBeCloseTo(0.4757, 3);
    // the unranked workers follow the ranking in pool order: llama-8b (id 1) is rank 3, phi-3 rank 4
    const one = (worker: number): number => Math.exp(p.logprob(features(1), { steps: [{ worker, kind: 'solve', access: 'none' }] }));
    expect(one(1) / one(4)).toBeCloseTo(3, 6);
    expect(one(best) / one(0)).toBeCloseTo(3, 6);
    const samples = Array.from({ length: 2000 }, (_, s) => p.decide(features(s), { seed: s }).decisions.steps.length);
    const single = samples.filter((n) => n === 1).length / samples.length;
    expect(single).toBeGreaterThan(0.6);
    expect(single).toBeLessThan(0.85);
    // with featureScale the feature weights are seeded: same seed same θ
    const a = ConductorPolicy.init({ workers: names, featureDim: D, seed: 5, featureScale: 0.01 });
    expect(a.theta).toEqual(ConductorPolicy.init({ workers: names, featureDim: D, seed: 5, featureScale: 0.01 }).theta);
    expect(a.theta).not.toEqual(ConductorPolicy.init({ workers: names, featureDim: D, seed: 6, featureScale: 0.01 }).theta);
  });

  it('maxSteps 1 is always one solve step; a cap below the policy maxSteps masks the longer workflows', () => {
    const p = randomPolicy(2);
    for (let s = 0; s < 200; s++) {
      const one = p.decide(features(s), { seed: s, maxSteps: 1 });
      expect(one.decisions.steps).toHaveLength(1);
      expect(one.decisions.steps[0]!.kind).toBe('solve');
      expect(p.decide(features(s), { seed: s, maxSteps: 2 }).decisions.steps.length).toBeLessThanOrEqual(2);
    }
    inputError(() => p.decide(features(0), { seed: 1, maxSteps: 0 }), 'maxSteps');
  });

  it('refuses impossible decisions and bad features, naming the field', () => {
    const p = randomPolicy(1);
    const x = features(1);
    expect(inputError(() => p.logprob(x, { steps: [{ worker: 0, kind: 'verify', access: 'none' }] }), 'decisions.steps[0]')).toMatch(/masked/);
    inputError(() => p.logprob(x, { steps: [{ worker: 0, kind: 'solve', access: 'none' }, { worker: 1, kind: 'aggregate', access: 'none' }] }), 'decisions.steps[1]');
    inputError(() => p.logprob(x, { steps: [{ worker: 0, kind: 'plan', access: 'none' }] }), 'decisions.steps[1]');
    inputError(() => p.logprob(x, { steps: [{ worker: 9, kind: 'solve', access: 'none' }] }), 'decisions.steps[0]');
    inputError(() => p.logprob(x, { steps: [] }), 'decisions.steps');
    expect(inputError(() => p.decide(features(1, D + 1), { seed: 1 }), 'features')).toMatch(/dimension 17, the policy reads 16/);
    inputError(() => p.decide(Float32Array.from({ length: D }, () => NaN), { seed: 1 }), 'features');
    inputError(() => p.write({ features: x, question: '  ', pool, seed: 1 }), 'question');
    inputError(() => ConductorPolicy.init({ workers: names, featureDim: D, seed: 1, ranking: ['nope'] }), 'ranking');
    inputError(() => ConductorPolicy.init({ workers: ['a', 'a'], featureDim: D, seed: 1 }), 'workers[1]');
  });
});

describe('policy checkpoints and the policy Conductor', () => {
  const policy = ConductorPolicy.init({ workers: names, featureDim: D, seed: 3, ranking });

  it('round-trips through a checkpoint', () => {
    const c = policyCheckpoint(policy, { id: 'pol-1', backboneId: 'use-lite-abc', training: { seed: 3 } });
    expect(c).toMatchObject({ id: 'pol-1', workers: names, backboneId: 'use-lite-abc', featureDim: D, parentId: null, config: { maxSteps: 5, templateVersion: 'policy-v1', encodingVersion: 'policy-enc-v1' } });
    const back = policyFromCheckpoint(JSON.parse(JSON.stringify({ ...c, theta: Array.from(c.theta) }), (k, v: unknown) => (k === 'theta' ? Float32Array.from(v as number[]) : v)), { workers: names });
    expect(back.theta).toEqual(policy.theta);
    expect(back.decide(features(2), { seed: 9 })).toEqual(policy.decide(features(2), { seed: 9 }));
  });

  it('refuses a pool whose workers (in order) differ, naming the checkpoint, the expected and the given names', () => {
    const c = policyCheckpoint(policy, { id: 'pol-1', backboneId: 'bb' });
    const swapped = [names[1]!, names[0]!, ...names.slice(2)];
    const msg = inputError(() => policyFromCheckpoint(c, { workers: swapped }), 'pool');
    expect(msg).toContain('"pol-1"');
    expect(msg).toContain(names.join(', '));
    expect(msg).toContain(swapped.join(', '));
    inputError(() => policyFromCheckpoint(c, { workers: names.slice(0, 4) }), 'pool');
    inputError(() => policyFromCheckpoint({ ...c, config: { ...c.config, templateVersion: 'policy-v9' } }, { workers: names }), 'checkpoint');
    inputError(() => policyFromCheckpoint({ ...c, theta: c.theta.subarray(1) }, { workers: names }), 'checkpoint');
    inputError(() => policyFromCheckpoint({ ...c, featureDim: D + 1 }, { workers: names }), 'checkpoint');
  });

  it('writes through the Conductor interface from input.features', async () => {
    const conductor = policyConductor(policy, 'policy:pol-1');
    expect(conductor.spec).toBe('policy:pol-1');
    const out = await conductor.write({ question: 'What is 2 + 2?', pool, seed: 4, features: features(4) });
    const parsed = parseWorkflow(out.text, { poolSize: names.length });
    expect(parsed.ok).toBe(true);
    expect(out.logprob).toBe(policy.logprob(features(4), out.decisions as PolicyDecisions));
    expect(out.promptVersion).toBe('policy-v1');
    const argmax = await policyConductor(policy, 'policy:pol-1', { argmax: true }).write({ question: 'q?', pool, seed: 1, features: features(1) });
    expect(argmax.text).toBe(`model id = [2]\nsubtasks = [${JSON.stringify(POLICY_TEMPLATES.solve.replace('{{question}}', 'q?'))}]\naccess list = [[]]`);
    await expect(conductor.write({ question: 'q', pool, seed: 1 })).rejects.toMatchObject({ field: 'features' });
    await expect(conductor.write({ question: 'q', pool, seed: 1, features: features(1, 8) })).rejects.toMatchObject({ field: 'features' });
    const other = conductorPool(['a', 'b'].map((name) => ({ name, description: name })));
    await expect(conductor.write({ question: 'q', pool: other, seed: 1, features: features(1) })).rejects.toMatchObject({ field: 'pool' });
  });
});
