// What the exact-expectation analyses read: a dataset with recorded scores and a replay pool over
// it (resolved from --dataset / --pool as `fugu ultra eval` and `fugu train grpo` resolve them: no
// earlier run needed), the router's split (by unique prompt, or the dataset's own: the scheme of
// the checkpoints analysed, another refused), the train-split ranking, and the replay step
// model's parameters per worker under a ReplayConfig. Everything here is a simulation from recorded
// outcomes (libs/conductor/src/replay).
import type { DatasetItem, WorkerSpec } from '@fugu/core';
import { InputError } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import { validateReplayConfig, type ReplayConfig, type ReplayParams, type StepParams } from '@fugu/conductor';
import { checkPoolAgainstDataset, resolveDataset, resolveWorkerPool } from '@fugu/evaluation';
import { resolveSplitScheme, type SplitScheme } from '@fugu/datasets';
import type { Db } from '@fugu/db';
import { policySplitScheme, routerSplitScheme, splitItems, trainSplitRanking, workerReplayParams, type UltraSplit } from '@fugu/ultra';

export type AnalysisInputs = {
  dataset: string;
  workers: WorkerSpec[];
  names: string[];
  /** every item of the dataset, in dataset order */
  items: DatasetItem[];
  splitSeed: number;
  splitBy: SplitScheme;
  /** the items of one part of the router's split (by unique prompt, or the dataset's own) */
  split(s: UltraSplit): DatasetItem[];
  /** workers best first by train-split mean */
  ranking: string[];
  /** each worker's step-model parameters under a ReplayConfig (undefined: the presets) */
  params(config?: ReplayConfig): StepParams;
};

/** The dataset and replay pool of an analysis; InputError naming --pool when a worker is not a replay worker. */
export async function analysisInputs(config: Pick<FuguConfig, 'llmrouterDir'>, o: { dataset: string; pool: string; splitSeed?: number; splitBy?: SplitScheme }): Promise<AnalysisInputs> {
  const pool = await resolveWorkerPool(o.pool, config.llmrouterDir);
  const live = pool.workers.filter((w) => w.provider !== 'replay');
  if (live.length > 0) {
    throw new InputError(`exact expectations need recorded outcomes: ${live.map((w) => w.name).join(', ')} ${live.length === 1 ? 'is not a replay worker' : 'are not replay workers'}`, { field: '--pool' });
  }
  const dataset = await resolveDataset(o.dataset, config.llmrouterDir);
  checkPoolAgainstDataset(pool, dataset, null);
  const names = pool.workers.map((w) => w.name);
  const splitSeed = o.splitSeed ?? 0;
  const splitBy = o.splitBy ?? 'prompt';
  const spec = { by: splitBy, seed: splitSeed };
  const byName = new Map(pool.workers.map((w) => [w.name, w]));
  return {
    dataset: dataset.name,
    workers: pool.workers,
    names,
    items: dataset.items,
    splitSeed,
    splitBy,
    split: (s) => splitItems(dataset.items, s, spec).map((i) => dataset.items[i]!),
    ranking: trainSplitRanking(names, dataset.items, spec),
    params: (cfg) => {
      const memo = new Map<string, ReplayParams>();
      return (w, sources) => {
        let p = memo.get(`${w}/${sources}`);
        if (!p) {
          const spec = byName.get(w);
          if (!spec) throw new InputError(`worker ${JSON.stringify(w)} is not in the pool`, { field: 'worker' });
          p = workerReplayParams(cfg, spec, sources);
          memo.set(`${w}/${sources}`, p);
        }
        return p;
      };
    },
  };
}

/**
 * The split scheme of an analysis: the one given (`--split-by`), else the one the policy and router
 * checkpoints it reads were made with; another, or two that differ, is an InputError
 * (resolveSplitScheme). Unknown ids are left to the analysis to refuse.
 */
export async function analysisSplitScheme(db: Db, given: SplitScheme | undefined, o: { policies?: readonly string[]; routers?: readonly string[] }): Promise<SplitScheme> {
  const made: Array<{ what: string; by: SplitScheme }> = [];
  for (const id of o.policies ?? []) {
    const by = await policySplitScheme(db, id);
    if (by) made.push({ what: `policy checkpoint ${id}`, by });
  }
  for (const id of o.routers ?? []) {
    const by = await routerSplitScheme(db, id);
    if (by) made.push({ what: `router checkpoint ${id}`, by });
  }
  return resolveSplitScheme(given, made);
}

/** A named ReplayConfig (a file's name without .json, or a perturbation's), validated. */
export type NamedReplayConfig = { name: string; config: ReplayConfig };

/** Figure 2's fixed perturbations of the presets (issue 16): one parameter moved in both size classes. */
export function presetPerturbations(presets: { large: ReplayParams; small: ReplayParams }): NamedReplayConfig[] {
  const both = (f: (p: ReplayParams) => Partial<ReplayParams>): ReplayConfig => ({ presets: { large: f(presets.large), small: f(presets.small) } });
  return [
    { name: 'presets', config: {} },
    { name: 'misled +0.1', config: both((p) => ({ misled: Math.min(1, p.misled + 0.1) })) },
    { name: 'fix -0.05', config: both((p) => ({ fix: Math.max(0, p.fix - 0.05) })) },
    { name: 'keep -0.05', config: both((p) => ({ keep: p.keep - 0.05 })) },
    { name: 'herd halved', config: both((p) => ({ herd: p.herd / 2 })) },
  ];
}

/** Validates a parsed ReplayConfig under its name (the error names the config). */
export function namedReplayConfig(name: string, raw: unknown): NamedReplayConfig {
  try {
    return { name, config: validateReplayConfig(raw) };
  } catch (e) {
    if (e instanceof InputError) throw new InputError(`${name}: ${e.message}`, { field: '--replay' }, { cause: e });
    throw e;
  }
}
