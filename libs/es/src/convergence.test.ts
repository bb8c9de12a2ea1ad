// Convergence to f <= 1e-8 (maximising -f) on sphere, separable ellipsoid (cond 1e6) and
// Rosenbrock for n = 10 and 40, with both step-size rules. Fewer seeds than the README table
// (scripts/benchmark-table.ts, 10 seeds); budgets are about 3x the table's medians.
import { describe, expect, it } from 'vitest';
import { ellipsoid, minimise, rosenbrock, sphere } from './index.ts';
import type { TestFunction } from './index.ts';

const cases: Array<{ fn: TestFunction; n: number; budget: number; seeds: number[] }> = [
  { fn: sphere, n: 10, budget: 4_000, seeds: [1, 2] },
  { fn: sphere, n: 40, budget: 15_000, seeds: [1, 2] },
  { fn: ellipsoid, n: 10, budget: 9_000, seeds: [1, 2] },
  { fn: ellipsoid, n: 40, budget: 40_000, seeds: [1, 2] },
  // Rosenbrock is not separable: the diagonal model cannot learn its valley, so it takes
  // ~100x the sphere's evaluations; IPOP restarts allowed for the local optimum near x_1 = -1
  { fn: rosenbrock, n: 10, budget: 300_000, seeds: [1] },
  { fn: rosenbrock, n: 40, budget: 600_000, seeds: [1] },
];

describe('sep-CMA-ES converges to 1e-8', () => {
  for (const { fn, n, budget, seeds } of cases)
    for (const stepSize of ['csa', 'tpa'] as const)
      it(`${fn.name} n=${n} ${stepSize}`, () => {
        for (const seed of seeds) {
          const r = minimise({ fn, n, seed, stepSize, maxEvaluations: budget, restarts: fn === rosenbrock ? 4 : 0 });
          expect(r.fBest, `seed ${seed}: ${JSON.stringify(r)}`).toBeLessThanOrEqual(1e-8);
          expect(r.reached).toBe(true);
        }
      });
});
