import { describe, expect, it, vi } from 'vitest';
import { MicroBatcher } from './batcher.ts';

const echo = (sizes: number[], gate?: () => Promise<void>) => async (items: number[]) => {
  sizes.push(items.length);
  await gate?.();
  return items.map((value) => ({ ok: true as const, value: value * 2 }));
};

describe('MicroBatcher', () => {
  it('never sends more than maxBatch requests in one batch, and answers each in order', async () => {
    const sizes: number[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const b = new MicroBatcher<number, number>({ maxBatch: 4, maxWaitMs: 20, runners: 2, run: echo(sizes, () => gate) });
    const all = Promise.all(Array.from({ length: 23 }, (_, i) => b.submit(i)));
    // a full batch leaves at once (no wait for T), one per free runner
    expect(sizes).toEqual([4, 4]);
    release();
    expect(await all).toEqual(Array.from({ length: 23 }, (_, i) => i * 2));
    expect(Math.max(...sizes)).toBeLessThanOrEqual(4);
    expect(sizes.reduce((a, c) => a + c, 0)).toBe(23);
  });

  it('flushes a lone request after maxWaitMs, not before', async () => {
    const sizes: number[] = [];
    const b = new MicroBatcher<number, number>({ maxBatch: 16, maxWaitMs: 30, runners: 1, run: echo(sizes) });
    const p = b.submit(21);
    await Promise.resolve();
    expect(sizes).toEqual([]); // waiting for more requests
    expect(await p).toBe(42);
    expect(sizes).toEqual([1]);
  });

  it('sends a lone request at once after a batch of one, and waits again once a batch of several has formed', async () => {
    const sizes: number[] = [];
    const b = new MicroBatcher<number, number>({ maxBatch: 16, maxWaitMs: 60_000, runners: 1, run: echo(sizes) });
    // requests one at a time: the first waits T (a long one here), ...
    const first = b.submit(1);
    await Promise.resolve();
    expect(sizes).toEqual([]);
    b.submit(2).catch(() => {}); // a second arrival makes the batch due at B or T: flush it by filling B
    for (let i = 0; i < 14; i++) void b.submit(3);
    expect(await first).toBe(2);
    expect(sizes).toEqual([16]);
    // ... a batch of several formed: a lone request waits again
    const lone = b.submit(5);
    await Promise.resolve();
    expect(sizes).toEqual([16]);
    for (let i = 0; i < 15; i++) void b.submit(6);
    expect(await lone).toBe(10);
    expect(sizes).toEqual([16, 16]);
  });

  it('after a batch of one, the next lone request goes without waiting T', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    try {
      const sizes: number[] = [];
      const b = new MicroBatcher<number, number>({ maxBatch: 16, maxWaitMs: 20, runners: 1, run: echo(sizes) });
      // the first waits T: no batch has run yet
      const first = b.submit(1);
      await vi.advanceTimersByTimeAsync(19);
      expect(sizes).toEqual([]);
      await vi.advanceTimersByTimeAsync(1);
      expect(await first).toBe(2);
      // the next goes with no time passing
      const again = b.submit(2);
      await vi.advanceTimersByTimeAsync(0);
      expect(sizes).toEqual([1, 1]);
      expect(await again).toBe(4);
    } finally {
      vi.useRealTimers();
    }
  });

  it('rejects only the requests whose results are errors; a failed batch rejects its own requests', async () => {
    const b = new MicroBatcher<number, number>({
      maxBatch: 8,
      maxWaitMs: 0,
      runners: 1,
      run: async (items) => {
        if (items.includes(99)) throw new Error('thread died');
        return items.map((v) => (v < 0 ? { ok: false as const, error: new Error(`bad ${v}`) } : { ok: true as const, value: v }));
      },
    });
    const r = await Promise.allSettled([b.submit(1), b.submit(-1), b.submit(2)]);
    expect(r.map((x) => x.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    await expect(b.submit(99)).rejects.toThrow(/thread died/);
    expect(await b.submit(3)).toBe(3);
  });

  it('refuses bad settings', () => {
    const run = async () => [];
    expect(() => new MicroBatcher({ maxBatch: 0, maxWaitMs: 1, runners: 1, run })).toThrow(/maxBatch/);
    expect(() => new MicroBatcher({ maxBatch: 1, maxWaitMs: -1, runners: 1, run })).toThrow(/maxWaitMs/);
  });
});
