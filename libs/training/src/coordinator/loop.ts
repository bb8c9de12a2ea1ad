// The staged loop: the generic part of a distributed optimiser's coordinator. Postgres is the
// truth, Redis only carries work. Per iteration:
//
//   load (the committed state asks iteration i) --fan-out--> ONE BullMQ flow: children = the
//   iteration's jobs on the driver's eval queue, parent = a fan-in job on its fan-in queue that
//   this loop consumes --> wait until every job has its result row (poll a count; the fan-in job
//   wakes the loop sooner) --> fan-in (the driver computes the update from all results) -->
//   commit (the driver writes the iteration in ONE transaction).
//
// Missing results are dispatched again as a new flow (a new dispatch id) when the fan-in of the
// latest dispatch arrives without them (children that failed for good are dropped from their
// parent's dependencies, ignoreDependencyOnFailure, so a fan-in never hangs), and when the
// iteration's deadline passes after the last dispatch. A result is keyed by its job key: the
// driver's store keeps the first one and skips duplicates.
//
// Exact resume after kill -9 anywhere: every iteration (interrupted or not) starts from
// `driver.load()`, which reads the committed state back from Postgres; what is recorded is kept
// and only the missing jobs are dispatched. So a resumed run computes exactly what an
// uninterrupted one does, provided the driver's jobs are deterministic in (state, key).
//
// The driver (ES: es-driver.ts; GRPO: libs/ultra-training/src/grpo/driver.ts) says what an iteration's jobs are, where results are
// stored, what the fan-in computes and what the commit writes. Contract: README.md in this folder.
import { randomBytes } from 'node:crypto';
import { FlowProducer, Worker, type FlowJob, type Job } from 'bullmq';
import { decodeWireError, type WireError } from '@fugu/core';
import { closeWorkers, type RedisClient } from '@fugu/queue';
import { bullTelemetry } from '@fugu/telemetry';

/** Where the loop's own time went in an iteration (ms; waiting for the jobs excluded). */
export type LoopTimings = { load: number; dispatch: number; poll: number; fanin: number; commit: number };

/** The iteration a driver's state asks for: its index and every job key, in dispatch order. */
export type LoopIteration = { readonly index: number; readonly keys: readonly string[] };

/** One BullMQ job the driver makes: its name, payload and id (ids must contain the dispatch id). */
export type LoopJob = { name: string; data: unknown; jobId: string };

export type CrashPoint = 'fanout' | 'fanin' | 'commit';

export interface StagedDriver<It extends LoopIteration, R, C> {
  /** the queue the children go to (the evaluators' workers consume it) */
  readonly evalQueue: string;
  /** the queue of the fan-in parents (this loop consumes it) */
  readonly faninQueue: string;
  /** BullMQ attempts per child before it is dropped from its parent (and dispatched again later) */
  readonly attempts: number;
  /** ms after the last dispatch when the iteration's missing jobs are dispatched again */
  readonly deadlineMs: number;
  /** the iteration the committed state asks for, read from Postgres; null when the run is complete */
  load(): Promise<It | null>;
  /** the children for `keys` (a subset of it.keys, in that order) and their fan-in parent, under `dispatch` */
  flow(it: It, keys: readonly string[], dispatch: string): { parent: LoopJob; children: LoopJob[] };
  /** the (iteration, dispatch) a fan-in payload closes, or null when it is not this run's */
  fannedIn(data: unknown): { index: number; dispatch: string } | null;
  /** how many of the iteration's jobs have a result (cheap: polled while waiting) */
  countResults(it: It): Promise<number>;
  /** the results recorded so far, by job key (keys outside it.keys are ignored) */
  results(it: It): Promise<Map<string, R>>;
  /** every job has its result: compute the update (the optimiser's tell); writes nothing */
  fanIn(it: It, results: ReadonlyMap<string, R>, info: { dispatches: number; wallMs: number }): Promise<C> | C;
  /** write the iteration (the new state and its records) in ONE transaction */
  commit(it: It, update: C): Promise<void>;
  /** the run is over: completed (load returned null) or failed (jobs still missing after maxDispatches) */
  finish(status: 'completed' | 'failed', reason?: string): Promise<void>;
}

export type LoopDispatchEvent = {
  index: number;
  dispatch: string;
  jobs: number;
  /** the largest child payload (JSON bytes) */
  bytesPerJob: number;
  reason: 'start' | 'failed-children' | 'deadline';
  /** the failures of the children dropped from the previous dispatch (as the workers threw them) */
  failures: WireError[];
};

export type LoopIterationEvent<C> = {
  index: number;
  update: C;
  dispatches: number;
  timings: LoopTimings;
  /** sum of `timings` */
  coordinatorMs: number;
  /** ms from the end of the previous iteration's commit (or the loop's start) to the end of this one's */
  cycleMs: number;
};

export type StagedLoopOptions<C> = {
  /** BullMQ connections: `connection` for the producer, `workerConnection` for the fan-in worker (maxRetriesPerRequest null) */
  connection: RedisClient;
  workerConnection: RedisClient;
  prefix: string;
  /** how often the result count is polled (the fan-in job wakes the loop sooner) */
  pollMs?: number;
  /** dispatches of one iteration before the run fails */
  maxDispatches?: number;
  signal?: AbortSignal;
  onIteration?: (e: LoopIterationEvent<C>) => void;
  onDispatch?: (e: LoopDispatchEvent) => void;
  onProgress?: (e: { index: number; done: number; total: number }) => void;
  log?: (msg: string, extra?: Record<string, unknown>) => void;
  /** test hook: the process kills itself with SIGKILL at this point of this iteration */
  crashAt?: { point: CrashPoint; iteration: number };
  /** words for the failure reason and logs (default iteration / jobs) */
  names?: { iteration: string; jobs: string };
};

export type StagedLoopResult = { status: 'completed' | 'failed' | 'interrupted'; index: number; reason?: string };

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });

/** Bytes of a job payload (JSON), as BullMQ stores it. */
export const jobBytes = (data: unknown): number => Buffer.byteLength(JSON.stringify(data));

/** Runs iterations until the driver's state is complete, the run fails, or `signal` aborts. */
export async function runStagedLoop<It extends LoopIteration, R, C>(driver: StagedDriver<It, R, C>, opts: StagedLoopOptions<C>): Promise<StagedLoopResult> {
  const log = opts.log ?? (() => {});
  const pollMs = opts.pollMs ?? 500;
  const maxDispatches = opts.maxDispatches ?? 20;
  const names = opts.names ?? { iteration: 'iteration', jobs: 'jobs' };

  const flow = new FlowProducer({ connection: opts.connection, prefix: opts.prefix, ...bullTelemetry() });
  // fan-in jobs wake the wait of the iteration they belong to
  const wakers = new Set<(closes: { index: number; dispatch: string }, failures: WireError[]) => void>();
  const fanin = new Worker(
    driver.faninQueue,
    async (job: Job) => {
      const closes = driver.fannedIn(job.data);
      // the children that failed for good: their failedReason is the worker's encoded WireError
      const ignored = Object.values(((await job.getIgnoredChildrenFailures().catch(() => ({}))) ?? {}) as Record<string, string>);
      const failures = ignored.map((r) => decodeWireError(r));
      if (closes) for (const w of wakers) w(closes, failures);
      return { failedChildren: failures.length };
    },
    { connection: opts.workerConnection, prefix: opts.prefix, concurrency: 4, removeOnComplete: { count: 1000 }, removeOnFail: { count: 1000 }, ...bullTelemetry() },
  );
  fanin.on('error', (e) => log('fan-in worker error', { err: e.message }));

  const crash = (point: CrashPoint, index: number): void => {
    if (opts.crashAt && opts.crashAt.point === point && opts.crashAt.iteration === index) {
      log(`test hook: kill -9 at ${point} of ${names.iteration} ${index}`);
      process.kill(process.pid, 'SIGKILL');
    }
  };

  let cycleStart = performance.now();
  try {
    for (;;) {
      if (opts.signal?.aborted) return { status: 'interrupted', index: (await driver.load())?.index ?? -1 };
      const tl = performance.now();
      const it = await driver.load();
      if (!it) {
        await driver.finish('completed');
        return { status: 'completed', index: -1 };
      }
      const started = Date.now();
      const timings: LoopTimings = { load: performance.now() - tl, dispatch: 0, poll: 0, fanin: 0, commit: 0 };
      const total = it.keys.length;

      // fan-out, and re-dispatch what is missing until every job has its result
      let dispatches = 0;
      let latest = '';
      let lastDispatchAt = 0;
      let latestFannedIn = false;
      let failures: WireError[] = [];
      let wake: (() => void) | undefined;
      const waker = (closes: { index: number; dispatch: string }, f: WireError[]): void => {
        if (closes.index !== it.index) return;
        if (closes.dispatch === latest) latestFannedIn = true;
        failures.push(...f);
        wake?.();
      };
      wakers.add(waker);
      let results = new Map<string, R>();
      try {
        for (let first = true; ; first = false) {
          // while waiting only count (cheap); read the results when all are there or to re-dispatch
          const tr = performance.now();
          const done = first ? -1 : await driver.countResults(it);
          const deadlinePassed = dispatches > 0 && Date.now() - lastDispatchAt > driver.deadlineMs;
          const redispatch = dispatches === 0 || latestFannedIn || deadlinePassed;
          if (done >= total || done < 0 || redispatch) results = await driver.results(it);
          timings.poll += performance.now() - tr;
          const have = it.keys.filter((k) => results.has(k)).length;
          opts.onProgress?.({ index: it.index, done: done < 0 ? have : Math.min(done, total), total });
          if (have >= total) break;
          if (opts.signal?.aborted) return { status: 'interrupted', index: it.index };
          if (redispatch) {
            if (dispatches >= maxDispatches) {
              const reason = `${names.iteration} ${it.index}: ${total - have} of ${total} ${names.jobs} still missing after ${dispatches} dispatches (see the evaluators' logs)`;
              await driver.finish('failed', reason);
              return { status: 'failed', index: it.index, reason };
            }
            const missing = it.keys.filter((k) => !results.has(k));
            const reason = dispatches === 0 ? 'start' : latestFannedIn ? 'failed-children' : 'deadline';
            latest = `d${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
            latestFannedIn = false;
            const td = performance.now();
            const bytes = await dispatch(flow, driver, it, missing, latest);
            timings.dispatch += performance.now() - td;
            dispatches++;
            lastDispatchAt = Date.now();
            opts.onDispatch?.({ index: it.index, dispatch: latest, jobs: missing.length, bytesPerJob: bytes, reason, failures });
            if (reason !== 'start') log(`re-dispatched missing ${names.jobs}`, { [names.iteration]: it.index, jobs: missing.length, reason, failures: failures.slice(0, 3).map((f) => `${f.code}: ${f.message}`) });
            failures = [];
            crash('fanout', it.index);
            continue;
          }
          await new Promise<void>((resolve) => {
            wake = resolve;
            void sleep(pollMs, opts.signal).then(resolve);
          });
          wake = undefined;
        }
      } finally {
        wakers.delete(waker);
      }

      crash('fanin', it.index);
      const tf = performance.now();
      const update = await driver.fanIn(it, results, { dispatches, wallMs: Date.now() - started });
      const tc = performance.now();
      timings.fanin = tc - tf;
      await driver.commit(it, update);
      const end = performance.now();
      timings.commit = end - tc;
      const coordinatorMs = timings.load + timings.dispatch + timings.poll + timings.fanin + timings.commit;
      opts.onIteration?.({ index: it.index, update, dispatches, timings, coordinatorMs, cycleMs: end - cycleStart });
      cycleStart = end;
      crash('commit', it.index);
    }
  } finally {
    // bounded: after a Redis Cluster failover a close can wait forever on the dead master
    await closeWorkers([fanin, flow], Date.now() + 10_000);
  }
}

async function dispatch<It extends LoopIteration>(flow: FlowProducer, driver: StagedDriver<It, unknown, unknown>, it: It, keys: readonly string[], id: string): Promise<number> {
  const { parent, children } = driver.flow(it, keys, id);
  let bytes = 0;
  const kids: FlowJob[] = children.map((c) => {
    bytes = Math.max(bytes, jobBytes(c.data));
    return {
      name: c.name,
      queueName: driver.evalQueue,
      data: c.data,
      opts: {
        jobId: c.jobId,
        attempts: driver.attempts,
        backoff: { type: 'exponential', delay: 1_000, jitter: 0.5 },
        // after the last attempt the parent goes on without this child (the loop re-dispatches)
        ignoreDependencyOnFailure: true,
        removeOnComplete: true,
        removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
      },
    };
  });
  await flow.add({
    name: parent.name,
    queueName: driver.faninQueue,
    data: parent.data,
    opts: { jobId: parent.jobId, removeOnComplete: { count: 1000 }, removeOnFail: { count: 1000 } },
    children: kids,
  });
  return bytes;
}
