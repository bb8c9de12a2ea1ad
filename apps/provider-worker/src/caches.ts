// Read-through caches of what every job needs: items (batched loads), workers, run status.
import { getItems, getRun, getWorkersByIds, type Db, type StoredItem, type StoredWorker } from '@fugu/db';
import type { RunStatus } from '@fugu/db';

/** Loads items by id, coalescing the ids asked for in one turn of the event loop into one query. */
export class ItemLoader {
  readonly #db: Db;
  readonly #max: number;
  readonly #cache = new Map<number, StoredItem>();
  #waiting = new Map<number, Array<{ resolve: (i: StoredItem) => void; reject: (e: unknown) => void }>>();
  #scheduled = false;

  constructor(db: Db, max = 50_000) {
    this.#db = db;
    this.#max = max;
  }

  peek(id: number): StoredItem | undefined {
    return this.#cache.get(id);
  }

  get(id: number): Promise<StoredItem> {
    const hit = this.#cache.get(id);
    if (hit) return Promise.resolve(hit);
    return new Promise((resolve, reject) => {
      const list = this.#waiting.get(id);
      if (list) list.push({ resolve, reject });
      else this.#waiting.set(id, [{ resolve, reject }]);
      if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => void this.#load());
      }
    });
  }

  async #load(): Promise<void> {
    this.#scheduled = false;
    const waiting = this.#waiting;
    this.#waiting = new Map();
    try {
      const items = await getItems(this.#db, [...waiting.keys()]);
      if (this.#cache.size + items.length > this.#max) this.#cache.clear();
      for (const it of items) this.#cache.set(it.dbId, it);
      for (const [id, list] of waiting) {
        const it = this.#cache.get(id);
        for (const w of list) {
          if (it) w.resolve(it);
          else w.reject(new Error(`item ${id} does not exist`));
        }
      }
    } catch (e) {
      for (const list of waiting.values()) for (const w of list) w.reject(e);
    }
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
