import { describe, expect, it } from 'vitest';
import { InputError, rng } from '@fugu/core';
import { estimateReplayParams, estimateReplayParamsByWorker, wilsonInterval, type CalibrationObservation } from './calibrate.ts';
import { stepProbability } from './model.ts';
import { REPLAY_PRESETS, type ReplayParams } from './params.ts';

/** Observations simulated from known parameters: design A (f in {0, 1}) and design B (3 proposers, f in {1/3, 2/3}). */
function simulate(p: ReplayParams, nPerCell: number, seed: number, worker?: string): CalibrationObservation[] {
  const r = rng('calibrate-test', seed);
  const out: CalibrationObservation[] = [];
  for (const s of [true, false]) {
    for (const f of [0, 1 / 3, 2 / 3, 1]) {
      for (let i = 0; i < nPerCell; i++) out.push({ s, f, correct: r.next() < stepProbability(p, s, f), ...(worker !== undefined && { worker }) });
    }
  }
  return out;
}

describe('estimateReplayParams', () => {
  it('recovers the parameters it was simulated from, within sampling error, and its intervals cover them', () => {
    const truth: ReplayParams = { keep: 0.93, misled: 0.25, adopt: 0.55, fix: 0.06, herd: 3 };
    let covered = 0, total = 0;
    for (let seed = 0; seed < 20; seed++) {
      const est = estimateReplayParams(simulate(truth, 800, seed));
      for (const c of ['keep', 'misled', 'adopt', 'fix'] as const) {
        const cell = est.cells[c];
        expect(cell.n).toBe(800);
        expect(cell.source).toBe('data');
        const q = c === 'misled' ? 1 - truth[c] : truth[c];
        expect(Math.abs(est.params[c] - truth[c])).toBeLessThan(4 * Math.sqrt((q * (1 - q)) / 800));
        total++;
        if (cell.interval[0] <= truth[c] && truth[c] <= cell.interval[1]) covered++;
      }
      expect(est.herd.n).toBe(3200);
      expect(est.herd.interval[0]).toBeLessThanOrEqual(truth.herd);
      expect(est.herd.interval[1]).toBeGreaterThanOrEqual(truth.herd);
      expect(Math.abs(Math.log(est.herd.estimate / truth.herd))).toBeLessThan(0.4);
    }
    // 95% intervals: about 4 misses expected in 80; 9 or more would say the intervals are too narrow
    expect(total).toBe(80);
    expect(covered).toBeGreaterThanOrEqual(total - 8);
  });

  it('herd is identified from enough split observations and reported not identified from too few', () => {
    const truth: ReplayParams = { ...REPLAY_PRESETS.large, herd: 1 };
    const many = estimateReplayParams(simulate(truth, 3000, 1));
    expect(many.herd.identified).toBe(true);
    expect(many.herd.interval[1]).toBeLessThan(4);
    const few = estimateReplayParams(simulate(truth, 5, 1));
    expect(few.herd.identified).toBe(false);
  });

  it('falls back for cells without data and says so', () => {
    const obs: CalibrationObservation[] = [{ s: true, f: 1, correct: true }, { s: true, f: 1, correct: false }];
    const est = estimateReplayParams(obs, { fallback: REPLAY_PRESETS.small });
    expect(est.cells.keep).toMatchObject({ n: 2, correct: 1, estimate: 0.5, source: 'data' });
    expect(est.cells.misled).toMatchObject({ n: 0, estimate: REPLAY_PRESETS.small.misled, source: 'fallback', interval: [0, 1] });
    expect(est.herd).toMatchObject({ n: 0, estimate: REPLAY_PRESETS.small.herd, source: 'fallback', identified: false });
  });

  it('shrinks toward a prior by its strength', () => {
    const obs: CalibrationObservation[] = Array.from({ length: 10 }, (_, i) => ({ s: false, f: 1, correct: i < 10 }));
    const est = estimateReplayParams(obs, { prior: { ...REPLAY_PRESETS.large, adopt: 0.5 }, priorStrength: 10 });
    expect(est.cells.adopt.estimate).toBeCloseTo(0.75, 12);
    const misled = estimateReplayParams([{ s: true, f: 0, correct: true }], { prior: { ...REPLAY_PRESETS.large, misled: 0.5 }, priorStrength: 1 });
    expect(misled.cells.misled.estimate).toBeCloseTo(0.25, 12);
  });

  it('a bad observation is an InputError naming it', () => {
    try {
      estimateReplayParams([{ s: true, f: 1, correct: true }, { s: true, f: 1.5, correct: true }]);
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(InputError);
      expect((e as InputError).field).toBe('observations[1].f');
    }
    expect(() => estimateReplayParams([], { priorStrength: 5 })).toThrow(/priorStrength needs a prior/);
  });
});

describe('estimateReplayParams: the joint maximum likelihood and the bootstrap (issue 29)', () => {
  /** Observations of the split cells only (f = 1/3 and 2/3: three other agents, as in a 4-agent debate). */
  const splitOnly = (p: ReplayParams, n: number, seed: number) => simulate(p, n, seed).filter((o) => o.f > 0 && o.f < 1);

  it('the split observations inform the corners: with few corner observations, the joint estimate is nearer the truth than the corner counts', () => {
    const truth: ReplayParams = { keep: 0.9, misled: 0.3, adopt: 0.6, fix: 0.1, herd: 1.5 };
    let joint = 0, counts = 0;
    for (let seed = 0; seed < 10; seed++) {
      const corners = simulate(truth, 25, seed).filter((o) => o.f === 0 || o.f === 1);
      const est = estimateReplayParams([...corners, ...splitOnly(truth, 400, 50 + seed)]);
      for (const c of ['keep', 'misled', 'adopt', 'fix'] as const) {
        const share = est.cells[c].correct / est.cells[c].n;
        joint += Math.abs(est.params[c] - truth[c]);
        counts += Math.abs((c === 'misled' ? 1 - share : share) - truth[c]);
      }
    }
    expect(joint).toBeLessThan(0.8 * counts);
  });

  it('maximises the likelihood: no corner or herd value nearby does better, and the count-only corners do worse', () => {
    const truth: ReplayParams = { keep: 0.93, misled: 0.25, adopt: 0.55, fix: 0.06, herd: 3 };
    const obs = simulate(truth, 300, 7);
    const est = estimateReplayParams(obs);
    const ll = (p: ReplayParams) => obs.reduce((t, o) => { const q = stepProbability(p, o.s, o.f); return t + Math.log(o.correct ? q : 1 - q); }, 0);
    expect(est.logLik).toBeCloseTo(ll(est.params), 8);
    const r = rng('calibrate-test-nearby', 1);
    for (let i = 0; i < 200; i++) {
      const near = { ...est.params };
      for (const c of ['keep', 'misled', 'adopt', 'fix'] as const) near[c] = Math.min(0.999, Math.max(0.001, near[c] + (r.next() - 0.5) * 0.04));
      near.herd = est.params.herd * Math.exp((r.next() - 0.5) * 0.2);
      expect(ll(near)).toBeLessThanOrEqual(est.logLik + 1e-6);
    }
    const counts = { ...est.params };
    for (const c of ['keep', 'misled', 'adopt', 'fix'] as const) counts[c] = c === 'misled' ? 1 - est.cells[c].correct / est.cells[c].n : est.cells[c].correct / est.cells[c].n;
    expect(ll(counts)).toBeLessThan(est.logLik);
  });

  it('the bootstrap: the same seed the same intervals, another seed others; its intervals cover the truth about 95% of the time', () => {
    const truth: ReplayParams = { keep: 0.9, misled: 0.3, adopt: 0.5, fix: 0.08, herd: 2 };
    const obs = simulate(truth, 150, 11);
    const a = estimateReplayParams(obs, { bootstrap: { samples: 100, seed: 1 } });
    expect(estimateReplayParams(obs, { bootstrap: { samples: 100, seed: 1 } }).bootstrap).toEqual(a.bootstrap);
    expect(estimateReplayParams(obs, { bootstrap: { samples: 100, seed: 2 } }).bootstrap).not.toEqual(a.bootstrap);
    let covered = 0, total = 0;
    for (let seed = 0; seed < 12; seed++) {
      const est = estimateReplayParams(simulate(truth, 150, 100 + seed), { bootstrap: { samples: 150, seed } });
      for (const c of ['keep', 'misled', 'adopt', 'fix'] as const) {
        const [lo, hi] = est.bootstrap!.intervals[c];
        expect(lo).toBeLessThanOrEqual(est.params[c] + 1e-9);
        expect(hi).toBeGreaterThanOrEqual(est.params[c] - 1e-9);
        total++;
        if (lo <= truth[c] && truth[c] <= hi) covered++;
      }
    }
    expect(covered).toBeGreaterThanOrEqual(total - 7);
  });

  it('resamples questions, not observations: four copies of each observation in one question give the intervals of the data once', () => {
    const truth: ReplayParams = { keep: 0.9, misled: 0.3, adopt: 0.5, fix: 0.08, herd: 2 };
    const once = simulate(truth, 80, 5).map((o, i) => ({ ...o, cluster: `q${i}` }));
    const copies = once.flatMap((o) => [o, o, o, o]);
    const width = (e: ReturnType<typeof estimateReplayParams>) => e.bootstrap!.intervals.adopt[1] - e.bootstrap!.intervals.adopt[0];
    const w1 = width(estimateReplayParams(once, { bootstrap: { samples: 300, seed: 3 } }));
    const wq = width(estimateReplayParams(copies, { bootstrap: { samples: 300, seed: 3 } }));
    const wObs = width(estimateReplayParams(copies.map(({ cluster: _c, ...o }) => o), { bootstrap: { samples: 300, seed: 3 } }));
    expect(Math.abs(wq - w1) / w1).toBeLessThan(0.25);
    expect(wObs).toBeLessThan(0.7 * wq);
  });
});

describe('estimateReplayParamsByWorker', () => {
  it('estimates each worker, shrunk toward the pool', () => {
    const a: ReplayParams = { keep: 0.95, misled: 0.1, adopt: 0.8, fix: 0.05, herd: 2 };
    const b: ReplayParams = { keep: 0.75, misled: 0.6, adopt: 0.3, fix: 0.1, herd: 2 };
    const { pool, workers } = estimateReplayParamsByWorker([...simulate(a, 400, 1, 'a'), ...simulate(b, 400, 2, 'b')]);
    expect(pool.n).toBe(6400);
    expect(Math.abs(workers['a']!.params.adopt - a.adopt)).toBeLessThan(0.08);
    expect(Math.abs(workers['b']!.params.adopt - b.adopt)).toBeLessThan(0.08);
    expect(workers['a']!.params.adopt).toBeGreaterThan(workers['b']!.params.adopt);
    // shrinkage pulls each toward the pool value
    expect(workers['a']!.params.adopt).toBeLessThanOrEqual(workers['a']!.cells.adopt.correct / workers['a']!.cells.adopt.n + 1e-12);
  });
});

describe('wilsonInterval', () => {
  it('contains the share and stays in [0, 1]', () => {
    expect(wilsonInterval(0, 0)).toEqual([0, 1]);
    const [lo, hi] = wilsonInterval(48, 96);
    expect(lo).toBeCloseTo(0.4019, 3);
    expect(hi).toBeCloseTo(0.5981, 3);
    const [l0] = wilsonInterval(0, 20);
    expect(l0).toBe(0);
    const [, h1] = wilsonInterval(20, 20);
    expect(h1).toBe(1);
  });
});
