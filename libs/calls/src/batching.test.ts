import { describe, expect, it } from 'vitest';
import { BatchLoader, WriteBatcher } from './batching.ts';

describe('WriteBatcher', () => {
  it('writes what arrives in one turn as one batch, at most maxBatch at a time, in order', async () => {
    const batches: number[][] = [];
    const b = new WriteBatcher<number>({ maxBatch: 4, write: async (xs) => void batches.push(xs) });
    await Promise.all(Array.from({ length: 10 }, (_, i) => b.write(i)));
    expect(batches).toEqual([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]);
  });

  it('with lingerMs, waits for later writes to join the batch', async () => {
    const batches: number[][] = [];
    const b = new WriteBatcher<number>({ maxBatch: 100, lingerMs: 30, write: async (xs) => void batches.push(xs) });
    const first = b.write(1);
    await new Promise((r) => setTimeout(r, 5));
    await Promise.all([first, b.write(2), b.write(3)]);
    expect(batches).toEqual([[1, 2, 3]]);
  });

  it("rejects every item of a failed batch, goes on with the next, and runs a written batch's after-step", async () => {
    const order: string[] = [];
    let calls = 0;
    const b = new WriteBatcher<string>({
      maxBatch: 2,
      write: async (xs) => {
        if (calls++ === 0) throw new Error('down');
        return () => void order.push(`after ${xs.join(',')}`);
      },
    });
    const ps = ['a', 'b', 'c'].map((x) => b.write(x).then(() => order.push(`ok ${x}`), (e: Error) => order.push(`failed ${x}: ${e.message}`)));
    await Promise.all(ps);
    await b.flush();
    expect(order.sort()).toEqual(['after c', 'failed a: down', 'failed b: down', 'ok c']);
    expect(b.pending).toBe(0);
  });

  it('with splitOn, writes a failed batch again one item at a time, so only the item that cannot be written fails', async () => {
    const batches: string[][] = [];
    const b = new WriteBatcher<string>({
      maxBatch: 10,
      write: async (xs) => {
        batches.push(xs);
        if (xs.includes('bad')) throw new Error(xs.length > 1 ? 'constraint' : `constraint: ${xs[0]}`);
        return () => void batches.push([`after ${xs.join(',')}`]);
      },
      splitOn: (e) => (e as Error).message.startsWith('constraint'),
    });
    const got = await Promise.all(['a', 'bad', 'c'].map((x) => b.write(x).then(() => `ok ${x}`, (e: Error) => `failed ${x}: ${e.message}`)));
    expect(got).toEqual(['ok a', 'failed bad: constraint: bad', 'ok c']);
    expect(batches).toEqual([['a', 'bad', 'c'], ['a'], ['after a'], ['bad'], ['c'], ['after c']]);
  });

  it('without a match of splitOn (the database away), fails the batch whole without writing each item', async () => {
    let writes = 0;
    const b = new WriteBatcher<number>({
      maxBatch: 10,
      write: async () => {
        writes++;
        throw new Error('ECONNREFUSED');
      },
      splitOn: (e) => !/ECONNREFUSED/.test((e as Error).message),
    });
    const got = await Promise.allSettled([1, 2, 3].map((x) => b.write(x)));
    expect(got.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(writes).toBe(1);
  });
});

describe('BatchLoader', () => {
  it('loads the keys asked for in one turn with one call, each caller getting its own value', async () => {
    const loads: string[][] = [];
    const l = new BatchLoader(async (keys: string[]) => {
      loads.push(keys);
      return new Map(keys.filter((k) => k !== 'missing').map((k) => [k, k.toUpperCase()]));
    });
    const got = await Promise.all(['a', 'b', 'a', 'missing'].map((k) => l.get(k)));
    expect(got).toEqual(['A', 'B', 'A', undefined]);
    expect(loads).toEqual([['a', 'b', 'missing']]);
    expect(await l.get('c')).toBe('C');
    expect(loads).toHaveLength(2);
  });

  it('rejects the callers of a failed load', async () => {
    const l = new BatchLoader(async () => {
      throw new Error('db away');
    });
    await expect(l.get(1)).rejects.toThrow('db away');
  });
});
