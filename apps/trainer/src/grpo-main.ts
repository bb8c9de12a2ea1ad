// `node apps/trainer/src/grpo-main.ts` — the GRPO coordinator process for one run (the command
// the Kubernetes Job fugu-grpo-coordinator runs). The run is created by `fugu train grpo ...
// --no-wait` (or any earlier `fugu train grpo`); this process drives it to the end over the
// cluster (conduct jobs, one flow per iteration) and may be killed and started again at any
// point: it resumes from Postgres. Exit status: 0 when the run completed, 3 when it ended
// otherwise (failed), 143 when stopped by SIGTERM/SIGINT before it completed.
// Environment: FUGU_GRPO_RUN (required), FUGU_REDIS_URL, FUGU_DATABASE_URL, FUGU_QUEUE_PREFIX,
// FUGU_HOME (the router backbone), FUGU_GRPO_COORDINATOR_PORT (9473; 0 = any), FUGU_GRPO_POLL_MS
// (500), FUGU_GRPO_CRASH_AT (tests only: fanout|fanin|commit:<iteration> kills the process with
// SIGKILL there).
import { ConfigError, InputError } from '@fugu/core';
import { loadConfig } from '@fugu/config';
import { openContext } from '@fugu/evaluation';
import { createLogger, Gauge, Registry, startOpsServer, startTracing } from '@fugu/telemetry';
import type { CrashPoint } from '@fugu/training';
import { backboneFeatures, runGrpo } from '@fugu/ultra-training';
import { collectDefaultMetrics } from 'prom-client';
import { envInt } from './env.ts';
import { superviseCoordinator } from './supervise.ts';

const log = createLogger({ name: 'grpo-coordinator' });

function parseCrashAt(v: string | undefined): { point: CrashPoint; iteration: number } | undefined {
  if (!v) return undefined;
  const m = /^(fanout|fanin|commit):(\d+)$/.exec(v);
  if (!m) throw new InputError(`must be fanout|fanin|commit:<iteration>, got "${v}"`, { field: 'FUGU_GRPO_CRASH_AT' });
  return { point: m[1] as CrashPoint, iteration: Number(m[2]) };
}

async function main(): Promise<void> {
  // spans to an OTLP endpoint when OTEL_EXPORTER_OTLP_ENDPOINT is set (else off); first, so every queue carries them (an iteration's flow is one trace)
  const tracing = await startTracing('fugu-grpo-coordinator', process.env, log);
  const env = process.env;
  const runId = env.FUGU_GRPO_RUN;
  if (!runId) throw new ConfigError('FUGU_GRPO_RUN: set it to the GRPO run to coordinate (fugu train grpo --no-wait creates one)', 'FUGU_GRPO_RUN');
  const crashAt = parseCrashAt(env.FUGU_GRPO_CRASH_AT);
  const config = loadConfig();
  const ctx = await openContext({ redis: true, config });
  const features = await backboneFeatures(ctx.db, config.home);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const iterGauge = new Gauge({ name: 'fugu_grpo_iteration', help: 'iterations committed', registers: [registry] });
  const rewardGauge = new Gauge({ name: 'fugu_grpo_mean_reward', help: "the last iteration's mean train reward", registers: [registry] });
  const ac = new AbortController();
  let iteration = -1;
  const ops = await startOpsServer({ port: envInt(env, 'FUGU_GRPO_COORDINATOR_PORT', 9473), registry, ready: () => true, details: () => ({ run: runId, iteration }) });
  const done = runGrpo(ctx, {
    runId, rollouts: 'cluster', features, signal: ac.signal,
    pollMs: envInt(env, 'FUGU_GRPO_POLL_MS', 500, 10),
    ...(crashAt && { crashAt }),
    log: (msg, extra) => log.info(extra ?? {}, msg),
    onIteration: ({ index, update, wallMs }) => {
      iteration = index;
      iterGauge.set(index + 1);
      rewardGauge.set(update.record.meanReward);
      log.info({ iteration: index, meanReward: update.record.meanReward, val: update.record.val?.meanReward, criterion: update.valReward, clip: update.record.clipFraction, kl: update.record.approxKl, wallMs }, 'iteration committed');
    },
  });
  if (process.send) process.send({ type: 'ready', port: ops.port });
  await superviseCoordinator({
    done, abort: ac, log,
    close: async () => {
      await ops.close();
      await features.release();
      await ctx.close();
      await tracing?.shutdown();
    },
  });
}

main().catch((e: unknown) => {
  process.stderr.write(`grpo-coordinator: ${(e as Error).message}\n`);
  process.exit(e instanceof ConfigError || e instanceof InputError ? 2 : 1);
});
