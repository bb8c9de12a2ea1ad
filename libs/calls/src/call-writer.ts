// Batches call rows into one Postgres statement per flush. A job completes only after its row is
// committed (its promise resolves then), so a crash loses nothing: an unflushed job is re-run
// and the unique key makes the second write a no-op. A statement that fails for one row's sake
// (a constraint) is written again a row at a time, so only that row's job fails.
import { recordCalls, type CallRecord, type Db, type RunProgress } from '@fugu/db';
import { WriteBatcher } from './batching.ts';

export class CallWriter {
  readonly #db: Db;
  readonly #batcher: WriteBatcher<CallRecord>;

  constructor(db: Db, opts: { maxBatch: number; lingerMs?: number; onProgress: (runs: RunProgress[]) => Promise<void> | void }) {
    this.#db = db;
    this.#batcher = new WriteBatcher({
      maxBatch: opts.maxBatch,
      lingerMs: opts.lingerMs,
      write: async (records) => {
        const { runs } = await retryTransient(() => recordCalls(this.#db, records));
        return () => opts.onProgress(runs);
      },
      splitOn: (e) => !isTransientDbError(e),
    });
  }

  write(record: CallRecord): Promise<void> {
    return this.#batcher.write(record);
  }

  get pending(): number {
    return this.#batcher.pending;
  }

  /** Waits until everything written so far is committed (or failed). */
  flush(): Promise<void> {
    return this.#batcher.flush();
  }
}

/** Connection trouble (Postgres restarting, away, out of resources): not the statement's own fault. */
export function isTransientDbError(e: unknown): boolean {
  const code = (e as { code?: string }).code ?? '';
  return /^(08|57P|53)/.test(code) || /ECONNREFUSED|ECONNRESET|terminat|timeout/i.test((e as Error).message);
}

/** Runs a write, retrying connection trouble (Postgres restarting) briefly; a constraint error is not retried. */
export async function retryTransient<T>(f: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await f();
    } catch (e) {
      if (!isTransientDbError(e) || attempt >= 5) throw e;
      await new Promise((r) => setTimeout(r, 200 * 2 ** attempt));
    }
  }
}
