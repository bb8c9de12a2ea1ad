// What the gateway writes behind its answers: the `requests` rows, the `chat_calls` rows of its
// provider calls (JSON answers; the call pipeline hands them over, `writeRow`) and, through the
// request rows, what each API key spent (a key's spend grows by the costs of the rows inserted:
// insertGatewayRecords). No answer waits for Postgres: one statement (all of it, or none) writes
// everything queued; statements do not overlap, and what is queued while one is in flight goes
// in the next, so a busy gateway makes one statement per batch, not three per request. A statement
// waits `lingerMs` (gateway.recordLingerMs, 5 ms) once something is queued, so that a quiet
// gateway's request writes its call rows and its own row in one commit, not one each.
//
// Durability: the journal. With Redis, every record is first appended to a Redis stream (one
// XADD: `<prefix>:gateway:records:<database>`), and a request's row is appended before its answer's last
// byte: `seal` is awaited before a JSON body is sent and before a stream's final chunks. The
// entries of a batch are deleted once its statement has committed. A gateway killed -9 leaves
// its unwritten records in the stream, and `sweep` (every gateway runs it at start and then
// every `graceMs / 3`) writes the entries older than `graceMs` and deletes them. Writing a record
// twice is harmless (a row or call already there is skipped, and spend comes from inserted rows
// only), so a sweep may overlap a live writer, and several gateways may sweep at once. A batch
// whose statement fails is logged and left in the journal for the sweeps. Records survive a
// gateway crash as long as Redis keeps them (its persistence settings); without Redis (or while
// it fails) a record is written behind the answer only, and a crash loses the last batch.
import type { RedisClient } from '@fugu/queue';
import { insertGatewayRecords, newRequestRowId, type ChatCallRecord, type Db, type NewRequestRow } from '@fugu/db';
import { scrub, type Logger } from '@fugu/telemetry';

export type RecordJournal = {
  redis: RedisClient;
  /** the stream's key */
  key: string;
  /** entries older than this are another (dead) writer's: a sweep writes them (default 30 s) */
  graceMs?: number;
};

type Entry = { rows?: NewRequestRow[]; calls?: ChatCallRecord[] };
type Queued<T> = { record: T; entry: Promise<string | undefined> | undefined };

const SWEEP_BATCH = 500;

/**
 * The journal's key: the deployment's queue prefix and its database's name (gateways of one
 * deployment share it; a test database's gateways never sweep another's records).
 */
export function journalKey(queuePrefix: string, databaseUrl: string): string {
  const name = databaseNameOf(databaseUrl);
  return `${queuePrefix}:gateway:records${name ? `:${name}` : ''}`;
}

/** A Postgres URL's database name ('' when it is not a URL). */
export function databaseNameOf(databaseUrl: string): string {
  try {
    return decodeURIComponent(new URL(databaseUrl).pathname.replace(/^\//, ''));
  } catch {
    return '';
  }
}

export class RecordWriter {
  readonly #db: Db;
  readonly #log: Logger;
  readonly #journal: RecordJournal | undefined;
  readonly #graceMs: number;
  #rows: Queued<NewRequestRow>[] = [];
  #calls: Queued<ChatCallRecord>[] = [];
  /** per key: spend charged by this process whose request row is not written yet */
  readonly #unwritten = new Map<string, bigint>();
  #writing: Promise<void> | undefined;
  #journalFailing = false;
  #sweeping: Promise<number> | undefined;
  #timer: NodeJS.Timeout | undefined;

  readonly #lingerMs: number;

  /** `lingerMs`: how long a statement waits for more records once one is queued (default 0: at once) */
  constructor(db: Db, log: Logger, journal?: RecordJournal, opts: { lingerMs?: number } = {}) {
    this.#db = db;
    this.#log = log;
    this.#journal = journal;
    this.#graceMs = journal?.graceMs ?? 30_000;
    this.#lingerMs = opts.lingerMs ?? 0;
  }

  /**
   * A request's row, in the journal before this resolves (then queued for Postgres): await it
   * before the answer's last byte goes out. Without a journal, or when Redis fails, it is queued only.
   */
  async seal(r: NewRequestRow): Promise<void> {
    const entry = this.#queueRow(r);
    await entry;
  }

  /** A request's row, journaled and queued without waiting (a request that ended without an answer to seal). */
  row(r: NewRequestRow): void {
    void this.#queueRow(r);
  }

  #queueRow(r: NewRequestRow): Promise<string | undefined> | undefined {
    // an id and a time of its own: a replay writes the same row, or nothing
    const row = { ...r, id: r.id ?? newRequestRowId(), createdAt: r.createdAt ?? new Date() };
    const entry = this.#append({ rows: [row] });
    this.#rows.push({ record: row, entry });
    this.#kick();
    return entry;
  }

  /**
   * A provider call's row, journaled and queued: it is handed over before its request's answer,
   * so the seal of that answer (later on the same Redis connection) finds it in the journal.
   */
  call(r: ChatCallRecord): void {
    this.#calls.push({ record: r, entry: this.#append({ calls: [r] }) });
    this.#kick();
  }

  /** What a key spent (picodollars): seen by `unwritten` until the request row that carries it is written. */
  charge(keyId: string, cost: bigint): void {
    if (cost === 0n) return;
    this.#unwritten.set(keyId, (this.#unwritten.get(keyId) ?? 0n) + cost);
  }

  /** A key's spend that this process has charged and not yet written (what its api_keys row does not show yet). */
  unwritten(keyId: string): bigint {
    return this.#unwritten.get(keyId) ?? 0n;
  }

  /** Resolves once everything queued so far is written (or its failure logged). */
  async flush(): Promise<void> {
    while (this.#writing) await this.#writing;
  }

  /** Sweeps at once, then every graceMs / 3 until `stop` (with a journal; else nothing). */
  start(): void {
    if (!this.#journal || this.#timer) return;
    const run = () => void this.sweep().catch((e: unknown) => this.#log.warn({ err: scrub((e as Error).message) }, 'could not sweep the record journal'));
    run();
    this.#timer = setInterval(run, Math.max(1_000, Math.round(this.#graceMs / 3)));
    this.#timer.unref();
  }

  /** Stops the sweeps and waits for the one running, then for the writes (the gateway's close). */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#sweeping?.catch(() => {});
    await this.flush();
  }

  /**
   * Writes the journal's entries older than graceMs (a crashed writer's, or a failed batch's)
   * and deletes them; returns how many entries it wrote. Entries that still cannot be written
   * stay, and are logged.
   */
  sweep(): Promise<number> {
    this.#sweeping ??= this.#sweep().finally(() => (this.#sweeping = undefined));
    return this.#sweeping;
  }

  async #sweep(): Promise<number> {
    const j = this.#journal;
    if (!j) return 0;
    const before = Date.now() - this.#graceMs;
    let done = 0;
    let from = '-';
    for (;;) {
      const got = (await j.redis.xrange(j.key, from, String(before), 'COUNT', SWEEP_BATCH)) as Array<[string, string[]]>;
      if (got.length === 0) return done;
      const parsed: Array<{ id: string; entry: Entry }> = [];
      const unreadable: string[] = [];
      for (const [id, fields] of got) {
        const entry = parseEntry(fields);
        if (entry) parsed.push({ id, entry });
        else unreadable.push(id);
      }
      if (unreadable.length > 0) {
        this.#log.error({ n: unreadable.length, ids: unreadable.slice(0, 5) }, 'dropped unreadable entries of the record journal');
        await j.redis.xdel(j.key, ...unreadable);
      }
      const written = await this.#writeEntries(parsed);
      if (written.length > 0) await j.redis.xdel(j.key, ...written);
      done += written.length;
      if (got.length < SWEEP_BATCH) return done;
      from = `(${got.at(-1)![0]}`;
    }
  }

  /** Writes entries, all at once, else one by one; returns the ids written. */
  async #writeEntries(es: Array<{ id: string; entry: Entry }>): Promise<string[]> {
    if (es.length === 0) return [];
    const all = (xs: typeof es) => ({ requests: xs.flatMap((e) => e.entry.rows ?? []), calls: xs.flatMap((e) => e.entry.calls ?? []) });
    try {
      await insertGatewayRecords(this.#db, all(es));
      return es.map((e) => e.id);
    } catch (e) {
      if (es.length === 1) {
        this.#log.error({ id: es[0]!.id, err: scrub((e as Error).message) }, 'could not write an entry of the record journal (it stays for the next sweep)');
        return [];
      }
    }
    const ok: string[] = [];
    for (const e of es) ok.push(...(await this.#writeEntries([e])));
    return ok;
  }

  #append(entry: Entry): Promise<string | undefined> | undefined {
    const j = this.#journal;
    if (!j) return undefined;
    return (j.redis.xadd(j.key, '*', 'v', JSON.stringify(entry, bigintReplacer)) as Promise<string | null>).then(
      (id) => {
        if (this.#journalFailing) this.#log.info('the record journal is written again');
        this.#journalFailing = false;
        return id ?? undefined;
      },
      (e: unknown) => {
        if (!this.#journalFailing) this.#log.warn({ err: scrub((e as Error).message) }, 'could not append to the record journal: records are written behind the answers only until Redis answers');
        this.#journalFailing = true;
        return undefined;
      },
    );
  }

  #kick(): void {
    if (this.#writing) return;
    // a short linger first: what comes meanwhile (the request's own row after its calls') goes in the same statement
    const linger = this.#lingerMs;
    this.#writing = (linger > 0 ? new Promise<void>((r) => setTimeout(r, linger)).then(() => this.#drain()) : this.#drain()).finally(() => {
      this.#writing = undefined;
      if (this.#queued()) this.#kick();
    });
  }

  #queued(): boolean {
    return this.#rows.length > 0 || this.#calls.length > 0;
  }

  async #drain(): Promise<void> {
    while (this.#queued()) {
      const rows = this.#rows;
      const calls = this.#calls;
      this.#rows = [];
      this.#calls = [];
      let ok = false;
      try {
        await insertGatewayRecords(this.#db, { requests: rows.map((q) => q.record), calls: calls.map((q) => q.record) });
        ok = true;
      } catch (e) {
        this.#log.error(
          { n: rows.length + calls.length, err: scrub((e as Error).message) },
          this.#journal ? 'could not write request and call rows (they stay in the record journal for its sweeps)' : 'could not write request and call rows',
        );
      } finally {
        for (const { record: r } of rows) {
          if (r.apiKeyId === null || r.cost === 0n) continue;
          const left = (this.#unwritten.get(r.apiKeyId) ?? 0n) - r.cost;
          if (left <= 0n) this.#unwritten.delete(r.apiKeyId);
          else this.#unwritten.set(r.apiKeyId, left);
        }
      }
      if (ok && this.#journal) {
        const ids = (await Promise.all([...rows, ...calls].map((q) => q.entry))).filter((id): id is string => id !== undefined);
        if (ids.length > 0) await this.#journal.redis.xdel(this.#journal.key, ...ids).catch((e: unknown) => this.#log.warn({ err: scrub((e as Error).message) }, 'could not delete written entries of the record journal (a sweep writes them again, harmlessly)'));
      }
    }
  }
}

function bigintReplacer(_k: string, v: unknown): unknown {
  return typeof v === 'bigint' ? `${v}n` : v;
}

/** An entry's records (bigints and dates restored), or undefined when it is not one. */
function parseEntry(fields: string[]): Entry | undefined {
  const i = fields.indexOf('v');
  if (i < 0 || i + 1 >= fields.length) return undefined;
  try {
    const e = JSON.parse(fields[i + 1]!) as { rows?: Array<Record<string, unknown>>; calls?: ChatCallRecord[] };
    const rows = (e.rows ?? []).map((r) => {
      if (typeof r.id !== 'string' || typeof r.cost !== 'string' || !/^-?\d+n$/.test(r.cost) || typeof r.createdAt !== 'string') throw new Error('not a request row');
      return { ...r, cost: BigInt(r.cost.slice(0, -1)), createdAt: new Date(r.createdAt) } as unknown as NewRequestRow;
    });
    if (!Array.isArray(e.calls ?? []) || (e.calls ?? []).some((c) => typeof c?.key !== 'string')) throw new Error('not call rows');
    return { rows, calls: e.calls ?? [] };
  } catch {
    return undefined;
  }
}
