// Comparisons against independent re-implementations of the reference formulas, transcribed in a
// few lines each from the sources read (through the code search) before writing this library:
//
// - verl, verl/trainer/ppo/core_algos.py (volcengine/verl, the stored version at commit 012be9d9):
//   `compute_grpo_outcome_advantage` (scores grouped by `index`; a group of 1 gets mean 0, std 1;
//   else torch.mean and torch.std, which is unbiased (n - 1); (s - mean) / (std + epsilon),
//   epsilon = 1e-6, or s - mean with norm_adv_by_std_in_grpo = False, "as in Dr.GRPO");
//   `compute_policy_loss_vanilla` (negative_approx_kl = clamp(log_prob - old_log_prob, -20, 20),
//   ratio = exp, ppo_kl = masked_mean(-negative_approx_kl), pg_losses1 = -A ratio, pg_losses2 =
//   -A clamp(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high), torch.maximum of the two,
//   pg_clipfrac = masked_mean(pg_losses2 > pg_losses1), then dual-clip for A < 0 with
//   clip_ratio_c = 3); `agg_loss` ("token-mean": masked_mean over the batch;
//   "seq-mean-token-mean": per-row masked mean, then the mean over rows); `kl_penalty` with
//   "low_var_kl" (kl = clamp(ref - logprob, -20, 20); clamp(exp(kl) - kl - 1, -10, 10)), added in
//   verl/workers/actor/dp_actor.py as policy_loss + agg_loss(kld) * kl_loss_coef.
//   verl/utils/torch_functional.py `masked_mean` = (values * mask).sum() / mask.sum().
// - TRL, trl/trainer/grpo_trainer.py (huggingface/trl, the stored version at commit 000bb3db):
//   `_generate_and_score_completions` (rewards.view(-1, G).mean(dim=1) and .std(dim=1), unbiased;
//   advantages = rewards - mean, divided by (std + 1e-4) when scale_rewards); `_compute_loss`
//   (coef_1 = exp(logp - old), coef_2 = clamp(coef_1, 1 - epsilon_low, 1 + epsilon_high),
//   per_token_loss = -min(coef_1 A, coef_2 A) + beta per_token_kl with per_token_kl =
//   exp(ref - logp) - (ref - logp) - 1; loss_type "grpo": per-sequence masked mean (length
//   clamped at 1), then the mean; "bnpo": masked sum / mask sum; clip_ratio = share of masked
//   tokens with (coef_1 < 1 - eps_low and A < 0) or (coef_1 > 1 + eps_high and A > 0)).
// - PyTorch's tools/autograd/derivatives.yaml for the gradient: `maximum` gives grad / 2 to each
//   side on a tie, and `clamp` passes the gradient on min <= x <= max (bounds included).
//
// The inputs keep |log ratio| <= 1 (ratio < e < 3), so verl's dual clip and its +-20 / +-10 clamps,
// which this library does not have, never engage.
import { describe, expect, it } from 'vitest';
import { rng, type Rng } from '@fugu/core';
import { clippedSurrogate, groupAdvantages, type LossAgg, type SurrogateSample } from './index.ts';

type Matrix = number[][];
const clamp = (x: number, lo: number, hi: number): number => Math.min(Math.max(x, lo), hi);

// ---- verl, transcribed ------------------------------------------------------------------------

/** verl compute_grpo_outcome_advantage on one scalar score per response and its group index */
function verlGrpoAdvantage(scores: number[], index: string[], epsilon = 1e-6, normAdvByStdInGrpo = true): number[] {
  const id2score = new Map<string, number[]>();
  scores.forEach((s, i) => id2score.set(index[i]!, [...(id2score.get(index[i]!) ?? []), s]));
  const id2mean = new Map<string, number>();
  const id2std = new Map<string, number>();
  for (const [idx, xs] of id2score) {
    if (xs.length === 1) {
      id2mean.set(idx, 0);
      id2std.set(idx, 1);
    } else {
      const m = xs.reduce((a, x) => a + x, 0) / xs.length;
      id2mean.set(idx, m);
      id2std.set(idx, Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1))); // torch.std: unbiased
    }
  }
  return scores.map((s, i) => (normAdvByStdInGrpo ? (s - id2mean.get(index[i]!)!) / (id2std.get(index[i]!)! + epsilon) : s - id2mean.get(index[i]!)!));
}

/** verl_F.masked_mean over the whole matrix */
const maskedMean = (v: Matrix, mask: Matrix): number => v.flat().reduce((a, x, k) => a + x * mask.flat()[k]!, 0) / mask.flat().reduce((a, x) => a + x, 0);

/** verl agg_loss */
function verlAggLoss(lossMat: Matrix, mask: Matrix, mode: LossAgg): number {
  if (mode === 'token-mean') return maskedMean(lossMat, mask);
  const seq = lossMat.map((row, b) => row.reduce((a, x, t) => a + x * mask[b]![t]!, 0) / mask[b]!.reduce((a, x) => a + x, 0));
  return seq.reduce((a, x) => a + x, 0) / seq.length;
}

/** verl kl_penalty(logprob, ref_logprob, "low_var_kl") */
function verlLowVarKl(logprob: number, refLogprob: number): number {
  const kl = clamp(refLogprob - logprob, -20, 20);
  return clamp(Math.exp(kl) - kl - 1, -10, 10);
}

/** verl compute_policy_loss_vanilla + the dp_actor KL term; with the gradient by torch's backward rules */
function verlPolicyLoss(old: Matrix, logp: Matrix, adv: Matrix, mask: Matrix, mode: LossAgg, low: number, high: number, ref?: Matrix, klCoef = 0) {
  const clipRatioC = 3.0;
  const nak = logp.map((row, b) => row.map((x, t) => clamp(x - old[b]![t]!, -20, 20)));
  const ratio = nak.map((row) => row.map(Math.exp));
  const ppoKl = maskedMean(nak.map((row) => row.map((x) => -x)), mask);
  const pg1 = ratio.map((row, b) => row.map((r, t) => -adv[b]![t]! * r));
  const pg2 = ratio.map((row, b) => row.map((r, t) => -adv[b]![t]! * clamp(r, 1 - low, 1 + high)));
  const clip1 = pg1.map((row, b) => row.map((x, t) => Math.max(x, pg2[b]![t]!)));
  const clipfrac = maskedMean(pg2.map((row, b) => row.map((x, t) => (x > pg1[b]![t]! ? 1 : 0))), mask);
  const pgLosses = clip1.map((row, b) => row.map((x, t) => (adv[b]![t]! < 0 ? Math.min(-adv[b]![t]! * clipRatioC, x) : x)));
  let loss = verlAggLoss(pgLosses, mask, mode);
  if (ref) loss += verlAggLoss(logp.map((row, b) => row.map((x, t) => verlLowVarKl(x, ref[b]![t]!))), mask, mode) * klCoef;
  // backward: the agg weight of each token, then maximum's tie rule and clamp's inclusive bounds
  const weight = (b: number): number => (mode === 'token-mean' ? 1 / mask.flat().reduce((a, x) => a + x, 0) : 1 / (mask.length * mask[b]!.reduce((a, x) => a + x, 0)));
  const grad = ratio.map((row, b) =>
    row.map((r, t) => {
      if (!mask[b]![t]) return 0;
      const A = adv[b]![t]!;
      const d1 = -A * r; // d pg_losses1 / d log_prob
      const d2 = r >= 1 - low && r <= 1 + high ? -A * r : 0; // d pg_losses2 / d log_prob through clamp
      const x1 = pg1[b]![t]!;
      const x2 = pg2[b]![t]!;
      let g = x1 > x2 ? d1 : x1 < x2 ? d2 : d1 / 2 + d2 / 2;
      if (ref) g += klCoef * (1 - Math.exp(ref[b]![t]! - logp[b]![t]!)); // d (exp(kl) - kl - 1) / d log_prob, kl = ref - log_prob
      return g * weight(b);
    }),
  );
  return { loss, clipfrac, ppoKl, grad };
}

// ---- TRL, transcribed -------------------------------------------------------------------------

/** TRL GRPOTrainer advantages: contiguous groups of G, unbiased std, (r - mean) / (std + 1e-4) */
function trlAdvantages(rewards: number[], G: number, scaleRewards = true): number[] {
  return rewards.map((r, i) => {
    const group = rewards.slice(Math.floor(i / G) * G, Math.floor(i / G) * G + G);
    const m = group.reduce((a, x) => a + x, 0) / G;
    const s = Math.sqrt(group.reduce((a, x) => a + (x - m) ** 2, 0) / (G - 1));
    return scaleRewards ? (r - m) / (s + 1e-4) : r - m;
  });
}

/** TRL GRPOTrainer._compute_loss on padded matrices (advantages one per row) */
function trlLoss(logp: Matrix, old: Matrix, ref: Matrix, adv: number[], mask: Matrix, lossType: 'grpo' | 'bnpo', epsLow: number, epsHigh: number, beta: number) {
  const perToken = logp.map((row, b) =>
    row.map((lp, t) => {
      const coef1 = Math.exp(lp - old[b]![t]!);
      const coef2 = clamp(coef1, 1 - epsLow, 1 + epsHigh);
      const kl = Math.exp(ref[b]![t]! - lp) - (ref[b]![t]! - lp) - 1;
      return -Math.min(coef1 * adv[b]!, coef2 * adv[b]!) + (beta !== 0 ? beta * kl : 0);
    }),
  );
  const rowSum = (m: Matrix, b: number): number => m[b]!.reduce((a, x, t) => a + x * mask[b]![t]!, 0);
  const maskSum = mask.flat().reduce((a, x) => a + x, 0);
  const loss =
    lossType === 'grpo'
      ? perToken.map((_, b) => rowSum(perToken, b) / Math.max(mask[b]!.reduce((a, x) => a + x, 0), 1)).reduce((a, x) => a + x, 0) / perToken.length
      : perToken.reduce((a, _, b) => a + rowSum(perToken, b), 0) / Math.max(maskSum, 1);
  const isClipped = logp.map((row, b) => row.map((lp, t) => ((Math.exp(lp - old[b]![t]!) < 1 - epsLow && adv[b]! < 0) || (Math.exp(lp - old[b]![t]!) > 1 + epsHigh && adv[b]! > 0) ? 1 : 0)));
  const clipRatio = isClipped.reduce((a, _, b) => a + rowSum(isClipped, b), 0) / maskSum;
  return { loss, clipRatio };
}

// ---- random batches ---------------------------------------------------------------------------

type Batch = { samples: SurrogateSample[]; old: Matrix; logp: Matrix; ref: Matrix; mask: Matrix; T: number };

/** ragged samples and their right-padded matrices (padding: garbage values under mask 0) */
function randomBatch(r: Rng, advantages: number[]): Batch {
  const lengths = advantages.map(() => 1 + r.int(6));
  const T = Math.max(...lengths);
  const samples: SurrogateSample[] = [];
  const old: Matrix = [];
  const logp: Matrix = [];
  const ref: Matrix = [];
  const mask: Matrix = [];
  advantages.forEach((A, b) => {
    const o: number[] = [];
    const l: number[] = [];
    const f: number[] = [];
    for (let t = 0; t < T; t++) {
      const oldLp = -0.05 - 3 * r.next();
      // a few exact ties: logp == oldLogp (rho = 1)
      const logRatio = r.next() < 0.15 ? 0 : clamp(0.35 * r.normal(), -1, 1);
      o.push(oldLp);
      l.push(oldLp + logRatio);
      f.push(oldLp + 0.3 * r.normal());
    }
    old.push(o);
    logp.push(l);
    ref.push(f);
    mask.push(Array.from({ length: T }, (_, t) => (t < lengths[b]! ? 1 : 0)));
    const n = lengths[b]!;
    samples.push({ advantage: A, logp: l.slice(0, n), oldLogp: o.slice(0, n), refLogp: f.slice(0, n) });
  });
  return { samples, old, logp, ref, mask, T };
}

/** Q groups of G rewards: real-valued, binary (with all-equal groups), or a mix */
function randomRewards(r: Rng, Q: number, G: number): number[][] {
  return Array.from({ length: Q }, (_, q) => Array.from({ length: G }, () => (q % 3 === 0 ? r.normal() : q % 3 === 1 ? (r.next() < 0.5 ? 1 : 0) : r.next() < 0.9 ? 1 : 0)));
}

describe('against verl core_algos.py', () => {
  it('compute_grpo_outcome_advantage: group (std-normalised) and Dr. GRPO (norm_adv_by_std_in_grpo = False)', () => {
    for (let seed = 0; seed < 20; seed++) {
      const r = rng('grpo-ref-verl-adv', seed);
      const Q = 2 + r.int(6);
      const G = 2 + r.int(7);
      const groups = randomRewards(r, Q, G);
      // verl sees a flat batch with an index per response, here interleaved (uid q of response j)
      const order = Array.from({ length: Q * G }, (_, k) => ({ q: k % Q, j: Math.floor(k / Q) }));
      const scores = order.map(({ q, j }) => groups[q]![j]!);
      const index = order.map(({ q }) => `uid-${q}`);
      for (const norm of [true, false]) {
        const theirs = verlGrpoAdvantage(scores, index, 1e-6, norm);
        const ours = groupAdvantages(groups, { scale: norm ? 'group' : 'none', eps: 1e-6 }).advantages;
        order.forEach(({ q, j }, k) => expect(ours[q]![j]!, `seed ${seed} q ${q} j ${j}`).toBeCloseTo(theirs[k]!, 12));
      }
    }
  });

  for (const mode of ['token-mean', 'seq-mean-token-mean'] as LossAgg[]) {
    it(`compute_policy_loss_vanilla + agg_loss "${mode}" + low_var_kl: loss, gradient, pg_clipfrac, ppo_kl`, () => {
      for (let seed = 0; seed < 25; seed++) {
        const r = rng('grpo-ref-verl-loss', mode, seed);
        const groups = randomRewards(r, 3, 4);
        const advantages = groupAdvantages(groups).advantages.flat();
        const batch = randomBatch(r, advantages);
        const [low, high] = seed % 2 === 0 ? [0.2, 0.2] : [0.2, 0.28];
        const klCoef = seed % 3 === 0 ? 0 : 0.001 * (1 + r.int(100));
        const adv = batch.logp.map((row, b) => row.map(() => advantages[b]!)); // verl broadcasts A over the response
        const theirs = verlPolicyLoss(batch.old, batch.logp, adv, batch.mask, mode, low, high, batch.ref, klCoef);
        const ours = clippedSurrogate(batch.samples, { lossAgg: mode, epsLow: low, epsHigh: high, beta: klCoef });
        expect(ours.loss, `seed ${seed}`).toBeCloseTo(theirs.loss, 12);
        expect(ours.stats.clipFraction).toBeCloseTo(theirs.clipfrac, 14);
        expect(ours.stats.approxKl).toBeCloseTo(theirs.ppoKl, 12);
        ours.grad.forEach((g, b) => g.forEach((x, t) => expect(x, `seed ${seed} b ${b} t ${t}`).toBeCloseTo(theirs.grad[b]![t]!, 12)));
      }
    });
  }
});

describe("against TRL's GRPOTrainer", () => {
  it('advantages: unbiased group std, eps 1e-4; scale_rewards = False is Dr. GRPO', () => {
    for (let seed = 0; seed < 20; seed++) {
      const r = rng('grpo-ref-trl-adv', seed);
      const G = 2 + r.int(7);
      const groups = randomRewards(r, 1 + r.int(6), G);
      for (const scale of [true, false]) {
        const theirs = trlAdvantages(groups.flat(), G, scale);
        const ours = groupAdvantages(groups, { scale: scale ? 'group' : 'none', eps: 1e-4 }).advantages.flat();
        ours.forEach((a, k) => expect(a, `seed ${seed} k ${k}`).toBeCloseTo(theirs[k]!, 12));
      }
    }
  });

  it('_compute_loss: loss_type "grpo" is seq-mean-token-mean, "bnpo" is token-mean; clip_ratio; beta * k3', () => {
    for (let seed = 0; seed < 25; seed++) {
      const r = rng('grpo-ref-trl-loss', seed);
      const G = 4;
      const groups = randomRewards(r, 3, G);
      const advantages = trlAdvantages(groups.flat(), G);
      const batch = randomBatch(r, advantages);
      const epsHigh = seed % 2 === 0 ? 0.2 : 0.28;
      const beta = seed % 3 === 0 ? 0 : 0.04;
      for (const [lossType, lossAgg] of [
        ['grpo', 'seq-mean-token-mean'],
        ['bnpo', 'token-mean'],
      ] as const) {
        const theirs = trlLoss(batch.logp, batch.old, batch.ref, advantages, batch.mask, lossType, 0.2, epsHigh, beta);
        const ours = clippedSurrogate(batch.samples, { lossAgg, epsLow: 0.2, epsHigh, beta });
        expect(ours.loss, `seed ${seed} ${lossType}`).toBeCloseTo(theirs.loss, 12);
        expect(ours.stats.clipFraction).toBeCloseTo(theirs.clipRatio, 14);
      }
    }
  });
});
