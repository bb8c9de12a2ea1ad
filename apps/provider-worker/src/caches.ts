// Read-through caches of what every job needs: items (batched loads), workers, run status.
import { getItems, getRun, getWorkersByIds, type Db, type StoredItem, type StoredWorker } from '@fugu/db';
import type { RunStatus } from '@fugu/db';
import { BatchLoader } from '@fugu/calls';

/** Loads items by id, coalescing the ids asked for in one turn of the event loop into one query. */
export class ItemLoader {
  readonly #max: number;
  readonly #cache = new Map<number, StoredItem>();
  readonly #loader: BatchLoader<number, StoredItem>;

  constructor(db: Db, max = 50_000) {
    this.#max = max;
    this.#loader = new BatchLoader(async (ids: number[]) => {
      const items = await getItems(db, ids);
      if (this.#cache.size + items.length > this.#max) this.#cache.clear();
      for (const it of items) this.#cache.set(it.dbId, it);
      return new Map(items.map((it) => [it.dbId, it]));
    });
  }

  peek(id: number): StoredItem | undefined {
    return this.#cache.get(id);
  }

  async get(id: number): Promise<StoredItem> {
    const it = this.#cache.get(id) ?? (await this.#loader.get(id));
    if (!it) throw new Error(`item ${id} does not exist`);
    return it;
  }
}

export class WorkerCache {
  readonly #db: Db;
  readonly #cache = new Map<number, Promise<StoredWorker>>();
  constructor(db: Db) {
    this.#db = db;
  }
  get(id: number): Promise<StoredWorker> {
    let p = this.#cache.get(id);
    if (!p) {
      p = getWorkersByIds(this.#db, [id]).then((ws) => {
        if (!ws[0]) throw new Error(`worker ${id} does not exist`);
        return ws[0];
      });
      p.catch(() => this.#cache.delete(id));
      this.#cache.set(id, p);
    }
    return p;
  }
}

/** Run status, re-read at most every `ttlMs`, so pausing a run stops its jobs within that time. */
export class RunStatusCache {
  readonly #db: Db;
  readonly #ttlMs: number;
  readonly #cache = new Map<string, { at: number; status: Promise<RunStatus | undefined> }>();
  constructor(db: Db, ttlMs = 1_000) {
    this.#db = db;
    this.#ttlMs = ttlMs;
  }
  get(runId: string): Promise<RunStatus | undefined> {
    const hit = this.#cache.get(runId);
    if (hit && Date.now() - hit.at < this.#ttlMs) return hit.status;
    const status = getRun(this.#db, runId).then((r) => r?.status);
    status.catch(() => this.#cache.delete(runId));
    this.#cache.set(runId, { at: Date.now(), status });
    return status;
  }
  set(runId: string, status: RunStatus): void {
    this.#cache.set(runId, { at: Date.now(), status: Promise.resolve(status) });
  }
}
