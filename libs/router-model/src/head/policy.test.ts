import { describe, expect, it } from 'vitest';
import { InputError, type WorkerSpec } from '@fugu/core';
import { maskedSoftmax, normalisedPrices, pricesOf, RouterPolicy } from './policy.ts';

const workers = ['cheap', 'mid', 'strong'];
const prices = {
  cheap: { inputPerMTok: '0.10', outputPerMTok: '0.30' }, // mean 0.20
  mid: { inputPerMTok: '1', outputPerMTok: '3' }, // mean 2
  strong: { inputPerMTok: '3', outputPerMTok: '17' }, // mean 10
};
const logits = [0, 1, 2]; // pi = [0.090, 0.245, 0.665]

describe('RouterPolicy', () => {
  it('argmax over all workers, with the softmax and scores', () => {
    const d = new RouterPolicy({ workers }).decide(logits);
    expect(d.worker).toBe('strong');
    expect(d.index).toBe(2);
    const e = [1, Math.E, Math.E ** 2];
    const z = e[0]! + e[1]! + e[2]!;
    for (let j = 0; j < 3; j++) expect(d.probs[j]).toBeCloseTo(e[j]! / z, 12);
    expect([...d.scores]).toEqual([...d.probs]);
  });

  it('restricts to the allowed set: pi renormalised there, 0 and -Infinity outside', () => {
    const d = new RouterPolicy({ workers, allowed: ['cheap', 'mid'] }).decide(logits);
    expect(d.worker).toBe('mid');
    expect(d.probs[2]).toBe(0);
    expect(d.scores[2]).toBe(-Infinity);
    expect(d.probs[0]! + d.probs[1]!).toBeCloseTo(1, 12);
    expect(d.probs[1]).toBeCloseTo(Math.E / (1 + Math.E), 12);
  });

  it('cost-aware: lambda trades winning probability against normalised price', () => {
    // normalised mean prices: cheap 0.02, mid 0.2, strong 1
    const pick = (lambda: number, allowed?: string[]) => new RouterPolicy({ workers, lambda, prices, ...(allowed ? { allowed } : {}) }).decide(logits);
    // pi = [0.090, 0.245, 0.665]; scores = pi - lambda * [0.02, 0.2, 1]
    expect(pick(0).worker).toBe('strong');
    expect(pick(0.5).worker).toBe('strong'); // 0.080, 0.145, 0.165
    expect(pick(0.6).worker).toBe('mid'); // 0.078, 0.125, 0.065
    expect(pick(1).worker).toBe('cheap'); // 0.070, 0.045, -0.335
    expect(pick(1, ['mid', 'strong']).worker).toBe('mid'); // prices over the allowed set: mid 0.2
  });

  it('a large lambda picks the cheapest allowed worker; max price is over the allowed set', () => {
    expect(new RouterPolicy({ workers, lambda: 100, prices }).decide(logits).worker).toBe('cheap');
    const p = new RouterPolicy({ workers, allowed: ['cheap', 'mid'], lambda: 1, prices });
    expect(p.normalisedPrices[1]).toBeCloseTo(1, 12); // mid is the max among the allowed
    expect(p.normalisedPrices[0]).toBeCloseTo(0.1, 12);
    expect(p.normalisedPrices[2]).toBe(0);
  });

  it('price basis: mean of input and output (default) or input only', () => {
    const mask = [1, 1, 1];
    expect([...normalisedPrices(workers, mask, prices, 'mean')].map((v) => +v.toFixed(12))).toEqual([0.02, 0.2, 1]);
    expect([...normalisedPrices(workers, mask, prices, 'input')].map((v) => +v.toFixed(12))).toEqual([+(0.1 / 3).toFixed(12), +(1 / 3).toFixed(12), 1]);
    expect([...normalisedPrices(['a', 'b'], [1, 1], { a: { inputPerMTok: '0', outputPerMTok: '0' }, b: { inputPerMTok: '0', outputPerMTok: '0' } })]).toEqual([0, 0]);
  });

  it('seeded sampling follows pi, never leaves the allowed set, and repeats with the seed', () => {
    const draw = (seed: number, allowed?: string[]) => {
      const p = new RouterPolicy({ workers, mode: 'sample', seed, ...(allowed ? { allowed } : {}) });
      return Array.from({ length: 4000 }, () => p.decide(logits).index);
    };
    const a = draw(7), b = draw(7), c = draw(8);
    expect(a).toEqual(b);
    expect(a).not.toEqual(c);
    const pi = maskedSoftmax(logits, [1, 1, 1]);
    for (let j = 0; j < 3; j++) expect(a.filter((i) => i === j).length / a.length).toBeCloseTo(pi[j]!, 1);
    expect(new Set(draw(9, ['cheap', 'strong']))).toEqual(new Set([0, 2]));
  });

  it('batch decisions equal one-by-one decisions', () => {
    const p = new RouterPolicy({ workers, lambda: 0.5, prices });
    const rows = Float32Array.from([0, 1, 2, 3, 0, 0, 0, 0, 5]);
    expect(p.decideBatch(rows, 3).map((d) => d.worker)).toEqual([0, 1, 2].map((i) => p.decide(rows.subarray(i * 3, i * 3 + 3)).worker));
  });

  it('prices from worker specs', () => {
    const spec = (name: string, inputPerMTok: string, outputPerMTok: string): WorkerSpec => ({ name, provider: 'replay', model: name, settings: {}, prices: { inputPerMTok, outputPerMTok } });
    expect(pricesOf([spec('a', '1', '2')])).toEqual({ a: { inputPerMTok: '1', outputPerMTok: '2' } });
  });

  it('clear errors', () => {
    const err = (f: () => unknown, re: RegExp) => {
      expect(f).toThrow(InputError);
      expect(f).toThrow(re);
    };
    err(() => new RouterPolicy({ workers, allowed: [] }), /field allowed: policy: the allowed worker set is empty/);
    err(() => new RouterPolicy({ workers, allowed: ['cheap', 'gpt-9'] }), /unknown worker gpt-9/);
    err(() => new RouterPolicy({ workers: ['a', 'a'] }), /appears twice/);
    err(() => new RouterPolicy({ workers, lambda: -1, prices }), /lambda/);
    err(() => new RouterPolicy({ workers, lambda: 1 }), /no price for allowed worker cheap/);
    err(() => new RouterPolicy({ workers, lambda: 1, prices: { ...prices, mid: { inputPerMTok: 'x', outputPerMTok: '1' } } }), /bad price for worker mid/);
    err(() => new RouterPolicy({ workers, mode: 'sample' }), /needs a seed/);
    err(() => new RouterPolicy({ workers, mode: 'sample', seed: 1, lambda: 0.5, prices }), /argmax rule/);
    err(() => new RouterPolicy({ workers }).decide([1, 2]), /2 logits for 3 workers/);
    err(() => new RouterPolicy({ workers }).decide([1, NaN, 2]), /logit 1 is NaN/);
    // Only the allowed workers need prices.
    expect(new RouterPolicy({ workers, allowed: ['cheap'], lambda: 1, prices: { cheap: prices.cheap } }).decide(logits).worker).toBe('cheap');
  });
});
