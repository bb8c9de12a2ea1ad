// Test functions and a run-to-target loop with IPOP restarts, for the tests and the benchmark table.
// The optimiser maximises, so these loops tell it -f.
import { SepCmaEs } from './sep-cma-es.ts';
import type { StepSizeAdaptation } from './sep-cma-es.ts';

export type TestFunction = { name: string; f: (x: Float64Array) => number; m0: (n: number) => number[]; sigma0: number };

export const sphere: TestFunction = {
  name: 'sphere',
  f: (x) => {
    let s = 0;
    for (let i = 0; i < x.length; i++) s += x[i]! * x[i]!;
    return s;
  },
  m0: (n) => new Array<number>(n).fill(1),
  sigma0: 1,
};

/** separable ellipsoid, condition number 1e6: sum_i 1e6^((i-1)/(n-1)) x_i^2 */
export const ellipsoid: TestFunction = {
  name: 'ellipsoid',
  f: (x) => {
    const n = x.length;
    let s = 0;
    for (let i = 0; i < n; i++) s += Math.pow(1e6, n === 1 ? 0 : i / (n - 1)) * x[i]! * x[i]!;
    return s;
  },
  m0: (n) => new Array<number>(n).fill(1),
  sigma0: 1,
};

/** Rosenbrock: sum_i 100 (x_i^2 - x_{i+1})^2 + (x_i - 1)^2, optimum 0 at (1, ..., 1); non-separable */
export const rosenbrock: TestFunction = {
  name: 'rosenbrock',
  f: (x) => {
    let s = 0;
    for (let i = 0; i + 1 < x.length; i++) {
      const a = x[i]! * x[i]! - x[i + 1]!;
      const b = x[i]! - 1;
      s += 100 * a * a + b * b;
    }
    return s;
  },
  m0: (n) => new Array<number>(n).fill(0),
  sigma0: 0.5,
};

export const testFunctions: readonly TestFunction[] = [sphere, ellipsoid, rosenbrock];

export type MinimiseOptions = {
  fn: TestFunction;
  n: number;
  seed: number | string;
  stepSize?: StepSizeAdaptation;
  /** stop when f(best) <= target (default 1e-8) */
  target?: number;
  maxEvaluations: number;
  /** IPOP restarts (lambda doubles on each): default 0 */
  restarts?: number;
};

export type MinimiseResult = { reached: boolean; evaluations: number; fBest: number; restarts: number; finalSigma: number };

/**
 * Minimises fn.f (maximising -f) until f(best) <= target or the evaluation budget is spent. A run
 * restarts (new seed, doubled lambda) when it stalls: all sampling stds below 1e-12, or the best
 * fitness of the last 10 + ceil(30 n / lambda) generations and the current one within 1e-12.
 */
export function minimise(opts: MinimiseOptions): MinimiseResult {
  const target = opts.target ?? 1e-8;
  const { fn, n } = opts;
  let evaluations = 0;
  let fBest = Infinity;
  let lambda: number | undefined;
  let finalSigma = NaN;
  const maxRestarts = opts.restarts ?? 0;
  for (let r = 0; r <= maxRestarts; r++) {
    const es = new SepCmaEs({
      n,
      m0: fn.m0(n),
      sigma0: fn.sigma0,
      seed: r === 0 ? opts.seed : `${opts.seed}/restart-${r}`,
      ...(lambda === undefined ? {} : { lambda }),
      ...(opts.stepSize === undefined ? {} : { stepSize: opts.stepSize }),
    });
    lambda = es.lambda;
    const window = 10 + Math.ceil((30 * n) / es.lambda);
    const history: number[] = [];
    for (;;) {
      const fit: number[] = [];
      for (let k = 0; k < es.lambda; k++) {
        const f = fn.f(es.candidate(k));
        fit.push(-f);
        evaluations++;
        if (f < fBest) fBest = f;
      }
      es.tell(fit);
      finalSigma = es.sigma;
      if (fBest <= target) return { reached: true, evaluations, fBest, restarts: r, finalSigma };
      if (evaluations >= opts.maxEvaluations) return { reached: false, evaluations, fBest, restarts: r, finalSigma };
      history.push(Math.max(...fit));
      if (history.length > window) history.shift();
      const stds = es.stds();
      let maxStd = 0;
      for (const s of stds) maxStd = Math.max(maxStd, s);
      const range = Math.max(...history, ...fit) - Math.min(...history, ...fit);
      if (maxStd < 1e-12 || (history.length === window && range < 1e-12)) break;
    }
    lambda *= 2;
  }
  return { reached: false, evaluations, fBest, restarts: maxRestarts, finalSigma };
}
