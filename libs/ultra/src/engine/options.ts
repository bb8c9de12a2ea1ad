// A workflow's options (the `options` column of `workflows`): budgets, reward and replay
// configuration, prompt templates. Validated once at submission and again at execution (a row
// written by another tool is checked the same way); an error names the field.
import { InputError, parseUsd, type WorkerSpec } from '@fugu/core';
import { loadPromptTemplate, resolveMaxSteps, resolveWorkerParams, rewardConfig, validateReplayConfig, type ReplayConfig, type ReplayParams, type RewardConfig, type SizeClass } from '@fugu/conductor';

export type WorkflowOptions = {
  /** the most steps a workflow may have (1..10); a longer one ends `budget-steps` */
  maxSteps: number;
  /** maxTokens of every step's call; a step cut by it ends the workflow `budget-tokens` (no further step starts) */
  maxTokensPerStep?: number;
  /** dollars (decimal string); spent >= maxUsd before a step starts ends the workflow `budget-usd` (steps in flight finish) */
  maxUsd?: string;
  reward?: Partial<RewardConfig>;
  /** pool worker names by training mean, best first (fixed topologies; default: pool order) */
  ranking?: string[];
  /** sampling temperature of an llm: Conductor (default: config.conductor.temperature) */
  temperature?: number;
  /** the replay step model's configuration (presets, per-worker parameters) */
  replay?: ReplayConfig;
  /** worker prompt template version (default worker-v1) */
  workerPrompt?: string;
  /** conductor prompt template version (default conductor-v1) */
  conductorPrompt?: string;
  /**
   * one more key of a sampling writer's draws, besides the seed and the item: the G samples of a
   * GRPO group share the seed (so the replay environment's draws) and differ here
   */
  sample?: string;
  /** a policy writer takes its most probable decisions instead of sampling (GRPO's validation) */
  argmax?: boolean;
  /**
   * the pool workers this workflow may use (names; default all): a per-key pool, or a GRPO run's
   * randomised k-of-K pool. Every writer sees only them: an llm: Conductor's prompt lists them
   * (numbered from 0), a policy's worker choice is masked to them, fixed topologies rank and the
   * router picks among them. Checked against the pool at execution (`options.workers[i]`).
   */
  workers?: string[];
  /** the completion of a `given` workflow (engine/given.ts): parsed and executed as written, nothing writes */
  completion?: string;
};

const KNOWN = ['maxSteps', 'maxTokensPerStep', 'maxUsd', 'reward', 'ranking', 'temperature', 'replay', 'workerPrompt', 'conductorPrompt', 'sample', 'argmax', 'workers', 'completion'] as const;

/** Checks a workflow's options; `field` prefixes every error's field (e.g. `rows[3].options`). */
export function validateWorkflowOptions(raw: unknown, field = 'options'): WorkflowOptions {
  const at = (f: string): string => (field ? `${field}.${f}` : f);
  const fail = (f: string, msg: string): never => {
    throw new InputError(msg, { field: at(f) });
  };
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new InputError('workflow options must be an object', { field });
  const o = raw as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!(KNOWN as readonly string[]).includes(k)) fail(k, `unknown workflow option "${k}" (known: ${KNOWN.join(', ')})`);
  let maxSteps: number;
  try {
    maxSteps = resolveMaxSteps(o.maxSteps as number);
  } catch (e) {
    return fail('maxSteps', (e as Error).message.replace(/^field maxSteps: /, ''));
  }
  const out: WorkflowOptions = { maxSteps };
  if (o.maxTokensPerStep !== undefined) {
    const v = o.maxTokensPerStep;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) fail('maxTokensPerStep', `maxTokensPerStep must be a positive integer, got ${String(v)}`);
    out.maxTokensPerStep = v as number;
  }
  if (o.maxUsd !== undefined) {
    const v = o.maxUsd;
    try {
      if (typeof v !== 'string') throw new Error();
      parseUsd(v);
    } catch {
      fail('maxUsd', `maxUsd must be a non-negative decimal string of dollars (e.g. "0.05"), got ${JSON.stringify(v)}`);
    }
    out.maxUsd = v as string;
  }
  if (o.reward !== undefined) {
    if (o.reward === null || typeof o.reward !== 'object' || Array.isArray(o.reward)) fail('reward', 'reward must be an object');
    try {
      rewardConfig(o.reward as Partial<RewardConfig>);
    } catch (e) {
      fail(`reward.${(e as InputError).field ?? ''}`, (e as Error).message.replace(/^field [^:]+: /, ''));
    }
    out.reward = o.reward as Partial<RewardConfig>;
  }
  if (o.ranking !== undefined) {
    if (!Array.isArray(o.ranking) || o.ranking.some((n) => typeof n !== 'string' || n === '')) fail('ranking', 'ranking must be a list of worker names');
    out.ranking = [...(o.ranking as string[])];
  }
  if (o.temperature !== undefined) {
    const v = o.temperature;
    if (typeof v !== 'number' || !(v >= 0 && v <= 2)) fail('temperature', `temperature must be a number in [0, 2], got ${String(v)}`);
    out.temperature = v as number;
  }
  if (o.replay !== undefined) {
    try {
      out.replay = validateReplayConfig(o.replay);
    } catch (e) {
      fail(`replay${(e as InputError).field ? `.${(e as InputError).field}` : ''}`, (e as Error).message.replace(/^field [^:]+: /, ''));
    }
  }
  if (o.sample !== undefined) {
    if (typeof o.sample !== 'string' || !/^[A-Za-z0-9_.:-]{1,100}$/.test(o.sample)) fail('sample', `sample must be 1 to 100 letters, digits, _ . : -, got ${JSON.stringify(o.sample)}`);
    out.sample = o.sample as string;
  }
  if (o.argmax !== undefined) {
    if (typeof o.argmax !== 'boolean') fail('argmax', `argmax must be true or false, got ${JSON.stringify(o.argmax)}`);
    if (o.argmax) out.argmax = true;
  }
  if (o.workers !== undefined) {
    const v = o.workers;
    if (!Array.isArray(v) || v.length === 0) fail('workers', 'workers must be a non-empty list of pool worker names');
    const seen = new Set<string>();
    (v as unknown[]).forEach((n, i) => {
      if (typeof n !== 'string' || n === '') fail(`workers[${i}]`, `workers[${i}] must be a worker name, got ${JSON.stringify(n)}`);
      if (seen.has(n as string)) fail(`workers[${i}]`, `worker ${JSON.stringify(n)} appears twice`);
      seen.add(n as string);
    });
    out.workers = [...(v as string[])];
  }
  if (o.completion !== undefined) {
    if (typeof o.completion !== 'string') fail('completion', `completion must be a string (the text to parse), got ${typeof o.completion}`);
    out.completion = o.completion as string;
  }
  for (const k of ['workerPrompt', 'conductorPrompt'] as const) {
    const v = o[k];
    if (v === undefined) continue;
    if (typeof v !== 'string' || v === '') fail(k, `${k} must be a template version such as worker-v1`);
    try {
      loadPromptTemplate(v as string);
    } catch (e) {
      fail(k, (e as Error).message.replace(/^field [^:]+: /, ''));
    }
    out[k] = v as string;
  }
  return out;
}

/**
 * A replay worker's step-model parameters under a workflow's replay config: its size class from
 * the pool's `size`, else a parameter count in its name, model id or description, then the
 * presets and per-worker overrides.
 * The executor and the run summary both read them here, so a report shows what the steps used;
 * `sources` (the distinct other workers a step reads) applies the config's per-count overrides.
 */
export function workerReplayParams(config: ReplayConfig | undefined, worker: Pick<WorkerSpec, 'name' | 'model' | 'description' | 'size'>, sources?: number): ReplayParams & { sizeClass: SizeClass } {
  return resolveWorkerParams(config ?? {}, worker.name, {
    description: [worker.model, worker.description].filter((t) => t !== undefined && t !== '').join('; '),
    ...(worker.size !== undefined && { size: worker.size }),
    ...(sources !== undefined && { sources }),
  });
}
