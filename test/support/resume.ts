// The kill-and-resume harness of the ES and GRPO resume fault tests: a run created by the CLI
// (`--no-wait`), coordinator processes started on it (apps/trainer, the Job's command), killed
// -9 at the crash points the coordinator offers or sent SIGTERM, and the run's outcome compared
// with an uninterrupted reference run of the same seed.
import { expect } from 'vitest';
import type { FuguConfig } from '@fugu/config';
import { waitFor } from './eval-env.ts';
import { runCli, startTrainerProcess, type TrainerProcess } from './es-env.ts';

/** Where the coordinator kills itself, in order: during fan-out of step 0, mid fan-in of step 1, after the commit of step 2. */
export const CRASH_POINTS = ['fanout:0', 'fanin:1', 'commit:2'] as const;

export type ResumeSpec<O> = {
  /** the environment's configuration (read when a process starts, so it may be set in beforeAll) */
  config: () => FuguConfig;
  /** `fugu train …` arguments (read when a run is created); `--run-id <id> --no-wait` follow them */
  train: () => readonly string[];
  /** the trainer process that coordinates the run */
  process: 'coordinator' | 'grpo';
  /** the coordinator's environment for a run (its run id, its poll interval) */
  env: (runId: string) => Record<string, string>;
  /** the variable that names the crash point */
  crashEnv: string;
  /** the run's committed steps (ES generations, GRPO iterations) and status */
  progress: (runId: string) => Promise<{ step: number; status: string }>;
  /** what a resumed run must end with, equal to the reference run's */
  outcome: (runId: string) => Promise<O>;
};

export type ResumeHarness<O> = {
  create(runId: string): Promise<void>;
  /** a coordinator process on the run, with more environment */
  coordinator(runId: string, extra?: Record<string, string>): Promise<TrainerProcess>;
  /** creates the run and takes it to the end with one coordinator: its outcome */
  uninterrupted(runId: string): Promise<O>;
  /** a coordinator killed -9 at each crash point in turn: the run then stands at step 3 */
  crashAtEachPoint(runId: string): Promise<void>;
  /** the last coordinator: it exits 0 and the outcome equals the reference */
  finishes(runId: string, reference: O): Promise<void>;
  /** SIGTERM once a step is committed: exit 143 (not 0, or a Kubernetes Job counts the run done), the run not completed, then finishes() */
  termAndResume(runId: string, reference: O, what: string): Promise<void>;
};

export function resumeHarness<O>(spec: ResumeSpec<O>): ResumeHarness<O> {
  const create = async (runId: string): Promise<void> => {
    const r = await runCli(spec.config(), [...spec.train(), '--run-id', runId, '--no-wait']);
    expect(r.code, r.stderr).toBe(0);
  };
  const coordinator = (runId: string, extra: Record<string, string> = {}): Promise<TrainerProcess> =>
    startTrainerProcess(spec.process, spec.config(), { ...spec.env(runId), ...extra });
  const finishes = async (runId: string, reference: O): Promise<void> => {
    const last = await coordinator(runId);
    expect(await last.exited).toEqual({ code: 0, signal: null });
    expect(await spec.outcome(runId)).toEqual(reference);
  };
  return {
    create,
    coordinator,
    finishes,
    async uninterrupted(runId) {
      await create(runId);
      const c = await coordinator(runId);
      expect(await c.exited).toEqual({ code: 0, signal: null });
      return spec.outcome(runId);
    },
    async crashAtEachPoint(runId) {
      for (const at of CRASH_POINTS) {
        const c = await coordinator(runId, { [spec.crashEnv]: at });
        expect(await c.exited, at).toEqual({ code: null, signal: 'SIGKILL' });
      }
      expect((await spec.progress(runId)).step).toBe(3);
    },
    async termAndResume(runId, reference, what) {
      await create(runId);
      const c = await coordinator(runId);
      await waitFor(what, async () => (await spec.progress(runId)).step >= 1, 60_000, 20);
      expect(await c.term()).toEqual({ code: 143, signal: null });
      expect((await spec.progress(runId)).status).not.toBe('completed');
      await finishes(runId, reference);
    },
  };
}
