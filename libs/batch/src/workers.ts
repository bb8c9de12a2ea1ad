// The provider workers a batch's lines need (issue 28): a batch's chat-call jobs wait on their
// providers' queues (`{provider-call.<provider>}`), and with no provider worker connected to one
// (a bare `fugu gateway`, a worker pool scaled to zero) they would wait there with nothing said.
// The driver checks the queues its lines wait on (BullMQ's worker count of every shard; `fugu
// eval --local-workers auto` checks the same), says so on the batch (`BatchWorkerNote`, the batch
// object's `fugu` extension), and after `waitMs` with none connected starts provider-worker
// processes of its own for those providers (`LocalWorkerSupply`: the same command as the
// provider-worker container, started by the gateway's `start`), at most `count` processes per
// set of providers, stopped when no batch has needed them for `idleMs` and when the driver stops.
import type { BatchWorkerNote } from '@fugu/db';
import { scrub, type Logger } from '@fugu/telemetry';

/** Provider-worker processes started by the gateway (`@fugu/local-services` startLocalWorkers). */
export type LocalProviderWorkers = { count: number; logDir: string; stop(): Promise<void> };

export type BatchWorkersOptions = {
  /** provider-worker processes to start for a batch whose lines find no worker (0: none; the batch says its lines wait) */
  localWorkers: number;
  /** how long lines wait with no worker connected before the gateway starts its own (ms) */
  waitMs: number;
  /** local workers that no batch has needed for this long are stopped (ms) */
  idleMs: number;
  /** how often a batch with lines on the queues checks that their queues have a worker (ms, default 2,000) */
  checkMs?: number;
  /** starts `count` provider-worker processes consuming these providers' queues */
  start?: (o: { count: number; providers: string[] }) => Promise<LocalProviderWorkers>;
};

/** The command that starts a provider worker for these providers, as a user runs it. */
export const workerCommand = (providers: readonly string[]): string => `FUGU_WORKER_PROVIDERS=${providers.join(',')} node apps/provider-worker/src/main.ts`;

/**
 * What a batch says about its workers. `queues`: the queues its lines wait on that no worker
 * consumes (their providers `providers`), since `since`; `local`: the gateway's own workers that
 * run its lines (since it started them); `startError`: why they could not be started.
 */
export function workerNote(o: {
  queues: readonly string[];
  providers: readonly string[];
  since: Date | null;
  local: BatchWorkerNote['local'];
  localWorkers: number;
  waitMs: number;
  startError?: string;
}): BatchWorkerNote {
  const waiting = o.queues.length > 0;
  const queues = o.queues.join(', ');
  const plural = o.queues.length > 1 ? 's' : '';
  const ownText = (l: NonNullable<BatchWorkerNote['local']>) =>
    `this gateway runs the batch's lines with ${l.workers} provider worker process${l.workers > 1 ? 'es' : ''} of its own for ${l.providers.join(', ')} ` +
    `(started ${l.startedAt}, as no provider worker was connected; stopped when idle; FUGU_BATCH_LOCAL_WORKERS=0 turns this off)`;
  let message: string;
  if (!waiting) {
    message = o.local ? ownText(o.local) : 'a provider worker consumes every queue the batch\'s lines are on';
  } else {
    const what = `lines wait on queue${plural} ${queues}, which no provider worker consumes (none connected since ${o.since?.toISOString() ?? 'now'})`;
    const start = `start one: ${workerCommand(o.providers)} (or scale up the provider-worker deployment)`;
    if (o.startError) message = `${what}; this gateway could not start provider workers of its own (${o.startError}); ${start}`;
    else if (o.local) message = `${what}; ${ownText(o.local)}; they are connecting`;
    else if (o.localWorkers > 0) message = `${what}; this gateway starts ${o.localWorkers} provider worker process${o.localWorkers > 1 ? 'es' : ''} of its own for them after ${Math.round(o.waitMs / 1000)} s (FUGU_BATCH_LOCAL_WORKERS, FUGU_BATCH_WORKER_WAIT_MS), or ${start}`;
    else message = `${what}: ${start}, or let the gateway start its own (FUGU_BATCH_LOCAL_WORKERS=1)`;
  }
  return { waiting, queues: [...o.queues], since: waiting ? (o.since?.toISOString() ?? null) : null, local: o.local, message };
}

type WorkerSet = { providers: Set<string>; startedAt: Date; lastNeeded: number; run: Promise<LocalProviderWorkers> };

/**
 * The provider-worker processes a driver started (one set per group of providers that had no
 * worker): started once per provider (a second batch on the same provider reuses them), stopped
 * once no batch has needed them for `idleMs`, and all of them when the driver stops.
 */
export class LocalWorkerSupply {
  readonly #o: BatchWorkersOptions;
  readonly #log: Logger;
  readonly #sets: WorkerSet[] = [];
  #timer: NodeJS.Timeout | undefined;

  constructor(o: BatchWorkersOptions, log: Logger) {
    this.#o = o;
    this.#log = log;
  }

  get enabled(): boolean {
    return this.#o.localWorkers > 0 && this.#o.start !== undefined;
  }

  /** The running sets covering any of these providers, as the batch note says them (null: none). */
  local(providers: Iterable<string>): BatchWorkerNote['local'] {
    const want = new Set(providers);
    const sets = this.#sets.filter((s) => [...s.providers].some((p) => want.has(p)));
    if (sets.length === 0) return null;
    return {
      workers: sets.length * this.#o.localWorkers,
      providers: [...new Set(sets.flatMap((s) => [...s.providers]))].sort(),
      startedAt: new Date(Math.min(...sets.map((s) => s.startedAt.getTime()))).toISOString(),
    };
  }

  /** These providers are needed now (their workers are not idle). */
  touch(providers: Iterable<string>): void {
    const now = Date.now();
    for (const p of providers) for (const s of this.#sets) if (s.providers.has(p)) s.lastNeeded = now;
  }

  /**
   * Starts workers for those of these providers that have none of this supply's yet; resolves once
   * they are ready (they then consume the queues), rejects when they could not start.
   */
  async ensure(providers: readonly string[], why: string): Promise<void> {
    if (!this.enabled) return;
    const missing = providers.filter((p) => !this.#sets.some((s) => s.providers.has(p))).sort();
    if (missing.length > 0) {
      const count = this.#o.localWorkers;
      this.#log.warn(
        { providers: missing, count },
        `${why}: starting ${count} provider worker process${count > 1 ? 'es' : ''} of this gateway's own for ${missing.join(', ')} (FUGU_BATCH_LOCAL_WORKERS=0 turns this off; or start one: ${workerCommand(missing)})`,
      );
      const set: WorkerSet = { providers: new Set(missing), startedAt: new Date(), lastNeeded: Date.now(), run: this.#o.start!({ count, providers: missing }) };
      this.#sets.push(set);
      set.run.then(
        (w) => this.#log.warn({ providers: missing, count: w.count, logs: w.logDir }, `started ${w.count} local provider worker(s) for ${missing.join(', ')}; logs in ${w.logDir}`),
        (e: unknown) => {
          this.#sets.splice(this.#sets.indexOf(set), 1);
          this.#log.error({ providers: missing, err: scrub((e as Error).message) }, 'could not start local provider workers');
        },
      );
      this.#timer ??= setInterval(() => void this.stopIdle(), Math.max(250, Math.min(this.#o.idleMs / 4, 5_000))).unref();
    }
    await Promise.all(this.#sets.filter((s) => providers.some((p) => s.providers.has(p))).map((s) => s.run));
  }

  /** Stops the sets no batch has needed for idleMs. */
  async stopIdle(now = Date.now()): Promise<void> {
    const idle = this.#sets.filter((s) => now - s.lastNeeded >= this.#o.idleMs);
    await Promise.all(idle.map((s) => this.#stopSet(s, `no batch has needed them for ${Math.round(this.#o.idleMs / 1000)} s`)));
  }

  /** Stops every set (the driver stops). */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await Promise.all([...this.#sets].map((s) => this.#stopSet(s, 'the gateway stops')));
  }

  async #stopSet(s: WorkerSet, why: string): Promise<void> {
    const i = this.#sets.indexOf(s);
    if (i < 0) return;
    this.#sets.splice(i, 1);
    if (this.#sets.length === 0 && this.#timer) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
    const w = await s.run.catch(() => undefined);
    if (!w) return;
    this.#log.info({ providers: [...s.providers] }, `stopping the local provider workers for ${[...s.providers].join(', ')} (${why})`);
    await w.stop();
  }
}
