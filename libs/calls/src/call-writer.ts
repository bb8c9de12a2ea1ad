// Batches call rows into one Postgres statement per flush. A job completes only after its row is
// committed (its promise resolves then), so a crash loses nothing: an unflushed job is re-run
// and the unique key makes the second write a no-op.
import { recordCalls, type CallRecord, type Db, type RunProgress } from '@fugu/db';

type Pending = { record: CallRecord; resolve: () => void; reject: (e: unknown) => void };

export class CallWriter {
  readonly #db: Db;
  readonly #maxBatch: number;
  readonly #onProgress: (runs: RunProgress[]) => Promise<void> | void;
  #queue: Pending[] = [];
  #flushing: Promise<void> | undefined;
  #scheduled = false;

  constructor(db: Db, opts: { maxBatch: number; onProgress: (runs: RunProgress[]) => Promise<void> | void }) {
    this.#db = db;
    this.#maxBatch = opts.maxBatch;
    this.#onProgress = opts.onProgress;
  }

  write(record: CallRecord): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ record, resolve, reject });
      this.#schedule();
    });
  }

  get pending(): number {
    return this.#queue.length;
  }

  #schedule(): void {
    if (this.#scheduled || this.#flushing) return;
    this.#scheduled = true;
    // let the jobs finishing in this turn of the event loop join the batch
    setImmediate(() => {
      this.#scheduled = false;
      this.#flushing = this.#drain().finally(() => {
        this.#flushing = undefined;
        if (this.#queue.length > 0) this.#schedule();
      });
    });
  }

  async #drain(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue.splice(0, this.#maxBatch);
      try {
        const { runs } = await this.#writeWithRetry(batch.map((p) => p.record));
        for (const p of batch) p.resolve();
        await this.#onProgress(runs);
      } catch (e) {
        for (const p of batch) p.reject(e);
      }
    }
  }

  async #writeWithRetry(records: CallRecord[]): Promise<{ runs: RunProgress[] }> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await recordCalls(this.#db, records);
      } catch (e) {
        // connection trouble (Postgres restarting) is retried briefly; a constraint error is not
        const code = (e as { code?: string }).code ?? '';
        const transient = /^(08|57P|53)/.test(code) || /ECONNREFUSED|ECONNRESET|terminat|timeout/i.test((e as Error).message);
        if (!transient || attempt >= 5) throw e;
        await new Promise((r) => setTimeout(r, 200 * 2 ** attempt));
      }
    }
  }

  /** Waits until everything written so far is committed (or failed). */
  async flush(): Promise<void> {
    while (this.#queue.length > 0 || this.#flushing || this.#scheduled) {
      if (this.#flushing) await this.#flushing.catch(() => {});
      else await new Promise((r) => setImmediate(r));
    }
  }
}
