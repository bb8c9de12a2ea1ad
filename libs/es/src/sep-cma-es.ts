// sep-CMA-ES (Ros & Hansen 2008): CMA-ES with a diagonal covariance matrix, maximising fitness.
// Ask/tell with candidates regenerated from (seed, generation, k) and the state, so a job payload
// never carries a parameter vector. Two step-size rules: cumulative step-size adaptation (CSA) and
// two-point step-size adaptation (TPA, Hansen 2008; as pycma's CMAAdaptSigmaTPA). See README.md.
import { InputError, rng } from '@fugu/core';

export type StepSizeAdaptation = 'tpa' | 'csa';

export type SepCmaEsOptions = {
  /** dimension */
  n: number;
  /** initial mean (length n) */
  m0: ArrayLike<number>;
  /** initial step size, > 0 */
  sigma0: number;
  /** run seed: candidate k of generation g is drawn from rng(seed, `es/${g}/${k}`) */
  seed: number | string;
  /** population size; default 4 + floor(3 ln n); >= 2 (>= 4 with tpa) */
  lambda?: number;
  /** default: 'tpa' for n >= TPA_MIN_N (300, as pycma for diagonal CMA), else 'csa' */
  stepSize?: StepSizeAdaptation;
};

/** The whole optimiser state: plain JSON (vectors as number arrays). `version` is the format version. */
export type SepCmaEsState = {
  version: 1;
  algorithm: 'sep-cma-es';
  n: number;
  lambda: number;
  stepSize: StepSizeAdaptation;
  seed: number | string;
  /** 0-based generation the next candidates belong to */
  generation: number;
  /** fitness evaluations told so far (lambda per generation) */
  evaluations: number;
  mean: number[];
  sigma: number;
  /** diagonal of C; d = sqrt(C) */
  C: number[];
  /** evolution path for C (x-space, divided by sigma) */
  pc: number[];
  /** conjugate evolution path for sigma (z-space) */
  ps: number[];
  /** m_g - m_{g-1} of the last tell (x-space); null before the first tell. TPA samples along it */
  lastShift: number[] | null;
  /** TPA's smoothed rank difference s */
  tpaS: number;
  best: { x: number[]; fitness: number; generation: number } | null;
};

/** Strategy parameters, all derived from (n, lambda): never stored, recomputed identically. */
export type SepCmaEsParams = {
  n: number;
  lambda: number;
  mu: number;
  weights: readonly number[];
  muEff: number;
  cSigma: number;
  dSigma: number;
  cc: number;
  /** c_cov of full CMA-ES (mu_cov = mu_eff) */
  cCov: number;
  /** (n + 2) / 3 * c_cov, capped at 1 */
  cCovSep: number;
  /** E||N(0, I)|| */
  chiN: number;
  /** TPA: damping, smoothing constant and rank exponent (pycma's defaults) */
  tpaDamp: number;
  tpaC: number;
  tpaZExponent: number;
};

/** pycma switches diagonal CMA-ES to TPA above 299 dimensions; so do we. */
export const TPA_MIN_N = 300;
export const MAX_LAMBDA = 100_000;
export const MAX_N = 100_000_000;

export function defaultLambda(n: number): number {
  return 4 + Math.floor(3 * Math.log(n));
}

export function defaultStepSize(n: number): StepSizeAdaptation {
  return n >= TPA_MIN_N ? 'tpa' : 'csa';
}

export function sepCmaEsParams(n: number, lambda: number): SepCmaEsParams {
  const mu = Math.floor(lambda / 2);
  const raw: number[] = [];
  for (let i = 1; i <= mu; i++) raw.push(Math.log((lambda + 1) / 2) - Math.log(i));
  let sum = 0;
  for (const w of raw) sum += w;
  const weights = raw.map((w) => w / sum);
  let sq = 0;
  for (const w of weights) sq += w * w;
  const muEff = 1 / sq;
  const cSigma = (muEff + 2) / (n + muEff + 3);
  const dSigma = 1 + 2 * Math.max(0, Math.sqrt((muEff - 1) / (n + 1)) - 1) + cSigma;
  const cc = 4 / (n + 4);
  const muCov = muEff;
  const cCov =
    (1 / muCov) * (2 / ((n + Math.SQRT2) * (n + Math.SQRT2))) +
    (1 - 1 / muCov) * Math.min(1, (2 * muEff - 1) / ((n + 2) * (n + 2) + muEff));
  const cCovSep = Math.min(1, ((n + 2) / 3) * cCov);
  const chiN = Math.sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n * n));
  const tpaDamp = 0.7 + 2 * Math.log(n) + 2 * Math.log(Math.max(1, lambda - n));
  return { n, lambda, mu, weights, muEff, cSigma, dSigma, cc, cCov, cCovSep, chiN, tpaDamp, tpaC: 0.3, tpaZExponent: 0.5 };
}

/** The standard normal vector z of candidate k in generation g: the same in any process. */
export function gaussianVector(seed: number | string, generation: number, k: number, n: number): Float64Array {
  const r = rng(seed, `es/${generation}/${k}`);
  const z = new Float64Array(n);
  for (let i = 0; i < n; i++) z[i] = r.normal();
  return z;
}

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v);
const isFiniteNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

function checkSeed(seed: unknown, field: string): number | string {
  if (typeof seed === 'number' ? !Number.isFinite(seed) : typeof seed !== 'string' || seed === '')
    throw new InputError(`must be a finite number or a non-empty string, got ${JSON.stringify(seed)}`, { field });
  return seed as number | string;
}

function checkVector(v: unknown, n: number, field: string, positive = false): Float64Array {
  if (v === null || typeof v !== 'object' || typeof (v as ArrayLike<number>).length !== 'number')
    throw new InputError(`must be an array of ${n} numbers`, { field });
  const a = v as ArrayLike<unknown>;
  if (a.length !== n) throw new InputError(`must have length n = ${n}, got ${a.length}`, { field });
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const x = a[i];
    if (!isFiniteNumber(x) || (positive && !(x > 0)))
      throw new InputError(`must be ${positive ? 'positive' : 'finite'} numbers; element ${i} is ${String(x)}`, {
        field: `${field}[${i}]`,
      });
    out[i] = x;
  }
  return out;
}

function checkLambda(lambda: unknown, stepSize: StepSizeAdaptation, field: string): number {
  const min = stepSize === 'tpa' ? 4 : 2;
  if (!isInt(lambda) || lambda < min || lambda > MAX_LAMBDA)
    throw new InputError(
      `must be an integer in [${min}, ${MAX_LAMBDA}]${stepSize === 'tpa' ? ' (tpa spends two candidates a generation)' : ''}, got ${String(lambda)}`,
      { field },
    );
  return lambda;
}

function checkN(n: unknown, field: string): number {
  if (!isInt(n) || n < 1 || n > MAX_N) throw new InputError(`must be an integer in [1, ${MAX_N}], got ${String(n)}`, { field });
  return n;
}

function checkStepSize(v: unknown, field: string): StepSizeAdaptation {
  if (v !== 'tpa' && v !== 'csa') throw new InputError(`must be 'tpa' or 'csa', got ${JSON.stringify(v)}`, { field });
  return v;
}

function checkSigma(v: unknown, field: string): number {
  if (!isFiniteNumber(v) || !(v > 0)) throw new InputError(`must be a finite number > 0, got ${String(v)}`, { field });
  return v;
}

export class SepCmaEs {
  readonly n: number;
  readonly lambda: number;
  readonly stepSize: StepSizeAdaptation;
  readonly seed: number | string;
  readonly params: SepCmaEsParams;
  #generation: number;
  #evaluations: number;
  #m: Float64Array;
  #sigma: number;
  #C: Float64Array;
  #d: Float64Array;
  #pc: Float64Array;
  #ps: Float64Array;
  #lastShift: Float64Array | null;
  #tpaS: number;
  #best: { x: Float64Array; fitness: number; generation: number } | undefined;
  /** cached z vectors of the current generation (cleared by tell) */
  #zCache = new Map<number, Float64Array>();
  #tpaZ: Float64Array | null | undefined;

  constructor(opts: SepCmaEsOptions) {
    if (opts === null || typeof opts !== 'object') throw new InputError('options must be an object', { field: 'options' });
    const n = checkN(opts.n, 'n');
    const stepSize = opts.stepSize === undefined ? defaultStepSize(n) : checkStepSize(opts.stepSize, 'stepSize');
    const lambda = opts.lambda === undefined ? Math.max(defaultLambda(n), stepSize === 'tpa' ? 4 : 2) : checkLambda(opts.lambda, stepSize, 'lambda');
    const m0 = checkVector(opts.m0, n, 'm0');
    const sigma0 = checkSigma(opts.sigma0, 'sigma0');
    const seed = checkSeed(opts.seed, 'seed');
    this.n = n;
    this.lambda = lambda;
    this.stepSize = stepSize;
    this.seed = seed;
    this.params = sepCmaEsParams(n, lambda);
    this.#generation = 0;
    this.#evaluations = 0;
    this.#m = m0;
    this.#sigma = sigma0;
    this.#C = new Float64Array(n).fill(1);
    this.#d = new Float64Array(n).fill(1);
    this.#pc = new Float64Array(n);
    this.#ps = new Float64Array(n);
    this.#lastShift = null;
    this.#tpaS = 0;
    this.#best = undefined;
  }

  /** Restores a state from `state()` (e.g. after JSON round trip); InputError on a bad or unknown-version state. */
  static fromState(state: SepCmaEsState): SepCmaEs {
    if (state === null || typeof state !== 'object') throw new InputError('optimiser state must be an object', { field: 'state' });
    const s = state as Partial<Record<keyof SepCmaEsState, unknown>>;
    if (s.version !== 1)
      throw new InputError(`unknown optimiser state version ${JSON.stringify(s.version)} (this code reads version 1)`, {
        field: 'state.version',
      });
    if (s.algorithm !== 'sep-cma-es')
      throw new InputError(`expected 'sep-cma-es', got ${JSON.stringify(s.algorithm)}`, { field: 'state.algorithm' });
    const n = checkN(s.n, 'state.n');
    const stepSize = checkStepSize(s.stepSize, 'state.stepSize');
    const lambda = checkLambda(s.lambda, stepSize, 'state.lambda');
    const seed = checkSeed(s.seed, 'state.seed');
    if (!isInt(s.generation) || s.generation < 0)
      throw new InputError(`must be an integer >= 0, got ${String(s.generation)}`, { field: 'state.generation' });
    if (!isInt(s.evaluations) || s.evaluations < 0)
      throw new InputError(`must be an integer >= 0, got ${String(s.evaluations)}`, { field: 'state.evaluations' });
    const sigma = checkSigma(s.sigma, 'state.sigma');
    if (!isFiniteNumber(s.tpaS)) throw new InputError(`must be a finite number, got ${String(s.tpaS)}`, { field: 'state.tpaS' });
    const es = new SepCmaEs({ n, m0: checkVector(s.mean, n, 'state.mean'), sigma0: sigma, seed, lambda, stepSize });
    es.#generation = s.generation;
    es.#evaluations = s.evaluations;
    es.#C = checkVector(s.C, n, 'state.C', true);
    es.#d = es.#C.map(Math.sqrt);
    es.#pc = checkVector(s.pc, n, 'state.pc');
    es.#ps = checkVector(s.ps, n, 'state.ps');
    es.#lastShift = s.lastShift === null ? null : checkVector(s.lastShift, n, 'state.lastShift');
    es.#tpaS = s.tpaS;
    if (s.best !== null) {
      const b = s.best as { x?: unknown; fitness?: unknown; generation?: unknown } | undefined;
      if (b === undefined || typeof b !== 'object' || !isFiniteNumber(b.fitness) || !isInt(b.generation) || b.generation < 0)
        throw new InputError('must be null or { x, fitness, generation }', { field: 'state.best' });
      es.#best = { x: checkVector(b.x, n, 'state.best.x'), fitness: b.fitness, generation: b.generation };
    }
    return es;
  }

  /** 0-based: the generation the next candidates belong to */
  get generation(): number {
    return this.#generation;
  }

  get sigma(): number {
    return this.#sigma;
  }

  get evaluations(): number {
    return this.#evaluations;
  }

  mean(): Float64Array {
    return this.#m.slice();
  }

  /** per-coordinate standard deviation of the sampling distribution: sigma * sqrt(C_ii) */
  stds(): Float64Array {
    const out = new Float64Array(this.n);
    for (let i = 0; i < this.n; i++) out[i] = this.#sigma * this.#d[i]!;
    return out;
  }

  /** whether candidates 0 and 1 of the current generation are TPA's two points m +- step along the last mean shift */
  get tpaActive(): boolean {
    return this.#tpaDirection() !== null;
  }

  state(): SepCmaEsState {
    return {
      version: 1,
      algorithm: 'sep-cma-es',
      n: this.n,
      lambda: this.lambda,
      stepSize: this.stepSize,
      seed: this.seed,
      generation: this.#generation,
      evaluations: this.#evaluations,
      mean: Array.from(this.#m),
      sigma: this.#sigma,
      C: Array.from(this.#C),
      pc: Array.from(this.#pc),
      ps: Array.from(this.#ps),
      lastShift: this.#lastShift ? Array.from(this.#lastShift) : null,
      tpaS: this.#tpaS,
      best: this.#best ? { x: Array.from(this.#best.x), fitness: this.#best.fitness, generation: this.#best.generation } : null,
    };
  }

  /** Candidate k in [0, lambda) of the current generation: x_k = m + sigma * d * z_k. */
  candidate(k: number): Float64Array {
    this.#checkK(k);
    const z = this.#z(k);
    const x = new Float64Array(this.n);
    const m = this.#m, d = this.#d, sigma = this.#sigma;
    for (let i = 0; i < this.n; i++) x[i] = m[i]! + sigma * (d[i]! * z[i]!);
    return x;
  }

  /** Fitness (maximised) of candidates 0..lambda-1 of the current generation, in k order; advances the generation. */
  tell(fitness: readonly number[]): void {
    if (!Array.isArray(fitness) || fitness.length !== this.lambda)
      throw new InputError(`must be an array of lambda = ${this.lambda} numbers, got ${Array.isArray(fitness) ? `length ${fitness.length}` : typeof fitness}`, {
        field: 'fitness',
      });
    for (let k = 0; k < this.lambda; k++)
      if (!isFiniteNumber(fitness[k])) throw new InputError(`must be a finite number, got ${String(fitness[k])}`, { field: `fitness[${k}]` });

    const { n, lambda } = this;
    const p = this.params;
    const g = this.#generation;
    const tpa = this.stepSize === 'tpa' && this.#tpaDirection() !== null;
    const zs: Float64Array[] = [];
    for (let k = 0; k < lambda; k++) zs.push(this.#z(k));

    // ranks: descending fitness, ties by k (stable sort)
    const order = Array.from({ length: lambda }, (_, k) => k).sort((a, b) => fitness[b]! - fitness[a]!);

    // best so far (the x the evaluators saw: same arithmetic as candidate())
    const top = order[0]!;
    if (this.#best === undefined || fitness[top]! > this.#best.fitness)
      this.#best = { x: this.candidate(top), fitness: fitness[top]!, generation: g };

    // z_w = sum_j w_j z_{j:lambda}
    const zw = new Float64Array(n);
    for (let j = 0; j < p.mu; j++) {
      const w = p.weights[j]!;
      const z = zs[order[j]!]!;
      for (let i = 0; i < n; i++) zw[i] = zw[i]! + w * z[i]!;
    }

    const m = this.#m, d = this.#d, C = this.#C, pc = this.#pc, ps = this.#ps;
    const sigma = this.#sigma;
    // m <- m + sigma * d * z_w  (Eq. 5), remembering the shift for TPA
    const shift = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const before = m[i]!;
      m[i] = before + sigma * (d[i]! * zw[i]!);
      shift[i] = m[i]! - before;
    }

    // p_sigma <- (1 - c_sigma) p_sigma + sqrt(c_sigma (2 - c_sigma) mu_eff) C^{-1/2} (m' - m) / sigma
    const csn = Math.sqrt(p.cSigma * (2 - p.cSigma) * p.muEff);
    let psNorm2 = 0;
    for (let i = 0; i < n; i++) {
      ps[i] = (1 - p.cSigma) * ps[i]! + csn * zw[i]!;
      psNorm2 += ps[i]! * ps[i]!;
    }
    const psNorm = Math.sqrt(psNorm2);
    // h_sigma: stall the rank-one update while p_sigma is long (right after a large sigma increase)
    const hSigma = psNorm / Math.sqrt(1 - Math.pow(1 - p.cSigma, 2 * (g + 1))) < (1.4 + 2 / (n + 1)) * p.chiN ? 1 : 0;

    // p_c <- (1 - c_c) p_c + h_sigma sqrt(c_c (2 - c_c) mu_eff) (m' - m) / sigma
    const ccn = hSigma * Math.sqrt(p.cc * (2 - p.cc) * p.muEff);
    for (let i = 0; i < n; i++) pc[i] = (1 - p.cc) * pc[i]! + ccn * (d[i]! * zw[i]!);

    // diagonal covariance update (rank-one + rank-mu, restricted to the diagonal), c_cov_sep
    const c = p.cCovSep;
    const c1 = c / p.muEff; // mu_cov = mu_eff
    const cmu = c * (1 - 1 / p.muEff);
    const stall = (1 - hSigma) * p.cc * (2 - p.cc);
    for (let i = 0; i < n; i++) {
      let rankMu = 0;
      for (let j = 0; j < p.mu; j++) {
        const z = zs[order[j]!]![i]!;
        rankMu += p.weights[j]! * z * z;
      }
      const ci = C[i]!;
      C[i] = (1 - c) * ci + c1 * (pc[i]! * pc[i]! + stall * ci) + cmu * ci * rankMu;
    }

    // step size
    if (this.stepSize === 'csa') {
      this.#sigma = sigma * Math.exp((p.cSigma / p.dSigma) * (psNorm / p.chiN - 1));
    } else if (tpa) {
      // pycma CMAAdaptSigmaTPA.update2 with maximisation: z > 0 when the point along the last
      // mean shift (k = 0) ranks better than its mirror (k = 1)
      let above0 = 0, above1 = 0;
      for (let k = 0; k < lambda; k++) {
        if (fitness[k]! > fitness[0]!) above0++;
        if (fitness[k]! > fitness[1]!) above1++;
      }
      const zr = (above1 - above0) / (lambda - 1);
      this.#tpaS = (1 - p.tpaC) * this.#tpaS + p.tpaC * Math.sign(zr) * Math.pow(Math.abs(zr), p.tpaZExponent);
      this.#sigma = sigma * Math.exp(this.#tpaS / p.tpaDamp);
    }

    for (let i = 0; i < n; i++) d[i] = Math.sqrt(C[i]!);
    this.#lastShift = shift;
    this.#generation = g + 1;
    this.#evaluations += lambda;
    this.#zCache.clear();
    this.#tpaZ = undefined;
  }

  best(): { x: Float64Array; fitness: number; generation: number } | undefined {
    return this.#best ? { x: this.#best.x.slice(), fitness: this.#best.fitness, generation: this.#best.generation } : undefined;
  }

  #checkK(k: number): void {
    if (!isInt(k) || k < 0 || k >= this.lambda)
      throw new InputError(`must be an integer in [0, ${this.lambda}), got ${String(k)}`, { field: 'k' });
  }

  /** TPA's z_0 for this generation (z_1 = -z_0), or null when TPA is off or has no direction yet. */
  #tpaDirection(): Float64Array | null {
    if (this.#tpaZ !== undefined) return this.#tpaZ;
    let out: Float64Array | null = null;
    if (this.stepSize === 'tpa' && this.#lastShift !== null) {
      // direction of the last mean shift in z-space, C^{-1/2} dm, with the length of a normal sample
      const n = this.n;
      const dir = new Float64Array(n);
      let norm2 = 0;
      for (let i = 0; i < n; i++) {
        dir[i] = this.#lastShift[i]! / this.#d[i]!;
        norm2 += dir[i]! * dir[i]!;
      }
      const xi = gaussianVector(this.seed, this.#generation, 0, n);
      let len2 = 0;
      for (let i = 0; i < n; i++) len2 += xi[i]! * xi[i]!;
      const scale = Math.sqrt(len2) / Math.sqrt(norm2);
      if (norm2 > 0 && Number.isFinite(scale) && scale > 0) {
        for (let i = 0; i < n; i++) dir[i] = dir[i]! * scale;
        out = dir;
      }
    }
    this.#tpaZ = out;
    return out;
  }

  #z(k: number): Float64Array {
    let z = this.#zCache.get(k);
    if (z) return z;
    const tpa = k < 2 ? this.#tpaDirection() : null;
    if (tpa) z = k === 0 ? tpa : tpa.map((v) => -v);
    else z = gaussianVector(this.seed, this.#generation, k, this.n);
    // cache only small problems' vectors: at n ~ 1e4 regenerating is cheap and memory is not
    if (this.n * this.lambda <= 4_000_000) this.#zCache.set(k, z);
    return z;
  }
}
