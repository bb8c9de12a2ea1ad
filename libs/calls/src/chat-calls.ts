// chat-call jobs: a chat request stored in Postgres (chat_requests) and a job carrying only its id
// on the worker's provider-call queue (so the provider's limits apply), executed by the provider
// workers through the call pipeline into exactly one `chat_calls` row (key = the chat-call id).
//
// Postgres is the truth: a result is the row, readable by id by any process at any time (a
// coordinator that died and restarted reads the answers of its earlier life). Submitting an id
// again never calls again: an id that has a row is not enqueued, and a job whose id already has a
// row completes without a call.
import { Job, Queue, QueueEvents, type JobsOptions } from 'bullmq';
import { InputError, type ChatRequest, type ChatResult, type ProviderKind } from '@fugu/core';
import { canonicalJson } from '@fugu/providers';
import { getChatCallJobState, type ChatCallJobState, getChatCalls, getChatRequests, getChatRequestWorkers, saveChatRequests, type CallStatus, type ChatCallRow, type Db, type StoredWorker } from '@fugu/db';
import { CHAT_CALL_JOB, chatCallIdSchema, chatCallJobSchema, enqueueStream, parseJob, providerCallQueueFor, type ChatCallJob, type RedisClient } from '@fugu/queue';
import type { WireError } from '@fugu/core';

export type ChatCallSpec = {
  /** unique id of the call (letters, digits, _ . -; at most 200): the job id and the row's key */
  id: string;
  worker: StoredWorker;
  request: ChatRequest;
  /** sample index (n samples of one request are n calls; default 0) */
  sample?: number;
};

export type ChatCallResult =
  | { id: string; status: 'ok'; result: ChatResult; cost: string; cached: boolean; latencyMs: number; attempts: number; worker: string }
  | { id: string; status: 'error'; error: WireError; latencyMs: number; attempts: number; worker: string };

/** Job options of chat-call jobs (as evaluation jobs: retries with jittered exponential backoff). */
export type ChatCallJobOptions = Pick<JobsOptions, 'attempts' | 'backoff'>;

export const defaultChatCallJobOptions = (worker: { attempts: number; backoffMs: number }): ChatCallJobOptions => ({
  attempts: worker.attempts,
  backoff: { type: 'exponential', delay: worker.backoffMs, jitter: 0.5 },
});

/** What a stored request may hold: no signal, no time limit of the caller's process. */
function storable(req: ChatRequest): Record<string, unknown> {
  const { signal: _signal, ...rest } = req;
  return JSON.parse(JSON.stringify(rest)) as Record<string, unknown>;
}

export function rowToResult(r: ChatCallRow): ChatCallResult {
  if (r.status === 'ok') {
    return { id: r.key, status: 'ok', result: r.response as unknown as ChatResult, cost: r.cost, cached: r.cached, latencyMs: r.latencyMs, attempts: r.attempts, worker: r.worker };
  }
  return { id: r.key, status: 'error', error: r.error ?? { code: 'internal', message: 'unknown error' }, latencyMs: r.latencyMs, attempts: r.attempts, worker: r.worker };
}

/** The results of these ids that exist now (by id). */
export async function getChatCallResults(db: Db, ids: readonly string[]): Promise<Map<string, ChatCallResult>> {
  const out = new Map<string, ChatCallResult>();
  for (let i = 0; i < ids.length; i += 5000) for (const r of await getChatCalls(db, ids.slice(i, i + 5000))) out.set(r.key, rowToResult(r));
  return out;
}

export type ChatCallClientOptions = {
  db: Db;
  /** the provider-call queues by name (one Queue per name, kept open by the caller) */
  queue: (name: string) => Queue;
  /**
   * shards of each provider's queue (config.providerQueueShards): a job goes to the shard of its
   * id (providerCallQueueFor), so a re-submitted id finds its job and BullMQ's dedupe holds
   */
  shards: number;
  jobOptions: ChatCallJobOptions;
  origin?: string;
};

/**
 * Stores the requests, then enqueues a job for every id that has no result yet. An id already
 * stored keeps its first request (a resubmission never changes or repeats a call). Returns the
 * ids in order, and how many already had a result.
 */
export async function submitChatCalls(opts: ChatCallClientOptions, calls: readonly ChatCallSpec[]): Promise<{ ids: string[]; answered: number; enqueued: number }> {
  const ids: string[] = [];
  const seen = new Set<string>();
  for (const c of calls) {
    const id = chatCallIdSchema.safeParse(c.id);
    if (!id.success) throw new Error(`chat call id ${JSON.stringify(c.id)}: ${id.error.issues[0]!.message}`);
    if (seen.has(c.id)) throw new Error(`chat call id ${c.id} is given twice`);
    seen.add(c.id);
    ids.push(c.id);
  }
  const records = calls.map((c) => ({ id: c.id, workerId: c.worker.id, request: storable(c.request), sample: c.sample ?? 0, origin: opts.origin ?? 'chat-call' }));
  const added = await saveChatRequests(opts.db, records);
  // an id submitted again must mean the same call: another request under a known id is a bug of the caller
  const again = records.filter((r) => !added.has(r.id));
  if (again.length > 0) {
    const stored = new Map((await getChatRequests(opts.db, again.map((r) => r.id))).map((r) => [r.id, r]));
    for (const r of again) {
      const s = stored.get(r.id);
      if (s && (s.workerId !== r.workerId || s.sample !== r.sample || canonicalJson(s.request) !== canonicalJson(r.request))) {
        throw new InputError(`chat call ${r.id} was submitted before with another worker, sample or request; an id names one call (use a new id for another)`, { field: 'id' });
      }
    }
  }
  // only an id stored before can have a result: a call's row comes after its job, and its job
  // after its request (a job whose id has a row anyway makes no call: chatCallJob looks first)
  const answered = again.length > 0 ? await getChatCallResults(opts.db, again.map((r) => r.id)) : new Map<string, ChatCallResult>();
  const todo = calls.filter((c) => !answered.has(c.id));
  const enqueued = await enqueueStream(opts.queue, todo.map((c) => chatCallBulkJob(opts, c.id, c.worker.id, c.worker.provider)));
  return { ids, answered: answered.size, enqueued };
}

function chatCallBulkJob(opts: ChatCallClientOptions, id: string, workerId: number, provider: ProviderKind) {
  const queue = providerCallQueueFor(provider, id, opts.shards);
  const data: ChatCallJob = parseJob(chatCallJobSchema, { v: 1, id, workerId, provider }, queue);
  return {
    queue,
    name: CHAT_CALL_JOB,
    data,
    opts: { jobId: id, ...opts.jobOptions, removeOnComplete: true, removeOnFail: { age: 7 * 24 * 3600, count: 10_000 } } satisfies JobsOptions,
  };
}

/**
 * Puts back the jobs of stored chat calls that have no result and no live job: a job that failed
 * for good without a row (e.g. Postgres away through all its attempts) is removed and added again;
 * a job that is gone (a flushed Redis) is added again. Waiting, active and delayed jobs are left
 * alone. Returns the ids put back.
 */
export async function reconcileChatCalls(opts: ChatCallClientOptions, ids: readonly string[]): Promise<string[]> {
  const answered = await getChatCallResults(opts.db, ids);
  const open = ids.filter((id) => !answered.has(id));
  const back: string[] = [];
  for (const r of await getChatRequestWorkers(opts.db, open)) {
    const q = opts.queue(providerCallQueueFor(r.provider as ProviderKind, r.id, opts.shards));
    const state = await q.getJobState(r.id);
    if (state === 'failed') await (await Job.fromId(q, r.id))?.remove();
    else if (state !== 'unknown' && state !== 'completed') continue;
    back.push(r.id);
  }
  const byId = new Map((await getChatRequestWorkers(opts.db, back)).map((r) => [r.id, r]));
  await enqueueStream(opts.queue, back.map((id) => chatCallBulkJob(opts, id, byId.get(id)!.workerId, byId.get(id)!.provider as ProviderKind)));
  return back;
}

export type WaitOptions = {
  /** give up after this long (default: wait as long as it takes) */
  timeoutMs?: number;
  /** how often Postgres is asked for the ids still open (default 100 ms) */
  pollMs?: number;
  signal?: AbortSignal;
  /** called as results come in (e.g. progress) */
  onResults?: (results: ChatCallResult[], done: number, total: number) => void;
  /**
   * with the queues: when no result has come for `stallMs` (default 15 s), put back the jobs of
   * open ids that failed for good or are gone (reconcileChatCalls), as `fugu eval` does for runs
   */
  reconcile?: { client: ChatCallClientOptions; stallMs?: number };
  /** wake when one of the ids' jobs completes (the poll stays as a backstop) */
  events?: ChatCallEvents;
};

/**
 * Waits for the results of many chat calls at once: one query per poll for the ids still open.
 * Resolves with every result by id, or rejects on timeout or abort naming how many are open.
 */
export async function waitForChatCalls(db: Db, ids: readonly string[], opts: WaitOptions = {}): Promise<Map<string, ChatCallResult>> {
  const out = new Map<string, ChatCallResult>();
  let open = [...new Set(ids)];
  const deadline = opts.timeoutMs === undefined ? Infinity : Date.now() + opts.timeoutMs;
  const pollMs = opts.pollMs ?? 100;
  let progressAt = Date.now();
  for (;;) {
    // armed before the query: a completion between the query and the wait still wakes it
    const armed = opts.events?.arm(open);
    const got = await getChatCallResults(db, open);
    if (got.size > 0) {
      progressAt = Date.now();
      for (const [id, r] of got) out.set(id, r);
      open = open.filter((id) => !got.has(id));
      opts.onResults?.([...got.values()], out.size, out.size + open.length);
    }
    if (open.length === 0) {
      armed?.cancel();
      return out;
    }
    if (opts.reconcile && Date.now() - progressAt >= (opts.reconcile.stallMs ?? 15_000)) {
      await reconcileChatCalls(opts.reconcile.client, open).catch(() => []);
      progressAt = Date.now();
    }
    const wait = Math.min(pollMs, deadline - Date.now());
    if (opts.signal?.aborted || wait <= 0) {
      armed?.cancel();
      if (opts.signal?.aborted) throw new Error(`waiting for chat calls aborted with ${open.length} of ${ids.length} open`);
      throw new Error(`timed out waiting for chat calls: ${open.length} of ${ids.length} open (first: ${open[0]})`);
    }
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([new Promise((r) => (timer = setTimeout(r, wait))), ...(armed ? [armed.fired] : [])]);
    clearTimeout(timer);
    armed?.cancel();
  }
}

/**
 * What a chat-call job needs before its call, in one query: the status of the id's row when it
 * has one (answered already: no call), else the stored request (undefined: none under the id).
 */
export async function loadChatCallJob(
  db: Db,
  job: ChatCallJob,
  /** the state's loader (default one query per job; a worker process batches them: BatchLoader over getChatCallJobStates) */
  state: (id: string) => Promise<ChatCallJobState | undefined> = (id) => getChatCallJobState(db, id),
): Promise<{ existing: CallStatus } | { existing?: undefined; request: ChatRequest; sample: number } | undefined> {
  const row = (await state(job.id))!;
  if (row.status !== null) return { existing: row.status };
  if (row.workerId === null) return undefined;
  if (row.workerId !== job.workerId) throw new Error(`chat call ${job.id}: the job names worker ${job.workerId}, the stored request worker ${row.workerId}`);
  return { request: row.request as unknown as ChatRequest, sample: row.sample! };
}

/**
 * Completions of chat-call jobs as they happen (BullMQ's queue events of the provider queues), so
 * a waiter wakes when one of its ids completes instead of at its next poll. A chat-call job
 * completes after its chat_calls row is written, so the row is there when the event arrives.
 * One QueueEvents (a blocking Redis connection) per queue, opened on first use.
 */
export class ChatCallEvents {
  readonly #connection: () => RedisClient;
  readonly #prefix: string;
  readonly #events = new Map<string, QueueEvents>();
  readonly #connections: RedisClient[] = [];
  readonly #waiters = new Map<string, Set<() => void>>();

  constructor(o: { connection: () => RedisClient; prefix: string }) {
    this.#connection = o.connection;
    this.#prefix = o.prefix;
  }

  /** Listen on these queues (idempotent); resolves once they are subscribed. */
  async listen(queues: Iterable<string>): Promise<void> {
    const ready: Array<Promise<unknown>> = [];
    for (const name of queues) {
      if (this.#events.has(name)) continue;
      const connection = this.#connection();
      this.#connections.push(connection);
      const qe = new QueueEvents(name, { connection, prefix: this.#prefix });
      const fire = ({ jobId }: { jobId: string }) => {
        const ws = this.#waiters.get(jobId);
        if (ws) for (const w of ws) w();
      };
      qe.on('completed', fire);
      qe.on('failed', fire);
      qe.on('error', () => {});
      this.#events.set(name, qe);
      ready.push(qe.waitUntilReady());
    }
    await Promise.all(ready);
  }

  /** A promise that resolves when any of `ids` completes from now on; `cancel` stops listening for them. */
  arm(ids: readonly string[]): { fired: Promise<void>; cancel(): void } {
    let resolve!: () => void;
    const fired = new Promise<void>((r) => (resolve = r));
    for (const id of ids) {
      let ws = this.#waiters.get(id);
      if (!ws) this.#waiters.set(id, (ws = new Set()));
      ws.add(resolve);
    }
    const cancel = () => {
      for (const id of ids) {
        const ws = this.#waiters.get(id);
        if (!ws) continue;
        ws.delete(resolve);
        if (ws.size === 0) this.#waiters.delete(id);
      }
    };
    return { fired, cancel };
  }

  async close(): Promise<void> {
    await Promise.all([...this.#events.values()].map((q) => q.close().catch(() => {})));
    for (const c of this.#connections.splice(0)) c.disconnect();
    this.#events.clear();
    this.#waiters.clear();
  }
}
