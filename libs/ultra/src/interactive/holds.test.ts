// The holds on served workflows (holds.ts): the same behaviour from the Redis holds (real Redis)
// and a gateway's own (localHolds).
import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { localHolds, redisHolds, type Hold, type SavedSession, type WorkflowHolds } from './holds.ts';

const redis = new Redis(process.env.FUGU_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379');
const prefix = `fuguholds${randomBytes(4).toString('hex')}`;
afterAll(async () => {
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

const saved = (workflowId: number, version: number, state: Record<string, unknown> = { v: 2, n: version }): SavedSession => ({
  workflowId, conversationId: 'c', apiKeyId: 'k', status: 'tools', version, stateJson: JSON.stringify(state), deadlineAt: null,
});
async function held(h: WorkflowHolds, id: number): Promise<Hold> {
  const t = await h.take(id);
  if ('busyMs' in t) throw new Error(`workflow ${id} is busy for ${t.busyMs} ms`);
  return t;
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each([
  ['in Redis', (o: { leaseMs?: number; cacheBytes?: number }) => redisHolds(redis, `${prefix}${randomBytes(3).toString('hex')}`, o)],
  ['in the process', (o: { leaseMs?: number; cacheBytes?: number }) => localHolds(o)],
])('workflow holds %s', (_name, make) => {
  it('one holder at a time: the next request is told how long the lease has left; the saved version and a copy of the state come back to the next taker', async () => {
    const h = make({ leaseMs: 5_000 });
    const a = await held(h, 7);
    expect([a.takeover, a.version]).toEqual([false, undefined]);
    const busy = await h.take(7);
    expect('busyMs' in busy && busy.busyMs > 4_000 && busy.busyMs <= 5_000).toBe(true);
    // another workflow is free
    await (await held(h, 8)).release({ advanced: false });

    await a.release({ saved: saved(7, 3) });
    const b = await held(h, 7);
    expect([b.takeover, b.version]).toEqual([false, 3]);
    const copy = h.cached(7)!;
    expect(copy).toMatchObject({ workflowId: 7, version: 3, status: 'tools', state: { v: 2, n: 3 } });
    (copy.state as { n: number }).n = 99;
    expect(h.cached(7)!.state).toEqual({ v: 2, n: 3 });
    await b.release({ advanced: false });
  });

  it('a holder that made calls and saved nothing, or that died (its lease lapsed), leaves the workflow to be taken over; one that did nothing does not', async () => {
    const h = make({ leaseMs: 1_000 });
    await (await held(h, 1)).release({ advanced: false });
    expect((await held(h, 1)).takeover).toBe(false);
    // (the holder above never gave it back: it died; its lease lapses)
    expect('busyMs' in (await h.take(1))).toBe(true);
    await sleep(1_100);
    const next = await held(h, 1);
    expect(next.takeover).toBe(true);
    await next.release({ advanced: true });
    // given back after its calls, unsaved: taken over at once
    const after = await held(h, 1);
    expect(after.takeover).toBe(true);
    await after.release({ saved: saved(1, 5) });
    expect(await held(h, 1)).toMatchObject({ takeover: false, version: 5 });
  });

  it('the heartbeat keeps the lease past its time; a holder whose lease lapsed and was taken cannot renew it, and its late release frees nothing of the new holder', async () => {
    const h = make({ leaseMs: 1_000 });
    const a = await held(h, 2);
    for (let i = 0; i < 4; i++) {
      await sleep(300);
      expect(await a.renew()).toBe(true);
    }
    expect('busyMs' in (await h.take(2))).toBe(true);
    await sleep(1_100);
    const b = await held(h, 2);
    expect(await a.renew()).toBe(false);
    // the old holder's late save is recorded (a version only grows), its release frees nothing of b's
    await a.release({ saved: saved(2, 4) });
    expect('busyMs' in (await h.take(2))).toBe(true);
    await b.release({ saved: saved(2, 6) });
    await sleep(1_100);
    expect(await held(h, 2)).toMatchObject({ takeover: false, version: 6 });
  });

  it('a session saved without a hold (a first turn) is the newest version; versions only grow', async () => {
    const h = make({});
    await h.saved(saved(3, 0));
    const a = await held(h, 3);
    expect([a.takeover, a.version]).toEqual([false, 0]);
    await a.release({ saved: saved(3, 2) });
    // a late note of an older save does not take the version back
    await h.saved(saved(3, 1));
    expect((await held(h, 3)).version).toBe(2);
  });

  it('keeps copies of the states within its bytes, dropping the least recently used', async () => {
    const h = make({ cacheBytes: 3_000 });
    const big = (id: number) => saved(id, 0, { v: 2, pad: 'x'.repeat(600) });
    for (const id of [10, 11]) await h.saved(big(id));
    h.cached(10);
    await h.saved(big(12));
    expect([10, 11, 12].map((id) => h.cached(id) !== undefined)).toEqual([true, false, true]);
    // a state past the budget is not kept
    await h.saved(saved(13, 0, { v: 2, pad: 'x'.repeat(2_000) }));
    expect(h.cached(13)).toBeUndefined();
  });
});
