// Seeded random numbers: every stochastic piece of fugu takes a seed and gives the same
// result for the same seed. sfc32 seeded through splitmix32 of the seed (a number or string).

export type Rng = {
  /** uniform in [0, 1) */
  next(): number;
  /** integer in [0, n) */
  int(n: number): number;
  /** standard normal (Box-Muller) */
  normal(): number;
};

/** 32-bit FNV-1a of a string: stable seeds from names. */
export function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

function splitmix32(a: number): () => number {
  return () => {
    a |= 0;
    a = (a + 0x9e3779b9) | 0;
    let t = a ^ (a >>> 16);
    t = Math.imul(t, 0x21f0aaad);
    t ^= t >>> 15;
    t = Math.imul(t, 0x735a2d97);
    return (t ^ (t >>> 15)) >>> 0;
  };
}

/** A seeded generator; `seed` may be a number or any string (hashed), and parts are combined. */
export function rng(...seed: Array<number | string>): Rng {
  let s = 0x12345678;
  for (const part of seed) s = hash32(`${s}:${typeof part === 'number' ? part : `s${part}`}`);
  const sm = splitmix32(s);
  let a = sm(), b = sm(), c = sm(), d = sm();
  const next32 = (): number => {
    a >>>= 0; b >>>= 0; c >>>= 0; d >>>= 0;
    const t = (a + b) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    d = (d + 1) | 0;
    const r = (t + d) | 0;
    c = (c + r) | 0;
    return r >>> 0;
  };
  for (let i = 0; i < 12; i++) next32();
  let spare: number | undefined;
  const next = (): number => next32() / 4294967296;
  return {
    next,
    int: (n) => Math.floor(next() * n),
    normal: () => {
      if (spare !== undefined) {
        const v = spare;
        spare = undefined;
        return v;
      }
      let u = 0;
      while (u === 0) u = next();
      const v = next();
      const r = Math.sqrt(-2 * Math.log(u));
      spare = r * Math.sin(2 * Math.PI * v);
      return r * Math.cos(2 * Math.PI * v);
    },
  };
}

/** Fisher-Yates shuffle of a copy. */
export function shuffled<T>(xs: readonly T[], r: Rng): T[] {
  const out = xs.slice();
  for (let i = out.length - 1; i > 0; i--) {
    const j = r.int(i + 1);
    const t = out[i]!;
    out[i] = out[j]!;
    out[j] = t;
  }
  return out;
}
