import { InputError, rng } from '@fugu/core';
import { describe, expect, it } from 'vitest';
import { policyConductor, policyCheckpoint, policyFromCheckpoint } from './checkpoint.ts';
import { ACCESS_CHOICES, ConductorPolicy, POLICY_ENCODING_VERSION, POLICY_HEADS, POLICY_INIT, maskHeads, policyBlockHead, policyThetaLayout, policyThetaSize, type PolicyDecisions, type PolicyHead, type PolicyStep } from './policy.ts';
import { POLICY_TEMPLATE_VERSIONS, POLICY_TEMPLATES, SUBTASK_KINDS } from './templates.ts';
import { renderWorkerPrompt } from '../prompts.ts';
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

/** A policy with random θ everywhere (biases and bilinear blocks too), so every branch gets real probability. */
function randomPolicy(seed: number, maxSteps = 5, scale = 0.5, bilinearScale = 0.3): ConductorPolicy {
  const base = ConductorPolicy.init({ workers: names, featureDim: D, seed, maxSteps });
  const r = rng('policy-test-theta', seed);
  const theta = new Float32Array(base.theta.length);
  for (const b of base.layout) {
    const sc = /\.[UVP]$/.test(b.name) ? bilinearScale : scale;
    for (let k = 0; k < size(b); k++) theta[b.offset + k] = sc * r.normal();
  }
  return base.withTheta(theta);
}

const size = (b: { shape: number[] }): number => b.shape.reduce((a, x) => a * x, 1);

/** θ with the blocks whose names match set to 0. */
function zeroBlocks(p: ConductorPolicy, match: RegExp): ConductorPolicy {
  const theta = Float32Array.from(p.theta);
  for (const b of p.layout) if (match.test(b.name)) theta.fill(0, b.offset, b.offset + size(b));
  return p.withTheta(theta);
}

/** The block names of θ, in layout order, as the README lists them. */
const BLOCK_NAMES = POLICY_HEADS.flatMap((h) => ['W', 'b', 'U', 'V', 'P'].map((n) => `${h}.${n}`));

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
  const R = p.rank;
  const head = (h: string, allowed: boolean[], chosen: number): number => {
    const W = at.get(`${h}.W`)!, b = at.get(`${h}.b`)!, U = at.get(`${h}.U`)!, V = at.get(`${h}.V`)!, P = at.get(`${h}.P`)!;
    const cols = W.shape[1]!;
    const z = [...x, ...c];
    const t = p.theta;
    // (V x)_r (P c)_r, then logits_j = b_j + W_j . [x ; c] + sum_r U[j, r] (V x)_r (P c)_r
    const q = Array.from({ length: R }, (_, r) => x.reduce((s, v, k) => s + t[V.offset + r * x.length + k]! * v, 0) * c.reduce((s, v, k) => s + t[P.offset + r * c.length + k]! * v, 0));
    const logits = allowed.map((_, j) => t[b.offset + j]! + z.reduce((s, v, k) => s + t[W.offset + j * cols + k]! * v, 0) + q.reduce((s, v, r) => s + t[U.offset + j * R + r]! * v, 0));
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
  it('lays θ out per head: W [out, D + C], b [out], then the bilinear U [out, R], V [R, D], P [R, C]', () => {
    const layout = policyThetaLayout({ workers: 5, featureDim: D, maxSteps: 5 });
    const C = 5 + 3 * 5 + 3 * 5;
    const R = 8;
    expect(layout.map((b) => b.name)).toEqual(BLOCK_NAMES);
    expect(layout.slice(0, 6)).toEqual([
      { name: 'stop.W', offset: 0, shape: [2, D + C] },
      { name: 'stop.b', offset: 2 * (D + C), shape: [2] },
      { name: 'stop.U', offset: 2 * (D + C + 1), shape: [2, R] },
      { name: 'stop.V', offset: 2 * (D + C + 1 + R), shape: [R, D] },
      { name: 'stop.P', offset: 2 * (D + C + 1 + R) + R * D, shape: [R, C] },
      { name: 'worker.W', offset: 2 * (D + C + 1 + R) + R * (D + C), shape: [5, D + C] },
    ]);
    // contiguous, no gaps
    layout.forEach((b, i) => i > 0 && expect(b.offset).toBe(layout[i - 1]!.offset + size(layout[i - 1]!)));
    expect(policyThetaSize(layout)).toBe((2 + 5 + 5 + 4) * (D + C + 1 + R) + 4 * R * (D + C));
    expect(policyThetaSize(policyThetaLayout({ workers: 5, featureDim: D, maxSteps: 5, rank: 3 }))).toBe(16 * (D + C + 1 + 3) + 4 * 3 * (D + C));
    // the README's count: K = 9, D = 512, M = 5, R = 8 (C = 47): 11,200 linear + 18,048 bilinear
    expect(policyThetaSize(policyThetaLayout({ workers: 9, featureDim: 512, maxSteps: 5 }))).toBe(29_248);
    expect(policyBlockHead('worker.U')).toBe('worker');
    expect(() => policyThetaLayout({ workers: 5, featureDim: D, maxSteps: 5, rank: 0 })).toThrow(InputError);
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
    // every decision sequence the masks allow, enumerated from README "Masks" (not from the policy's code)
    const cap = 3;
    const kindsAt = (i: number): string[] => SUBTASK_KINDS.filter((k) => !(i === 0 && ['verify', 'refine', 'aggregate'].includes(k)) && !(k === 'plan' && i === cap - 1));
    const accessAt = (i: number, kind: string): string[] => (i === 0 ? ['none'] : ACCESS_CHOICES.filter((a) => (a !== 'none' || !['verify', 'refine', 'aggregate'].includes(kind)) && (i >= 2 || (a !== 'previous' && a !== 'first'))));
    const all: PolicyStep[][] = [];
    const extend = (prefix: PolicyStep[]): void => {
      const i = prefix.length;
      for (let worker = 0; worker < w2.length; worker++) {
        for (const kind of kindsAt(i)) {
          for (const access of accessAt(i, kind)) {
            const steps = [...prefix, { worker, kind, access } as PolicyStep];
            if (kind !== 'plan') all.push(steps); // stop here (never right after a plan)
            if (i + 1 < cap) extend(steps); // or continue
          }
        }
      }
    };
    extend([]);
    // by hand: 1 step 2 (solve by a or b); 2 steps 4 x 10 (the second not a plan); 3 steps 4 x 14 x 26
    expect(all).toHaveLength(2 + 40 + 4 * 14 * 26);
    expect(new Set(all.map((s) => JSON.stringify(s))).size).toBe(all.length);
    // logprob() refuses a masked decision, so each is allowed; the sum is 1 only if none is missing
    let total = 0;
    for (const steps of all) total += Math.exp(p.logprob(x, { steps }));
    expect(Math.abs(total - 1)).toBeLessThan(1e-9);
    // and sampling never leaves the enumerated space
    const known = new Set(all.map((s) => JSON.stringify(s)));
    for (let s = 0; s < 500; s++) expect(known.has(JSON.stringify(p.decide(x, { seed: s }).decisions.steps))).toBe(true);
  });

  // a 4-step workflow in which every head takes unforced decisions: kind at step 1 (solve or
  // plan), stop before steps 3 and 4 (the stop before step 2 is forced after a plan), access at
  // steps 3 and 4 (at step 2 a refine can only see `all`)
  const fourSteps: PolicyDecisions = { steps: [
    { worker: 0, kind: 'plan', access: 'none' }, { worker: 1, kind: 'refine', access: 'all' },
    { worker: 2, kind: 'solve', access: 'previous' }, { worker: 3, kind: 'verify', access: 'first' },
  ] };

  it('decisionLogprobs lists the unforced decisions in order, with head and step, and sums to logprob', () => {
    const p = randomPolicy(4, 4);
    const x = features(4);
    const d = p.decisionLogprobs(x, fourSteps);
    expect(d.map((e) => `${e.head}@${e.step}`)).toEqual(['worker@0', 'kind@0', 'worker@1', 'kind@1', 'stop@2', 'worker@2', 'kind@2', 'access@2', 'stop@3', 'worker@3', 'kind@3', 'access@3']);
    expect(d.map((e) => e.choice)).toEqual([0, 1, 1, 3, 0, 2, 0, 2, 0, 3, 2, 3]);
    expect(d.reduce((a, e) => a + e.logprob, 0)).toBe(p.logprob(x, fourSteps));
    for (const e of d) expect(e.logprob).toBeLessThan(0);
    for (let s = 0; s < 100; s++) {
      const q = randomPolicy(s % 5);
      const xs = features(s);
      const { decisions, logprob } = q.decide(xs, { seed: s });
      const parts = q.decisionLogprobs(xs, decisions);
      expect(parts.reduce((a, e) => a + e.logprob, 0)).toBeCloseTo(logprob, 12);
      // one stop decision per step after the first where allowed; the last one is `stop` unless the cap ended it
      const stops = parts.filter((e) => e.head === 'stop');
      if (decisions.steps.length < q.maxSteps) expect(stops.at(-1)).toMatchObject({ step: decisions.steps.length, choice: 1 });
      expect(parts.filter((e) => e.head === 'worker')).toHaveLength(decisions.steps.length);
    }
  });

  it('gradLogprob and gradLogprobWeighted match central finite differences on every block of θ', () => {
    // every block by name (the BLOCK_NAMES, 20 of them: {stop, worker, kind, access} x {W, b, U, V, P}):
    // small blocks in full, the others 10 random entries plus the 4 of largest analytic gradient,
    // and in each block at least one entry whose finite-difference gradient is clearly not 0
    const eps = 1e-3;
    for (const s of [1, 2, 3]) {
      const p = randomPolicy(s, 4);
      const x = features(100 + s);
      const sampled = p.decide(x, { seed: s + 10 }).decisions;
      for (const decisions of [fourSteps, sampled]) {
        const n = p.decisionLogprobs(x, decisions).length;
        const r = rng('fd', s, decisions.steps.length);
        const weights = Array.from({ length: n }, () => r.normal());
        const g = p.gradLogprob(x, decisions);
        const gw = p.gradLogprobWeighted(x, decisions, weights);
        expect(g.length).toBe(p.theta.length);
        expect(p.gradLogprobWeighted(x, decisions, weights.map(() => 1))).toEqual(g);
        expect(p.layout.map((b) => b.name)).toEqual(BLOCK_NAMES);
        for (const b of p.layout) {
          const idx = new Set<number>();
          if (size(b) <= 40) for (let k = 0; k < size(b); k++) idx.add(b.offset + k);
          else {
            for (let k = 0; k < 10; k++) idx.add(b.offset + r.int(size(b)));
            const byG = Array.from({ length: size(b) }, (_, k) => b.offset + k).sort((i, j) => Math.abs(g[j]!) - Math.abs(g[i]!));
            const byGw = Array.from({ length: size(b) }, (_, k) => b.offset + k).sort((i, j) => Math.abs(gw[j]!) - Math.abs(gw[i]!));
            for (const i of [...byG.slice(0, 4), ...byGw.slice(0, 4)]) idx.add(i);
          }
          let maxFd = 0, maxFdW = 0;
          for (const i of idx) {
            const plus = Float32Array.from(p.theta), minus = Float32Array.from(p.theta);
            plus[i]! += eps;
            minus[i]! -= eps;
            const h = plus[i]! - minus[i]!;
            const pp = p.withTheta(plus), pm = p.withTheta(minus);
            const fd = (pp.logprob(x, decisions) - pm.logprob(x, decisions)) / h;
            const lp = pp.decisionLogprobs(x, decisions), lm = pm.decisionLogprobs(x, decisions);
            const fdW = weights.reduce((a, w, d) => a + w * (lp[d]!.logprob - lm[d]!.logprob), 0) / h;
            expect(Math.abs(g[i]! - fd), `${b.name}[${i - b.offset}] seed ${s}`).toBeLessThan(1e-4 + 1e-3 * Math.abs(fd));
            expect(Math.abs(gw[i]! - fdW), `weighted ${b.name}[${i - b.offset}] seed ${s}`).toBeLessThan(1e-4 + 1e-3 * Math.abs(fdW));
            maxFd = Math.max(maxFd, Math.abs(fd));
            maxFdW = Math.max(maxFdW, Math.abs(fdW));
          }
          if (decisions === fourSteps) {
            expect(maxFd, `${b.name}: no entry with a gradient (seed ${s})`).toBeGreaterThan(1e-3);
            expect(maxFdW, `${b.name}: no entry with a weighted gradient (seed ${s})`).toBeGreaterThan(1e-3);
          }
        }
      }
    }
  });

  it('the trained heads: heads leaves the other heads\' blocks at 0 (= maskHeads, = their decisions weighted 0)', () => {
    const p = randomPolicy(6, 4);
    const x = features(6);
    const heads: PolicyHead[] = ['stop', 'worker', 'access'];
    const full = p.gradLogprob(x, fourSteps);
    const part = p.gradLogprob(x, fourSteps, { heads });
    expect(part).toEqual(maskHeads(full, p.layout, heads));
    for (const b of p.layout) {
      const block = part.subarray(b.offset, b.offset + size(b));
      if (b.name.startsWith('kind.')) expect(block.every((v) => v === 0)).toBe(true);
      else if (!b.name.endsWith('.V') && !b.name.endsWith('.P')) expect(block.some((v) => v !== 0)).toBe(true);
    }
    const parts = p.decisionLogprobs(x, fourSteps);
    const w = parts.map((e, i) => (e.head === 'kind' ? 0 : 0.5 + i));
    const w1 = parts.map((_, i) => 0.5 + i);
    const a = p.gradLogprobWeighted(x, fourSteps, w);
    const b = p.gradLogprobWeighted(x, fourSteps, w1, { heads });
    for (let i = 0; i < a.length; i++) expect(Math.abs(a[i]! - b[i]!)).toBeLessThan(1e-6);
    expect(p.gradLogprob(x, fourSteps, { heads: [] }).every((v) => v === 0)).toBe(true);
    inputError(() => p.gradLogprob(x, fourSteps, { heads: ['kinds' as PolicyHead] }), 'heads[0]');
    expect(inputError(() => p.gradLogprobWeighted(x, fourSteps, [1, 2]), 'weights')).toMatch(/2 entries.*12 unforced decisions/);
    inputError(() => p.gradLogprobWeighted(x, fourSteps, parts.map(() => NaN)), 'weights');
  });

  it('the bilinear term makes the step-to-step change of a decision depend on the question (without it, it cannot)', () => {
    // two workers: the worker head's log-odds A:B at step 1, and at step 2 after [A solve]
    const w2 = ['A', 'B'];
    const solveThen = (first: number, second: number): PolicyDecisions => ({ steps: [{ worker: first, kind: 'solve', access: 'none' }, { worker: second, kind: 'verify', access: 'all' }] });
    const odds = (p: ConductorPolicy, x: Float32Array): { step1: number; afterA: number } => {
      const lp = (d: PolicyDecisions, step: number): number => p.decisionLogprobs(x, d).find((e) => e.head === 'worker' && e.step === step)!.logprob;
      return { step1: lp(solveThen(0, 0), 0) - lp(solveThen(1, 0), 0), afterA: lp(solveThen(0, 0), 1) - lp(solveThen(0, 1), 1) };
    };
    // (1) any θ: with the bilinear blocks 0 the logits are b + W_x x + W_c c, so the change of the
    // log-odds from step 1 to step 2 is W_c (c2 - c1): the same for every question. With them it is not.
    for (const s of [1, 2, 3]) {
      const base = ConductorPolicy.init({ workers: w2, featureDim: D, seed: s, maxSteps: 3 });
      const r = rng('bilinear-test', s);
      const withBilinear = base.withTheta(Float32Array.from(base.theta, () => 0.5 * r.normal()));
      const linear = zeroBlocks(withBilinear, /\.U$/);
      const change = (p: ConductorPolicy, x: Float32Array): number => odds(p, x).afterA - odds(p, x).step1;
      const xs = [0, 1, 2, 3, 4].map((k) => features(200 + k));
      const lin = xs.map((x) => change(linear, x));
      const bil = xs.map((x) => change(withBilinear, x));
      for (const c of lin) expect(Math.abs(c - lin[0]!)).toBeLessThan(1e-9);
      expect(Math.max(...bil) - Math.min(...bil)).toBeGreaterThan(0.5);
      // while the linear policy's log-odds themselves do depend on the question
      expect(Math.abs(odds(linear, xs[0]!).step1 - odds(linear, xs[1]!).step1)).toBeGreaterThan(0.01);
    }

    // (2) by hand: question x1 "A solves, the other worker checks", question x2 "B solves, A checks,
    // whoever solved". So x1 takes A at step 1 (log-odds > 0) and B after [A solve] (< 0); x2 takes
    // B at step 1 (< 0) and still A after [A solve] (> 0). With the bilinear blocks 0 that needs
    // change(x1) < 0 < change(x2), which (1) rules out for every θ.
    const K = 2, M = 2, S = SUBTASK_KINDS.length, Dx = 2;
    const zero = ConductorPolicy.init({ workers: w2, featureDim: Dx, seed: 1, maxSteps: M }).withTheta(new Float32Array(policyThetaSize(policyThetaLayout({ workers: K, featureDim: Dx, maxSteps: M }))));
    const at = new Map(zero.layout.map((b) => [b.name, b.offset]));
    const theta = new Float32Array(zero.theta.length);
    const cols = Dx + M + 3 * K + 3 * S;
    const R = zero.rank;
    theta[at.get('stop.b')! + 0] = 5; // continue after step 1
    theta[at.get('kind.b')! + SUBTASK_KINDS.indexOf('solve')] = 5; // solve at step 1
    theta[at.get('kind.W')! + SUBTASK_KINDS.indexOf('verify') * cols + Dx + 1] = 10; // verify at step 2 (step one-hot [1])
    const lastW = M + K + S; // the context's "last worker" part
    const U = at.get('worker.U')!, V = at.get('worker.V')!, P = at.get('worker.P')!, C = cols - Dx;
    for (const rr of [0, 1]) {
      theta[U + 0 * R + rr] = 1; // A
      theta[U + 1 * R + rr] = -1; // B: log-odds A:B = 2 sum_r (V x)_r (P c)_r
    }
    theta[V + 0 * Dx + 0] = 1; // r = 0 reads x1's direction
    theta[P + 0 * C + 0] = 1; // step 1: A
    theta[P + 0 * C + lastW + 0] = -1; // after A: B
    theta[P + 0 * C + lastW + 1] = 1; // after B: A
    theta[V + 1 * Dx + 1] = 1; // r = 1 reads x2's direction
    theta[P + 1 * C + 0] = -1; // step 1: B
    theta[P + 1 * C + 1] = 1; // step 2: A, after either
    const p = zero.withTheta(theta);
    const x1 = Float32Array.from([1, 0]), x2 = Float32Array.from([0, 1]);
    expect(p.decide(x1, { argmax: true }).decisions).toEqual(solveThen(0, 1)); // [A solve, B verify]
    expect(p.decide(x2, { argmax: true }).decisions).toEqual(solveThen(1, 0)); // [B solve, A verify]
    const o1 = odds(p, x1), o2 = odds(p, x2);
    expect(o1.step1).toBeGreaterThan(1);
    expect(o1.afterA).toBeLessThan(-1); // x1 after [A solve]: B
    expect(o2.step1).toBeLessThan(-1);
    expect(o2.afterA).toBeGreaterThan(1); // x2 after [A solve]: A
    expect(o1.afterA - o1.step1).toBeLessThan(0);
    expect(o2.afterA - o2.step1).toBeGreaterThan(0);
    // the same θ without the bilinear blocks: nothing reads the question, both get the same workflow
    const lin = zeroBlocks(p, /\.[UVP]$/);
    expect(lin.decide(x1, { argmax: true }).decisions).toEqual(lin.decide(x2, { argmax: true }).decisions);
    expect(odds(lin, x1).afterA - odds(lin, x1).step1).toBeCloseTo(odds(lin, x2).afterA - odds(lin, x2).step1, 12);
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
    expect(a.decide(features(3), { argmax: true }).decisions.steps).toHaveLength(1);
    expect(a.theta).toEqual(ConductorPolicy.init({ workers: names, featureDim: D, seed: 5, featureScale: 0.01 }).theta);
    expect(a.theta).not.toEqual(ConductorPolicy.init({ workers: names, featureDim: D, seed: 6, featureScale: 0.01 }).theta);
  });

  it('the init: U is 0 (exactly the linear policy), V and P seeded, so d logprob / dU is not 0 while dV = dP = 0', () => {
    const p = ConductorPolicy.init({ workers: names, featureDim: D, seed: 5, ranking });
    const at = new Map(p.layout.map((b) => [b.name, b]));
    const block = (t: Float32Array, name: string): Float32Array => t.subarray(at.get(name)!.offset, at.get(name)!.offset + size(at.get(name)!));
    for (const h of POLICY_HEADS) {
      expect(block(p.theta, `${h}.U`).every((v) => v === 0)).toBe(true);
      expect(block(p.theta, `${h}.V`).some((v) => v !== 0)).toBe(true);
      expect(block(p.theta, `${h}.P`).some((v) => v !== 0)).toBe(true);
      expect(block(p.theta, `${h}.W`).every((v) => v === 0)).toBe(true);
    }
    // the bilinear blocks add exactly nothing: the same log-probabilities as with V and P zeroed
    const noVP = zeroBlocks(p, /\.[VP]$/);
    for (let s = 0; s < 50; s++) {
      const x = features(s, D, 1 / Math.sqrt(D)); // about unit norm, as the backbone's
      const d = p.decide(x, { seed: s });
      expect(noVP.logprob(x, d.decisions)).toBe(d.logprob);
    }
    const x = features(7, D, 1 / Math.sqrt(D));
    const g = p.gradLogprob(x, fourSteps);
    for (const h of POLICY_HEADS) {
      expect(Math.max(...block(g, `${h}.U`).map(Math.abs)), `${h}.U`).toBeGreaterThan(1e-3);
      expect(block(g, `${h}.V`).every((v) => v === 0)).toBe(true);
      expect(block(g, `${h}.P`).every((v) => v === 0)).toBe(true);
    }
    // seeded by the seed, the rank settable and recorded
    expect(ConductorPolicy.init({ workers: names, featureDim: D, seed: 5, ranking }).theta).toEqual(p.theta);
    expect(ConductorPolicy.init({ workers: names, featureDim: D, seed: 6, ranking }).theta).not.toEqual(p.theta);
    const r3 = ConductorPolicy.init({ workers: names, featureDim: D, seed: 5, rank: 3 });
    expect(r3.rank).toBe(3);
    expect(r3.config.rank).toBe(3);
    expect(r3.layout.find((b) => b.name === 'worker.U')!.shape).toEqual([5, 3]);
    expect(p.config.rank).toBe(8);
    inputError(() => ConductorPolicy.init({ workers: names, featureDim: D, seed: 5, rank: 1.5 }), 'rank');
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

  it('a worker mask (a restricted pool): only allowed workers are chosen, logprob and the gradients follow the masked softmax', () => {
    const allowed = [1, 3, 4];
    let other = 0;
    for (let s = 0; s < 200; s++) {
      const p = randomPolicy(s);
      const x = features(s);
      const { decisions, logprob } = p.decide(x, { seed: s, allowedWorkers: allowed });
      for (const st of decisions.steps) expect(allowed).toContain(st.worker);
      expect(p.logprob(x, decisions, { allowedWorkers: allowed })).toBe(logprob);
      const per = p.decisionLogprobs(x, decisions, { allowedWorkers: allowed });
      expect(per.reduce((a, d) => a + d.logprob, 0)).toBeCloseTo(logprob, 10);
      // the masked worker decisions renormalise over the allowed three: more probable than unmasked
      const unmasked = p.decisionLogprobs(x, decisions);
      per.forEach((d, i) => (d.head === 'worker' ? expect(d.logprob).toBeGreaterThan(unmasked[i]!.logprob) : expect(d.logprob).toBe(unmasked[i]!.logprob)));
      if (p.decide(x, { seed: s }).decisions.steps.some((st) => !allowed.includes(st.worker))) other++;
    }
    expect(other, 'unmasked, the same seeds choose masked workers').toBeGreaterThan(50);
    // argmax under a mask: the best allowed worker by the init's ranking (qwen-7b = 2 is masked; gpt-4o = 0 too; mistral-7b = 3)
    const init = ConductorPolicy.init({ workers: names, featureDim: D, seed: 0, ranking });
    expect(init.decide(features(1), { argmax: true, allowedWorkers: [1, 3, 4] }).decisions.steps.map((st) => st.worker)).toEqual([3]);
    // the masked gradient matches finite differences of the masked logprob
    const p = randomPolicy(7, 4);
    const x = features(107);
    const d = p.decide(x, { seed: 3, allowedWorkers: allowed }).decisions;
    const g = p.gradLogprob(x, d, { allowedWorkers: allowed });
    const wb = p.layout.find((b) => b.name === 'worker.b')!;
    const eps = 1e-3;
    for (let j = 0; j < names.length; j++) {
      const i = wb.offset + j;
      const plus = Float32Array.from(p.theta), minus = Float32Array.from(p.theta);
      plus[i]! += eps;
      minus[i]! -= eps;
      const fd = (p.withTheta(plus).logprob(x, d, { allowedWorkers: allowed }) - p.withTheta(minus).logprob(x, d, { allowedWorkers: allowed })) / (plus[i]! - minus[i]!);
      expect(Math.abs(g[i]! - fd), `worker.b[${j}]`).toBeLessThan(1e-4 + 1e-3 * Math.abs(fd));
      // a masked worker's logit does not enter the masked softmax
      if (!allowed.includes(j)) expect(g[i]).toBe(0);
    }
    // a decision outside the mask is impossible; a bad mask names its entry
    const outside: PolicyDecisions = { steps: [{ worker: 0, kind: 'solve', access: 'none' }] };
    inputError(() => p.logprob(x, outside, { allowedWorkers: allowed }), 'decisions.steps[0]');
    inputError(() => p.decide(x, { seed: 1, allowedWorkers: [] }), 'allowedWorkers');
    inputError(() => p.decide(x, { seed: 1, allowedWorkers: [1, 9] }), 'allowedWorkers[1]');
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
    expect(c).toMatchObject({ id: 'pol-1', workers: names, backboneId: 'use-lite-abc', featureDim: D, parentId: null, config: { maxSteps: 5, rank: 8, templateVersion: 'policy-v2', encodingVersion: 'policy-enc-v2' } });
    expect(POLICY_ENCODING_VERSION).toBe('policy-enc-v2');
    const back = policyFromCheckpoint(JSON.parse(JSON.stringify({ ...c, theta: Array.from(c.theta) }), (k, v: unknown) => (k === 'theta' ? Float32Array.from(v as number[]) : v)), { workers: names });
    expect(back.theta).toEqual(policy.theta);
    expect(back.decide(features(2), { seed: 9 })).toEqual(policy.decide(features(2), { seed: 9 }));
    // the rank travels in the config
    const r3 = ConductorPolicy.init({ workers: names, featureDim: D, seed: 1, rank: 3 });
    const c3 = policyCheckpoint(r3, { id: 'pol-3', backboneId: 'bb' });
    expect(c3.config.rank).toBe(3);
    const back3 = policyFromCheckpoint(c3, { workers: names });
    expect(back3.rank).toBe(3);
    expect(back3.theta).toEqual(r3.theta);
    // withTheta keeps the rank: a θ of another rank does not fit
    inputError(() => policy.withTheta(r3.theta), 'theta');
  });

  it('refuses an older-layout (policy-enc-v1) checkpoint and a config without its rank', () => {
    const c = policyCheckpoint(policy, { id: 'pol-1', backboneId: 'bb' });
    // what a v1 checkpoint looked like: no rank, 8 blocks (W and b per head)
    const v1Layout = c.thetaLayout.filter((b) => b.name.endsWith('.W') || b.name.endsWith('.b'));
    let off = 0;
    const v1 = { ...c, config: { ...c.config, encodingVersion: 'policy-enc-v1' }, thetaLayout: v1Layout.map((b) => { const o = off; off += size(b); return { ...b, offset: o }; }) };
    delete (v1.config as { rank?: number }).rank;
    v1.theta = new Float32Array(off);
    const msg = inputError(() => policyFromCheckpoint(v1, { workers: names }), 'checkpoint');
    expect(msg).toMatch(/"pol-1".*encoding version "policy-enc-v1" is unknown \(known: policy-enc-v2\).*without the bilinear blocks/);
    // a v2 label on the old layout, or no rank, is refused too
    inputError(() => policyFromCheckpoint({ ...v1, config: { ...v1.config, encodingVersion: 'policy-enc-v2' } }, { workers: names }), 'checkpoint');
    inputError(() => policyFromCheckpoint({ ...v1, config: { ...v1.config, encodingVersion: 'policy-enc-v2', rank: 8 } }, { workers: names }), 'checkpoint');
    inputError(() => policyFromCheckpoint({ ...c, config: { ...c.config, rank: 4 } }, { workers: names }), 'checkpoint');
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
    expect(out.promptVersion).toBe('policy-v2');
    const argmax = await policyConductor(policy, 'policy:pol-1', { argmax: true }).write({ question: 'q?', pool, seed: 1, features: features(1) });
    expect(argmax.text).toBe(`model id = [2]\nsubtasks = [${JSON.stringify(POLICY_TEMPLATES.solve.replace('{{question}}', 'q?'))}]\naccess list = [[]]`);
    await expect(conductor.write({ question: 'q', pool, seed: 1 })).rejects.toMatchObject({ field: 'features' });
    await expect(conductor.write({ question: 'q', pool, seed: 1, features: features(1, 8) })).rejects.toMatchObject({ field: 'features' });
    const other = conductorPool(['a', 'b'].map((name) => ({ name, description: name })));
    await expect(conductor.write({ question: 'q', pool: other, seed: 1, features: features(1) })).rejects.toMatchObject({ field: 'pool' });
  });

  it('template versions: a policy-v2 step\'s worker prompt carries the question once; a policy-v1 checkpoint keeps writing v1 subtasks', async () => {
    const question = 'What is the capital of Mongolia?';
    const v2 = policy.write({ features: features(2), question, pool, argmax: true });
    expect(policy.config.templateVersion).toBe('policy-v2');
    for (const st of v2.workflow.steps) expect(st.subtask).not.toContain(question);
    const prompt = renderWorkerPrompt({ question, workflow: v2.workflow, step: 0, answers: new Map() });
    const text = prompt.messages.map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content))).join('\n');
    expect(text.split(question).length - 1).toBe(1);
    // a stored policy-v1 checkpoint: its subtasks embed the question, as when it was trained
    const c = policyCheckpoint(policy, { id: 'pol-v1', backboneId: 'bb' });
    const old = policyFromCheckpoint({ ...c, config: { ...c.config, templateVersion: 'policy-v1' } }, { workers: names });
    expect(old.config.templateVersion).toBe('policy-v1');
    expect(old.withTheta(old.theta).config.templateVersion).toBe('policy-v1');
    const v1 = old.write({ features: features(2), question, pool, argmax: true });
    expect(v1.workflow.steps[0]!.subtask).toBe(POLICY_TEMPLATE_VERSIONS['policy-v1']!.solve.replace('{{question}}', question));
    expect((await policyConductor(old, 'policy:pol-v1').write({ question, pool, seed: 1, features: features(1) })).promptVersion).toBe('policy-v1');
  });

  it('writes for a restricted pool (some of its workers, in order): the text numbers that pool, the decisions the policy\'s workers', async () => {
    const conductor = policyConductor(policy, 'policy:pol-1');
    const sub = [names[1]!, names[3]!, names[4]!];
    const subPool = conductorPool(sub.map((name) => ({ name, description: name })));
    let steps = 0;
    for (let s = 0; s < 50; s++) {
      const out = await conductor.write({ question: 'What is 2 + 2?', pool: subPool, seed: s, features: features(s) });
      const parsed = parseWorkflow(out.text, { poolSize: sub.length });
      expect(parsed.ok).toBe(true);
      if (!parsed.ok) continue;
      const d = out.decisions as PolicyDecisions;
      // the same steps: the text's ids are the sub-pool's, the decisions the policy's indices
      expect(parsed.workflow.steps.map((st) => sub[st.worker])).toEqual(d.steps.map((st) => names[st.worker]));
      expect(out.logprob).toBe(policy.logprob(features(s), d, { allowedWorkers: [1, 3, 4] }));
      steps += d.steps.length;
    }
    expect(steps).toBeGreaterThan(50);
    // a pool out of the policy's order, or with a stranger, is refused
    const swapped = conductorPool([names[3]!, names[1]!].map((name) => ({ name, description: name })));
    await expect(conductor.write({ question: 'q', pool: swapped, seed: 1, features: features(1) })).rejects.toMatchObject({ field: 'pool' });
    const stranger = conductorPool([names[1]!, 'zz'].map((name) => ({ name, description: name })));
    await expect(conductor.write({ question: 'q', pool: stranger, seed: 1, features: features(1) })).rejects.toMatchObject({ field: 'pool' });
  });
});
