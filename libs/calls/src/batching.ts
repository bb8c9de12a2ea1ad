// Coalescing of many small database round trips into few large ones, for the jobs of one worker
// process: what the jobs running at the same time write or read in one turn of the event loop
// (or within `lingerMs`) goes to Postgres as one statement. A job still waits for its own write
// (its promise settles when the statement has committed), so a crash loses nothing a job has
// reported done.

export type WriteBatcherOptions<T> = {
  /** items per statement at most */
  maxBatch: number;
  /**
   * how long a batch waits for more items before it is written (default 0: what arrived in this
   * turn of the event loop). A few ms make batches larger (less per-statement work) and each
   * write that much later.
   */
  lingerMs?: number;
  /**
   * writes a batch (a throw rejects every item of it); may return what to do once the items'
   * writers have been told (e.g. act on what the statement returned)
   */
  write: (items: T[]) => Promise<(() => Promise<void> | void) | void>;
  /**
   * a batch of several items failed with this error: write them again one at a time, so an item
   * that cannot be written (a constraint it breaks) fails alone and its batch-mates are written
   * (default: never; give it for errors that belong to one item, not to the database being away)
   */
  splitOn?: (e: unknown) => boolean;
};

type Pending<T> = { item: T; resolve: () => void; reject: (e: unknown) => void };

/** Batches writes: one `write` of many items at a time, in order, each item's promise settled with its batch. */
export class WriteBatcher<T> {
  readonly #o: Required<WriteBatcherOptions<T>>;
  #queue: Array<Pending<T>> = [];
  #flushing: Promise<void> | undefined;
  #scheduled = false;

  constructor(o: WriteBatcherOptions<T>) {
    this.#o = { lingerMs: 0, splitOn: () => false, ...o };
  }

  write(item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ item, resolve, reject });
      this.#schedule();
    });
  }

  /** items waiting to be written */
  get pending(): number {
    return this.#queue.length;
  }

  #schedule(): void {
    if (this.#scheduled || this.#flushing) return;
    this.#scheduled = true;
    const go = () => {
      this.#scheduled = false;
      this.#flushing = this.#drain().finally(() => {
        this.#flushing = undefined;
        if (this.#queue.length > 0) this.#schedule();
      });
    };
    if (this.#o.lingerMs > 0 && this.#queue.length < this.#o.maxBatch) setTimeout(go, this.#o.lingerMs);
    else setImmediate(go);
  }

  async #drain(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue.splice(0, this.#o.maxBatch);
      let after: (() => Promise<void> | void) | void;
      try {
        after = await this.#o.write(batch.map((p) => p.item));
      } catch (e) {
        if (batch.length > 1 && this.#o.splitOn(e)) await this.#oneByOne(batch);
        else for (const p of batch) p.reject(e);
        continue;
      }
      for (const p of batch) p.resolve();
      await after?.();
    }
  }

  /** A failed batch's items again, each in a statement of its own. */
  async #oneByOne(batch: Array<Pending<T>>): Promise<void> {
    for (const p of batch) {
      let after: (() => Promise<void> | void) | void;
      try {
        after = await this.#o.write([p.item]);
      } catch (e) {
        p.reject(e);
        continue;
      }
      p.resolve();
      await after?.();
    }
  }

  /** Waits until everything written so far is committed (or failed). */
  async flush(): Promise<void> {
    while (this.#queue.length > 0 || this.#flushing || this.#scheduled) {
      if (this.#flushing) await this.#flushing.catch(() => {});
      else await new Promise((r) => setTimeout(r, 1));
    }
  }
}

/**
 * Batches reads by key: the keys asked for in one turn of the event loop go to `load` together
 * (one query); each caller gets its key's value, or undefined when `load` returned none for it.
 */
export class BatchLoader<K, V> {
  readonly #load: (keys: K[]) => Promise<Map<K, V>>;
  readonly #maxBatch: number;
  #waiting = new Map<K, Array<{ resolve: (v: V | undefined) => void; reject: (e: unknown) => void }>>();
  #scheduled = false;

  constructor(load: (keys: K[]) => Promise<Map<K, V>>, maxBatch = 1000) {
    this.#load = load;
    this.#maxBatch = maxBatch;
  }

  get(key: K): Promise<V | undefined> {
    return new Promise((resolve, reject) => {
      const list = this.#waiting.get(key);
      if (list) list.push({ resolve, reject });
      else this.#waiting.set(key, [{ resolve, reject }]);
      if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => void this.#run());
      }
    });
  }

  async #run(): Promise<void> {
    this.#scheduled = false;
    const waiting = [...this.#waiting];
    this.#waiting = new Map();
    for (let i = 0; i < waiting.length; i += this.#maxBatch) {
      const chunk = waiting.slice(i, i + this.#maxBatch);
      try {
        const got = await this.#load(chunk.map(([k]) => k));
        for (const [k, list] of chunk) for (const w of list) w.resolve(got.get(k));
      } catch (e) {
        for (const [, list] of chunk) for (const w of list) w.reject(e);
      }
    }
  }
}
