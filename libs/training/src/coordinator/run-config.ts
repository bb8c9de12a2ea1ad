// An ES run's configuration: validated when the run is created (errors name the CLI flag), stored
// in es_runs.config, and compared field by field when the run is resumed.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { InputError } from '@fugu/core';
import { MAX_LAMBDA, type StepSizeAdaptation } from '@fugu/es';
import type { FitnessTaskSpec } from '../tasks/types.ts';

export type EsRunConfig = {
  task: FitnessTaskSpec;
  lambda: number;
  sigma0: number;
  replicas: number;
  generations: number;
  seed: number;
  /** step-size rule; undefined = @fugu/es's default for the dimension */
  stepSize?: StepSizeAdaptation;
  /** the evaluation run whose rewards define outcomes (default: the checkpoint's training run) */
  evalRun?: string;
  /** default: the checkpoint's split seed */
  splitSeed?: number;
  /** a generation's deadline: evaluations still missing after it are dispatched again */
  deadlineMs: number;
  /** attempts of an evaluation job (exponential backoff) before its flow's parent goes on without it */
  attempts: number;
};

export const ES_DEFAULTS = {
  // The head's input is an L2-normalised embedding, so a perturbation of W_h with step sigma moves
  // each logit by about sigma: 0.05 left the sampled policy (and the episode fitness) unchanged
  // within 30 generations (held-out success 0.324 vs SFT 0.329); 0.5 gave 0.367 (README).
  sigma0: 0.5,
  replicas: 1,
  generations: 30,
  seed: 0,
  deadlineMs: 300_000,
  attempts: 3,
  singleStepBatch: 256,
  episodes: { episodes: 32, questions: 3, turnBudget: 5 },
} as const;

/** The most sigma0 may be: theta entries are O(1) (SVF scales near 1, head weights). */
export const MAX_SIGMA0 = 10;
export const MAX_REPLICAS = 1_000;
export const MAX_GENERATIONS = 100_000;

const intIn = (v: unknown, lo: number, hi: number): boolean => typeof v === 'number' && Number.isInteger(v) && v >= lo && v <= hi;

/** Throws an InputError naming the flag of the first bad field. `n` (theta's dimension) bounds nothing today. */
export function validateEsConfig(c: EsRunConfig): EsRunConfig {
  if (!intIn(c.lambda, 2, MAX_LAMBDA)) throw new InputError(`must be a whole number in [2, ${MAX_LAMBDA}], got ${String(c.lambda)}`, { field: '--lambda' });
  if (c.stepSize === 'tpa' && c.lambda < 4) throw new InputError(`must be at least 4 with two-point step-size adaptation, got ${c.lambda}`, { field: '--lambda' });
  if (typeof c.sigma0 !== 'number' || !Number.isFinite(c.sigma0) || c.sigma0 <= 0 || c.sigma0 > MAX_SIGMA0)
    throw new InputError(`must be a number in (0, ${MAX_SIGMA0}], got ${String(c.sigma0)}`, { field: '--sigma0' });
  if (!intIn(c.replicas, 1, MAX_REPLICAS)) throw new InputError(`must be a whole number in [1, ${MAX_REPLICAS}], got ${String(c.replicas)}`, { field: '--replicas' });
  if (!intIn(c.generations, 1, MAX_GENERATIONS)) throw new InputError(`must be a whole number in [1, ${MAX_GENERATIONS}], got ${String(c.generations)}`, { field: '--generations' });
  if (!intIn(c.seed, 0, 2 ** 31 - 1)) throw new InputError(`must be a whole number in [0, 2^31), got ${String(c.seed)}`, { field: '--seed' });
  if (!intIn(c.deadlineMs, 1_000, 86_400_000)) throw new InputError(`must be in [1000, 86400000] ms, got ${String(c.deadlineMs)}`, { field: '--deadline-ms' });
  if (!intIn(c.attempts, 1, 100)) throw new InputError(`must be a whole number in [1, 100], got ${String(c.attempts)}`, { field: '--attempts' });
  const t = c.task;
  if (t.kind === 'single-step') {
    if (!intIn(t.batchSize, 1, 1_000_000)) throw new InputError(`must be a whole number >= 1, got ${String(t.batchSize)}`, { field: '--batch' });
  } else if (t.kind === 'episodes') {
    if (!intIn(t.episodes, 1, 1_000_000)) throw new InputError(`must be a whole number >= 1, got ${String(t.episodes)}`, { field: '--episodes' });
    if (!intIn(t.questions, 1, 1_000)) throw new InputError(`must be a whole number >= 1, got ${String(t.questions)}`, { field: '--questions' });
    if (!intIn(t.turnBudget, t.questions, 10_000)) throw new InputError(`must be a whole number >= --questions (${t.questions}), got ${String(t.turnBudget)}`, { field: '--turn-budget' });
  } else {
    throw new InputError(`must be single-step or episodes, got ${String((t as { kind?: unknown }).kind)}`, { field: '--task' });
  }
  return c;
}

/** The flag that names a config field in errors. */
const FLAG: Record<string, string> = {
  lambda: '--lambda', sigma0: '--sigma0', replicas: '--replicas', generations: '--generations', seed: '--seed', stepSize: '--step-size',
  evalRun: '--eval-run', splitSeed: '--split-seed', deadlineMs: '--deadline-ms', attempts: '--attempts', 'task.kind': '--task',
  'task.batchSize': '--batch', 'task.episodes': '--episodes', 'task.questions': '--questions', 'task.turnBudget': '--turn-budget',
};

const flatten = (o: Record<string, unknown>, prefix = ''): Record<string, unknown> =>
  Object.fromEntries(
    Object.entries(o).flatMap(([k, v]) =>
      v !== null && typeof v === 'object' && !Array.isArray(v) ? Object.entries(flatten(v as Record<string, unknown>, `${prefix}${k}.`)) : [[`${prefix}${k}`, v]],
    ),
  );

/** On --resume: every field given again must equal the stored one (InputError naming the flag). */
export function checkResumeConfig(runId: string, stored: Record<string, unknown>, given: Partial<Record<string, unknown>>): void {
  const s = flatten(stored);
  const g = flatten(given as Record<string, unknown>);
  for (const [k, v] of Object.entries(g)) {
    if (v === undefined) continue;
    if (JSON.stringify(s[k]) !== JSON.stringify(v))
      throw new InputError(`run ${runId} was created with ${k} = ${JSON.stringify(s[k])}, got ${JSON.stringify(v)}; a resumed run keeps its configuration (start a new run instead)`, {
        field: FLAG[k] ?? k,
      });
  }
}

const here = path.dirname(fileURLToPath(import.meta.url));
const CODE_DIRS = [path.resolve(here, '../../../es/src'), path.resolve(here, '..')];

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return out;
  }
  for (const name of names) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) out.push(...sourceFiles(p));
    else if (name.endsWith('.ts') && !name.endsWith('.test.ts')) out.push(p);
  }
  return out;
}

const versions = new Map<string, string>();

/** `src-<16 hex>`: a hash of the TypeScript sources under `dirs` (tests excluded, paths relative to libs/), cached per process. */
export function sourceVersion(dirs: readonly string[]): string {
  const key = dirs.join('\0');
  const known = versions.get(key);
  if (known) return known;
  const h = createHash('sha256');
  for (const dir of dirs) for (const f of sourceFiles(dir)) h.update(path.relative(path.resolve(here, '../../..'), f)).update('\0').update(readFileSync(f)).update('\0');
  const v = `src-${h.digest('hex').slice(0, 16)}`;
  versions.set(key, v);
  return v;
}

/** The code version of the ES stage: a hash of the optimiser's and the training lib's sources
 *  (tests excluded). A run resumes only under the code that started it (FUGU_ES_CODE_VERSION overrides). */
export function esCodeVersion(env: Record<string, string | undefined> = process.env): string {
  return env.FUGU_ES_CODE_VERSION || sourceVersion(CODE_DIRS);
}

/** sha256 of the state's canonical JSON (sorted keys: jsonb reorders keys), first 16 hex digits. */
export function stateVersion(state: unknown): string {
  return createHash('sha256').update(canonicalJson(state)).digest('hex').slice(0, 16);
}

export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`)
    .join(',')}}`;
}
