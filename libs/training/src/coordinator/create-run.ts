// Creating and resuming ES runs: the checks that fail before anything is stored (bad flags, a
// checkpoint that does not fit the task's worker pool, a resume under other code or config).
import { randomBytes } from 'node:crypto';
import { InputError } from '@fugu/core';
import { SepCmaEs } from '@fugu/es';
import { createEsRun, getCheckpoint, getEsRun, type Db, type EsRunRecord } from '@fugu/db';
import { createFitnessTask } from '../tasks/index.ts';
import type { FitnessTask, FitnessTaskOptions } from '../tasks/types.ts';
import { checkResumeConfig, esCodeVersion, validateEsConfig, type EsRunConfig } from './run-config.ts';

export type CreateEsRunOptions = {
  db: Db;
  home: string;
  checkpointId: string;
  config: EsRunConfig;
  runId?: string;
  /** builds the fitness task once to check the checkpoint against the task's data (default true) */
  checkTask?: boolean;
  createTask?: (o: FitnessTaskOptions) => Promise<FitnessTask>;
};

export const newEsRunId = (): string => `es-${new Date().toISOString().slice(0, 10).replaceAll('-', '')}-${randomBytes(3).toString('hex')}`;

export async function createEsRunFromCheckpoint(o: CreateEsRunOptions): Promise<EsRunRecord> {
  const cfg = validateEsConfig(o.config);
  if (o.runId !== undefined && !/^[A-Za-z0-9_-]{1,80}$/.test(o.runId)) throw new InputError('letters, digits, _ and - only (at most 80)', { field: '--run-id' });
  const runId = o.runId ?? newEsRunId();
  if (await getEsRun(o.db, runId)) throw new InputError(`an ES run "${runId}" exists already (resume it with --resume ${runId})`, { field: '--run-id' });
  const ckpt = await getCheckpoint(o.db, o.checkpointId);
  if (!ckpt) throw new InputError(`no router checkpoint "${o.checkpointId}" (fugu router list shows them)`, { field: '--from' });
  if (o.checkTask !== false) {
    // an InputError naming both worker lists when the checkpoint does not fit the task's pool
    const task = await (o.createTask ?? createFitnessTask)({
      db: o.db, home: o.home, checkpointId: o.checkpointId, spec: cfg.task,
      ...(cfg.evalRun !== undefined && { run: cfg.evalRun }),
      ...(cfg.splitSeed !== undefined && { splitSeed: cfg.splitSeed }),
    });
    await task.release();
  }
  const es = new SepCmaEs({ n: ckpt.theta.length, m0: ckpt.theta, sigma0: cfg.sigma0, seed: cfg.seed, lambda: cfg.lambda, ...(cfg.stepSize && { stepSize: cfg.stepSize }) });
  await createEsRun(o.db, { id: runId, config: { ...cfg, n: es.n }, codeVersion: esCodeVersion(), checkpointId: ckpt.id, initialState: es.state() as unknown as Record<string, unknown> });
  return (await getEsRun(o.db, runId))!;
}

/** The checks of `--resume`: the run exists, the code is the same, the flags given again agree. */
export async function checkEsResume(db: Db, runId: string, given: Partial<EsRunConfig> & { checkpointId?: string }): Promise<EsRunRecord> {
  const run = await getEsRun(db, runId);
  if (!run) throw new InputError(`no ES run "${runId}"`, { field: '--resume' });
  if (run.codeVersion !== esCodeVersion())
    throw new InputError(`run ${runId} was started by code version ${run.codeVersion}, this is ${esCodeVersion()}: resume it with the code that started it`, { field: 'code_version' });
  const { checkpointId, ...rest } = given;
  if (checkpointId !== undefined && checkpointId !== run.checkpointId)
    throw new InputError(`run ${runId} starts from checkpoint ${run.checkpointId}, got ${checkpointId}`, { field: '--from' });
  checkResumeConfig(runId, run.config, rest);
  return run;
}
