// The staged loop with a driver that is not ES: a toy optimiser over a 1-D function, its jobs
// evaluated by a test evaluator (a BullMQ worker writing result rows), on real Redis and Postgres.
// Shows that fan-out (one flow), re-dispatch (after failed children, at the deadline) and exact
// resume belong to the loop, not to the ES driver.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Worker, type Job } from 'bullmq';
import { sql } from 'kysely';
import { InputError, WireFailure } from '@fugu/core';
import type { Db } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { createRedis, type RedisClient } from '@fugu/queue';
import { runStagedLoop, type LoopDispatchEvent, type LoopIteration, type LoopJob, type StagedDriver, type StagedLoopOptions } from './loop.ts';

const redisUrl = process.env.FUGU_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = `fugul${randomBytes(4).toString('hex')}`;
const EVAL = 'toy-eval';
const FANIN = 'toy-fanin';
/** candidates per iteration, iterations per run */
const P = 4;
const ITERATIONS = 5;

type ToyState = { m: number; s: number };
type ToyIteration = LoopIteration & { state: ToyState };
type ToyUpdate = { state: ToyState; best: number };

/** maximise f(x) = -(x - 3)^2 by a shrinking grid around the best point so far */
const f = (x: number): number => -((x - 3) ** 2);
const candidate = (s: ToyState, i: number): number => s.m + s.s * (i - (P - 1) / 2);

class ToyDriver implements StagedDriver<ToyIteration, number, ToyUpdate> {
  readonly evalQueue = EVAL;
  readonly faninQueue = FANIN;
  readonly attempts = 1;
  readonly deadlineMs: number;
  private readonly db: Db;
  private readonly run: string;
  constructor(db: Db, run: string, deadlineMs = 60_000) {
    this.db = db;
    this.run = run;
    this.deadlineMs = deadlineMs;
  }
  async load(): Promise<ToyIteration | null> {
    const r = await sql<{ iteration: number; m: number; s: number }>`select iteration, m, s from toy_state where run = ${this.run}`.execute(this.db);
    const row = r.rows[0]!;
    if (row.iteration >= ITERATIONS) return null;
    return { index: row.iteration, keys: Array.from({ length: P }, (_, i) => String(i)), state: { m: row.m, s: row.s } };
  }
  flow(it: ToyIteration, keys: readonly string[], dispatch: string): { parent: LoopJob; children: LoopJob[] } {
    return {
      parent: { name: 'fanin', data: { run: this.run, iteration: it.index, dispatch }, jobId: `${this.run}.i${it.index}.fanin.${dispatch}` },
      children: keys.map((key) => ({ name: 'eval', data: { run: this.run, iteration: it.index, key, x: candidate(it.state, Number(key)) }, jobId: `${this.run}.i${it.index}.${key}.${dispatch}` })),
    };
  }
  fannedIn(data: unknown): { index: number; dispatch: string } | null {
    const d = data as { run: string; iteration: number; dispatch: string };
    return d.run === this.run ? { index: d.iteration, dispatch: d.dispatch } : null;
  }
  async countResults(it: ToyIteration): Promise<number> {
    const r = await sql<{ n: string }>`select count(*) as n from toy_results where run = ${this.run} and iteration = ${it.index}`.execute(this.db);
    return Number(r.rows[0]!.n);
  }
  async results(it: ToyIteration): Promise<Map<string, number>> {
    const r = await sql<{ key: string; value: number }>`select key, value from toy_results where run = ${this.run} and iteration = ${it.index}`.execute(this.db);
    return new Map(r.rows.map((x) => [x.key, x.value]));
  }
  fanIn(it: ToyIteration, results: ReadonlyMap<string, number>): ToyUpdate {
    let best = 0;
    for (const k of it.keys) if (results.get(k)! > results.get(String(best))!) best = Number(k);
    return { state: { m: candidate(it.state, best), s: it.state.s * 0.6 }, best: results.get(String(best))! };
  }
  async commit(it: ToyIteration, u: ToyUpdate): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await sql`insert into toy_iterations (run, iteration, best) values (${this.run}, ${it.index}, ${u.best})`.execute(trx);
      const r = await sql`update toy_state set iteration = iteration + 1, m = ${u.state.m}, s = ${u.state.s} where run = ${this.run} and iteration = ${it.index}`.execute(trx);
      if (Number(r.numAffectedRows) !== 1) throw new Error(`toy run ${this.run}: iteration ${it.index} committed twice`);
    });
  }
  async finish(status: 'completed' | 'failed', reason?: string): Promise<void> {
    await sql`update toy_state set status = ${status}, reason = ${reason ?? null} where run = ${this.run}`.execute(this.db);
  }
}

let t: TestDatabase;
let producer: RedisClient;
const conns: RedisClient[] = [];
const conn = (): RedisClient => {
  const c = createRedis(redisUrl, 'worker');
  conns.push(c);
  return c;
};

/**
 * The test evaluator. `fail`: (run/iteration/key) keys that throw once (an InputError, as a
 * WireFailure); `hang`: keys whose first job is taken and held until `release()` (then recorded:
 * the first result wins, a later one inserts nothing).
 * Records the parent of every job it evaluates.
 */
function evaluator(opts: { fail?: Set<string>; hang?: Set<string> } = {}) {
  const parents: string[] = [];
  let release!: () => void;
  const hung = new Promise<void>((r) => (release = r));
  const worker = new Worker(
    EVAL,
    async (j: Job) => {
      const d = j.data as { run: string; iteration: number; key: string; x: number };
      const id = `${d.run}/${d.iteration}/${d.key}`;
      parents.push(j.parentKey ?? '');
      if (opts.hang?.delete(id)) await hung;
      if (opts.fail?.delete(id)) throw new WireFailure(new InputError(`synthetic failure of ${id}`, { field: 'x' }));
      await sql`insert into toy_results (run, iteration, key, value) values (${d.run}, ${d.iteration}, ${d.key}, ${f(d.x)}) on conflict do nothing`.execute(t.db);
    },
    { connection: conn(), prefix, concurrency: 8 },
  );
  return {
    parents,
    release,
    async close() {
      release();
      await worker.close();
    },
  };
}

async function newRun(run: string): Promise<void> {
  await sql`insert into toy_state (run, iteration, m, s, status) values (${run}, 0, 0, 1, 'running')`.execute(t.db);
}

const loop = (driver: ToyDriver, extra: Partial<StagedLoopOptions<ToyUpdate>> = {}) =>
  runStagedLoop(driver, { connection: producer, workerConnection: conn(), prefix, pollMs: 50, ...extra });

const finalState = async (run: string) =>
  (await sql<{ iteration: number; m: number; s: number; status: string }>`select iteration, m, s, status from toy_state where run = ${run}`.execute(t.db)).rows[0];
const iterations = async (run: string) =>
  (await sql<{ iteration: number; best: number }>`select iteration, best from toy_iterations where run = ${run} order by iteration`.execute(t.db)).rows;

beforeAll(async () => {
  t = await createTestDatabase();
  producer = createRedis(redisUrl, 'producer');
  await sql`create table toy_state (run text primary key, iteration int not null, m double precision not null, s double precision not null, status text not null, reason text)`.execute(t.db);
  await sql`create table toy_results (run text, iteration int, key text, value double precision not null, primary key (run, iteration, key))`.execute(t.db);
  await sql`create table toy_iterations (run text, iteration int, best double precision not null, primary key (run, iteration))`.execute(t.db);
});
afterAll(async () => {
  const keys = await producer.keys(`${prefix}:*`);
  if (keys.length) await producer.del(...keys);
  producer?.disconnect();
  for (const c of conns) c.disconnect();
  await t?.drop();
});

describe('the staged loop with a second (non-ES) driver', () => {
  let reference: Awaited<ReturnType<typeof finalState>>;

  it('fans out one flow per iteration, fans in, commits every iteration once and completes', async () => {
    const ev = evaluator();
    try {
      await newRun('plain');
      const dispatches: LoopDispatchEvent[] = [];
      const r = await loop(new ToyDriver(t.db, 'plain'), { onDispatch: (d) => dispatches.push(d) });
      expect(r.status).toBe('completed');
      reference = await finalState('plain');
      expect(reference).toMatchObject({ iteration: ITERATIONS, status: 'completed' });
      expect((await iterations('plain')).map((x) => x.iteration)).toEqual([0, 1, 2, 3, 4]);
      // one dispatch per iteration, all of its jobs, as children of a fan-in parent
      expect(dispatches.map((d) => [d.index, d.jobs, d.reason])).toEqual([0, 1, 2, 3, 4].map((i) => [i, P, 'start']));
      expect(ev.parents).toHaveLength(ITERATIONS * P);
      expect(ev.parents.every((p) => p.includes(`${prefix}:${FANIN}:plain.i`))).toBe(true);
      // it optimises: the best value rises to the optimum's neighbourhood
      const best = (await iterations('plain')).map((x) => x.best);
      expect(best[ITERATIONS - 1]!).toBeGreaterThan(best[0]!);
      expect(Math.abs(reference!.m - 3)).toBeLessThan(0.1);
    } finally {
      await ev.close();
    }
  });

  it('re-dispatches the children that failed for good (their errors arrive in the wire format) and ends where a run without failures ends', async () => {
    const ev = evaluator({ fail: new Set(['flaky/1/2', 'flaky/3/0']) });
    try {
      await newRun('flaky');
      const dispatches: LoopDispatchEvent[] = [];
      const r = await loop(new ToyDriver(t.db, 'flaky'), { onDispatch: (d) => dispatches.push(d) });
      expect(r.status).toBe('completed');
      const again = dispatches.filter((d) => d.reason !== 'start');
      expect(again.map((d) => [d.index, d.jobs, d.reason])).toEqual([[1, 1, 'failed-children'], [3, 1, 'failed-children']]);
      expect(again[0]!.failures).toEqual([expect.objectContaining({ code: 'bad-input', name: 'InputError', fields: { field: 'x' } })]);
      expect(await finalState('flaky')).toEqual(reference);
    } finally {
      await ev.close();
    }
  });

  it('re-dispatches a job still held at the deadline', async () => {
    // the first job of (iteration 2, key 0) is taken and held until the end of the test
    const ev = evaluator({ hang: new Set(['late/2/0']) });
    try {
      await newRun('late');
      const dispatches: LoopDispatchEvent[] = [];
      const r = await loop(new ToyDriver(t.db, 'late', 300), { onDispatch: (d) => dispatches.push(d) });
      expect(r.status).toBe('completed');
      // iteration 2 was dispatched again at its deadline (how often, and with how many jobs, depends
      // on the machine's speed: at least the held job), and then completed
      const two = dispatches.filter((d) => d.index === 2);
      expect(two[0]).toMatchObject({ jobs: P, reason: 'start' });
      expect(two.length).toBeGreaterThan(1);
      expect(two.slice(1).every((d) => d.reason === 'deadline' && d.jobs >= 1)).toBe(true);
      expect(await finalState('late')).toEqual(reference);
    } finally {
      await ev.close();
    }
  });

  it('resumes exactly after an interruption mid-iteration (the recorded results are kept)', async () => {
    await newRun('parts');
    // iteration 2's jobs are held until release(): none of them is recorded before the interruption
    const ev = evaluator({ hang: new Set([0, 1, 2, 3].map((k) => `parts/2/${k}`)) });
    try {
      const ac = new AbortController();
      // stop right after iteration 2's fan-out
      const first = await loop(new ToyDriver(t.db, 'parts'), { signal: ac.signal, onDispatch: (d) => { if (d.index === 2) ac.abort(); } });
      expect(first).toMatchObject({ status: 'interrupted', index: 2 });
      expect(await iterations('parts')).toHaveLength(2);
      // no loop runs: iteration 2's jobs (from the interrupted dispatch) are recorded meanwhile
      ev.release();
      await expect.poll(async () => Number((await sql<{ n: string }>`select count(*) as n from toy_results where run = 'parts' and iteration = 2`.execute(t.db)).rows[0]!.n), { timeout: 30_000 }).toBe(P);
      const dispatches: LoopDispatchEvent[] = [];
      const second = await loop(new ToyDriver(t.db, 'parts'), { onDispatch: (d) => dispatches.push(d) });
      expect(second.status).toBe('completed');
      // iteration 2 needed no dispatch: its results were there
      expect(dispatches.map((d) => d.index)).toEqual([3, 4]);
      expect(await finalState('parts')).toEqual(reference);
      expect(await iterations('parts')).toEqual(await iterations('plain'));
    } finally {
      await ev.close();
    }
  });
});
