// RouterThreadPool: Router inference in node:worker_threads. N threads, each with its own ONNX
// Runtime sessions (intra-op threads per session = max(1, floor(cores / N)), spinning off), fed
// by a MicroBatcher in the main thread (up to maxBatch requests or maxWaitMs, then one batch to a
// free thread). swap() publishes a new checkpoint to every thread without dropping requests:
// a batch already sent finishes on the checkpoint it started with (messages to a thread are
// ordered, and a thread reads its Router once at a batch's start), later batches use the new one.
// A thread that dies is restarted; its batch fails (the route queue retries such jobs).
import { Worker } from 'node:worker_threads';
import { InputError } from '@fugu/core';
import { loadUseLite, thetaSize, type SvfLayer, resolveExecutionProvider, threadsPerSession, useLiteSvfLayer, type ExecutionProviderSetting, type ResolvedExecution } from '@fugu/router-model';
import { MicroBatcher } from './batcher.ts';
import { fromWireError } from '@fugu/core';
import { RouterUnavailableError } from './errors.ts';
import type { RouterCheckpoint, RouterDecision } from './router.ts';
import type { RouterThreadData } from './router-thread.ts';
import type { ThreadItem, ThreadRequest, ThreadResponse } from './thread-protocol.ts';
import type { RouteDecision } from './types.ts';

export type PoolBatchInfo = {
  size: number;
  thread: number;
  /** per request: ms between route() and the batch leaving for a thread */
  waitMs: number[];
  /** ms the thread spent in the Router (encode + head + policy) */
  inferenceMs: number;
  checkpointId: string | null;
};

export type PoolStats = {
  threads: number;
  intraOpThreads: number;
  executionProvider: 'cpu' | 'cuda';
  checkpointId: string | null;
  batches: number;
  requests: number;
  maxBatchSeen: number;
  meanBatch: number;
  /** total ms inside threads' Router calls */
  inferenceMs: number;
  queued: number;
};

export type RouterThreadPoolOptions = {
  /** FUGU_HOME: the SVD cache of the backbone */
  home: string;
  /** worker threads, default 1 */
  threads?: number;
  /** B, default 16 */
  maxBatch?: number;
  /** T, default 2 */
  maxWaitMs?: number;
  /** default 'auto' */
  executionProvider?: ExecutionProviderSetting;
  /** default threadsPerSession(threads) */
  intraOpNumThreads?: number;
  /** the checkpoint to start with (else: not ready until swap) */
  checkpoint?: RouterCheckpoint;
  log?: (msg: string, extra?: Record<string, unknown>) => void;
  /** after each batch (metrics) */
  onBatch?: (info: PoolBatchInfo) => void;
};

type ThreadSlot = {
  index: number;
  worker: Worker;
  ready: Promise<void>;
  alive: boolean;
};

type BatchResult = Array<{ ok: true; value: RouterDecision } | { ok: false; error: Error }>;

const fromWire = fromWireError;

export class RouterThreadPool {
  readonly execution: ResolvedExecution;
  readonly intraOpThreads: number;
  readonly backboneId: string;
  private readonly opts: RouterThreadPoolOptions;
  private readonly svfLayer: SvfLayer;
  private readonly slots: ThreadSlot[] = [];
  private readonly batcher: MicroBatcher<ThreadItem & { at: number }, RouterDecision>;
  private readonly pending = new Map<number, { resolve: (r: BatchResult) => void; slot: number; size: number; waitMs: number[] }>();
  private readonly acks = new Map<string, { resolve: () => void; reject: (e: Error) => void }>();
  private current: RouterCheckpoint | undefined;
  private nextId = 1;
  private seq = 0;
  private closed = false;
  private counters = { batches: 0, requests: 0, maxBatchSeen: 0, inferenceMs: 0 };

  private constructor(opts: RouterThreadPoolOptions, execution: ResolvedExecution, backboneId: string, svfLayer: SvfLayer) {
    this.opts = opts;
    this.execution = execution;
    this.backboneId = backboneId;
    this.svfLayer = svfLayer;
    const threads = opts.threads ?? 1;
    this.intraOpThreads = opts.intraOpNumThreads ?? threadsPerSession(threads);
    this.current = opts.checkpoint;
    this.batcher = new MicroBatcher({
      maxBatch: opts.maxBatch ?? 16,
      maxWaitMs: opts.maxWaitMs ?? 2,
      runners: threads,
      run: (items, runner) => this.runBatch(items, runner),
    });
  }

  /** Loads the backbone's SVF layer once (computing the SVD if it is not cached), starts the threads. */
  static async create(opts: RouterThreadPoolOptions): Promise<RouterThreadPool> {
    const threads = opts.threads ?? 1;
    if (!Number.isInteger(threads) || threads < 1) throw new InputError(`router threads must be a positive integer, got ${threads}`, { field: 'threads' });
    const execution = resolveExecutionProvider(opts.executionProvider ?? 'auto');
    const backbone = await loadUseLite();
    const layer = await useLiteSvfLayer(opts.home, backbone);
    const pool = new RouterThreadPool(opts, execution, backbone.backboneId, layer);
    if (opts.checkpoint) pool.check(opts.checkpoint);
    opts.log?.(`router inference: ${execution.reason}; ${threads} thread${threads > 1 ? 's' : ''} x ${pool.intraOpThreads} ONNX Runtime thread${pool.intraOpThreads > 1 ? 's' : ''} per session, spinning off`, {
      executionProvider: execution.provider,
      threads,
      intraOpThreads: pool.intraOpThreads,
    });
    for (let i = 0; i < threads; i++) pool.slots.push(pool.spawn(i));
    try {
      await Promise.all(pool.slots.map((s) => s.ready));
    } catch (e) {
      await pool.close();
      throw e;
    }
    return pool;
  }

  /** the checkpoint new batches use (undefined: none yet) */
  get checkpointId(): string | undefined {
    return this.current?.id;
  }

  get ready(): boolean {
    return this.current !== undefined && !this.closed;
  }

  /** One decision; the micro-batcher groups concurrent calls. routingMs = wait + inference. */
  async route(req: ThreadItem): Promise<RouteDecision> {
    if (this.closed) throw new RouterUnavailableError('the router thread pool is closed');
    if (!this.current) throw new RouterUnavailableError('no router checkpoint is loaded yet (publish one: fugu router publish <checkpoint>)');
    const at = performance.now();
    const d = await this.batcher.submit({ text: req.text, ...(req.allowed && { allowed: req.allowed }), ...(req.lambda !== undefined && { lambda: req.lambda }), at });
    return { worker: d.worker, workers: d.workers, probs: d.probs, checkpointId: d.checkpointId, routingMs: performance.now() - at };
  }

  /** Publishes a checkpoint to every thread; resolves when all have it. Requests are not dropped. */
  async swap(checkpoint: RouterCheckpoint): Promise<void> {
    this.check(checkpoint);
    this.current = checkpoint;
    await Promise.all(this.slots.filter((s) => s.alive).map((s) => this.sendCheckpoint(s, checkpoint)));
    this.opts.log?.(`router checkpoint ${checkpoint.id} loaded`, { checkpoint: checkpoint.id });
  }

  stats(): PoolStats {
    const c = this.counters;
    return {
      threads: this.slots.length,
      intraOpThreads: this.intraOpThreads,
      executionProvider: this.execution.provider,
      checkpointId: this.current?.id ?? null,
      batches: c.batches,
      requests: c.requests,
      maxBatchSeen: c.maxBatchSeen,
      meanBatch: c.batches ? c.requests / c.batches : 0,
      inferenceMs: c.inferenceMs,
      queued: this.batcher.queued,
    };
  }

  /** Waits for queued and running requests (until `deadline`), then stops the threads. */
  async close(deadline = Date.now() + 10_000): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.race([this.batcher.idle(), new Promise((r) => setTimeout(r, Math.max(0, deadline - Date.now())).unref())]);
    this.batcher.rejectQueued(new RouterUnavailableError('the router thread pool is closed'));
    await Promise.all(
      this.slots.map(async (s) => {
        s.alive = false;
        await s.worker.terminate().catch(() => {});
      }),
    );
  }

  private check(c: RouterCheckpoint): void {
    if (c.backboneId !== this.backboneId) throw new InputError(`checkpoint ${c.id} was trained on backbone ${c.backboneId}, not ${this.backboneId}`, { field: 'checkpoint' });
    const want = thetaSize({ rank: this.svfLayer.rank, dim: this.svfLayer.outDim, workers: c.workers.length });
    if (c.theta.length !== want) throw new InputError(`checkpoint ${c.id}: theta has ${c.theta.length} floats, the head for ${c.workers.length} workers needs ${want}`, { field: 'checkpoint' });
  }

  private sendCheckpoint(slot: ThreadSlot, checkpoint: RouterCheckpoint): Promise<void> {
    const seq = ++this.seq;
    return new Promise<void>((resolve, reject) => {
      this.acks.set(`${slot.index}:${seq}`, { resolve, reject });
      this.post(slot, { type: 'checkpoint', seq, checkpoint });
    });
  }

  private post(slot: ThreadSlot, msg: ThreadRequest): void {
    slot.worker.postMessage(msg);
  }

  private spawn(index: number): ThreadSlot {
    const data: RouterThreadData = { home: this.opts.home, execution: this.execution, intraOpNumThreads: this.intraOpThreads, svfLayer: this.svfLayer };
    const worker = new Worker(new URL('./router-thread.ts', import.meta.url), { workerData: data });
    let readyResolve!: () => void, readyReject!: (e: Error) => void;
    const slot: ThreadSlot = { index, worker, alive: true, ready: new Promise<void>((res, rej) => ((readyResolve = res), (readyReject = rej))) };
    slot.ready.catch(() => {});
    worker.on('message', (m: ThreadResponse) => {
      switch (m.type) {
        case 'ready':
          if (this.current) this.sendCheckpoint(slot, this.current).then(readyResolve, readyReject);
          else readyResolve();
          return;
        case 'fatal':
          readyReject(new Error(`router thread ${index} could not start: ${m.error.message}`));
          return;
        case 'checkpoint': {
          const key = `${index}:${m.seq}`;
          const ack = this.acks.get(key);
          this.acks.delete(key);
          if (m.error) ack?.reject(fromWire(m.error));
          else ack?.resolve();
          return;
        }
        case 'result': {
          const p = this.pending.get(m.id);
          if (!p) return;
          this.pending.delete(m.id);
          const c = this.counters;
          c.batches++;
          c.requests += p.size;
          c.maxBatchSeen = Math.max(c.maxBatchSeen, p.size);
          c.inferenceMs += m.inferenceMs;
          this.opts.onBatch?.({ size: p.size, thread: index, waitMs: p.waitMs, inferenceMs: m.inferenceMs, checkpointId: m.checkpointId });
          p.resolve(m.results.map((r) => (r.ok ? { ok: true as const, value: r.decision } : { ok: false as const, error: fromWire(r.error) })));
          return;
        }
      }
    });
    const died = (why: string) => {
      if (!slot.alive) return;
      slot.alive = false;
      readyReject(new Error(`router thread ${index} ${why}`));
      if (this.closed) return;
      this.batcher.setRunnerEnabled(index, false);
      for (const [id, p] of this.pending) {
        if (p.slot !== index) continue;
        this.pending.delete(id);
        p.resolve(Array.from({ length: p.size }, () => ({ ok: false as const, error: new RouterUnavailableError(`router thread ${index} ${why}`) })));
      }
      for (const [key, a] of this.acks) {
        if (!key.startsWith(`${index}:`)) continue;
        this.acks.delete(key);
        a.resolve(); // the restarted thread gets the current checkpoint at its start
      }
      this.opts.log?.(`router thread ${index} ${why}: restarting it`, { thread: index });
      const next = this.spawn(index);
      this.slots[index] = next;
      next.ready.then(
        () => this.batcher.setRunnerEnabled(index, true),
        (e: unknown) => this.opts.log?.(`router thread ${index} could not restart: ${(e as Error).message}`, { thread: index }),
      );
    };
    worker.on('error', (e) => died(`failed: ${e.message}`));
    worker.on('exit', (code) => died(`exited (code ${code})`));
    return slot;
  }

  private runBatch(items: Array<ThreadItem & { at: number }>, runner: number): Promise<BatchResult> {
    const slot = this.slots[runner]!;
    const id = this.nextId++;
    const now = performance.now();
    return new Promise<BatchResult>((resolve) => {
      this.pending.set(id, { resolve, slot: runner, size: items.length, waitMs: items.map((i) => now - i.at) });
      this.post(slot, { type: 'batch', id, items: items.map(({ at: _at, ...rest }) => rest) });
    });
  }
}
