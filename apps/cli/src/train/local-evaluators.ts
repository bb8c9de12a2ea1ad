// ES evaluator processes started by `fugu train es --local-evaluators N` (no cluster): the same
// command as the evaluator container, supervised by startLocalProcesses.
import { fileURLToPath } from 'node:url';
import { serviceEnv, type FuguConfig } from '@fugu/config';
import { startLocalProcesses, type LocalProcesses } from '../local-processes.ts';

export const evaluatorMain = fileURLToPath(new URL('../../../trainer/src/evaluator-main.ts', import.meta.url));
export const coordinatorMain = fileURLToPath(new URL('../../../trainer/src/coordinator-main.ts', import.meta.url));

export type LocalEvaluators = LocalProcesses;

export function startLocalEvaluators(
  config: FuguConfig,
  opts: { count: number; env?: Record<string, string | undefined>; onEvent?: (msg: string) => void },
): Promise<LocalEvaluators> {
  return startLocalProcesses({
    main: evaluatorMain,
    name: 'es-evaluator',
    count: opts.count,
    home: config.home,
    env: { ...process.env, ...serviceEnv(config), FUGU_ES_EVALUATOR_PORT: '0', ...opts.env },
    ...(opts.onEvent && { onEvent: opts.onEvent }),
  });
}
