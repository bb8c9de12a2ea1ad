// npm run bench:es — the ES stage's distributed evaluation on this machine: generation wall time
// with 1, 2 and 4 evaluator processes (apps/trainer's evaluator-main, the container command) at
// lambda = 32 and 16 replicas (512 single-step evaluations a generation), the share of wall time
// the coordinator adds beyond evaluation, and input-candidate evaluations per second.
//
// Evaluation time of a generation = the busiest evaluator's summed task.evaluate time (rows'
// eval_ms); coordinator share = 1 - that / wall (everything else: dispatch, queue hops, Postgres
// writes and reads, tell, the commit), and the coordinator's own working time is shown beside it.
// Generation 0 (evaluators loading the task) is a warm-up and left out.
// Both fitness tasks: single-step (minibatch 256: evaluation is cheap, so the fixed per-generation
// costs show most) and episodes (8 episodes of 3 questions, turn budget 5 per evaluation).
// Options (env): ES_BENCH_PROCS=1,2,4  ES_BENCH_GENERATIONS=4  ES_BENCH_BATCH=256  ES_BENCH_ITEMS=900
//                ES_BENCH_TASKS=single-step,episodes  ES_BENCH_EPISODES=8
import { availableParallelism } from 'node:os';
import { createRedis } from '@fugu/queue';
import { esEvaluations } from '@fugu/db';
import { createEsEnv, startTrainerProcess, type TrainerProcess } from '../support/es-env.ts';
import { createEsRunFromCheckpoint, runCoordinator, type FitnessTaskSpec, type GenerationEvent } from '@fugu/training';

const log = (s: string) => process.stderr.write(`bench:es: ${s}\n`);
const procsList = (process.env.ES_BENCH_PROCS ?? '1,2,4').split(',').map(Number);
const G = Number(process.env.ES_BENCH_GENERATIONS ?? 4);
const batch = Number(process.env.ES_BENCH_BATCH ?? 256);
const episodes = Number(process.env.ES_BENCH_EPISODES ?? 8);
const taskKinds = (process.env.ES_BENCH_TASKS ?? 'single-step,episodes').split(',');
const specOf = (kind: string): FitnessTaskSpec =>
  kind === 'episodes' ? { kind: 'episodes', episodes, questions: 3, turnBudget: 5 } : { kind: 'single-step', batchSize: batch };
const describe = (kind: string): string => (kind === 'episodes' ? `episodes (${episodes} of 3 questions, turn budget 5)` : `single-step (minibatch ${batch})`);
const LAMBDA = 32;
const REPLICAS = 16;
const cores = availableParallelism();

log(`setting up: replay run of ${process.env.ES_BENCH_ITEMS ?? 900} synthetic items and an SFT checkpoint`);
const env = await createEsEnv({ items: Number(process.env.ES_BENCH_ITEMS ?? 900) });
const rows: string[] = [];
try {
  for (const kind of taskKinds) for (const P of procsList) {
    const threads = Math.max(1, Math.floor(cores / P));
    const evaluators: TrainerProcess[] = await Promise.all(
      Array.from({ length: P }, () => startTrainerProcess('evaluator', env.config, { FUGU_ES_THREADS: String(threads), FUGU_ES_EVAL_CONCURRENCY: '32' })),
    );
    const runId = `bench-${kind}-p${P}`;
    await createEsRunFromCheckpoint({
      db: env.ctx.db, home: env.dir, checkpointId: env.checkpointId, runId,
      config: { task: specOf(kind), lambda: LAMBDA, sigma0: 0.5, replicas: REPLICAS, generations: G, seed: 1, deadlineMs: 600_000, attempts: 3 },
    });
    const gens: GenerationEvent[] = [];
    const worker = createRedis(env.config.redisUrl, 'worker');
    const r = await runCoordinator({ db: env.ctx.db, connection: env.ctx.redis!, workerConnection: worker, prefix: env.config.queuePrefix, runId, onGeneration: (g) => gens.push(g) });
    worker.disconnect();
    for (const e of evaluators) await e.term();
    if (r.status !== 'completed') throw new Error(`run ${runId}: ${r.status} ${r.reason ?? ''}`);
    const evals = await esEvaluations(env.ctx.db, runId);
    const measured = gens.filter((g) => g.generation > 0);
    let wall = 0, evalMs = 0, coord = 0;
    const t = { load: 0, dispatch: 0, poll: 0, fanin: 0, commit: 0 };
    for (const g of measured) {
      for (const k of Object.keys(t) as Array<keyof typeof t>) t[k] += g.timings[k] / measured.length;
      const busy = new Map<string, number>();
      for (const e of evals.filter((x) => x.generation === g.generation)) busy.set(e.evaluator ?? '?', (busy.get(e.evaluator ?? '?') ?? 0) + (e.evalMs ?? 0));
      wall += g.cycleMs;
      evalMs += Math.max(...busy.values());
      coord += g.coordinatorMs;
    }
    const n = measured.length;
    const batches = new Set(evals.filter((e) => e.generation > 0).map((e) => `${e.evaluator}/${e.generation}/${e.replica}/${e.evalMs}`)).size;
    log(`P=${P}: ${((n * LAMBDA * REPLICAS) / batches).toFixed(1)} candidates per task.evaluate call on average`);
    const line = `| ${describe(kind)} | ${P} | ${threads} | ${(wall / n / 1000).toFixed(2)} | ${(evalMs / n / 1000).toFixed(2)} | ${((100 * (wall - evalMs)) / wall).toFixed(1)}% | ${((100 * coord) / wall).toFixed(1)}% | ${((n * LAMBDA * REPLICAS) / (wall / 1000)).toFixed(0)} |`;
    log(line);
    log(`P=${P} coordinator ms per generation: ${Object.entries(t).map(([k, v]) => `${k} ${v.toFixed(0)}`).join(', ')}`);
    rows.push(line);
  }
} finally {
  await env.cleanup();
}
process.stdout.write(
  `\nES generation, lambda ${LAMBDA} x ${REPLICAS} replicas = ${LAMBDA * REPLICAS} evaluations, ${cores} cores, mean over generations 1..${G - 1}\n\n` +
    `| task | evaluator processes | ONNX threads each | generation wall s | evaluation s (busiest evaluator) | share beyond evaluation | coordinator working (share of wall) | evaluations/s |\n` +
    `|---|---|---|---|---|---|---|---|\n${rows.join('\n')}\n`,
);
process.exit(0);
