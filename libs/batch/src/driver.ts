// The batch driver: takes open batches (a lease in Postgres, so one driver at a time drives a
// batch and another takes over when its process dies), reads the input a part at a time, runs
// each runnable line as a chat-call job on its worker's provider queue (libs/calls: one
// `chat_calls` row per line, keyed `<batch id>.<line>`), follows the answers, and writes the
// output and error files when every line is answered, cancelled or expired.
//
// Local lines: a line the codec resolves as `local` (a model kind that runs in the gateway's
// process: fugu-ultra's workflows) is run here through the codec's `run`, at most `maxLocal` at a
// time per batch, each of its worker calls a chat-call job under an id the codec makes the same
// when the line is run again, and its answer is stored on its `batch_lines` row (the first write
// wins) for the output file.
//
// Flat memory: a driver holds at most `maxInFlight` unanswered lines' ids (it reads the next part
// only when the answers leave room, only while fewer than `maxLocal` local lines wait to start
// and none of its lines is held back) and one part of a file at a time; nothing grows with the batch.
//
// The batch's key: every turn the codec says whether it may still start lines (`keyState`: not
// revoked, under its spend limit) and what its limit leaves; a line starts only then, and under a
// limit only as many as the room left pays for at the batch's mean line cost (the part's other
// calls held back). A key that may not stops the batch as a cancel does, its lines not run in the
// error file with the reason. Crash safety: every step
// is written before the next is taken and is idempotent when taken again (lines `on conflict do
// nothing`, chat calls by id, a local line's answer once, a part charged once), so a driver that
// takes over a batch goes on where the dead one was (the local lines it left unanswered run
// again, their calls' rows reused), answers no custom_id twice and pays for no call twice. Jobs
// Redis lost (a flushed or failed-over Redis) are put back when no answer has come for `stallMs`
// (reconcileChatCalls).
//
// Workers: lines on a provider queue that no provider worker consumes would wait forever; the
// driver checks the queues its lines wait on (every `workers.checkMs`), says so on the batch
// (`worker_note`, the batch object's `fugu` extension) and, after `workers.waitMs` with none
// connected, starts provider workers of the gateway's own (workers.ts, LocalWorkerSupply).
import { performance } from 'node:perf_hooks';
import { hostname } from 'node:os';
import { fromWireError, InputError, parseUsd, type ChatRequest, type ChatResult, type ProviderKind } from '@fugu/core';
import {
  addBatchPart, batchPartTotals, claimBatch, deleteFileRow, finishBatchPart, getBatchLineAnswers, getBatchLines, getBatchParts, getBatchRow, getChatCalls, getChatCallStates,
  getChatRequestWorkers, insertBatchLines, lineOfCustomIds, releaseBatchLease, renewBatchLease, setBatchLineAnswer, updateBatchRow,
  type BatchLineAnswer, type BatchLineRow, type BatchRow, type BatchStatus, type BatchWorkerNote, type ChatCallRow, type Db, type NewBatchLine, type StoredWorker,
} from '@fugu/db';
import { reconcileChatCalls, submitChatCalls, waitForChatCalls, type ChatCallClientOptions, type ChatCallSpec } from '@fugu/calls';
import { providerCallQueueFor, providerCallQueues } from '@fugu/queue';
import { scrub, type Logger } from '@fugu/telemetry';
import { FileWriter, readParts, type FilePartLines } from './files.ts';
import { customIdOf, parseLine, type LineError } from './lines.ts';
import { LocalWorkerSupply, workerNote, type BatchWorkersOptions } from './workers.ts';

/**
 * A line the endpoint's codec has read: the worker and request of its one chat-call job, or
 * `local` (the driver runs it through the codec's `run`), or why it cannot run.
 */
export type ResolvedLine =
  | { line: number; ok: true; model: string; worker: StoredWorker; request: ChatRequest }
  | { line: number; ok: true; model: string; local: true }
  | { line: number; ok: false; error: LineError };

/**
 * A worker call of a local line: a chat-call job with this id on the worker's provider queue,
 * awaited; called again with the same id (a run again after a crash), no second call is made and
 * the first one's row answers. A failed call throws its error (as the row has it).
 */
export type BatchCall = (worker: StoredWorker, request: ChatRequest, id: string) => Promise<{ result: ChatResult; cost: bigint }>;

/**
 * A local line's calls: `call`, a worker call (above); `made`, a call the line makes in this
 * process instead (an `llm:` Conductor's own, through the gateway's pipeline) under an id whose
 * `chat_calls` row it pays for. A line stopped without an answer (cancel, expiry) is charged the
 * rows of both.
 */
export type LineCalls = { call: BatchCall; made(id: string): void };

/** What a batch's endpoint contributes (the gateway's: its wire checks, routing, response bodies). */
export type BatchCodec = {
  /**
   * The requests of lines (their bodies), each as the batch's endpoint would run it for the
   * batch's key (`batch.allowed`): `fugu` routed, a worker by name. `worker` given: the line was
   * routed before (a driver that took over), use that worker.
   */
  resolve(batch: BatchRow, lines: ReadonlyArray<{ line: number; body: Record<string, unknown>; worker?: string }>): Promise<ResolvedLine[]>;
  /** The response of a line's call row (`body`: the line's request): the endpoint's body and HTTP status. */
  answer(batch: BatchRow, line: BatchLineRow, call: ChatCallRow, body: Record<string, unknown>): { statusCode: number; body: Record<string, unknown> };
  /**
   * Runs a local line to the endpoint's answer (status, body) and its cost, every worker call
   * through `calls.call` under ids that are the same when the line is run again, any other call
   * named to `calls.made`. An error of the request is its answer; a rejection means no answer
   * (the line is run again later).
   */
  run?(batch: BatchRow, line: { line: number; body: Record<string, unknown> }, calls: LineCalls, signal: AbortSignal): Promise<BatchLineAnswer>;
  /**
   * The batch's key now, as a live request of it is checked (asked every turn of the driver, so
   * within its poll): `stop`, why no line of it may start any more (`key_revoked`,
   * `spend_limit_reached`); `room`, what its spend limit leaves in picodollars (null: no limit).
   * `uncharged`: what the batch's answered lines cost that is not charged to the key yet.
   */
  keyState?(batch: BatchRow, uncharged: bigint): Promise<KeyState>;
};

/** What the batch's key allows now (BatchCodec.keyState). */
export type KeyState = { stop?: { code: 'key_revoked' | 'spend_limit_reached'; message: string }; room: bigint | null };

/** Why the lines of a batch not run could not run, when its key stopped it: on the batch as its `errors`. */
const KEY_STOPS = new Set(['key_revoked', 'spend_limit_reached']);

export type BatchDriverOptions = {
  db: Db;
  /** the chat-call queues (origin is set to `batch`) */
  calls: Omit<ChatCallClientOptions, 'origin'>;
  codec: BatchCodec;
  log: Logger;
  /** this driver's name in leases (default host + pid) */
  owner?: string;
  /** a lease lapses this long after its last renewal (default 30 s) */
  leaseMs?: number;
  /** how often answers are looked for and open batches claimed (default 500 ms) */
  pollMs?: number;
  /** unanswered lines a batch may have in flight; the next part waits for room (default 20,000) */
  maxInFlight?: number;
  /** batches this driver runs at once (default 4) */
  concurrency?: number;
  /** no answer for this long: jobs Redis lost are put back (default 15 s) */
  stallMs?: number;
  /** local lines (fugu-ultra) a batch runs at once (default 8) */
  maxLocal?: number;
  /** the provider workers lines need: checked, said on the batch, started here when none is connected (default: checked and said, none started) */
  workers?: BatchWorkersOptions;
};

/**
 * A part being answered: its lines' call ids without a row yet (and the provider of each whose
 * queue it is on), its local lines without an answer yet.
 */
type OpenPart = {
  part: number; firstLine: number; lines: number; pending: Set<string>; providers: Map<string, string>; local: Set<number>; completed: number; failed: number; cost: bigint;
};

/** A batch's watch over its providers' workers: when it last looked, since when lines wait, the gateway's workers that ran them, the note last written. */
type Watch = { checkedAt: number; since: Date | null; local: BatchWorkerNote['local']; startError?: string; written: string | null };

/**
 * A batch's lines in this driver not on the queues yet, and its local lines: chat lines held back
 * (their calls wait for room under the key's spend limit), local lines waiting to start (with
 * their bodies), running, the calls made by each line without an answer yet (its worker calls,
 * those in flight among them, and the ones it made itself: LineCalls.made), the stop; and the
 * lines answered so far with what they cost (the mean cost of a line, for the spend limit).
 */
type Local = {
  held: ChatCallSpec[];
  waiting: Array<{ line: number; body: Record<string, unknown> }>;
  running: Map<number, Promise<void>>;
  made: Map<number, Set<string>>;
  stop: AbortController;
  seen: { lines: number; cost: bigint };
  /** the local lines' worker calls on the queues now, by id: their providers */
  calls: Map<string, string>;
};

const ENDINGS = { cancelled: 'cancelledAt', expired: 'expiredAt', completed: 'completedAt' } as const;

/**
 * What one batch this driver runs spends of its key: its answered lines' cost not charged yet
 * (`uncharged`), all its answered lines' cost so far (`answered`, only ever growing), and its
 * started lines without an answer at its mean line cost (`inFlight`). A key's batches run at once
 * each count the others', so its spend limit holds across them.
 */
type KeyLedger = { uncharged(): bigint; answered(): bigint; inFlight(): bigint };

export class BatchDriver {
  readonly owner: string;
  readonly #o: Required<Omit<BatchDriverOptions, 'owner' | 'workers'>> & { workers: Required<Omit<BatchWorkersOptions, 'start'>> & Pick<BatchWorkersOptions, 'start'> };
  readonly #supply: LocalWorkerSupply;
  /** the watches of the batches this driver runs (the last note is settled when a batch ends) */
  readonly #watches = new Map<string, Watch>();
  readonly #active = new Set<string>();
  #running = false;
  #loops: Promise<void>[] = [];
  /** sleeps that `poke` ends */
  readonly #waiters = new Set<() => void>();
  /** the batches this driver runs, by their API key */
  readonly #ledgers = new Map<string, Set<KeyLedger>>();

  constructor(o: BatchDriverOptions) {
    this.owner = o.owner ?? `${hostname()}:${process.pid}:${Math.random().toString(36).slice(2, 8)}`;
    this.#o = {
      leaseMs: 30_000, pollMs: 500, maxInFlight: 20_000, concurrency: 4, stallMs: 15_000, maxLocal: 8, ...o,
      workers: { localWorkers: 0, waitMs: 5_000, idleMs: 60_000, checkMs: 2_000, ...o.workers },
    };
    this.#supply = new LocalWorkerSupply(this.#o.workers, o.log);
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    for (let i = 0; i < this.#o.concurrency; i++) this.#loops.push(this.#loop());
  }

  /** Looks for open batches now (a batch was just made). */
  poke(): void {
    for (const w of [...this.#waiters]) w();
  }

  /** Stops taking batches and leaves the ones it drives (their leases lapse, or are released). */
  async stop(): Promise<void> {
    this.#running = false;
    this.poke();
    await Promise.all(this.#loops);
    this.#loops = [];
    await this.#supply.stop();
  }

  async #sleep(ms: number): Promise<void> {
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.#waiters.delete(done);
        resolve();
      };
      const t = setTimeout(done, ms);
      this.#waiters.add(done);
    });
  }

  async #loop(): Promise<void> {
    while (this.#running) {
      let b: BatchRow | undefined;
      try {
        b = await claimBatch(this.#o.db, this.owner, this.#o.leaseMs, [...this.#active]);
      } catch (e) {
        this.#o.log.warn({ err: scrub((e as Error).message) }, 'could not look for open batches');
      }
      if (!b) {
        await this.#sleep(this.#o.pollMs * 4);
        continue;
      }
      this.#active.add(b.id);
      // the lease is kept while this process lives (a long part or the files of a large batch
      // take longer than the lease); lost only when renewing fails past it (another took over)
      const lease = { lost: false };
      const keep = setInterval(() => {
        void renewBatchLease(this.#o.db, b.id, this.owner, this.#o.leaseMs).then(
          (ok) => (lease.lost ||= !ok),
          () => {},
        );
      }, Math.max(100, Math.floor(this.#o.leaseMs / 3)));
      try {
        await this.#drive(b, lease);
      } catch (e) {
        this.#o.log.error({ batch: b.id, err: scrub((e as Error).message) }, 'batch driver failed (the batch is taken again)');
        await this.#sleep(this.#o.pollMs);
      } finally {
        clearInterval(keep);
        this.#active.delete(b.id);
        await releaseBatchLease(this.#o.db, b.id, this.owner).catch(() => {});
      }
    }
  }

  async #drive(start: BatchRow, lease: { lost: boolean }): Promise<void> {
    const local: Local = { held: [], waiting: [], running: new Map(), made: new Map(), stop: new AbortController(), seen: { lines: 0, cost: 0n }, calls: new Map() };
    this.#watches.set(start.id, { checkedAt: 0, since: null, local: start.workerNote?.local ?? null, written: start.workerNote ? JSON.stringify(start.workerNote) : null });
    try {
      await this.#driveWith(start, lease, local);
    } finally {
      this.#watches.delete(start.id);
      // local lines still running answer nothing now (another driver, or this one later, runs them again)
      local.stop.abort();
      await Promise.all(local.running.values());
    }
  }

  async #driveWith(start: BatchRow, lease: { lost: boolean }, local: Local): Promise<void> {
    const { db, log } = this.#o;
    const id = start.id;
    if (start.status === 'validating') await updateBatchRow(db, id, this.owner, { status: 'in_progress', inProgressAt: 'now' }, ['validating']);
    log.info({ batch: id, part: start.nextPart }, 'driving a batch');
    const open = new Map<number, OpenPart>();
    const started = (): number => sum(open, (p) => p.pending.size + p.local.size) - local.held.length - local.waiting.length;
    const ledger: KeyLedger = {
      uncharged: () => [...open.values()].reduce((t, p) => t + p.cost, 0n),
      answered: () => local.seen.cost,
      inFlight: () => (local.seen.lines === 0 ? 0n : (local.seen.cost / BigInt(local.seen.lines)) * BigInt(Math.max(0, started()))),
    };
    const ledgers = start.apiKeyId === null ? undefined : this.#ledgers.get(start.apiKeyId) ?? this.#ledgers.set(start.apiKeyId, new Set()).get(start.apiKeyId)!;
    ledgers?.add(ledger);
    try {
      await this.#driveParts(start, lease, local, open, started, ledger, ledgers);
    } finally {
      ledgers?.delete(ledger);
      if (ledgers?.size === 0) this.#ledgers.delete(start.apiKeyId!);
    }
  }

  async #driveParts(
    start: BatchRow, lease: { lost: boolean }, local: Local, open: Map<number, OpenPart>, started: () => number, ledger: KeyLedger, ledgers: Set<KeyLedger> | undefined,
  ): Promise<void> {
    const { db, log } = this.#o;
    const id = start.id;
    // (the part at nextPart is read again below, its local lines with it)
    for (const p of await getBatchParts(db, id, { open: true })) open.set(p.part, await this.#openPart(id, p, local, p.part < start.nextPart ? start.inputFileId : undefined, true));
    let submitted = start.submitted;
    // parts below it are submitted whole; the one at it may have been begun by a dead driver (read
    // again); it moves past a part once none of the part's lines is held back
    let nextPart = start.nextPart;
    let savedPart = start.nextPart;
    const parts = readParts(db, start.inputFileId, start.nextPart);
    let progressAt = performance.now();
    let shown = { completed: start.completed, failed: start.failed };
    while (this.#running) {
      if (lease.lost) return;
      const b = await getBatchRow(db, id);
      if (!b) return;
      if (b.status === 'finalizing') return this.#finalize(b, 'completed', lease);
      const ending = b.status === 'cancelling' ? 'cancelled' : Date.now() >= b.expiresAt.getTime() ? 'expired' : undefined;
      if (ending) {
        await this.#settle(b, open, lease, local);
        return this.#finalize(b, ending, lease);
      }
      // the key, as a live request's: revoked or at its spend limit, no line starts any more (the
      // calls in flight finish, a revoked key's fugu-ultra lines stop as on a cancel); the batch
      // ends completed, the lines not run in its error file with the reason
      // the key's other batches here count too: what they have answered and not charged, and
      // (below) what their started lines will cost at their mean
      const others = [...(ledgers ?? [])].filter((l) => l !== ledger);
      const answeredAt = new Map(others.map((l) => [l, l.answered()]));
      const key = b.apiKeyId !== null && this.#o.codec.keyState
        ? await this.#o.codec.keyState(b, [ledger, ...others].reduce((t, l) => t + l.uncharged(), 0n))
        : { room: null };
      if (key.stop) {
        await this.#settle(b, open, lease, local, key.stop.code === 'key_revoked');
        const errors = [{ code: key.stop.code, message: key.stop.message, param: null, line: null }];
        if (!(await updateBatchRow(db, id, this.owner, { status: 'finalizing', finalizingAt: 'now', errors }, ['in_progress']))) return;
        log.warn({ batch: id, reason: key.stop.code }, 'batch stopped by its key');
        return this.#finalize({ ...b, errors }, 'completed', lease);
      }
      // the next part, while the answers leave room (one a turn: the answers are counted between
      // parts), few local lines wait to start and no line is held back
      const inFlight = sum(open, (p) => p.pending.size + p.local.size);
      let more = false;
      if (!submitted && local.held.length === 0 && inFlight < this.#o.maxInFlight && local.waiting.length < this.#o.maxLocal) {
        const n = await parts.next();
        if (n.done) {
          submitted = true;
          await updateBatchRow(db, id, this.owner, { submitted: true });
        } else {
          const p = await this.#submitPart(b, n.value, local);
          open.set(p.part, p);
          nextPart = n.value.part + 1;
          progressAt = performance.now();
          more = inFlight + p.pending.size + p.local.size < this.#o.maxInFlight && local.waiting.length < this.#o.maxLocal;
        }
      }
      // lines start as the key's spend limit leaves room: held chat lines onto the queues, then local lines
      // (started: the lines without an answer counted yet, neither held back nor waiting to start)
      // (the others as they are now: their lines started since the key was read, and those answered
      // since, which the key's room read then does not hold)
      const othersNow = [...(ledgers ?? [])].filter((l) => l !== ledger);
      const othersSpend = othersNow.reduce((t, l) => t + l.inFlight() + l.answered() - (answeredAt.get(l) ?? 0n), 0n);
      let room = this.#room(key.room === null ? null : key.room - othersSpend, local, started());
      if (room > 0 && local.held.length > 0) {
        const go = local.held.splice(0, Math.min(room, local.held.length));
        await submitChatCalls(this.#client(), go);
        room -= go.length;
      }
      more &&= local.held.length === 0;
      if (local.held.length === 0 && savedPart !== nextPart) {
        await updateBatchRow(db, id, this.owner, { nextPart });
        savedPart = nextPart;
      }
      this.#startLocal(b, local, lease, room);
      // the answers
      if (await this.#collect(id, open, nextPart, local.seen)) progressAt = performance.now();
      // the workers of the queues its lines wait on (said on the batch; the gateway's own started when none is connected)
      await this.#watchWorkers(b, open, local).catch((e: unknown) => log.warn({ batch: id, err: scrub((e as Error).message) }, 'could not check the provider workers of the batch\'s queues'));
      const done = await batchPartTotals(db, id);
      const now = { completed: done.completed + sum(open, (p) => p.completed), failed: done.failed + sum(open, (p) => p.failed) };
      if (now.completed !== shown.completed || now.failed !== shown.failed) {
        await updateBatchRow(db, id, this.owner, now);
        shown = now;
      }
      if (submitted && open.size === 0) {
        await updateBatchRow(db, id, this.owner, { status: 'finalizing', finalizingAt: 'now' }, ['in_progress']);
        return this.#finalize(b, 'completed', lease);
      }
      if (performance.now() - progressAt >= this.#o.stallMs) {
        const held = new Set(local.held.map((c) => c.id));
        const ids = [...open.values()].flatMap((p) => [...p.pending].filter((c) => !held.has(c)));
        const back = await reconcileChatCalls(this.#client(), ids).catch(() => []);
        if (back.length > 0) log.warn({ batch: id, n: back.length }, 'put back chat-call jobs that were lost');
        progressAt = performance.now();
      }
      if (!more) await this.#sleep(this.#o.pollMs);
    }
  }

  /**
   * Every `workers.checkMs`: the queues the batch's lines are on now (their calls submitted and
   * unanswered, its local lines' worker calls) and whether a worker consumes each (every shard);
   * when none has for `workers.waitMs`, the gateway's own are started for those providers. What it
   * finds is written on the batch when it changes.
   */
  async #watchWorkers(b: BatchRow, open: Map<number, OpenPart>, local: Local): Promise<void> {
    const watch = this.#watches.get(b.id);
    const now = Date.now();
    if (!watch || now - watch.checkedAt < this.#o.workers.checkMs) return;
    watch.checkedAt = now;
    const held = new Set(local.held.map((c) => c.id));
    const needed = new Set(local.calls.values());
    for (const p of open.values()) for (const [id, provider] of p.providers) if (!held.has(id)) needed.add(provider);
    const { shards } = this.#o.calls;
    const missing: string[] = [];
    for (const provider of [...needed].sort()) {
      const queues = providerCallQueues(provider as ProviderKind, shards);
      const counts = await Promise.all(queues.map((q) => this.#o.calls.queue(q).getWorkersCount()));
      if (counts.some((n) => n === 0)) missing.push(provider);
    }
    this.#supply.touch(needed);
    if (missing.length === 0) watch.since = null;
    else {
      watch.since ??= new Date(now);
      if (this.#supply.enabled && now - watch.since.getTime() >= this.#o.workers.waitMs) {
        const why = `batch ${b.id}: its lines wait on ${missing.map((p) => providerCallQueues(p as ProviderKind, shards).join(', ')).join(', ')}, which no provider worker has consumed for ${Math.round((now - watch.since.getTime()) / 1000)} s`;
        try {
          await this.#supply.ensure(missing, why);
          delete watch.startError;
        } catch (e) {
          watch.startError = scrub((e as Error).message);
        }
      }
    }
    // the gateway's own workers for these providers, once they ran some of its lines (kept when they stop)
    watch.local = this.#supply.local(needed) ?? watch.local;
    const note = this.#note(watch, missing, missing.flatMap((p) => providerCallQueues(p as ProviderKind, shards)));
    // nothing to say yet (a worker consumes every queue, none of the gateway's ran its lines): no note
    if (watch.written === null && !note.waiting && note.local === null) return;
    const text = JSON.stringify(note);
    if (text === watch.written) return;
    if (await updateBatchRow(this.#o.db, b.id, this.owner, { workerNote: note })) watch.written = text;
  }

  #note(watch: Watch, providers: string[], queues: string[]): BatchWorkerNote {
    const { localWorkers, waitMs } = this.#o.workers;
    return workerNote({
      queues, providers, since: watch.since, local: watch.local, localWorkers: this.#supply.enabled ? localWorkers : 0, waitMs,
      ...(watch.startError !== undefined && { startError: watch.startError }),
    });
  }

  #client(): ChatCallClientOptions {
    return { ...this.#o.calls, origin: 'batch' };
  }

  /**
   * How many more lines may start, `started` being on their way (on the queues unanswered, or
   * running): no limit, any number; under one, what the room left pays for at the batch's mean
   * line cost so far, less those started (one at a time before a line has answered), so the key
   * goes past its limit by what the lines in flight cost beyond that estimate, at most about a line.
   */
  #room(left: bigint | null, local: Local, started: number): number {
    if (left === null) return Infinity;
    if (left <= 0n) return 0;
    const { lines, cost } = local.seen;
    if (lines > 0 && cost === 0n) return Infinity;
    const mean = lines === 0 ? left : cost / BigInt(lines) || 1n;
    const fits = Number((left + mean - 1n) / mean);
    return Math.max(0, fits - started);
  }

  /**
   * An open part as the database has it: its lines' answers so far, the ones still pending. With
   * `inputFileId` (a part a dead driver submitted whole), its local lines without an answer wait
   * to run again, their bodies read from the input.
   */
  async #openPart(batchId: string, p: { part: number; firstLine: number; lines: number }, local: Local, inputFileId?: string, lookupProviders = false): Promise<OpenPart> {
    const rows = await getBatchLines(this.#o.db, batchId, p.firstLine, p.firstLine + p.lines - 1);
    const o: OpenPart = { ...p, pending: new Set(), providers: new Map(), local: new Set(), completed: 0, failed: 0, cost: 0n };
    for (const r of rows) {
      if (r.callId) o.pending.add(r.callId);
      else if (r.local && !r.error) o.local.add(r.line);
      else o.failed++;
    }
    await this.#collect(batchId, new Map([[p.part, o]]), -1, local.seen);
    // (a part a driver before this one submitted: the providers of its calls' queues, as stored with their requests)
    const ids = [...o.pending];
    for (let i = 0; lookupProviders && i < ids.length; i += 1000) for (const r of await getChatRequestWorkers(this.#o.db, ids.slice(i, i + 1000))) o.providers.set(r.id, r.provider);
    if (inputFileId !== undefined && o.local.size > 0) {
      const n = await readParts(this.#o.db, inputFileId, p.part).next();
      const lines = n.done ? [] : n.value.lines;
      for (const line of o.local) local.waiting.push({ line, body: envelopeBody(lines[line - p.firstLine]!) });
    }
    return o;
  }

  /**
   * Looks up the pending lines' call rows; finishes the parts below `finishBelow` whose lines all
   * have one (a part at or past it is being read again). Returns whether anything was answered.
   */
  async #collect(batchId: string, open: Map<number, OpenPart>, finishBelow: number, seen?: Local['seen']): Promise<boolean> {
    let any = false;
    const answered = (p: OpenPart, ok: boolean, cost: bigint) => {
      if (ok) p.completed++;
      else p.failed++;
      p.cost += cost;
      if (seen) {
        seen.lines++;
        seen.cost += cost;
      }
      any = true;
    };
    for (const p of [...open.values()]) {
      if (p.pending.size > 0) {
        for (const r of await getChatCallStates(this.#o.db, [...p.pending])) {
          p.pending.delete(r.key);
          p.providers.delete(r.key);
          answered(p, r.status === 'ok', parseUsd(r.cost));
        }
      }
      if (p.local.size > 0) {
        for (const a of await getBatchLineAnswers(this.#o.db, batchId, [...p.local])) {
          p.local.delete(a.line);
          answered(p, a.statusCode === 200, a.cost);
        }
      }
      if (p.part < finishBelow && p.pending.size === 0 && p.local.size === 0) {
        await finishBatchPart(this.#o.db, batchId, p.part, p);
        open.delete(p.part);
      }
    }
    return any;
  }

  /** Reads and checks one input part; returns it open (its calls pending, held back until they may start; its local lines waiting to run). */
  async #submitPart(b: BatchRow, input: FilePartLines, local: Local): Promise<OpenPart> {
    const { db, codec } = this.#o;
    const first = input.firstLine;
    const last = first + input.lines.length - 1;
    const callId = (line: number) => `${b.id}.${line}`;
    // the part is known before any of its calls exists: a cancel settles it, whatever happens next
    await addBatchPart(db, b.id, { part: input.part, firstLine: first, lines: input.lines.length });
    // lines a driver before this one wrote (it died in this part) stay as they are
    const known = new Map((await getBatchLines(db, b.id, first, last)).map((r) => [r.line, r]));
    const rows: NewBatchLine[] = [];
    const envelopes: Array<{ line: number; customId: string; body: Record<string, unknown> }> = [];
    input.lines.forEach((text, i) => {
      const line = first + i;
      if (known.has(line)) return;
      const bad = input.invalid?.get(i);
      if (bad !== undefined) {
        rows.push({ line, customId: customIdOf(text), model: null, worker: null, callId: null, error: { code: 'invalid_utf8', message: `line ${line}: ${bad}`, param: null } });
        return;
      }
      const e = parseLine(text, line, b.endpoint);
      if (e.ok) envelopes.push({ line, customId: e.customId, body: e.body });
      else rows.push({ line, customId: e.customId, model: null, worker: null, callId: null, error: e.error });
    });
    const resolved = new Map((await codec.resolve(b, envelopes)).map((r) => [r.line, r]));
    const specs = new Map<number, ChatCallSpec>();
    for (const e of envelopes) {
      const r = resolved.get(e.line);
      if (!r) rows.push({ line: e.line, customId: e.customId, model: null, worker: null, callId: null, error: { code: 'internal_error', message: `line ${e.line}: not resolved` } });
      else if (!r.ok) rows.push({ line: e.line, customId: e.customId, model: typeof e.body.model === 'string' ? e.body.model : null, worker: null, callId: null, error: r.error });
      // a local line: the model's name stands for its worker (fugu status counts its lines under it)
      else if ('local' in r) rows.push({ line: e.line, customId: e.customId, model: r.model, worker: r.model, callId: null, error: null, local: true });
      else {
        rows.push({ line: e.line, customId: e.customId, model: r.model, worker: r.worker.name, callId: callId(e.line), error: null });
        specs.set(e.line, { id: callId(e.line), worker: r.worker, request: r.request });
      }
    }
    const inserted = await insertBatchLines(db, b.id, rows);
    // a runnable line not inserted: its custom_id runs on another line already
    const dup = rows.filter((r) => r.error === null && !inserted.has(r.line));
    if (dup.length > 0) {
      const firstOf = await lineOfCustomIds(db, b.id, dup.map((r) => r.customId!));
      await insertBatchLines(db, b.id, dup.map((r) => ({
        ...r, callId: null, local: false,
        error: { code: 'duplicate_custom_id', message: `line ${r.line}: custom_id ${JSON.stringify(r.customId)} is used by line ${firstOf.get(r.customId!) ?? '?'} already (custom_ids are unique in a batch)`, param: 'custom_id' },
      })));
      for (const r of dup) specs.delete(r.line);
    }
    // lines of a dead driver that were to run: their requests again, on the worker chosen then
    const again = [...known.values()].filter((r) => r.callId !== null);
    if (again.length > 0) {
      const bodies = again.map((r) => ({ line: r.line, body: envelopeBody(input.lines[r.line - first]!), worker: r.worker! }));
      for (const r of await codec.resolve(b, bodies)) if (r.ok && !('local' in r)) specs.set(r.line, { id: callId(r.line), worker: r.worker, request: r.request });
    }
    const p = await this.#openPart(b.id, { part: input.part, firstLine: first, lines: input.lines.length }, local);
    // its calls without an answer wait to start (held back while the key's spend limit leaves no room)
    for (const c of specs.values()) {
      if (!p.pending.has(c.id)) continue;
      local.held.push(c);
      p.providers.set(c.id, c.worker.provider);
    }
    // its local lines without an answer (a dead driver's too) wait to run
    for (const line of p.local) local.waiting.push({ line, body: envelopeBody(input.lines[line - first]!) });
    return p;
  }

  /** Starts waiting local lines, at most `room`, while fewer than maxLocal run; each stores its answer when it has one. */
  #startLocal(b: BatchRow, local: Local, lease: { lost: boolean }, room: number): void {
    const { db, codec, log } = this.#o;
    for (; room > 0 && local.running.size < this.#o.maxLocal && local.waiting.length > 0 && !local.stop.signal.aborted; room--) {
      const l = local.waiting.shift()!;
      if (!codec.run) throw new Error(`batch ${b.id}: line ${l.line} is local, but the codec runs no local lines`);
      const seam = { failed: false };
      const run = codec
        .run(b, l, this.#localCalls(local, seam, l.line), local.stop.signal)
        .then(async (a) => {
          // stopped (cancel, expiry, shutdown) or taken over: no answer from here (a run again gives the same)
          if (local.stop.signal.aborted || lease.lost) return;
          // a call that could not be made or followed (Redis, Postgres) is not the line's answer
          if (seam.failed) throw new Error('a worker call of the line could not be made or followed');
          await setBatchLineAnswer(db, b.id, l.line, a);
          // the answer carries the line's cost
          local.made.delete(l.line);
          this.poke();
        })
        .catch((e: unknown) => {
          log.warn({ batch: b.id, line: l.line, err: scrub((e as Error).message) }, 'a local batch line got no answer (it runs again)');
          if (!local.stop.signal.aborted) local.waiting.push(l);
        })
        .finally(() => local.running.delete(l.line));
      local.running.set(l.line, run);
    }
  }

  /**
   * A local line's worker calls: chat-call jobs by id, awaited (put back when Redis lost them),
   * stopped with the batch; every id, and those of the calls it makes itself, kept until it has an
   * answer. `seam.failed`: a call could not be made or followed.
   */
  #localCalls(local: Local, seam: { failed: boolean }, line: number): LineCalls {
    const client = this.#client();
    const { signal } = local.stop;
    const made = (id: string): void => {
      let ids = local.made.get(line);
      if (!ids) local.made.set(line, (ids = new Set()));
      ids.add(id);
    };
    const call: BatchCall = async (worker, request, id) => {
      signal.throwIfAborted();
      made(id);
      let r;
      local.calls.set(id, worker.provider);
      try {
        await submitChatCalls(client, [{ id, worker, request }]);
        r = (await waitForChatCalls(this.#o.db, [id], { pollMs: Math.min(this.#o.pollMs, 200), signal, reconcile: { client, stallMs: this.#o.stallMs } })).get(id)!;
      } catch (e) {
        // (a request that differs from the one first submitted under the id is the line's own failure)
        seam.failed ||= !signal.aborted && !(e instanceof InputError);
        throw e;
      } finally {
        local.calls.delete(id);
      }
      if (r.status === 'ok') return { result: r.result, cost: parseUsd(r.cost) };
      throw fromWireError(r.error);
    };
    return { call, made };
  }

  /**
   * Cancelling, expiring, or stopped by its key: the waiting jobs of pending lines are removed, and
   * running ones answer; then every open part is finished with what it has (a line without an
   * answer failed: not run). No call starts after this. `stopLocal` false (a key at its spend
   * limit): running local lines finish, as requests in flight do.
   */
  async #settle(b: BatchRow, open: Map<number, OpenPart>, lease: { lost: boolean }, local: Local, stopLocal = true): Promise<void> {
    const { db } = this.#o;
    const client = this.#client();
    // held lines never start; local lines: none starts, the running ones stop unanswered (cancelled); their calls' jobs are settled below
    local.held.length = 0;
    local.waiting.length = 0;
    if (stopLocal) local.stop.abort();
    await Promise.all(local.running.values());
    local.stop.abort();
    // the calls of the stopped lines (a call of an answered line has its row)
    const made = [...local.made];
    local.made.clear();
    const calls = made.flatMap(([, ids]) => [...ids]);
    for (;;) {
      await this.#collect(b.id, open, -1);
      const pending = [...open.values()].flatMap((p) => [...p.pending]);
      // the stopped local lines' calls still without a row (nothing reads their rows)
      const answered = new Set((await getChatCallStates(db, calls)).map((r) => r.key));
      pending.push(...calls.filter((c) => !answered.has(c)));
      if (pending.length === 0) break;
      let running = 0;
      for (let i = 0; i < pending.length; i += 1000) {
        const workers = await getChatRequestWorkers(db, pending.slice(i, i + 1000));
        // all at once: a job not running (waiting, delayed, prioritized, gone) is removed before any
        // worker takes it; one a worker holds (its lock) is running, and finishes
        const removed = await Promise.all(workers.map((w) => client.queue(providerCallQueueFor(w.provider as ProviderKind, w.id, client.shards)).remove(w.id).catch(() => 0)));
        running += removed.filter((r) => r !== 1).length;
      }
      if (running === 0) {
        // nothing runs any more: what has no row now never will
        await this.#collect(b.id, open, -1);
        for (const p of open.values()) {
          p.failed += p.pending.size + p.local.size;
          p.pending.clear();
          p.providers.clear();
          p.local.clear();
        }
        break;
      }
      if (lease.lost) throw new Error(`batch ${b.id}: lost its lease while cancelling`);
      await this.#sleep(this.#o.pollMs);
    }
    // the stopped lines' calls that were made (worker calls, an llm: Conductor's) were paid for: charged with their lines' parts
    const costs = new Map((await getChatCallStates(db, calls)).map((r) => [r.key, parseUsd(r.cost)]));
    for (const [line, ids] of made) {
      const p = [...open.values()].find((q) => line >= q.firstLine && line < q.firstLine + q.lines);
      if (p) for (const id of ids) p.cost += costs.get(id) ?? 0n;
    }
    for (const p of [...open.values()]) await finishBatchPart(db, b.id, p.part, p);
    open.clear();
  }

  /** Writes the output and error files in input order, and ends the batch. */
  async #finalize(b: BatchRow, ending: 'completed' | 'cancelled' | 'expired', lease: { lost: boolean }): Promise<void> {
    const { db, codec } = this.#o;
    const outId = `file-${b.id.slice('batch_'.length)}o`;
    const errId = `file-${b.id.slice('batch_'.length)}e`;
    // a driver that died while writing them left incomplete files: written again from the start
    await deleteFileRow(db, outId);
    await deleteFileRow(db, errId);
    const out = new FileWriter(db, { id: outId, apiKeyId: b.apiKeyId, purpose: 'batch_output', filename: `${b.id}_output.jsonl` });
    const err = new FileWriter(db, { id: errId, apiKeyId: b.apiKeyId, purpose: 'batch_output', filename: `${b.id}_error.jsonl` });
    let completed = 0;
    let failed = 0;
    const reqId = (line: number) => `batch_req_${b.id.slice('batch_'.length)}_${line}`;
    // the lines not run: the key's reason (a batch it stopped), else the cancel's or the expiry's
    const stop = ending === 'completed' ? b.errors?.find((e) => KEY_STOPS.has(e.code)) : undefined;
    for await (const part of readParts(db, b.inputFileId)) {
      // another driver took over (this one could not renew): it writes the files from the start
      if (lease.lost) throw new Error(`batch ${b.id}: lost its lease while writing its files`);
      const last = part.firstLine + part.lines.length - 1;
      const rows = new Map((await getBatchLines(db, b.id, part.firstLine, last)).map((r) => [r.line, r]));
      const ids = [...rows.values()].flatMap((r) => (r.callId ? [r.callId] : []));
      const calls = new Map((await getChatCalls(db, ids)).map((c) => [c.key, c]));
      for (let i = 0; i < part.lines.length; i++) {
        const line = part.firstLine + i;
        const r = rows.get(line);
        const customId = r ? r.customId : customIdOf(part.lines[i]!);
        if (r?.error) {
          failed++;
          await err.line(JSON.stringify({ id: reqId(line), custom_id: customId, line, response: null, error: { ...r.error, line } }));
          continue;
        }
        const call = r?.callId ? calls.get(r.callId) : undefined;
        if (!r || (!call && !r.answer)) {
          if (stop) {
            failed++;
            await err.line(JSON.stringify({ id: reqId(line), custom_id: customId, line, response: null, error: { code: stop.code, message: `line ${line}: not run: ${stop.message}`, param: null, line } }));
            continue;
          }
          const code = ending === 'expired' ? 'batch_expired' : 'batch_cancelled';
          const message = `line ${line}: not run: the batch was ${ending === 'expired' ? 'past its completion window' : 'cancelled'} before this request ran`;
          await err.line(JSON.stringify({ id: reqId(line), custom_id: customId, line, response: null, error: { code, message, line } }));
          continue;
        }
        // a local line's stored answer, or the endpoint's answer of the line's call row
        const a = r.answer ?? codec.answer(b, r, call!, envelopeBody(part.lines[i]!));
        const requestId = call?.key ?? `${b.id}.${line}`;
        const entry = JSON.stringify({ id: reqId(line), custom_id: customId, response: { status_code: a.statusCode, request_id: requestId, body: a.body }, error: null });
        if (a.statusCode === 200) {
          completed++;
          await out.line(entry);
        } else {
          failed++;
          await err.line(entry);
        }
      }
    }
    const outputFileId = out.lines > 0 ? await out.finish() : (await out.discard(), undefined);
    const errorFileId = err.lines > 0 ? await err.finish() : (await err.discard(), undefined);
    const status: BatchStatus = ending;
    // nothing waits for a worker any more: the note keeps the gateway's own workers that ran lines, if any
    const watch = this.#watches.get(b.id);
    const workerNote = watch && watch.written !== null ? this.#note(watch, [], []) : undefined;
    const ok = await updateBatchRow(db, b.id, this.owner, {
      status, completed, failed, [ENDINGS[ending]]: 'now', ...(outputFileId && { outputFileId }), ...(errorFileId && { errorFileId }), ...(workerNote && { workerNote }),
    }, ['in_progress', 'finalizing', 'cancelling', 'validating']);
    if (ok) this.#o.log.info({ batch: b.id, status, completed, failed }, 'batch ended');
  }
}

/** The request of an input line whose envelope was read before (parseLine). */
function envelopeBody(text: string): Record<string, unknown> {
  return (JSON.parse(text) as { body: Record<string, unknown> }).body;
}

function sum(open: Map<number, OpenPart>, f: (p: OpenPart) => number): number {
  let n = 0;
  for (const p of open.values()) n += f(p);
  return n;
}

