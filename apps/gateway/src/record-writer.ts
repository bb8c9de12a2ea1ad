// What the gateway writes behind its answers: the `requests` rows and what each API key spent.
// Neither delays a response: a row is queued when its response has gone out, a spend when its
// call's cost is known, and one statement (insertRequestsAndSpend: rows and spend together, both
// or neither) writes everything queued. Statements do not overlap: what is queued while one is
// in flight goes in the next, so a busy gateway makes one statement per batch, not two per
// request, and one `update api_keys` per key and batch (no row-lock queue of concurrent
// requests on a hot key).
//
// Durability: `flush()` resolves once everything queued before it is written; the gateway's
// close waits for it (SIGTERM: after the last response, before Postgres is closed), so a
// graceful stop loses nothing. A process killed -9 loses what was queued or in flight at that
// moment: the rows and spend of the requests answered during the last statement's round trip
// (at concurrency 1 the one request just answered; under load one batch).
import { insertRequestsAndSpend, type Db, type NewRequestRow } from '@fugu/db';
import { scrub, type Logger } from '@fugu/telemetry';

export class RecordWriter {
  readonly #db: Db;
  readonly #log: Logger;
  #rows: NewRequestRow[] = [];
  #spend = new Map<string, bigint>();
  /** per key: spend queued or being written, not yet in its api_keys row */
  readonly #unwritten = new Map<string, bigint>();
  #writing: Promise<void> | undefined;

  constructor(db: Db, log: Logger) {
    this.#db = db;
    this.#log = log;
  }

  /** Queues a request's row. */
  row(r: NewRequestRow): void {
    this.#rows.push(r);
    this.#kick();
  }

  /** Queues what a key spent (picodollars). */
  spend(keyId: string, cost: bigint): void {
    if (cost === 0n) return;
    this.#spend.set(keyId, (this.#spend.get(keyId) ?? 0n) + cost);
    this.#unwritten.set(keyId, (this.#unwritten.get(keyId) ?? 0n) + cost);
    this.#kick();
  }

  /** A key's spend that this process has queued or is writing (what its api_keys row does not show yet). */
  unwritten(keyId: string): bigint {
    return this.#unwritten.get(keyId) ?? 0n;
  }

  /** Resolves once everything queued so far is written (or its failure logged). */
  async flush(): Promise<void> {
    while (this.#writing) await this.#writing;
  }

  #failed(what: string, n: number, e: unknown): void {
    this.#log.error({ n, err: scrub((e as Error).message) }, `could not write ${what}`);
  }

  #kick(): void {
    if (this.#writing) return;
    this.#writing = this.#drain().finally(() => {
      this.#writing = undefined;
      if (this.#rows.length > 0 || this.#spend.size > 0) this.#kick();
    });
  }

  async #drain(): Promise<void> {
    while (this.#rows.length > 0 || this.#spend.size > 0) {
      const rows = this.#rows;
      const spend = this.#spend;
      this.#rows = [];
      this.#spend = new Map();
      try {
        await insertRequestsAndSpend(this.#db, rows, spend).catch(async (e: unknown) => {
          // each part on its own, so that a bad row does not cost the spend, nor the other way round
          if (rows.length === 0 || spend.size === 0) throw e;
          await insertRequestsAndSpend(this.#db, [], spend).catch((se: unknown) => this.#failed('key spend', spend.size, se));
          await insertRequestsAndSpend(this.#db, rows, new Map()).catch((re: unknown) => this.#failed('request rows', rows.length, re));
        });
      } catch (e) {
        this.#failed(rows.length === 0 ? 'key spend' : 'request rows', rows.length || spend.size, e);
      } finally {
        for (const [id, cost] of spend) {
          const left = (this.#unwritten.get(id) ?? 0n) - cost;
          if (left === 0n) this.#unwritten.delete(id);
          else this.#unwritten.set(id, left);
        }
      }
    }
  }
}
