// The hold of a request on a served workflow (issue 27, sections 2a and 5): at most one request
// advances a workflow at a time. A hold is a lease in Redis, as BullMQ's job locks are: taken with
// SET NX PX, renewed by its live holder every third of its time (a heartbeat), and lapsing within
// that time when its holder dies. Postgres's state version is the fencing token: a save from a
// version that moved on writes nothing (saveTurn), so two holders (a lease lost with a Redis that
// restarted) never both advance a workflow; what the loser's calls in flight cost is all it costs.
//
// Beside the lease, Redis keeps for each workflow (`info`, a day after its last use):
//   - `ver`: the newest state version saved by a holder (or by a new conversation's first turn);
//   - `held`: set while a holder has it, and left set when a holder gives it back without saving
//     after its calls began (it failed) or never gives it back (it died mid-step). The next taker
//     then takes the workflow over: its calls reuse the calls that holder completed, by their
//     deterministic keys, instead of paying for them again.
// A request in the process that saved the newest version reads the state from this process's
// cache instead of Postgres: a tool round trip then costs Postgres two statements, the two turns'
// ends. (Postgres's versions of a workflow only grow, a workflow run again from its start too, so
// a cached session of the newest version is the stored one.)
// A gateway without Redis (one replica) keeps the same in a map of its own (localHolds).
import { randomBytes } from 'node:crypto';
import type { UltraSession } from '@fugu/db';
import type { RedisClient } from '@fugu/queue';

/** A session as just saved, its state as the JSON text written. */
export type SavedSession = Omit<UltraSession, 'state'> & { stateJson: string };

/** A request's hold on a workflow. */
export type Hold = {
  /** a holder before this one gave the workflow back without saving or died: reuse the calls it completed */
  readonly takeover: boolean;
  /** the newest state version a holder saved, when known (a session read at it, with no takeover, is current) */
  readonly version: number | undefined;
  /** the heartbeat: false when the lease was lost (it lapsed, and another request may hold it) */
  renew(): Promise<boolean>;
  /**
   * Gives the workflow back. `saved`: the session this holder saved (its version is the newest);
   * `advanced: false`: nothing was done (no call made, nothing saved); `advanced: true`: calls were
   * made and nothing saved (the next taker takes over and reuses them).
   */
  release(o: { saved: SavedSession } | { advanced: boolean }): Promise<void>;
};

export type WorkflowHolds = {
  /** the hold of a workflow, or how long until its holder's lease lapses (ms) */
  take(workflowId: number): Promise<Hold | { busyMs: number }>;
  /** a session saved without a hold (a new conversation's first turn, which no other request can reach before it is saved) */
  saved(s: SavedSession): Promise<void>;
  /** the session as this process last saved it (a copy), of whatever version: its key and conversation never change */
  cached(workflowId: number): UltraSession | undefined;
  readonly leaseMs: number;
};

/** What a holds store keeps per workflow: the lease, the newest saved version, whether a holder did not give it back cleanly. */
interface HoldStore {
  take(id: number, token: string, leaseMs: number): Promise<{ ok: true; ver: number | undefined; held: boolean } | { ok: false; busyMs: number }>;
  renew(id: number, token: string, leaseMs: number): Promise<boolean>;
  release(id: number, token: string, how: { saved: number } | { advanced: boolean }): Promise<void>;
  saved(id: number, version: number): Promise<void>;
}

export type HoldsOptions = {
  /** the lease's time: a dead holder's workflow is free within it (default 6 s) */
  leaseMs?: number;
  /** the bytes of saved states this process keeps to serve the next request without a read (default 64 MiB) */
  cacheBytes?: number;
};

const INFO_TTL_MS = 24 * 60 * 60 * 1000;
const DEFAULT_LEASE_MS = 6_000;
/** the workflows a gateway's own holds remember past their last use */
const LOCAL_ENTRIES = 100_000;

/** Holds shared by every gateway of a Redis (one server, or a Redis Cluster: a workflow's two keys share a slot). */
export function redisHolds(redis: RedisClient, prefix: string, o: HoldsOptions = {}): WorkflowHolds {
  const keys = (id: number) => [`${prefix}:ultra:{wf${id}}:lease`, `${prefix}:ultra:{wf${id}}:info`];
  const store: HoldStore = {
    async take(id, token, leaseMs) {
      const r = (await redis.eval(TAKE, 2, ...keys(id), token, leaseMs, INFO_TTL_MS)) as [number, string | number, number?];
      return r[0] === 1 ? { ok: true, ver: r[1] === '' ? undefined : Number(r[1]), held: r[2] === 1 } : { ok: false, busyMs: Math.max(0, Number(r[1])) };
    },
    async renew(id, token, leaseMs) {
      return (await redis.eval(RENEW, 1, keys(id)[0]!, token, leaseMs)) === 1;
    },
    async release(id, token, how) {
      await redis.eval(RELEASE, 2, ...keys(id), token, 'saved' in how ? 'saved' : how.advanced ? 'advanced' : 'clean', 'saved' in how ? how.saved : -1, INFO_TTL_MS);
    },
    async saved(id, version) {
      await redis.eval(RELEASE, 2, ...keys(id), '', 'saved', version, INFO_TTL_MS);
    },
  };
  return holdsOver(store, o);
}

/** Holds in this process only (a gateway without Redis: one replica). */
export function localHolds(o: HoldsOptions = {}): WorkflowHolds {
  const m = new Map<number, { token?: string; until: number; ver?: number; held: boolean }>();
  const at = (id: number) => {
    let e = m.get(id);
    if (e) return e;
    // past LOCAL_ENTRIES, the oldest entries that neither hold nor mark a takeover go (what they
    // forget is the newest version: the next request for their workflow reads it from Postgres)
    for (const [old, x] of m) {
      if (m.size < LOCAL_ENTRIES) break;
      if (x.token === undefined && !x.held) m.delete(old);
    }
    m.set(id, (e = { until: 0, held: false }));
    return e;
  };
  const store: HoldStore = {
    async take(id, token, leaseMs) {
      const e = at(id);
      if (e.token !== undefined && e.until > Date.now()) return { ok: false, busyMs: e.until - Date.now() };
      const held = e.held;
      Object.assign(e, { token, until: Date.now() + leaseMs, held: true });
      return { ok: true, ver: e.ver, held };
    },
    async renew(id, token, leaseMs) {
      const e = at(id);
      if (e.token !== token || e.until <= Date.now()) return false;
      e.until = Date.now() + leaseMs;
      return true;
    },
    async release(id, token, how) {
      const e = at(id);
      const mine = e.token === token;
      if ('saved' in how) e.ver = Math.max(e.ver ?? -1, how.saved);
      if (!mine) return;
      e.token = undefined;
      if ('saved' in how || !how.advanced) e.held = false;
    },
    async saved(id, version) {
      const e = at(id);
      e.ver = Math.max(e.ver ?? -1, version);
    },
  };
  return holdsOver(store, o);
}

function holdsOver(store: HoldStore, o: HoldsOptions): WorkflowHolds {
  const leaseMs = o.leaseMs ?? DEFAULT_LEASE_MS;
  const cache = new SessionCache(o.cacheBytes ?? 64 * 1024 * 1024);
  return {
    leaseMs,
    async take(id) {
      const token = randomBytes(12).toString('base64url');
      const t = await store.take(id, token, leaseMs);
      if (!t.ok) return { busyMs: t.busyMs };
      return {
        takeover: t.held,
        version: t.ver,
        renew: () => store.renew(id, token, leaseMs),
        async release(how) {
          if ('saved' in how) cache.set(how.saved);
          else if (how.advanced) cache.delete(id);
          await store.release(id, token, 'saved' in how ? { saved: how.saved.version } : how);
        },
      };
    },
    async saved(s) {
      cache.set(s);
      await store.saved(s.workflowId, s.version);
    },
    cached: (id) => cache.get(id),
  };
}

/** Saved sessions by workflow, the least recently used dropped past `bytes` (their states kept as JSON text: a reader gets its own copy). */
class SessionCache {
  readonly #m = new Map<number, { s: Omit<UltraSession, 'state'>; json: string }>();
  #bytes = 0;
  readonly #max: number;
  constructor(max: number) {
    this.#max = max;
  }

  get(id: number): UltraSession | undefined {
    const e = this.#m.get(id);
    if (!e) return undefined;
    this.#m.delete(id);
    this.#m.set(id, e);
    return { ...e.s, state: JSON.parse(e.json) as Record<string, unknown> };
  }

  set(s: SavedSession): void {
    this.delete(s.workflowId);
    const { stateJson: json, ...rest } = s;
    if (json.length * 2 > this.#max) return;
    this.#m.set(s.workflowId, { s: rest, json });
    this.#bytes += json.length * 2;
    for (const [id] of this.#m) {
      if (this.#bytes <= this.#max) break;
      this.delete(id);
    }
  }

  delete(id: number): void {
    const e = this.#m.get(id);
    if (!e) return;
    this.#bytes -= e.json.length * 2;
    this.#m.delete(id);
  }
}

// take: the lease when free; then the newest saved version and whether a holder left it held
const TAKE = `
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local ver = redis.call('hget', KEYS[2], 'ver')
  local held = redis.call('hexists', KEYS[2], 'held')
  redis.call('hset', KEYS[2], 'held', '1')
  redis.call('pexpire', KEYS[2], ARGV[3])
  return {1, ver or '', held}
end
return {0, redis.call('pttl', KEYS[1])}`;

const RENEW = `
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0`;

// release: a saved version is recorded whoever holds the lease now (it only ever grows); the
// lease and the held mark are the holder's own to clear
const RELEASE = `
if ARGV[2] == 'saved' then
  local cur = redis.call('hget', KEYS[2], 'ver')
  if not cur or tonumber(cur) < tonumber(ARGV[3]) then redis.call('hset', KEYS[2], 'ver', ARGV[3]) end
end
if ARGV[1] ~= '' and redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  if ARGV[2] ~= 'advanced' then redis.call('hdel', KEYS[2], 'held') end
end
redis.call('pexpire', KEYS[2], ARGV[4])
return 1`;
