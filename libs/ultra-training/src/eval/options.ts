// `fugu ultra eval`'s options: what the driver takes, what a run stores, and the checks of the
// numeric flags (each error names its flag).
import { InputError } from '@fugu/core';
import { resolveMaxSteps, type ReplayConfig, type RewardConfig } from '@fugu/conductor';
import type { ConductorRunProgress, ConductorRunRow } from '@fugu/db';
import type { SplitScheme } from '@fugu/datasets';
import { type WorkflowOptions, asFlag, ULTRA_SPLITS, type UltraSplit } from '@fugu/ultra';
import type { LocalProcessOptions } from '../locals.ts';

export type UltraEvalOptions = LocalProcessOptions & {
  dataset?: string;
  pool?: string;
  /** a comma list of conductor specs */
  conductor?: string;
  split: UltraSplit;
  /** seed of the split by unique prompt (the router's default: 0) */
  splitSeed: number;
  /** the split scheme; default: the one the specs' checkpoints were made with (another is refused), else by prompt */
  splitBy?: SplitScheme;
  sample: number | null;
  seed: number;
  repeats: number;
  maxSteps: number;
  maxUsd: string | null;
  maxTokensPerStep: number | null;
  /** policy writers take their most probable decisions instead of sampling (e.g. a trained policy) */
  argmax?: boolean;
  /** only these of the pool's workers (a restricted pool, as a per-key pool: every conductor sees only them) */
  workers?: string[];
  reward?: Partial<RewardConfig>;
  replay?: ReplayConfig;
  runId?: string;
  resume?: string;
  keyCheck: boolean;
  /** follow the run until it ends (default); false returns after submitting */
  wait: boolean;
  /** seconds without progress, with nothing queued, before unfinished workflows are submitted again */
  stallSeconds?: number;
  chunkSize?: number;
  log?: (line: string) => void;
  signal?: AbortSignal;
  progress?: (run: { id: string; total: number; specs: string[] }) => UltraProgress;
};

export type UltraProgress = { update(p: ConductorRunProgress, note?: string): void; stop(): void };
export type UltraEvalOutcome = { run: ConductorRunRow; interrupted: boolean; elapsedS: number };

/** What a run stores in `conductor_runs.options` (and hands each workflow: `workflow`). */
export type UltraRunOptions = {
  /** splitBy: absent in runs stored before it existed (by prompt) */
  dataset: string; pool: string; split: UltraSplit; splitSeed: number; splitBy?: SplitScheme; sample: number | null; seed: number; repeats: number;
  items: number; workflow: WorkflowOptions;
};

/** The numeric options, checked; each error names its flag. */
export function checkUltraNumbers(o: Pick<UltraEvalOptions, 'repeats' | 'sample' | 'maxSteps' | 'maxTokensPerStep' | 'split'>): void {
  if (!Number.isInteger(o.repeats) || o.repeats < 1) throw new InputError(`must be a whole number >= 1, got ${o.repeats}`, { field: '--repeats' });
  if (o.sample !== null && o.sample < 1) throw new InputError(`must be at least 1, got ${o.sample}`, { field: '--sample' });
  asFlag('--max-steps', () => resolveMaxSteps(o.maxSteps));
  if (o.maxTokensPerStep !== null && o.maxTokensPerStep < 1) throw new InputError(`must be at least 1, got ${o.maxTokensPerStep}`, { field: '--max-tokens-per-step' });
  if (!(ULTRA_SPLITS as readonly string[]).includes(o.split)) throw new InputError(`must be ${ULTRA_SPLITS.join(', ')}, got "${o.split}"`, { field: '--split' });
}
