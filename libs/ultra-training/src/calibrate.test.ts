// The pure parts of runCalibration: key segments, pairs, the ReplayConfig of an estimate.
import { describe, expect, it } from 'vitest';
import { estimateReplayParamsByWorker, validateReplayConfig, type CalibrationObservation } from '@fugu/conductor';
import { calibrationConfig, calibrationPairs, chainKey, keySegment, liveVerifiable } from './calibrate.ts';

describe('calibration keys and pairs', () => {
  it('key segments keep [A-Za-z0-9_-] and encode the rest injectively (no dots)', () => {
    expect(keySegment('gpt-4o_mini')).toBe('gpt-4o_mini');
    expect(keySegment('llama-3.1')).toBe('llama-3:2e1');
    expect(keySegment('a.b')).not.toBe(keySegment('a:2eb'));
    expect(chainKey('c1', 7, 'x.y', 'z')).not.toBe(chainKey('c1', 7, 'x', 'y.z'));
    expect(chainKey('c1', 7, 'a', 'b')).toBe('calib.c1.7.a.b');
  });
  it('all ordered pairs by default; a seeded subset of the same pairs with a limit', () => {
    expect(calibrationPairs(['a', 'b', 'c'], undefined, 0)).toEqual([['a', 'b'], ['a', 'c'], ['b', 'a'], ['b', 'c'], ['c', 'a'], ['c', 'b']]);
    const some = calibrationPairs(['a', 'b', 'c'], 2, 3);
    expect(some).toHaveLength(2);
    expect(calibrationPairs(['a', 'b', 'c'], 2, 3)).toEqual(some);
    expect(calibrationPairs(['a', 'b'], 10, 0)).toEqual([['a', 'b'], ['b', 'a']]);
  });
  it('items graded from live answers need a ground truth and a verifier other than recorded', () => {
    expect(liveVerifiable({ metric: 'multiple-choice', groundTruth: 'B' })).toBe(true);
    expect(liveVerifiable({ metric: 'code_eval', groundTruth: 'x' })).toBe(false);
    expect(liveVerifiable({ metric: 'GSM8K' })).toBe(false);
  });
});

describe('calibrationConfig', () => {
  it('writes only the corners estimated from data (own or the pool\'s), never herd without data; it validates', () => {
    const obs: CalibrationObservation[] = [
      { worker: 'a', s: true, f: 1, correct: true },
      { worker: 'a', s: true, f: 0, correct: false },
      { worker: 'b', s: false, f: 1, correct: true },
    ];
    const est = estimateReplayParamsByWorker(obs, { priorStrength: 0 });
    const config = calibrationConfig(est);
    expect(validateReplayConfig(config)).toEqual(config);
    // a has keep and misled of its own and adopt from the pool (b's); no one has fix data
    expect(config.workers!.a).toEqual({ params: { keep: 1, misled: 1, adopt: 1 } });
    expect(config.workers!.b).toEqual({ params: { keep: 1, misled: 1, adopt: 1 } });
  });
});
