// An ES environment for integration, fault and benchmark runs: an evaluation environment
// (eval-env.ts) with a replay run of synthetic items and an SFT checkpoint trained on it, plus
// helpers that start the trainer's processes (apps/trainer) and the CLI as child processes.
import { execFile, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { serviceEnv, type FuguConfig } from '@fugu/config';
import { createLogger, Registry } from '@fugu/telemetry';
import { startProviderWorker } from '../../apps/provider-worker/src/worker.ts';
import { runEval } from '@fugu/evaluation';
import { trainRouter } from '@fugu/training';
import { coordinatorMain, evaluatorMain, grpoCoordinatorMain } from '@fugu/local-services';
import { watchApp, type AppProcess } from './app-process.ts';
import { createEvalEnv, replayPool, syntheticItems, writeFixtures, type EvalEnv } from './eval-env.ts';

export type EsEnv = EvalEnv & { checkpointId: string; evalRun: string };

const quiet = () => {};

/** opts.otherPool: also a run 'two' of workers alpha and beta only (a pool the checkpoint does not fit). */
export async function createEsEnv(opts: { items?: number; otherPool?: boolean } = {}): Promise<EsEnv> {
  const env = await createEvalEnv();
  const worker = await startProviderWorker({ config: env.config, db: env.ctx.db, log: createLogger({ name: 't', level: 'silent' }), registry: new Registry() });
  try {
    const files = await writeFixtures(`${env.dir}/skills`, syntheticItems(opts.items ?? 300, 5), replayPool());
    await runEval(env.ctx, { dataset: files.dataset, pool: files.pool, repetitions: 1, sample: null, seed: 0, spendCap: null, localWorkers: 0, keyCheck: true, wait: true, runId: 'skills', log: quiet });
    if (opts.otherPool) {
      const two = await writeFixtures(`${env.dir}/two`, syntheticItems(60, 5), replayPool(['alpha', 'beta']));
      await runEval(env.ctx, { dataset: two.dataset, pool: two.pool, repetitions: 1, sample: null, seed: 0, spendCap: null, localWorkers: 0, keyCheck: true, wait: true, runId: 'two', log: quiet });
    }
  } finally {
    await worker.close();
  }
  const { checkpointId } = await trainRouter(env.ctx.db, {
    run: 'skills', tau: 1, seed: 0, splitSeed: 0, epochs: 8, batchSize: 64, lr: 0.01, patience: 10, headOnly: false, weightDecay: 0, selectBy: 'reward', home: env.dir, log: quiet,
  });
  return { ...env, checkpointId, evalRun: 'skills' };
}

export type TrainerProcess = AppProcess;

export function trainerEnv(config: FuguConfig, env: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    ...serviceEnv(config),
    FUGU_HOME: config.home,
    FUGU_LOG_LEVEL: 'warn',
    FUGU_ES_COORDINATOR_PORT: '0',
    FUGU_ES_EVALUATOR_PORT: '0',
    FUGU_GRPO_COORDINATOR_PORT: '0',
    ...env,
  };
}

/** Starts `node apps/trainer/src/<kind>-main.ts` (the container's command); resolves once it is ready. */
export function startTrainerProcess(kind: 'evaluator' | 'coordinator' | 'grpo', config: FuguConfig, env: Record<string, string> = {}): Promise<TrainerProcess> {
  const main = kind === 'evaluator' ? evaluatorMain : kind === 'grpo' ? grpoCoordinatorMain : coordinatorMain;
  const child = fork(main, [], { env: trainerEnv(config, env), stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  return watchApp(child, kind);
}

const cliMain = fileURLToPath(new URL('../../apps/cli/src/main.ts', import.meta.url));

export function runCli(config: FuguConfig, args: string[], env: Record<string, string> = {}, timeoutMs = 240_000): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [cliMain, ...args], { env: trainerEnv(config, env), timeout: timeoutMs, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}
