// The micro-batcher: requests wait until B (maxBatch) are queued or the oldest has waited T
// (maxWaitMs), then go as one batch to a free runner (a worker thread). With every runner busy,
// requests queue up and the next free runner takes up to B of them at once. A lone request after
// a batch of one (requests arriving one at a time: nobody to wait for) goes at once; once a batch
// of several has formed, lone requests wait T again.

export type BatchRunner<I, O> = (items: I[], runner: number) => Promise<Array<{ ok: true; value: O } | { ok: false; error: Error }>>;

export type MicroBatcherOptions<I, O> = {
  maxBatch: number;
  maxWaitMs: number;
  /** runners that can each run one batch at a time (threads) */
  runners: number;
  run: BatchRunner<I, O>;
  /** after each batch: its size and the time each item waited before the batch left */
  onBatch?: (info: { size: number; runner: number; waitMs: number[] }) => void;
};

type Pending<I, O> = { item: I; at: number; resolve: (o: O) => void; reject: (e: Error) => void };

export class MicroBatcher<I, O> {
  readonly maxBatch: number;
  readonly maxWaitMs: number;
  private readonly opts: MicroBatcherOptions<I, O>;
  private readonly queue: Array<Pending<I, O>> = [];
  private readonly busy: boolean[];
  private readonly disabled: boolean[];
  private timer: NodeJS.Timeout | undefined;
  private inFlight = 0;
  /** the size of the last batch dispatched (0: none yet) */
  private lastBatch = 0;
  private idleWaiters: Array<() => void> = [];

  constructor(opts: MicroBatcherOptions<I, O>) {
    for (const k of ['maxBatch', 'runners'] as const) {
      if (!Number.isInteger(opts[k]) || opts[k] < 1) throw new RangeError(`micro-batcher: ${k} must be a positive integer, got ${opts[k]}`);
    }
    if (!Number.isFinite(opts.maxWaitMs) || opts.maxWaitMs < 0) throw new RangeError(`micro-batcher: maxWaitMs must be >= 0, got ${opts.maxWaitMs}`);
    this.opts = opts;
    this.maxBatch = opts.maxBatch;
    this.maxWaitMs = opts.maxWaitMs;
    this.busy = new Array<boolean>(opts.runners).fill(false);
    this.disabled = new Array<boolean>(opts.runners).fill(false);
  }

  /** requests waiting for a batch */
  get queued(): number {
    return this.queue.length;
  }

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, at: performance.now(), resolve, reject });
      this.pump();
    });
  }

  /** take a runner out of service (a dead thread) or back in */
  setRunnerEnabled(runner: number, enabled: boolean): void {
    this.disabled[runner] = !enabled;
    if (enabled) this.pump();
  }

  /** resolves when nothing is queued or running */
  async idle(): Promise<void> {
    if (this.queue.length === 0 && this.inFlight === 0) return;
    await new Promise<void>((r) => this.idleWaiters.push(r));
  }

  /** rejects every queued request (at close) */
  rejectQueued(error: Error): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const p of this.queue.splice(0)) p.reject(error);
    this.checkIdle();
  }

  private freeRunner(): number {
    for (let r = 0; r < this.busy.length; r++) if (!this.busy[r] && !this.disabled[r]) return r;
    return -1;
  }

  private pump(): void {
    while (this.queue.length > 0) {
      const runner = this.freeRunner();
      if (runner < 0) return; // a runner finishing calls pump again
      const oldest = this.queue[0]!.at;
      const due = this.queue.length >= this.maxBatch || performance.now() - oldest >= this.maxWaitMs || (this.queue.length === 1 && this.lastBatch === 1);
      if (!due) {
        if (!this.timer) {
          const wait = Math.max(0, this.maxWaitMs - (performance.now() - oldest));
          this.timer = setTimeout(() => {
            this.timer = undefined;
            this.pump();
          }, wait);
        }
        return;
      }
      clearTimeout(this.timer);
      this.timer = undefined;
      this.dispatch(runner, this.queue.splice(0, this.maxBatch));
    }
  }

  private dispatch(runner: number, batch: Array<Pending<I, O>>): void {
    this.busy[runner] = true;
    this.inFlight++;
    this.lastBatch = batch.length;
    const now = performance.now();
    this.opts.onBatch?.({ size: batch.length, runner, waitMs: batch.map((p) => now - p.at) });
    void this.opts
      .run(
        batch.map((p) => p.item),
        runner,
      )
      .then(
        (results) => {
          batch.forEach((p, i) => {
            const r = results[i];
            if (!r) p.reject(new Error('micro-batcher: the runner returned fewer results than items'));
            else if (r.ok) p.resolve(r.value);
            else p.reject(r.error);
          });
        },
        (e: unknown) => {
          for (const p of batch) p.reject(e instanceof Error ? e : new Error(String(e)));
        },
      )
      .finally(() => {
        this.busy[runner] = false;
        this.inFlight--;
        this.pump();
        this.checkIdle();
      });
  }

  private checkIdle(): void {
    if (this.queue.length === 0 && this.inFlight === 0) for (const r of this.idleWaiters.splice(0)) r();
  }
}
