import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { SepCmaEs, defaultLambda, defaultStepSize, gaussianVector, sepCmaEsParams, sphere } from './index.ts';
import type { SepCmaEsOptions, SepCmaEsState } from './index.ts';

const bits = (a: ArrayLike<number>): string => Buffer.from(Float64Array.from(a).buffer).toString('hex');

/** maximise -f for `generations` generations, optionally restoring from JSON before every ask */
function drive(opts: SepCmaEsOptions, generations: number, roundTrip: boolean): SepCmaEs {
  let es = new SepCmaEs(opts);
  for (let g = 0; g < generations; g++) {
    if (roundTrip) es = SepCmaEs.fromState(JSON.parse(JSON.stringify(es.state())) as SepCmaEsState);
    const fit: number[] = [];
    for (let k = 0; k < es.lambda; k++) {
      // each candidate as an evaluator would see it: from a fresh copy of the serialised state
      const x = roundTrip ? SepCmaEs.fromState(JSON.parse(JSON.stringify(es.state())) as SepCmaEsState).candidate(k) : es.candidate(k);
      fit.push(-sphere.f(x));
    }
    es.tell(fit);
  }
  return es;
}

function expectInputError(fn: () => unknown, field: string): void {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    expect((e as InputError).field).toBe(field);
    expect((e as Error).message).toContain(`field ${field}`);
    return;
  }
  throw new Error(`expected an InputError naming ${field}`);
}

describe('sep-CMA-ES strategy parameters', () => {
  it('follows Ros & Hansen 2008 defaults', () => {
    expect(defaultLambda(10)).toBe(10);
    expect(defaultLambda(10_000)).toBe(4 + Math.floor(3 * Math.log(10_000)));
    const p = sepCmaEsParams(10, 10);
    expect(p.mu).toBe(5);
    expect(p.weights.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 14);
    for (let i = 1; i < p.weights.length; i++) expect(p.weights[i]!).toBeLessThan(p.weights[i - 1]!);
    expect(p.muEff).toBeCloseTo(1 / p.weights.reduce((a, w) => a + w * w, 0), 12);
    expect(p.cSigma).toBeCloseTo((p.muEff + 2) / (10 + p.muEff + 3), 14);
    expect(p.cc).toBe(4 / 14);
    expect(p.cCovSep).toBeCloseTo((12 / 3) * p.cCov, 14);
    expect(p.dSigma).toBeCloseTo(1 + p.cSigma, 14); // mu_eff - 1 < n + 1
    expect(defaultStepSize(299)).toBe('csa');
    expect(defaultStepSize(300)).toBe('tpa');
  });
});

describe('SepCmaEs candidates', () => {
  const opts: SepCmaEsOptions = { n: 7, m0: [1, 2, 3, 4, 5, 6, 7], sigma0: 0.3, seed: 'run-1', stepSize: 'csa' };

  it('samples x_k = m + sigma * d * z_k from the seeded stream of (seed, generation, k)', () => {
    const es = new SepCmaEs(opts);
    const z = gaussianVector('run-1', 0, 3, 7);
    const x = es.candidate(3);
    for (let i = 0; i < 7; i++) expect(x[i]).toBe(opts.m0[i]! + 0.3 * z[i]!);
    expect(bits(es.candidate(3))).toBe(bits(x));
    expect(bits(es.candidate(4))).not.toBe(bits(x));
    expect(bits(new SepCmaEs({ ...opts, seed: 'run-2' }).candidate(3))).not.toBe(bits(x));
  });

  it('is deterministic per seed: two runs give identical means and sigmas bit for bit', () => {
    const a = drive(opts, 15, false);
    const b = drive(opts, 15, false);
    expect(bits(a.mean())).toBe(bits(b.mean()));
    expect(a.sigma).toBe(b.sigma);
    const c = drive({ ...opts, seed: 'run-other' }, 15, false);
    expect(bits(c.mean())).not.toBe(bits(a.mean()));
  });

  it('regenerates the same candidate in another process from the serialised state', () => {
    const es = drive({ ...opts, stepSize: 'tpa' }, 5, false);
    expect(es.tpaActive).toBe(true);
    const index = fileURLToPath(new URL('./index.ts', import.meta.url));
    const script = `
      const { SepCmaEs } = await import(${JSON.stringify(index)});
      const es = SepCmaEs.fromState(JSON.parse(process.argv[1]));
      const out = [];
      for (let k = 0; k < es.lambda; k++) out.push(Buffer.from(es.candidate(k).buffer).toString('hex'));
      console.log(JSON.stringify(out));`;
    const stdout = execFileSync(process.execPath, ['--input-type=module', '-e', script, JSON.stringify(es.state())], { encoding: 'utf8' });
    const theirs = JSON.parse(stdout) as string[];
    expect(theirs).toEqual(Array.from({ length: es.lambda }, (_, k) => bits(es.candidate(k))));
  });

  for (const stepSize of ['csa', 'tpa'] as const) {
    it(`continues bit-identically after serialise/restore every generation (${stepSize})`, () => {
      const o = { ...opts, n: 12, m0: new Array<number>(12).fill(0.5), stepSize };
      const straight = drive(o, 20, false);
      const restored = drive(o, 20, true);
      expect(restored.generation).toBe(20);
      expect(bits(restored.mean())).toBe(bits(straight.mean()));
      expect(restored.sigma).toBe(straight.sigma);
      expect(restored.state()).toEqual(straight.state());
      expect(JSON.stringify(restored.state())).toBe(JSON.stringify(straight.state()));
    });
  }

  it('state() is a deep copy and best() tracks the best candidate told', () => {
    const es = new SepCmaEs(opts);
    const s = es.state();
    s.mean[0] = 1e9;
    expect(es.mean()[0]).toBe(1);
    expect(es.best()).toBeUndefined();
    const xs = Array.from({ length: es.lambda }, (_, k) => es.candidate(k));
    const fit = xs.map((x) => -sphere.f(x));
    es.tell(fit);
    const kBest = fit.indexOf(Math.max(...fit));
    const best = es.best()!;
    expect(best.fitness).toBe(fit[kBest]);
    expect(best.generation).toBe(0);
    expect(bits(best.x)).toBe(bits(xs[kBest]!));
    expect(es.generation).toBe(1);
    expect(es.evaluations).toBe(es.lambda);
  });

  it('moves the mean by sigma * d * sum_j w_j z_{j:lambda} (maximising: best fitness first)', () => {
    const es = new SepCmaEs(opts);
    const p = es.params;
    const zs = Array.from({ length: es.lambda }, (_, k) => gaussianVector('run-1', 0, k, 7));
    const fit = zs.map((_, k) => k); // candidate lambda-1 is the best
    es.tell(fit);
    const m = es.mean();
    for (let i = 0; i < 7; i++) {
      let zw = 0;
      for (let j = 0; j < p.mu; j++) zw += p.weights[j]! * zs[es.lambda - 1 - j]![i]!;
      expect(m[i]).toBeCloseTo(opts.m0[i]! + 0.3 * zw, 12);
    }
  });

  it('TPA: candidates 0 and 1 are m +- a normal-length step along the last mean shift', () => {
    const es = drive({ ...opts, stepSize: 'tpa' }, 3, false);
    const before = es.state();
    expect(before.lastShift).not.toBeNull();
    const m = es.mean();
    const x0 = es.candidate(0), x1 = es.candidate(1);
    const shift = before.lastShift!;
    const d = before.C.map(Math.sqrt);
    // x0 - m is parallel to the shift, x1 - m is its mirror
    const ratio = (x0[0]! - m[0]!) / shift[0]!;
    expect(ratio).toBeGreaterThan(0);
    for (let i = 0; i < 7; i++) {
      expect((x0[i]! - m[i]!) / shift[i]!).toBeCloseTo(ratio, 8);
      expect(x1[i]! - m[i]!).toBeCloseTo(-(x0[i]! - m[i]!), 12);
    }
    // Mahalanobis length of z_0 equals the norm of the generation's seeded normal sample
    let len2 = 0, zlen2 = 0;
    const xi = gaussianVector('run-1', es.generation, 0, 7);
    for (let i = 0; i < 7; i++) {
      const z = (x0[i]! - m[i]!) / (es.sigma * d[i]!);
      zlen2 += z * z;
      len2 += xi[i]! * xi[i]!;
    }
    expect(Math.sqrt(zlen2)).toBeCloseTo(Math.sqrt(len2), 10);
  });

  it('TPA: sigma grows when the point along the mean shift wins, shrinks when its mirror wins', () => {
    const grow = drive({ ...opts, stepSize: 'tpa' }, 2, false);
    const shrink = SepCmaEs.fromState(grow.state());
    const s0 = grow.sigma;
    const lam = grow.lambda;
    grow.tell(Array.from({ length: lam }, (_, k) => (k === 0 ? 10 : k === 1 ? -10 : 0)));
    shrink.tell(Array.from({ length: lam }, (_, k) => (k === 0 ? -10 : k === 1 ? 10 : 0)));
    expect(grow.sigma).toBeGreaterThan(s0);
    expect(shrink.sigma).toBeLessThan(s0);
  });

  it('at large n within 60 generations, CSA barely moves sigma while TPA grows it on a linear function', () => {
    const n = 2000;
    const ratio = (stepSize: 'csa' | 'tpa'): number => {
      const es = new SepCmaEs({ n, m0: new Array<number>(n).fill(0), sigma0: 1, seed: 3, stepSize });
      for (let g = 0; g < 60; g++) es.tell(Array.from({ length: es.lambda }, (_, k) => es.candidate(k).reduce((a, b) => a + b, 0)));
      return es.sigma;
    };
    const csa = ratio('csa');
    expect(Math.abs(Math.log(csa))).toBeLessThan(0.2);
    expect(ratio('tpa')).toBeGreaterThan(5);
  });

  it('CSA: sigma grows on a linear function', () => {
    const es = new SepCmaEs({ ...opts, stepSize: 'csa' });
    for (let g = 0; g < 30; g++) es.tell(Array.from({ length: es.lambda }, (_, k) => es.candidate(k).reduce((a, b) => a + b, 0)));
    expect(es.sigma).toBeGreaterThan(0.3 * 5);
  });
});

describe('SepCmaEs bad input', () => {
  const good: SepCmaEsOptions = { n: 3, m0: [0, 0, 0], sigma0: 1, seed: 1 };
  it('names the field of bad options', () => {
    expectInputError(() => new SepCmaEs({ ...good, n: 0 }), 'n');
    expectInputError(() => new SepCmaEs({ ...good, n: 2.5 }), 'n');
    expectInputError(() => new SepCmaEs({ ...good, sigma0: 0 }), 'sigma0');
    expectInputError(() => new SepCmaEs({ ...good, sigma0: -1 }), 'sigma0');
    expectInputError(() => new SepCmaEs({ ...good, sigma0: Infinity }), 'sigma0');
    expectInputError(() => new SepCmaEs({ ...good, lambda: 1 }), 'lambda');
    expectInputError(() => new SepCmaEs({ ...good, lambda: 3, stepSize: 'tpa' }), 'lambda');
    expectInputError(() => new SepCmaEs({ ...good, lambda: 4.5 }), 'lambda');
    expectInputError(() => new SepCmaEs({ ...good, lambda: 1e9 }), 'lambda');
    expectInputError(() => new SepCmaEs({ ...good, m0: [0, 0] }), 'm0');
    expectInputError(() => new SepCmaEs({ ...good, m0: [0, NaN, 0] }), 'm0[1]');
    expectInputError(() => new SepCmaEs({ ...good, seed: '' }), 'seed');
    expectInputError(() => new SepCmaEs({ ...good, stepSize: 'xnes' as never }), 'stepSize');
    expect(new SepCmaEs({ ...good, lambda: 2, stepSize: 'csa' }).lambda).toBe(2);
  });

  it('names the field of bad tell and candidate arguments', () => {
    const es = new SepCmaEs(good);
    expectInputError(() => es.candidate(es.lambda), 'k');
    expectInputError(() => es.candidate(-1), 'k');
    expectInputError(() => es.tell([1, 2]), 'fitness');
    expectInputError(() => es.tell(Array.from({ length: es.lambda }, (_, k) => (k === 2 ? NaN : 0))), 'fitness[2]');
    expect(es.generation).toBe(0);
  });

  it('rejects bad or unknown-version states', () => {
    const state = new SepCmaEs(good).state();
    expectInputError(() => SepCmaEs.fromState({ ...state, version: 2 } as unknown as SepCmaEsState), 'state.version');
    expectInputError(() => SepCmaEs.fromState({ ...state, sigma: -1 }), 'state.sigma');
    expectInputError(() => SepCmaEs.fromState({ ...state, C: [1, 0, 1] }), 'state.C[1]');
    expectInputError(() => SepCmaEs.fromState({ ...state, mean: [1] }), 'state.mean');
    expectInputError(() => SepCmaEs.fromState({ ...state, generation: -1 }), 'state.generation');
    expectInputError(() => SepCmaEs.fromState({ ...state, lambda: 1 }), 'state.lambda');
    expectInputError(() => SepCmaEs.fromState(null as unknown as SepCmaEsState), 'state');
  });
});
