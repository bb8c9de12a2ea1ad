import { describe, expect, it } from 'vitest';
import { normalQuantile, rng } from './random.ts';

describe('normalQuantile', () => {
  it('gives the standard normal quantiles (tables to 1e-8), symmetric, monotone, infinite at 0 and 1', () => {
    const known: Array<[number, number]> = [[0.5, 0], [0.975, 1.959963984540054], [0.841344746068543, 1], [0.001, -3.090232306167813], [0.02, -2.053748910631823], [1e-10, -6.361340902404056]];
    for (const [p, z] of known) expect(normalQuantile(p)).toBeCloseTo(z, 8);
    for (const p of [0.001, 0.01, 0.2, 0.4]) expect(normalQuantile(p)).toBeCloseTo(-normalQuantile(1 - p), 8);
    const ps = Array.from({ length: 99 }, (_, i) => (i + 1) / 100);
    for (let i = 1; i < ps.length; i++) expect(normalQuantile(ps[i]!)).toBeGreaterThan(normalQuantile(ps[i - 1]!));
    expect(normalQuantile(0)).toBe(-Infinity);
    expect(normalQuantile(1)).toBe(Infinity);
    expect(() => normalQuantile(1.5)).toThrow(RangeError);
  });

  it("is the inverse of the generator's normals: the share of draws below Φ⁻¹(p) is p", () => {
    const r = rng('normal-quantile-test', 1);
    const zs = Array.from({ length: 40_000 }, () => r.normal());
    for (const p of [0.1, 0.5, 0.9]) expect(Math.abs(zs.filter((z) => z < normalQuantile(p)).length / zs.length - p)).toBeLessThan(0.01);
  });
});
