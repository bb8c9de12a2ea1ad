// Prints the README table: median evaluations to f <= 1e-8 over 10 seeds per (function, n, step-size
// rule), then sigma after 60 generations at n = 10,000 (CSA vs TPA) and the bytes of a job payload.
//   node libs/es/scripts/benchmark-table.ts [--seeds 10]
import { SepCmaEs, ellipsoid, minimise, rosenbrock, sphere } from '../src/index.ts';
import type { StepSizeAdaptation, TestFunction } from '../src/index.ts';

const seedsArg = process.argv.indexOf('--seeds');
const nSeeds = seedsArg > 0 ? Number(process.argv[seedsArg + 1]) : 10;
const seeds = Array.from({ length: nSeeds }, (_, i) => i + 1);
const median = (xs: number[]): number => {
  const s = xs.slice().sort((a, b) => a - b);
  const h = Math.floor(s.length / 2);
  return s.length % 2 ? s[h]! : (s[h - 1]! + s[h]!) / 2;
};

const budget = (fn: TestFunction, n: number): number => (fn === rosenbrock ? 2000 : 200) * n * n + 20_000;

console.log(`median evaluations to f <= 1e-8 over ${nSeeds} seeds (maximising -f; m0 and sigma0 per function, see README)\n`);
console.log('| function | n | lambda | CSA: median (min-max) | TPA: median (min-max) | restarts (CSA/TPA) |');
console.log('|---|---:|---:|---:|---:|---:|');
for (const fn of [sphere, ellipsoid, rosenbrock])
  for (const n of [10, 40]) {
    const cells: string[] = [];
    const restarts: number[] = [];
    for (const stepSize of ['csa', 'tpa'] as StepSizeAdaptation[]) {
      const runs = seeds.map((seed) => minimise({ fn, n, seed, stepSize, maxEvaluations: budget(fn, n), restarts: fn === rosenbrock ? 4 : 0 }));
      const ok = runs.filter((r) => r.reached);
      const evals = ok.map((r) => r.evaluations);
      cells.push(
        ok.length === 0
          ? 'none reached'
          : `${median(evals)} (${Math.min(...evals)}-${Math.max(...evals)})${ok.length < runs.length ? ` ${ok.length}/${runs.length} reached` : ''}`,
      );
      restarts.push(runs.reduce((a, r) => a + r.restarts, 0));
    }
    const lambda = new SepCmaEs({ n, m0: fn.m0(n), sigma0: fn.sigma0, seed: 1 }).lambda;
    console.log(`| ${fn.name} | ${n} | ${lambda} | ${cells[0]} | ${cells[1]} | ${restarts.join('/')} |`);
  }

// n = 10,000 for 60 generations, the issue's regime: how far does each rule move sigma?
console.log('\nsigma_60 / sigma_0 at n = 10,000, lambda default, 60 generations (seed 1)\n');
console.log('| problem | sigma0 | CSA | TPA |');
console.log('|---|---:|---:|---:|');
const n = 10_000;
const problems: Array<{ name: string; sigma0: number; fitness: (x: Float64Array) => number }> = [
  { name: 'linear (sigma should grow)', sigma0: 1, fitness: (x) => x.reduce((a, b) => a + b, 0) },
  { name: 'sphere from m0 = 1, sigma0 too large', sigma0: 1, fitness: (x) => -sphere.f(x) },
  { name: 'sphere from m0 = 1, sigma0 too small', sigma0: 1e-4, fitness: (x) => -sphere.f(x) },
];
for (const p of problems) {
  const ratios: string[] = [];
  for (const stepSize of ['csa', 'tpa'] as StepSizeAdaptation[]) {
    const es = new SepCmaEs({ n, m0: new Array<number>(n).fill(1), sigma0: p.sigma0, seed: 1, stepSize });
    for (let g = 0; g < 60; g++) es.tell(Array.from({ length: es.lambda }, (_, k) => p.fitness(es.candidate(k))));
    ratios.push((es.sigma / p.sigma0).toPrecision(3));
  }
  console.log(`| ${p.name} | ${p.sigma0} | ${ratios[0]} | ${ratios[1]} |`);
}

// what a job carries instead of a vector
const payload = JSON.stringify({ runId: '0b7f6a2e-4c1d-4e8a-9f3b-2d5c6e7f8a9b', generation: 59, stateVersion: 59, candidate: 31, replica: 15 });
const es = new SepCmaEs({ n, m0: new Array<number>(n).fill(0), sigma0: 0.1, seed: 1, stepSize: 'tpa' });
es.tell(Array.from({ length: es.lambda }, (_, k) => -sphere.f(es.candidate(k))));
console.log(`\njob payload: ${Buffer.byteLength(payload)} bytes (${payload})`);
console.log(`one candidate vector at n = ${n}: ${n * 4} bytes as float32, ${Buffer.byteLength(JSON.stringify(Array.from(es.candidate(0))))} bytes as JSON`);
console.log(`optimiser state JSON at n = ${n} after one generation: ${Buffer.byteLength(JSON.stringify(es.state()))} bytes (read once per generation per evaluator)`);
