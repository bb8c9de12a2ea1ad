// The embedded, trainable Conductor: a workflow written by a sequence of discrete decisions, each
// a masked softmax over a head on [x ; c] (the backbone's features x of the question and an
// encoding c of the decisions so far): linear, plus a low-rank bilinear interaction of x with c
// (so the question can change what each step prefers). README.md in this folder documents the
// sequence, the masks, the encoding, the parameter layout and the initialisation.

import { InputError, rng, type Rng } from '@fugu/core';
import { renderWorkflow } from '../text.ts';
import { checkWorkflow, resolveMaxSteps, type Access, type ConductorPool, type Step, type Workflow } from '../workflow.ts';
import { isPolicyTemplateVersion, KINDS_NEEDING_ANSWERS, POLICY_TEMPLATE_VERSION, SUBTASK_KINDS, policySubtask, type SubtaskKind } from './templates.ts';

/** The access choices of a step after the first, in the order of the access head's outputs. */
export const ACCESS_CHOICES = ['all', 'none', 'previous', 'first'] as const;
export type AccessChoice = (typeof ACCESS_CHOICES)[number];

/**
 * The version of the context encoding c and of the heads' form (change it whenever the
 * encoding, the masks or the parameter layout change). v2: the low-rank bilinear blocks U, V, P.
 */
export const POLICY_ENCODING_VERSION = 'policy-enc-v2';

/** The default rank R of each head's bilinear interaction. */
export const DEFAULT_POLICY_RANK = 8;
/** The largest rank accepted. */
export const MAX_POLICY_RANK = 256;

/** The heads, in the order of the parameter layout. */
export const POLICY_HEADS = ['stop', 'worker', 'kind', 'access'] as const;
export type PolicyHead = (typeof POLICY_HEADS)[number];

/** The stop head's outputs. */
const CONTINUE = 0;
const STOP = 1;

export type PolicyStep = { worker: number; kind: SubtaskKind; access: AccessChoice };
/** What the policy decided: the steps (their number is the stop decisions); step 1's access is always `none`. */
export type PolicyDecisions = { steps: PolicyStep[] };

/** One block of the flat parameter vector (as router checkpoints: name, offset, shape). */
export type ThetaBlock = { name: string; offset: number; shape: number[] };

export type PolicyConfig = {
  maxSteps: number;
  /** R, the rank of each head's bilinear interaction (its U [out, R], V [R, D], P [R, C]) */
  rank: number;
  kinds: readonly SubtaskKind[];
  access: readonly AccessChoice[];
  templateVersion: string;
  encodingVersion: string;
};

export type PolicyInitOptions = {
  /** pool worker names in ordinal-id order */
  workers: readonly string[];
  /** the backbone's feature dimension */
  featureDim: number;
  /** seeds the feature weights when featureScale > 0 (recorded either way) */
  seed: number;
  /** worker names best first (need not list all; the rest follow in pool order); default pool order */
  ranking?: readonly string[];
  /** default 5 */
  maxSteps?: number;
  /** R, the rank of each head's bilinear interaction; default 8 (DEFAULT_POLICY_RANK) */
  rank?: number;
  /** standard deviation of the seeded feature weights; default 0 (the init ignores the features) */
  featureScale?: number;
};

/** The initialisation's biases (README "Initialisation"). */
export const POLICY_INIT = {
  /** stop logit over continue: P(stop) = 4/5 where both are allowed */
  stopBias: Math.log(4),
  /** worker of rank r: logit -r ln 3, so each rank is a third as likely as the one before */
  workerRankBias: -Math.log(3),
  /** solve logit over every other kind: 8 times as likely as each */
  solveBias: Math.log(8),
  /** the bilinear blocks: U = 0 (so the init is the linear policy above), V and P seeded N(0, std^2) */
  bilinearVStd: 1,
  bilinearPStd: 0.5,
} as const;

export type DecideOptions = ({ seed: number | string; argmax?: false } | { argmax: true }) & {
  /** cap the number of steps below the policy's maxSteps (masks the longer workflows) */
  maxSteps?: number;
} & WorkerMask;

/**
 * The workers a workflow may use (a per-key pool, or a randomised k-of-K training pool): their
 * indices in the policy's workers. The worker head's softmax runs over them only (the others are
 * masked), so decide, logprob and the gradients must all be given the same set. Default: all.
 */
export type WorkerMask = { allowedWorkers?: readonly number[] };

export type Decided = { decisions: PolicyDecisions; logprob: number };

export type WriteInput = {
  features: Float32Array | readonly number[];
  question: string;
  /**
   * the pool the workflow's ids refer to: the policy's workers in order, or some of them in the
   * policy's order (a restricted pool: the other workers are masked, and the text's ids are this
   * pool's)
   */
  pool: ConductorPool;
  seed?: number | string;
  argmax?: boolean;
  maxSteps?: number;
};

export type WriteOutput = { text: string; workflow: Workflow; decisions: PolicyDecisions; logprob: number };

/** One unforced decision of a workflow: its head, its step index (0-based), the option chosen and its log-probability. */
export type PolicyDecisionLogprob = {
  head: PolicyHead;
  /** the 0-based step index; a stop decision at step i is the one asked before step i (continue: step i exists) */
  step: number;
  /** the index of the chosen option in the head's outputs (STOP = 1, a worker id, SUBTASK_KINDS, ACCESS_CHOICES) */
  choice: number;
  logprob: number;
};

export type GradOptions = WorkerMask & {
  /** cap the number of steps below the policy's maxSteps, as for logprob */
  maxSteps?: number;
  /**
   * The heads whose parameter blocks get a gradient (default all). The blocks of the other
   * heads are 0: equivalently, their decisions are left out. The replay environment cannot
   * tell subtask kinds apart, so a trainer there passes ['stop', 'worker', 'access'].
   */
  heads?: readonly PolicyHead[];
};

/**
 * The layout of θ for K workers, feature dimension D, maxSteps M and rank R (default 8): per
 * head, in POLICY_HEADS order, W [out, D + C] row-major, b [out], then the bilinear factors
 * U [out, R], V [R, D], P [R, C] (all row-major).
 */
export function policyThetaLayout(dims: { workers: number; featureDim: number; maxSteps: number; rank?: number }): ThetaBlock[] {
  const C = contextSize(dims.workers, dims.maxSteps);
  const D = dims.featureDim;
  const R = resolvePolicyRank(dims.rank);
  const out: ThetaBlock[] = [];
  let offset = 0;
  const add = (name: string, shape: number[]): void => {
    out.push({ name, offset, shape });
    offset += shape.reduce((a, x) => a * x, 1);
  };
  for (const h of POLICY_HEADS) {
    const n = headSize(h, dims.workers);
    add(`${h}.W`, [n, D + C]);
    add(`${h}.b`, [n]);
    add(`${h}.U`, [n, R]);
    add(`${h}.V`, [R, D]);
    add(`${h}.P`, [R, C]);
  }
  return out;
}

/** The rank, checked: an integer 1..MAX_POLICY_RANK (InputError naming `rank`); default 8. */
export function resolvePolicyRank(rank: number | undefined = DEFAULT_POLICY_RANK): number {
  if (typeof rank !== 'number' || !Number.isInteger(rank) || rank < 1 || rank > MAX_POLICY_RANK) {
    throw new InputError(`the bilinear rank must be an integer from 1 to ${MAX_POLICY_RANK}, got ${String(rank)}`, { field: 'rank' });
  }
  return rank;
}

/** The head a block of θ belongs to (`worker.U` -> `worker`). */
export function policyBlockHead(name: string): PolicyHead | undefined {
  const dot = name.indexOf('.');
  if (dot < 0) return undefined;
  const h = name.slice(0, dot);
  return (POLICY_HEADS as readonly string[]).includes(h) ? (h as PolicyHead) : undefined;
}

/** A copy of a gradient (θ's layout) with the blocks of every head not in `heads` set to 0. */
export function maskHeads<T extends Float32Array | Float64Array>(grad: T, layout: readonly ThetaBlock[], heads: readonly PolicyHead[]): T {
  const keep = checkHeads(heads);
  const out = grad.slice() as T;
  for (const b of layout) {
    const h = policyBlockHead(b.name);
    if (h && !keep.has(h)) out.fill(0, b.offset, b.offset + b.shape.reduce((a, x) => a * x, 1));
  }
  return out;
}

function checkHeads(heads: readonly PolicyHead[] | undefined): ReadonlySet<PolicyHead> {
  if (heads === undefined) return new Set(POLICY_HEADS);
  if (!Array.isArray(heads)) throw new InputError(`heads must be a list of ${POLICY_HEADS.join(', ')}`, { field: 'heads' });
  heads.forEach((h, i) => {
    if (!(POLICY_HEADS as readonly string[]).includes(h)) throw new InputError(`heads[${i}] ${JSON.stringify(h)} is not a head (${POLICY_HEADS.join(', ')})`, { field: `heads[${i}]` });
  });
  return new Set(heads);
}

export function policyThetaSize(layout: readonly ThetaBlock[]): number {
  return layout.reduce((s, b) => Math.max(s, b.offset + b.shape.reduce((a, x) => a * x, 1)), 0);
}

function headSize(h: PolicyHead, workers: number): number {
  switch (h) {
    case 'stop':
      return 2;
    case 'worker':
      return workers;
    case 'kind':
      return SUBTASK_KINDS.length;
    case 'access':
      return ACCESS_CHOICES.length;
  }
}

/** C = M + 3K + 3S: step one-hot, worker counts, kind counts, last worker, last kind, this step's worker, this step's kind. */
export function contextSize(workers: number, maxSteps: number): number {
  return maxSteps + 3 * workers + 3 * SUBTASK_KINDS.length;
}

/** The access list of a choice at step index i (0-based). */
export function accessOf(choice: AccessChoice, i: number): Access {
  if (i === 0) return 'none';
  switch (choice) {
    case 'all':
      return 'all';
    case 'none':
      return 'none';
    case 'previous':
      return [i - 1];
    case 'first':
      return [0];
  }
}

/** Which options a head may choose at step index i (README "Masks"). */
function allowedStop(prevKind: SubtaskKind): boolean[] {
  return [true, prevKind !== 'plan'];
}
function allowedKinds(i: number, cap: number): boolean[] {
  return SUBTASK_KINDS.map((k) => (i === 0 ? !KINDS_NEEDING_ANSWERS.has(k) : true) && !(k === 'plan' && i === cap - 1));
}
function allowedAccess(i: number, kind: SubtaskKind): boolean[] {
  return ACCESS_CHOICES.map((a) => {
    if (a === 'none') return !KINDS_NEEDING_ANSWERS.has(kind);
    if (a === 'previous') return i >= 2; // at step index 1 it is the same steps as `all`
    if (a === 'first') return i >= 2; // at step index 1 it is the same steps as `all` and `previous`
    return true;
  });
}

type Chooser = (head: PolicyHead, step: number, logits: Float64Array, allowed: boolean[]) => number;
/** What an unforced decision looked like: what the gradient needs. */
type Seen = {
  head: PolicyHead;
  step: number;
  /** the masked softmax (0 where masked) */
  probs: Float64Array;
  chosen: number;
  logprob: number;
  /** the context c (sparse: index -> value) */
  context: ReadonlyMap<number, number>;
  /** V x and P c of the head ([R] each) */
  vx: Float64Array;
  pc: Float64Array;
};
type Observer = (seen: Seen) => void;

/** A head's log-softmax over its allowed options (masked ones -Infinity), in float64. */
function maskedLogSoftmax(logits: Float64Array, allowed: boolean[]): Float64Array {
  let max = -Infinity;
  for (let j = 0; j < logits.length; j++) if (allowed[j] && logits[j]! > max) max = logits[j]!;
  let sum = 0;
  for (let j = 0; j < logits.length; j++) if (allowed[j]) sum += Math.exp(logits[j]! - max);
  const lse = max + Math.log(sum);
  const out = new Float64Array(logits.length);
  for (let j = 0; j < logits.length; j++) out[j] = allowed[j] ? logits[j]! - lse : -Infinity;
  return out;
}

function checkWorkers(workers: readonly string[], field: string): string[] {
  if (!Array.isArray(workers) || workers.length === 0) throw new InputError('the policy needs at least one worker', { field });
  const seen = new Set<string>();
  return workers.map((w, i) => {
    if (typeof w !== 'string' || w.trim() === '') throw new InputError(`worker ${i} has no name`, { field: `${field}[${i}]` });
    if (seen.has(w)) throw new InputError(`worker name ${JSON.stringify(w)} appears twice`, { field: `${field}[${i}]` });
    seen.add(w);
    return w;
  });
}

/**
 * The embedded Conductor's policy: K workers (by name, ordinal-id order), feature dimension D,
 * at most `maxSteps` steps, and θ (one flat Float32Array laid out by `layout`).
 */
export class ConductorPolicy {
  readonly workers: readonly string[];
  readonly featureDim: number;
  readonly maxSteps: number;
  /** R, the rank of each head's bilinear interaction */
  readonly rank: number;
  readonly theta: Float32Array;
  readonly layout: readonly ThetaBlock[];
  readonly config: PolicyConfig;
  readonly #blocks: Map<string, number>;

  constructor(opts: { workers: readonly string[]; featureDim: number; maxSteps?: number; rank?: number; theta: Float32Array; templateVersion?: string }) {
    this.workers = checkWorkers(opts.workers, 'workers');
    if (!Number.isInteger(opts.featureDim) || opts.featureDim < 1) throw new InputError(`the feature dimension must be a positive integer, got ${String(opts.featureDim)}`, { field: 'featureDim' });
    this.featureDim = opts.featureDim;
    this.maxSteps = resolveMaxSteps(opts.maxSteps);
    this.rank = resolvePolicyRank(opts.rank);
    this.layout = policyThetaLayout({ workers: this.workers.length, featureDim: this.featureDim, maxSteps: this.maxSteps, rank: this.rank });
    const size = policyThetaSize(this.layout);
    if (!(opts.theta instanceof Float32Array) || opts.theta.length !== size) {
      throw new InputError(`theta has ${opts.theta?.length ?? 0} values, the layout for ${this.workers.length} workers, features ${this.featureDim}, ${this.maxSteps} steps and rank ${this.rank} needs ${size}`, { field: 'theta' });
    }
    for (let i = 0; i < opts.theta.length; i++) if (!Number.isFinite(opts.theta[i]!)) throw new InputError(`theta[${i}] is not a finite number`, { field: 'theta' });
    this.theta = opts.theta;
    this.#blocks = new Map(this.layout.map((b) => [b.name, b.offset]));
    const templateVersion = opts.templateVersion ?? POLICY_TEMPLATE_VERSION;
    if (!isPolicyTemplateVersion(templateVersion)) throw new InputError(`unknown policy template version ${JSON.stringify(templateVersion)}`, { field: 'templateVersion' });
    this.config = { maxSteps: this.maxSteps, rank: this.rank, kinds: SUBTASK_KINDS, access: ACCESS_CHOICES, templateVersion, encodingVersion: POLICY_ENCODING_VERSION };
  }

  /** The documented initialisation (README "Initialisation"). */
  static init(opts: PolicyInitOptions): ConductorPolicy {
    const workers = checkWorkers(opts.workers, 'workers');
    const maxSteps = resolveMaxSteps(opts.maxSteps);
    const rank = resolvePolicyRank(opts.rank);
    const layout = policyThetaLayout({ workers: workers.length, featureDim: opts.featureDim, maxSteps, rank });
    const theta = new Float32Array(policyThetaSize(layout));
    const at = new Map(layout.map((b) => [b.name, b]));
    // rank of each worker: the ranking first, then the rest in pool order
    const ranking = opts.ranking ?? [];
    const seen = new Set<string>();
    ranking.forEach((name, i) => {
      if (!workers.includes(name)) throw new InputError(`ranking entry ${i + 1}, worker ${JSON.stringify(name)}, is not in the pool (the pool has ${workers.join(', ')})`, { field: 'ranking' });
      if (seen.has(name)) throw new InputError(`ranking entry ${i + 1}, worker ${JSON.stringify(name)}, appears twice`, { field: 'ranking' });
      seen.add(name);
    });
    const order = [...ranking, ...workers.filter((w) => !seen.has(w))];
    const wb = at.get('worker.b')!.offset;
    order.forEach((name, r) => (theta[wb + workers.indexOf(name)] = r === 0 ? 0 : r * POLICY_INIT.workerRankBias));
    theta[at.get('stop.b')!.offset + STOP] = POLICY_INIT.stopBias;
    theta[at.get('kind.b')!.offset + SUBTASK_KINDS.indexOf('solve')] = POLICY_INIT.solveBias;
    const scale = opts.featureScale ?? 0;
    if (!(Number.isFinite(scale) && scale >= 0)) throw new InputError(`featureScale must be a number >= 0, got ${String(scale)}`, { field: 'featureScale' });
    if (!Number.isFinite(opts.seed)) throw new InputError(`the seed must be a finite number, got ${String(opts.seed)}`, { field: 'seed' });
    // the bilinear factors: U stays 0 (the init is exactly the linear policy above), V and P
    // seeded, so that d logprob / dU = (onehot - p) (V x ⊙ P c) is not 0 and GRPO moves U
    const r = rng('conductor-policy-init', opts.seed);
    for (const h of POLICY_HEADS) {
      for (const [name, std] of [[`${h}.V`, POLICY_INIT.bilinearVStd], [`${h}.P`, POLICY_INIT.bilinearPStd]] as const) {
        const blk = at.get(name)!;
        const n = blk.shape[0]! * blk.shape[1]!;
        for (let k = 0; k < n; k++) theta[blk.offset + k] = std * r.normal();
      }
    }
    if (scale > 0) {
      for (const h of POLICY_HEADS) {
        const w = at.get(`${h}.W`)!;
        const [rows, cols] = w.shape as [number, number];
        for (let j = 0; j < rows; j++) for (let k = 0; k < opts.featureDim; k++) theta[w.offset + j * cols + k] = scale * r.normal();
      }
    }
    return new ConductorPolicy({ workers, featureDim: opts.featureDim, maxSteps, rank, theta });
  }

  /** A copy with another θ (same layout): what a trainer steps. */
  withTheta(theta: Float32Array): ConductorPolicy {
    return new ConductorPolicy({ workers: this.workers, featureDim: this.featureDim, maxSteps: this.maxSteps, rank: this.rank, theta, templateVersion: this.config.templateVersion });
  }

  /** The features, checked: a vector of featureDim finite numbers (InputError naming `features`). */
  checkFeatures(x: Float32Array | readonly number[] | undefined): Float32Array | readonly number[] {
    if (x === undefined || x === null) throw new InputError(`the policy needs the backbone's features of the question (${this.featureDim} numbers)`, { field: 'features' });
    if (!(x instanceof Float32Array) && !Array.isArray(x)) throw new InputError('features must be a Float32Array or an array of numbers', { field: 'features' });
    if (x.length !== this.featureDim) throw new InputError(`features have dimension ${x.length}, the policy reads ${this.featureDim}`, { field: 'features' });
    for (let i = 0; i < x.length; i++) if (!Number.isFinite(x[i]!)) throw new InputError(`features[${i}] is not a finite number`, { field: 'features' });
    return x;
  }

  /** Samples (seeded) or takes the argmax of each decision in turn; the exact log-probability of what it chose. */
  decide(x: Float32Array | readonly number[], opts: DecideOptions): Decided {
    const cap = this.#cap(opts.maxSteps);
    let choose: Chooser;
    if ('argmax' in opts && opts.argmax === true) {
      choose = (_h, _i, logits, allowed) => {
        let best = -1;
        for (let j = 0; j < logits.length; j++) if (allowed[j] && (best < 0 || logits[j]! > logits[best]!)) best = j;
        return best;
      };
    } else {
      const seed = (opts as { seed?: number | string }).seed;
      if (seed === undefined || (typeof seed === 'number' && !Number.isFinite(seed))) throw new InputError('decide needs a seed or argmax: true', { field: 'seed' });
      const r: Rng = rng('conductor-policy', seed);
      choose = (_h, _i, logits, allowed) => {
        const lp = maskedLogSoftmax(logits, allowed);
        const u = r.next();
        let acc = 0;
        let last = -1;
        for (let j = 0; j < lp.length; j++) {
          if (!allowed[j]) continue;
          last = j;
          acc += Math.exp(lp[j]!);
          if (u < acc) return j;
        }
        return last;
      };
    }
    return this.#walk(this.checkFeatures(x), cap, choose, undefined, this.#workerMask(opts.allowedWorkers));
  }

  /** The exact log-probability of `decisions` (what decide returned for them, under the same worker mask). */
  logprob(x: Float32Array | readonly number[], decisions: PolicyDecisions, opts: { maxSteps?: number } & WorkerMask = {}): number {
    return this.#walk(this.checkFeatures(x), this.#cap(opts.maxSteps), this.#replay(decisions, this.#cap(opts.maxSteps)), undefined, this.#workerMask(opts.allowedWorkers)).logprob;
  }

  /**
   * The unforced decisions of `decisions`, in the order they are taken (per step: stop, worker,
   * kind, access), each with its head, step index, choice and log-probability; they sum to
   * logprob(x, decisions). A GRPO trainer weights them (gradLogprobWeighted).
   */
  decisionLogprobs(x: Float32Array | readonly number[], decisions: PolicyDecisions, opts: { maxSteps?: number } & WorkerMask = {}): PolicyDecisionLogprob[] {
    const cap = this.#cap(opts.maxSteps);
    const out: PolicyDecisionLogprob[] = [];
    this.#walk(this.checkFeatures(x), cap, this.#replay(decisions, cap), (d) => out.push({ head: d.head, step: d.step, choice: d.chosen, logprob: d.logprob }), this.#workerMask(opts.allowedWorkers));
    return out;
  }

  /** d logprob(x, decisions) / dθ: a flat Float32Array in θ's layout (gradLogprobWeighted with every weight 1). */
  gradLogprob(x: Float32Array | readonly number[], decisions: PolicyDecisions, opts: GradOptions = {}): Float32Array {
    return this.#grad(x, decisions, undefined, opts);
  }

  /**
   * sum_d weights[d] * d logp_d / dθ over the unforced decisions d, in the order
   * decisionLogprobs returns them (one weight each: an InputError naming `weights` otherwise).
   * With `heads`, only those heads' blocks (README "Training").
   */
  gradLogprobWeighted(x: Float32Array | readonly number[], decisions: PolicyDecisions, weights: readonly number[] | Float64Array | Float32Array, opts: GradOptions = {}): Float32Array {
    if (weights === null || typeof weights !== 'object' || typeof weights.length !== 'number') throw new InputError('weights must be a list of numbers, one per unforced decision', { field: 'weights' });
    for (let i = 0; i < weights.length; i++) if (!Number.isFinite(weights[i]!)) throw new InputError(`weights[${i}] is not a finite number`, { field: 'weights' });
    return this.#grad(x, decisions, weights, opts);
  }

  #grad(x: Float32Array | readonly number[], decisions: PolicyDecisions, weights: ArrayLike<number> | undefined, opts: GradOptions): Float32Array {
    const xs = this.checkFeatures(x);
    const cap = this.#cap(opts.maxSteps);
    const heads = checkHeads(opts.heads);
    const g = new Float64Array(this.theta.length);
    const theta = this.theta;
    const D = this.featureDim;
    const R = this.rank;
    const cols = D + contextSize(this.workers.length, this.maxSteps);
    let d = 0;
    const mask = this.#workerMask(opts.allowedWorkers);
    this.#walk(xs, cap, this.#replay(decisions, cap), ({ head, probs, chosen, context, vx, pc }) => {
      const weight = weights === undefined ? 1 : weights[d];
      d++;
      if (weight === undefined || !heads.has(head) || weight === 0) return;
      const w = this.#blocks.get(`${head}.W`)!;
      const b = this.#blocks.get(`${head}.b`)!;
      const U = this.#blocks.get(`${head}.U`)!;
      const V = this.#blocks.get(`${head}.V`)!;
      const P = this.#blocks.get(`${head}.P`)!;
      // dlogits: weight (onehot(chosen) - p); u = U^T dlogits
      const u = new Float64Array(R);
      for (let j = 0; j < probs.length; j++) {
        const gj = weight * ((j === chosen ? 1 : 0) - probs[j]!);
        if (gj === 0) continue;
        g[b + j]! += gj;
        const row = w + j * cols;
        for (let k = 0; k < D; k++) g[row + k]! += gj * xs[k]!;
        for (const [k, v] of context) g[row + D + k]! += gj * v;
        // logits_j += sum_r U[j, r] (V x)_r (P c)_r
        for (let r = 0; r < R; r++) {
          g[U + j * R + r]! += gj * vx[r]! * pc[r]!;
          u[r]! += gj * theta[U + j * R + r]!;
        }
      }
      for (let r = 0; r < R; r++) {
        const ur = u[r]!;
        if (ur === 0) continue;
        const dv = ur * pc[r]!; // d/dV[r, k] = u_r (P c)_r x_k
        const dp = ur * vx[r]!; // d/dP[r, k] = u_r (V x)_r c_k
        if (dv !== 0) for (let k = 0; k < D; k++) g[V + r * D + k]! += dv * xs[k]!;
        if (dp !== 0) for (const [k, v] of context) g[P + r * (cols - D) + k]! += dp * v;
      }
    }, mask);
    if (weights !== undefined && weights.length !== d) {
      throw new InputError(`weights has ${weights.length} entries, the decisions have ${d} unforced decisions (decisionLogprobs lists them)`, { field: 'weights' });
    }
    return Float32Array.from(g);
  }

  /** The workflow of a question: decisions (seeded or argmax) rendered as the three-list text. */
  write(input: WriteInput): WriteOutput {
    const ids = this.poolIndices(input.pool);
    const question = typeof input.question === 'string' ? input.question.trim() : '';
    if (!question) throw new InputError('the question is empty', { field: 'question' });
    const restricted = ids.length < this.workers.length;
    const common = { ...(input.maxSteps !== undefined && { maxSteps: input.maxSteps }), ...(restricted && { allowedWorkers: ids }) };
    const opts: DecideOptions = input.argmax ? { argmax: true, ...common } : { seed: input.seed as number | string, ...common };
    const { decisions, logprob } = this.decide(input.features, opts);
    const full = this.workflowOf(decisions, question);
    // the text's ids are the given pool's: a restricted pool numbers its own workers from 0
    const workflow = restricted ? { steps: full.steps.map((s) => ({ ...s, worker: ids.indexOf(s.worker) })) } : full;
    return { text: renderWorkflow(workflow), workflow, decisions, logprob };
  }

  /** The workflow decisions stand for: per-kind subtasks embedding the question, access lists from the choices. */
  workflowOf(decisions: PolicyDecisions, question: string): Workflow {
    const steps: Step[] = decisions.steps.map((s, i) => ({ worker: s.worker, subtask: policySubtask(s.kind, question, this.config.templateVersion), access: accessOf(s.access, i) }));
    const workflow: Workflow = { steps };
    const fault = checkWorkflow(workflow, { poolSize: this.workers.length, maxSteps: this.maxSteps });
    if (fault) throw new InputError(`the decisions make an invalid workflow (${fault.message})`, { field: 'decisions' });
    return workflow;
  }

  /**
   * The policy's index of each worker of `pool`, which must be the policy's workers in order, or
   * some of them in the policy's order (a restricted pool); else an InputError naming both lists.
   */
  poolIndices(pool: ConductorPool, what = 'the policy'): number[] {
    const given = pool.workers.map((w) => w.name);
    const ids = given.map((n) => this.workers.indexOf(n));
    if (given.length === 0 || ids.some((j, i) => j < 0 || (i > 0 && j <= ids[i - 1]!))) {
      throw new InputError(`${what} was made for the workers ${this.workers.join(', ')} (in this order, or some of them in this order); the pool has ${given.join(', ')}`, { field: 'pool' });
    }
    return ids;
  }

  /** The pool must be the policy's workers in order, or some of them in that order (poolIndices). */
  checkPool(pool: ConductorPool, what = 'the policy'): void {
    this.poolIndices(pool, what);
  }

  /** The worker head's mask for `allowedWorkers` (InputError naming `allowedWorkers`); undefined: every worker. */
  #workerMask(allowed: readonly number[] | undefined): boolean[] | undefined {
    if (allowed === undefined) return undefined;
    const K = this.workers.length;
    if (!Array.isArray(allowed) || allowed.length === 0) throw new InputError('allowedWorkers must list at least one worker index', { field: 'allowedWorkers' });
    const mask = Array.from({ length: K }, () => false);
    allowed.forEach((j, i) => {
      if (!Number.isInteger(j) || j < 0 || j >= K) throw new InputError(`allowedWorkers[${i}] = ${String(j)} is not a worker index (0 to ${K - 1})`, { field: `allowedWorkers[${i}]` });
      mask[j] = true;
    });
    return mask;
  }

  #cap(maxSteps: number | undefined): number {
    if (maxSteps === undefined) return this.maxSteps;
    return Math.min(this.maxSteps, resolveMaxSteps(maxSteps));
  }

  /** A chooser that replays given decisions, checking each against the masks (InputError naming the step). */
  #replay(decisions: PolicyDecisions, cap: number): Chooser {
    const steps = decisions?.steps;
    if (!Array.isArray(steps) || steps.length === 0) throw new InputError('decisions need at least one step', { field: 'decisions.steps' });
    if (steps.length > cap) throw new InputError(`decisions have ${steps.length} steps, more than the maximum of ${cap}`, { field: 'decisions.steps' });
    return (head, i, _logits, allowed) => {
      const field = `decisions.steps[${i}]`;
      const s = steps[i];
      let j: number;
      if (head === 'stop') j = i < steps.length ? CONTINUE : STOP;
      else if (!s) throw new Error(`replay asked for ${head} of a step past the end`); // a bug
      else if (head === 'worker') j = Number.isInteger(s.worker) && s.worker >= 0 && s.worker < this.workers.length ? s.worker : -1;
      else if (head === 'kind') j = SUBTASK_KINDS.indexOf(s.kind);
      else j = ACCESS_CHOICES.indexOf(s.access);
      if (j < 0) throw new InputError(`step ${i + 1}: ${head} ${JSON.stringify(head === 'worker' ? s?.worker : head === 'kind' ? s?.kind : s?.access)} is not one of the policy's choices`, { field });
      if (!allowed[j]) throw new InputError(`step ${i + 1}: the ${head} decision is masked there (impossible for the policy)`, { field });
      return j;
    };
  }

  /**
   * The decision sequence (README "Decisions"). Per step index i = 0..cap-1: stop/continue
   * (i >= 1), worker, kind, access (i >= 1). A head with one allowed option is forced: it adds
   * nothing to the log-probability, and it is not observed.
   */
  #walk(x: Float32Array | readonly number[], cap: number, choose: Chooser, observe?: Observer, workerMask?: readonly boolean[]): Decided {
    const K = this.workers.length;
    const S = SUBTASK_KINDS.length;
    const M = this.maxSteps;
    const D = this.featureDim;
    const R = this.rank;
    const C = contextSize(K, M);
    const cols = D + C;
    const theta = this.theta;
    // the feature part of every head's logits, once: b + W[:, :D] x; and its V x
    const base = new Map<PolicyHead, Float64Array>();
    const vxs = new Map<PolicyHead, Float64Array>();
    for (const h of POLICY_HEADS) {
      const n = headSize(h, K);
      const w = this.#blocks.get(`${h}.W`)!;
      const b = this.#blocks.get(`${h}.b`)!;
      const out = new Float64Array(n);
      for (let j = 0; j < n; j++) {
        let s = theta[b + j]!;
        const row = w + j * cols;
        for (let k = 0; k < D; k++) s += theta[row + k]! * x[k]!;
        out[j] = s;
      }
      base.set(h, out);
      const V = this.#blocks.get(`${h}.V`)!;
      const vx = new Float64Array(R);
      for (let r = 0; r < R; r++) {
        let s = 0;
        for (let k = 0; k < D; k++) s += theta[V + r * D + k]! * x[k]!;
        vx[r] = s;
      }
      vxs.set(h, vx);
    }
    const off = { step: 0, wCount: M, kCount: M + K, lastW: M + K + S, lastK: M + 2 * K + S, curW: M + 2 * K + 2 * S, curK: M + 3 * K + 2 * S };
    const context = new Map<number, number>();
    const bump = (k: number, v = 1): void => void context.set(k, (context.get(k) ?? 0) + v);
    let logprob = 0;
    const decide = (h: PolicyHead, i: number, allowed: boolean[]): number => {
      const n = allowed.filter(Boolean).length;
      const b0 = base.get(h)!;
      const logits = Float64Array.from(b0);
      const w = this.#blocks.get(`${h}.W`)!;
      for (let j = 0; j < logits.length; j++) {
        const row = w + j * cols + D;
        for (const [k, v] of context) logits[j]! += theta[row + k]! * v;
      }
      // the bilinear interaction: logits_j += sum_r U[j, r] (V x)_r (P c)_r
      const vx = vxs.get(h)!;
      const P = this.#blocks.get(`${h}.P`)!;
      const U = this.#blocks.get(`${h}.U`)!;
      const pc = new Float64Array(R);
      for (let r = 0; r < R; r++) {
        let s = 0;
        for (const [k, v] of context) s += theta[P + r * C + k]! * v;
        pc[r] = s;
      }
      for (let j = 0; j < logits.length; j++) {
        let s = 0;
        for (let r = 0; r < R; r++) s += theta[U + j * R + r]! * vx[r]! * pc[r]!;
        logits[j]! += s;
      }
      const chosen = choose(h, i, logits, allowed);
      if (n > 1) {
        const lp = maskedLogSoftmax(logits, allowed);
        logprob += lp[chosen]!;
        if (observe) observe({ head: h, step: i, probs: lp.map((v) => (Number.isFinite(v) ? Math.exp(v) : 0)), chosen, logprob: lp[chosen]!, context, vx, pc });
      }
      return chosen;
    };
    const steps: PolicyStep[] = [];
    // the worker head's options: the mask, the same at every step (read only)
    const workerAllowed = workerMask ? [...workerMask] : Array.from({ length: K }, () => true);
    context.set(off.step, 1);
    for (let i = 0; i < cap; i++) {
      const prev = steps[i - 1];
      if (prev) {
        if (decide('stop', i, allowedStop(prev.kind)) === STOP) break;
      }
      const worker = decide('worker', i, workerAllowed);
      context.set(off.curW + worker, 1);
      const kind = SUBTASK_KINDS[decide('kind', i, allowedKinds(i, cap))]!;
      context.set(off.curK + SUBTASK_KINDS.indexOf(kind), 1);
      const access: AccessChoice = i === 0 ? 'none' : ACCESS_CHOICES[decide('access', i, allowedAccess(i, kind))]!;
      steps.push({ worker, kind, access });
      // the context of the next step: step one-hot, counts, last worker and kind; this step's cleared
      context.delete(off.curW + worker);
      context.delete(off.curK + SUBTASK_KINDS.indexOf(kind));
      context.delete(off.step + i);
      if (prev) {
        context.delete(off.lastW + prev.worker);
        context.delete(off.lastK + SUBTASK_KINDS.indexOf(prev.kind));
      }
      if (i + 1 < M) context.set(off.step + i + 1, 1);
      context.set(off.lastW + worker, 1);
      context.set(off.lastK + SUBTASK_KINDS.indexOf(kind), 1);
      bump(off.wCount + worker);
      bump(off.kCount + SUBTASK_KINDS.indexOf(kind));
    }
    return { decisions: { steps }, logprob };
  }
}
