// What one GRPO iteration runs, from the run's config and its items alone (pure, seeded): Q
// questions drawn from the train split, G samples each, and every valEvery iterations the
// validation items under the sampling policy's argmax. The G samples of a question share the
// environment's seed (common random numbers: their reward differences come from the decisions)
// and differ only in the policy's draws (`options.sample`); the two streams are separate.
import { rng } from '@fugu/core';
import type { StoredItem } from '@fugu/db';
import { sampleIndices } from '@fugu/evaluation';
import type { WorkflowOptions } from '@fugu/ultra';
import type { GrpoConfig } from './config.ts';

export type PlannedRollout = {
  /** the loop's job key: `t.<q>.<g>` (question q of the draw, sample g) or `v.<j>` (validation item j) */
  key: string;
  split: 'train' | 'val';
  /** train: the question's index in the iteration's draw; val: the item's index in the validation set */
  question: number;
  sample: number;
  item: StoredItem;
  /** the environment's seed (the replay's draws) */
  seed: number;
  options: WorkflowOptions;
};

export type GrpoItems = { train: readonly StoredItem[]; val: readonly StoredItem[] };

/** The environment seed of question q of iteration i: one per (run seed, i, q), shared by its G samples. */
export function environmentSeed(seed: number, iteration: number, q: number): number {
  return rng('grpo-environment', seed, iteration, q).int(2 ** 31 - 1);
}

/** Whether iteration i evaluates on the validation items: every valEvery iterations, and the last one. */
export function isValidationIteration(cfg: Pick<GrpoConfig, 'valEvery' | 'valSize' | 'iterations'>, iteration: number): boolean {
  if (cfg.valEvery <= 0 || cfg.valSize <= 0) return false;
  return iteration % cfg.valEvery === 0 || iteration === cfg.iterations - 1;
}

/** The validation items: a seeded sample of valSize of the val split, the same at every evaluation. */
export function validationItems(cfg: Pick<GrpoConfig, 'valSize' | 'seed'>, val: readonly StoredItem[]): StoredItem[] {
  return sampleIndices(val.length, cfg.valSize, cfg.seed).map((i) => val[i]!);
}

/** The question indices (into the train split) of iteration i: Q distinct ones, a seeded draw. */
export function iterationQuestions(cfg: Pick<GrpoConfig, 'q' | 'seed'>, trainSize: number, iteration: number): number[] {
  return firstOfShuffle(rng('grpo-questions', cfg.seed, iteration), trainSize, cfg.q);
}

/** The first k of a seeded permutation of 0..n-1 (a partial Fisher-Yates shuffle, k draws of r). */
function firstOfShuffle(r: ReturnType<typeof rng>, n: number, k: number): number[] {
  const idx = Array.from({ length: n }, (_, i) => i);
  for (let j = 0; j < k; j++) {
    const t = j + r.int(n - j);
    [idx[j], idx[t]] = [idx[t]!, idx[j]!];
  }
  return idx.slice(0, k);
}

/**
 * The randomised pool of question q of iteration i (cfg.poolK > 0): a seeded k-subset of the
 * pool's worker names, in pool order, shared by the question's G samples (a group compares
 * decisions under one pool). undefined: the whole pool.
 */
export function questionPool(cfg: Pick<GrpoConfig, 'poolK' | 'poolHoldout' | 'seed'>, pool: readonly string[], iteration: number, q: number): string[] | undefined {
  const k = cfg.poolK ?? 0;
  if (k <= 0 || k >= pool.length) return undefined;
  const held = new Set((cfg.poolHoldout ?? []).map((s) => s.join('\n')));
  const r = rng('grpo-pool', cfg.seed, iteration, q);
  // a held-out pool is drawn again (the config leaves at least one pool to draw)
  for (;;) {
    const names = firstOfShuffle(r, pool.length, k).sort((a, b) => a - b).map((i) => pool[i]!);
    if (!held.has(names.join('\n'))) return names;
  }
}

/** Every rollout of iteration i, in dispatch order (train groups, then validation); `pool`: the pool's worker names (randomised pools). */
export function planIteration(cfg: GrpoConfig, items: GrpoItems, iteration: number, base: WorkflowOptions, pool: readonly string[] = []): PlannedRollout[] {
  const out: PlannedRollout[] = [];
  iterationQuestions(cfg, items.train.length, iteration).forEach((idx, q) => {
    const seed = environmentSeed(cfg.seed, iteration, q);
    const workers = questionPool(cfg, pool, iteration, q);
    for (let g = 0; g < cfg.g; g++) {
      out.push({ key: `t.${q}.${g}`, split: 'train', question: q, sample: g, item: items.train[idx]!, seed, options: { ...base, sample: `${iteration}.${q}.${g}`, ...(workers && { workers }) } });
    }
  });
  if (isValidationIteration(cfg, iteration)) {
    // the same items and environment draws at every evaluation, so the curve compares policies
    validationItems(cfg, items.val).forEach((item, j) => {
      out.push({ key: `v.${j}`, split: 'val', question: j, sample: 0, item, seed: environmentSeed(cfg.seed, -1, j), options: { ...base, argmax: true } });
    });
  }
  return out;
}
