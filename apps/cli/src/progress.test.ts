import { describe, expect, it } from 'vitest';
import { iterationClock } from './progress.ts';

describe('iterationClock', () => {
  it("says each iteration's whole time, the time elapsed and the remaining iterations' time at the mean so far", () => {
    let t = 0;
    const clock = iterationClock(4, () => t);
    t = 10_000;
    expect(clock(0)).toBe('10.0 s  elapsed 10s  ETA 30s');
    t = 40_000;
    // the mean of the two (20 s) for the two left
    expect(clock(1)).toBe('30.0 s  elapsed 40s  ETA 40s');
    t = 45_000;
    expect(clock(3)).toBe('5.0 s  elapsed 45s  ETA done');
  });
});
