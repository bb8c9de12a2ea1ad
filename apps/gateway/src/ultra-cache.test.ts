// deploymentCache (ultra.ts) without Redis: what is kept, what is read again. The reuse time is an
// hour (or 0), so every assertion is about reads counted, never a time. The Redis message's effect,
// end to end: test/integration/ultra-deployment-cache.test.ts.
import { describe, expect, it } from 'vitest';
import type { UltraDeploymentRef } from '@fugu/ultra';
import { deploymentCache } from './ultra.ts';

const ref = (conductor: string) => ({ name: 'fugu-ultra', conductor, poolId: 1, workers: [], options: {} }) as unknown as UltraDeploymentRef;

/** A loader whose reads the test answers one by one. */
function loader() {
  const pending: Array<{ resolve: (r: UltraDeploymentRef) => void; reject: (e: Error) => void }> = [];
  return {
    reads: () => pending.length,
    load: () => new Promise<UltraDeploymentRef>((resolve, reject) => pending.push({ resolve, reject })),
    answer: (i: number, r: UltraDeploymentRef | Error) => (r instanceof Error ? pending[i]!.reject(r) : pending[i]!.resolve(r)),
  };
}

describe('deploymentCache', () => {
  it('concurrent and later requests share one read while it is kept', async () => {
    const l = loader();
    const c = deploymentCache({ name: 'fugu-ultra', ttlMs: 3_600_000, load: l.load, invalidations: false });
    const both = Promise.all([c.get(), c.get()]);
    expect(l.reads()).toBe(1);
    l.answer(0, ref('fixed:single:a'));
    expect((await both).map((d) => d.conductor)).toEqual(['fixed:single:a', 'fixed:single:a']);
    expect((await c.get()).conductor).toBe('fixed:single:a');
    expect(l.reads()).toBe(1);
  });

  it('forget drops it, and a read in flight at that moment is not kept (it may predate the publish)', async () => {
    const l = loader();
    const c = deploymentCache({ name: 'fugu-ultra', ttlMs: 3_600_000, load: l.load, invalidations: false });
    const early = c.get();
    c.forget();
    // a request after the message does not join the read from before it
    const late = c.get();
    expect(l.reads()).toBe(2);
    l.answer(0, ref('old'));
    l.answer(1, ref('new'));
    expect([(await early).conductor, (await late).conductor]).toEqual(['old', 'new']);
    expect((await c.get()).conductor).toBe('new');
    expect(l.reads()).toBe(2);
  });

  it('a failed read (a 503: not published, another pool, bad options) is not kept', async () => {
    const l = loader();
    const c = deploymentCache({ name: 'fugu-ultra', ttlMs: 3_600_000, load: l.load, invalidations: false });
    const first = c.get();
    l.answer(0, new Error('no Conductor is published'));
    await expect(first).rejects.toThrow(/no Conductor/);
    const second = c.get();
    expect(l.reads()).toBe(2);
    l.answer(1, ref('fixed:single:a'));
    expect((await second).conductor).toBe('fixed:single:a');
  });

  it('ttlMs 0 reads on every request', async () => {
    let reads = 0;
    const c = deploymentCache({ name: 'fugu-ultra', ttlMs: 0, load: async () => ref(`r${++reads}`), invalidations: { redisUrl: 'redis://127.0.0.1:1', queuePrefix: 'x' } });
    expect([(await c.get()).conductor, (await c.get()).conductor]).toEqual(['r1', 'r2']);
    // (no subscriber was made for it)
    await c.close();
  });
});
