import { describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import {
  outsideJustified,
  parseBillions,
  REPLAY_PARAM_NAMES,
  REPLAY_PARAM_SPECS,
  REPLAY_PRESETS,
  resolveWorkerParams,
  sizeClassOf,
  validateReplayConfig,
  validateReplayParams,
  type ReplayConfig,
} from './params.ts';
import { expectedWorkflowCorrect, replayWorkflow } from './model.ts';

function fieldOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    return (e as InputError).field;
  }
  throw new Error('expected an InputError');
}

describe('size classes', () => {
  it('reads parameter counts from names, card sizes and descriptions', () => {
    expect(parseBillions('llama-3.1-8b-instruct')).toBe(8);
    expect(parseBillions('qwen2.5-7b-instruct')).toBe(7);
    expect(parseBillions('llama-3.3-nemotron-super-49b-v1')).toBe(49);
    expect(parseBillions('mixtral-8x7b-instruct-v0.1')).toBe(56);
    expect(parseBillions('141B')).toBe(141);
    expect(parseBillions('a 2.9-billion parameter model')).toBe(2.9);
    expect(parseBillions('gpt-4o-mini')).toBeUndefined();
    expect(parseBillions('claude-3-5-sonnet')).toBeUndefined();
  });
  it('classes the LLMRouter workers by size and API models without a count as large', () => {
    for (const w of ['qwen2.5-7b-instruct', 'llama3-chatqa-1.5-8b', 'mistral-7b-instruct-v0.3', 'gemma-2-9b-it', 'codegemma-7b', 'llama-3.1-8b-instruct', 'mistral-nemo-12b-instruct']) {
      expect(sizeClassOf({ name: w })).toBe('small');
    }
    for (const w of ['llama-3.1-nemotron-51b-instruct', 'llama3-chatqa-1.5-70b', 'llama-3.3-nemotron-super-49b-v1', 'gpt-4o', 'claude-3-5-sonnet', 'gemini-2.5-pro']) {
      expect(sizeClassOf({ name: w })).toBe('large');
    }
  });
  it('an explicit class wins over a size, a size over the name, the name over the description', () => {
    expect(sizeClassOf({ name: 'x-70b', sizeClass: 'small' })).toBe('small');
    expect(sizeClassOf({ name: 'x-70b', size: 7 })).toBe('small');
    expect(sizeClassOf({ name: 'x-7b', size: '49B' })).toBe('large');
    expect(sizeClassOf({ name: 'my-model', description: 'a 9-billion parameter model' })).toBe('small');
    expect(sizeClassOf({ name: 'x-70b', description: 'a 9B model' })).toBe('large');
  });
});

describe('parameters', () => {
  it('the presets are valid and inside the published ranges', () => {
    for (const p of Object.values(REPLAY_PRESETS)) {
      expect(validateReplayParams({ ...p })).toEqual(p);
      expect(outsideJustified(p)).toEqual([]);
    }
  });
  it('an out-of-range, missing, unknown or non-number parameter is an InputError naming it', () => {
    expect(fieldOf(() => validateReplayParams({ ...REPLAY_PRESETS.large, keep: 1.01 }))).toBe('keep');
    expect(fieldOf(() => validateReplayParams({ ...REPLAY_PRESETS.large, misled: -0.1 }))).toBe('misled');
    expect(fieldOf(() => validateReplayParams({ ...REPLAY_PRESETS.large, herd: 0 }))).toBe('herd');
    expect(fieldOf(() => validateReplayParams({ ...REPLAY_PRESETS.large, herd: 11 }))).toBe('herd');
    expect(fieldOf(() => validateReplayParams({ ...REPLAY_PRESETS.large, fix: Number.NaN }))).toBe('fix');
    expect(fieldOf(() => validateReplayParams({ ...REPLAY_PRESETS.large, adopt: '0.5' }))).toBe('adopt');
    expect(fieldOf(() => validateReplayParams({ keep: 0.9, misled: 0.2, adopt: 0.5, fix: 0.1 }))).toBe('herd');
    expect(fieldOf(() => validateReplayParams({ ...REPLAY_PRESETS.large, kep: 0.9 }))).toBe('kep');
    expect(() => validateReplayParams({ ...REPLAY_PRESETS.large, keep: 2 })).toThrow('field keep: keep must be in [0, 1], got 2');
  });
  it('flags values outside the published range', () => {
    expect(outsideJustified({ ...REPLAY_PRESETS.small, keep: 0.5, herd: 6 })).toEqual(['keep', 'herd']);
    for (const n of REPLAY_PARAM_NAMES) {
      const s = REPLAY_PARAM_SPECS[n];
      expect(s.valid[0]).toBeLessThanOrEqual(s.justified[0]);
      expect(s.valid[1]).toBeGreaterThanOrEqual(s.justified[1]);
    }
  });
});

describe('configuration', () => {
  it('validates a config and names the bad field', () => {
    const ok = validateReplayConfig({ presets: { small: { misled: 0.4 } }, workers: { 'gpt-4o': { sizeClass: 'large', params: { keep: 0.97 } }, m: { size: '8B' } } });
    expect(ok.workers?.['gpt-4o']?.params?.keep).toBe(0.97);
    expect(fieldOf(() => validateReplayConfig({ workers: { 'gpt-4o': { params: { keep: 1.5 } } } }))).toBe('workers.gpt-4o.params.keep');
    expect(fieldOf(() => validateReplayConfig({ presets: { medium: {} } }))).toBe('presets.medium');
    expect(fieldOf(() => validateReplayConfig({ presets: { large: { adopt: 2 } } }))).toBe('presets.large.adopt');
    expect(fieldOf(() => validateReplayConfig({ workers: { m: { sizeClass: 'huge' } } }))).toBe('workers.m.sizeClass');
    expect(fieldOf(() => validateReplayConfig({ workers: { m: { size: 'big' } } }))).toBe('workers.m.size');
    expect(fieldOf(() => validateReplayConfig({ workers: { m: { parms: {} } } }))).toBe('workers.m.parms');
    expect(fieldOf(() => validateReplayConfig({ worker: {} }))).toBe('worker');
    expect(validateReplayConfig(undefined)).toEqual({});
  });
  it('resolves a worker: its class preset, the preset overrides, then its own overrides', () => {
    const cfg = validateReplayConfig({ presets: { small: { misled: 0.4 } }, workers: { 'llama-3.1-8b-instruct': { params: { adopt: 0.55 } }, custom: { sizeClass: 'small' } } });
    expect(resolveWorkerParams(cfg, 'llama-3.1-8b-instruct')).toEqual({ ...REPLAY_PRESETS.small, misled: 0.4, adopt: 0.55, sizeClass: 'small' });
    expect(resolveWorkerParams(cfg, 'llama-3.1-nemotron-51b-instruct')).toEqual({ ...REPLAY_PRESETS.large, sizeClass: 'large' });
    expect(resolveWorkerParams(cfg, 'custom').sizeClass).toBe('small');
    expect(resolveWorkerParams({}, 'my-model', { description: 'a 7-billion parameter model' }).sizeClass).toBe('small');
  });
});

describe('parameters by the number of sources a step reads (adopt rises with agreeing sources)', () => {
  const config: ReplayConfig = { presets: { large: { adopt: 0.5, misled: 0.3 } }, sources: { '2': { adopt: 0.8 }, '3': { adopt: 0.95, misled: 0.5 } } };

  it('the override with the largest count not above k applies; one source, or none, takes the worker\'s own', () => {
    const at = (k?: number) => resolveWorkerParams(config, 'gpt-4o', k === undefined ? {} : { sources: k });
    expect(at().adopt).toBe(0.5);
    expect(at(1).adopt).toBe(0.5);
    expect(at(2)).toMatchObject({ adopt: 0.8, misled: 0.3 });
    expect(at(6)).toMatchObject({ adopt: 0.95, misled: 0.5 });
  });

  it('a step of a workflow reading two workers uses the two-source parameters, in exact expectation and sampled', () => {
    const item = { id: 'q', recorded: { a: 1, b: 1, c: 0 } };
    const params = (w: string, k: number) => resolveWorkerParams(config, w, { sources: k });
    const steps = [{ worker: 'a', sees: [] }, { worker: 'b', sees: [] }, { worker: 'c', sees: [0, 1] }];
    expect(expectedWorkflowCorrect({ params, item, steps })).toBeCloseTo(0.8, 12);
    expect(expectedWorkflowCorrect({ params, item, steps: [{ worker: 'a', sees: [] }, { worker: 'c', sees: [0] }] })).toBeCloseTo(0.5, 12);
    const right = Array.from({ length: 400 }, (_, s) => replayWorkflow({ params, item, steps, seed: s }).correct).filter(Boolean).length;
    expect(right / 400).toBeGreaterThan(0.72);
  });

  it('bad keys and values name the field', () => {
    expect(() => validateReplayConfig({ sources: { '1': { adopt: 0.9 } } })).toThrow(expect.objectContaining({ field: 'sources.1' }));
    expect(() => validateReplayConfig({ sources: { two: { adopt: 0.9 } } })).toThrow(expect.objectContaining({ field: 'sources.two' }));
    expect(() => validateReplayConfig({ sources: { '2': { adopt: 2 } } })).toThrow(expect.objectContaining({ field: 'sources.2.adopt' }));
    expect(validateReplayConfig({ sources: { '2': { adopt: 0.9 } } })).toEqual({ sources: { '2': { adopt: 0.9 } } });
  });
});
