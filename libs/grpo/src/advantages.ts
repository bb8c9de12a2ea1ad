// Group-relative advantages from outcome rewards (one scalar reward per sample, G samples per
// question). Three scalings: 'group' (GRPO, DeepSeekMath), 'batch' (group mean, batch std) and
// 'none' (Dr. GRPO). See README.md for the formulas and the std convention.
import { InputError } from '@fugu/core';

/** How centred rewards are scaled: by the group's std, the whole batch's std, or not at all. */
export type AdvantageScale = 'group' | 'batch' | 'none';

/** Unbiased (n - 1, torch's `.std()` default) or population (n) standard deviation. */
export type StdKind = 'unbiased' | 'population';

export type GroupAdvantageOptions = {
  /** default 'group' (GRPO as DeepSeekMath, TRL's GRPOTrainer and verl's `grpo` estimator) */
  scale?: AdvantageScale;
  /** added to the std before dividing; default 1e-6 (verl's `epsilon`); >= 0 */
  eps?: number;
  /** default 'unbiased', as torch.std in TRL and verl */
  std?: StdKind;
};

export type GroupAdvantageStats = {
  /** number of groups */
  groups: number;
  /** groups whose rewards are all equal: their advantages are exactly 0 */
  zeroAdvantageGroups: number;
  /** mean of every reward of the batch */
  meanReward: number;
  /** std (of the chosen kind) of every reward of the batch */
  rewardSd: number;
};

export type GroupAdvantages = {
  /** same shape as the input groups */
  advantages: number[][];
  stats: GroupAdvantageStats;
};

/** Default eps added to the std (verl's compute_grpo_outcome_advantage epsilon). */
export const DEFAULT_ADVANTAGE_EPS = 1e-6;

/** The arithmetic mean of a non-empty list. */
export function mean(xs: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < xs.length; i++) s += xs[i]!;
  return s / xs.length;
}

/** The standard deviation of a list around `m` (its mean): unbiased (n - 1) or population (n). */
export function std(xs: ArrayLike<number>, kind: StdKind = 'unbiased', m: number = mean(xs)): number {
  const n = xs.length;
  const denom = kind === 'unbiased' ? n - 1 : n;
  if (denom <= 0) return 0;
  let ss = 0;
  for (let i = 0; i < n; i++) {
    const d = xs[i]! - m;
    ss += d * d;
  }
  return Math.sqrt(ss / denom);
}

/** Whether every element of a non-empty list equals the first (exactly). */
function allEqual(xs: ArrayLike<number>): boolean {
  for (let i = 1; i < xs.length; i++) if (xs[i] !== xs[0]) return false;
  return true;
}

/**
 * Advantages per sample from rewards grouped per question. 'group': (r - mean_g) / (std_g + eps);
 * 'batch': (r - mean_g) / (std_batch + eps); 'none': r - mean_g. A group whose rewards are all
 * equal gets exactly 0 (whatever eps). Groups of fewer than 2 rewards, or a non-finite reward,
 * are an InputError naming the group.
 */
export function groupAdvantages(groups: ReadonlyArray<ArrayLike<number>>, opts: GroupAdvantageOptions = {}): GroupAdvantages {
  const scale = opts.scale ?? 'group';
  const eps = opts.eps ?? DEFAULT_ADVANTAGE_EPS;
  const kind = opts.std ?? 'unbiased';
  if (scale !== 'group' && scale !== 'batch' && scale !== 'none') throw new InputError(`scale must be 'group', 'batch' or 'none', got ${String(scale)}`, { field: 'scale' });
  if (kind !== 'unbiased' && kind !== 'population') throw new InputError(`std must be 'unbiased' or 'population', got ${String(kind)}`, { field: 'std' });
  if (!(Number.isFinite(eps) && eps >= 0)) throw new InputError(`eps must be a finite number >= 0, got ${eps}`, { field: 'eps' });
  if (!Array.isArray(groups) || groups.length === 0) throw new InputError('groups must be a non-empty array of reward groups', { field: 'groups' });
  const all: number[] = [];
  groups.forEach((g, i) => {
    if (!g || typeof g.length !== 'number' || g.length < 2) {
      throw new InputError(`group ${i} has ${g?.length ?? 0} reward(s): a group needs at least 2 samples for a group-relative advantage`, { field: `groups[${i}]` });
    }
    for (let j = 0; j < g.length; j++) {
      const r = g[j];
      if (typeof r !== 'number' || !Number.isFinite(r)) throw new InputError(`group ${i}, sample ${j}: reward must be a finite number, got ${String(r)}`, { field: `groups[${i}][${j}]` });
      all.push(r);
    }
  });
  const meanReward = mean(all);
  const rewardSd = std(all, kind, meanReward);
  let zeroAdvantageGroups = 0;
  const advantages = groups.map((g) => {
    const out = new Array<number>(g.length);
    if (allEqual(g)) {
      zeroAdvantageGroups++;
      return out.fill(0);
    }
    const m = mean(g);
    const denom = scale === 'group' ? std(g, kind, m) + eps : scale === 'batch' ? rewardSd + eps : 1;
    for (let j = 0; j < g.length; j++) out[j] = (g[j]! - m) / denom;
    return out;
  });
  return { advantages, stats: { groups: groups.length, zeroAdvantageGroups, meanReward, rewardSd } };
}
