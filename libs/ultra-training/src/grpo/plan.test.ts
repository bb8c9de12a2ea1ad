import { describe, expect, it } from 'vitest';
import { questionPool } from './plan.ts';

const pool = ['a', 'b', 'c', 'd', 'e', 'f'];

describe('questionPool (randomised k-of-K pools)', () => {
  it('a seeded k-subset in pool order, different across questions, never a held-out one', () => {
    const held = [['a', 'b', 'c'], ['b', 'd', 'f']];
    const cfg = { poolK: 3, poolHoldout: held, seed: 4 };
    const seen = new Map<string, number>();
    for (let i = 0; i < 40; i++) {
      for (let q = 0; q < 50; q++) {
        const s = questionPool(cfg, pool, i, q)!;
        expect(s).toHaveLength(3);
        expect([...s].sort((x, y) => pool.indexOf(x) - pool.indexOf(y))).toEqual(s);
        expect(new Set(s).size).toBe(3);
        expect(questionPool(cfg, pool, i, q)).toEqual(s);
        seen.set(s.join(), (seen.get(s.join()) ?? 0) + 1);
      }
    }
    // 20 subsets of 3 of 6, 2 held out: the other 18 are all drawn, the held-out ones never
    expect(seen.size).toBe(18);
    for (const h of held) expect(seen.has(h.join())).toBe(false);
    // without a hold-out they are drawn too; another seed draws another sequence
    const all = new Set(Array.from({ length: 2000 }, (_, j) => questionPool({ poolK: 3, poolHoldout: [], seed: 4 }, pool, j, 0)!.join()));
    expect(all.has('a,b,c') && all.has('b,d,f')).toBe(true);
    const other = Array.from({ length: 20 }, (_, q) => questionPool({ ...cfg, seed: 5 }, pool, 0, q)!.join());
    expect(other).not.toEqual(Array.from({ length: 20 }, (_, q) => questionPool(cfg, pool, 0, q)!.join()));
    // k = 0 or K: the whole pool
    expect(questionPool({ poolK: 0, poolHoldout: [], seed: 1 }, pool, 0, 0)).toBeUndefined();
    expect(questionPool({ poolK: 6, poolHoldout: [], seed: 1 }, pool, 0, 0)).toBeUndefined();
  });
});
