// What the gateway writes behind its answers: the `requests` rows, the `chat_calls` rows of its
// provider calls (JSON answers; the call pipeline hands them over, `writeRow`) and what each API
// key spent. None delays a response: a request row is queued when its response has gone out, a
// call row when its answer came, a spend when the call's cost is known; one statement
// (insertGatewayRecords: all of them, or none) writes everything queued. Statements do not
// overlap: what is queued while one is in flight goes in the next, so a busy gateway makes one
// statement per batch, not three per request, and one `update api_keys` per key and batch (no
// queue of concurrent requests on a hot key's row lock).
//
// Durability: `flush()` resolves once everything queued before it is written; the gateway's
// close waits for it (SIGTERM: after the last response, before Postgres is closed), so a
// graceful stop loses nothing. A process killed -9 loses what was queued or in flight at that
// moment: the rows and spend of the requests answered during the last statement's round trip
// (at concurrency 1 the one request just answered; under load one batch).
import { insertGatewayRecords, type ChatCallRecord, type Db, type GatewayRecords, type NewRequestRow } from '@fugu/db';
import { scrub, type Logger } from '@fugu/telemetry';

export class RecordWriter {
  readonly #db: Db;
  readonly #log: Logger;
  #rows: NewRequestRow[] = [];
  #calls: ChatCallRecord[] = [];
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

  /** Queues a provider call's row. */
  call(r: ChatCallRecord): void {
    this.#calls.push(r);
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
      if (this.#queued()) this.#kick();
    });
  }

  #queued(): boolean {
    return this.#rows.length > 0 || this.#calls.length > 0 || this.#spend.size > 0;
  }

  async #drain(): Promise<void> {
    while (this.#queued()) {
      const batch: Required<GatewayRecords> = { requests: this.#rows, calls: this.#calls, spend: this.#spend };
      this.#rows = [];
      this.#calls = [];
      this.#spend = new Map();
      try {
        await insertGatewayRecords(this.#db, batch).catch(async (e: unknown) => {
          // each part on its own, so that one bad row does not cost the others
          const parts = ([['request rows', { requests: batch.requests }, batch.requests.length], ['call rows', { calls: batch.calls }, batch.calls.length], ['key spend', { spend: batch.spend }, batch.spend.size]] as const).filter(([, , n]) => n > 0);
          if (parts.length === 1) throw e;
          for (const [what, part, n] of parts) await insertGatewayRecords(this.#db, part).catch((pe: unknown) => this.#failed(what, n, pe));
        });
      } catch (e) {
        this.#failed('request rows, call rows and key spend', batch.requests.length + batch.calls.length + batch.spend.size, e);
      } finally {
        for (const [id, cost] of batch.spend) {
          const left = (this.#unwritten.get(id) ?? 0n) - cost;
          if (left === 0n) this.#unwritten.delete(id);
          else this.#unwritten.set(id, left);
        }
      }
    }
  }
}
