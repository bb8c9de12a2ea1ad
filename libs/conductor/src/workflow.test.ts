import { InputError } from '@fugu/core';
import { describe, expect, it } from 'vitest';
import { canonicalAccess, checkWorkflow, conductorPool, DEFAULT_MAX_STEPS, resolveMaxSteps, sameWorkflow, visibleSteps, workerId, workerName, type Workflow } from './workflow.ts';

describe('maxSteps', () => {
  it('defaults to 5 and accepts 1..10', () => {
    expect(DEFAULT_MAX_STEPS).toBe(5);
    expect(resolveMaxSteps()).toBe(5);
    expect(resolveMaxSteps(1)).toBe(1);
    expect(resolveMaxSteps(10)).toBe(10);
  });
  it('rejects anything else with an InputError naming maxSteps', () => {
    for (const bad of [0, 11, -1, 2.5, Number.NaN, '3' as unknown as number]) {
      let e: unknown;
      try {
        resolveMaxSteps(bad);
      } catch (x) {
        e = x;
      }
      expect(e).toBeInstanceOf(InputError);
      expect((e as InputError).field).toBe('maxSteps');
    }
  });
});

describe('conductorPool', () => {
  const pool = conductorPool([
    { name: 'gpt-4o', description: 'strong  general\nmodel' },
    { name: 'llama-8b', description: 'small and fast' },
  ]);
  it('numbers the workers 0..K-1 and maps ids back to names', () => {
    expect(pool.workers).toEqual([
      { id: 0, name: 'gpt-4o', description: 'strong general model' },
      { id: 1, name: 'llama-8b', description: 'small and fast' },
    ]);
    expect(workerName(pool, 1)).toBe('llama-8b');
    expect(workerId(pool, 'gpt-4o')).toBe(0);
    expect(() => workerName(pool, 2)).toThrow(/no worker 2 in a pool of 2/);
    expect(() => workerId(pool, 'claude')).toThrow(/unknown worker "claude"/);
  });
  it('rejects an empty pool, duplicate names and missing descriptions, naming the field', () => {
    expect(() => conductorPool([])).toThrow(InputError);
    expect(() => conductorPool([{ name: 'a', description: 'x' }, { name: 'a', description: 'y' }])).toThrow(/workers\[1\]\.name/);
    expect(() => conductorPool([{ name: 'a', description: ' ' }])).toThrow(/workers\[0\]\.description/);
  });
});

describe('access', () => {
  const wf: Workflow = {
    steps: [
      { worker: 0, subtask: 'a', access: 'all' },
      { worker: 0, subtask: 'b', access: 'none' },
      { worker: 0, subtask: 'c', access: [1] },
      { worker: 0, subtask: 'd', access: 'all' },
    ],
  };
  it('visible steps: all earlier, none, or the list', () => {
    expect([0, 1, 2, 3].map((i) => visibleSteps(wf, i))).toEqual([[], [], [1], [0, 1, 2]]);
  });
  it('canonical form: sorted, unique, empty is none', () => {
    expect(canonicalAccess([2, 0, 2])).toEqual([0, 2]);
    expect(canonicalAccess([])).toBe('none');
    expect(canonicalAccess('all')).toBe('all');
  });
  it('sameWorkflow compares canonical access', () => {
    const a: Workflow = { steps: [{ worker: 0, subtask: 'x', access: [] }, { worker: 1, subtask: 'y', access: [0, 0] }] };
    const b: Workflow = { steps: [{ worker: 0, subtask: 'x', access: 'none' }, { worker: 1, subtask: 'y', access: [0] }] };
    expect(sameWorkflow(a, b)).toBe(true);
    expect(sameWorkflow(a, { steps: [b.steps[0]!, { ...b.steps[1]!, access: 'all' }] })).toBe(false);
    expect(sameWorkflow(a, { steps: [b.steps[0]!] })).toBe(false);
  });
});

describe('checkWorkflow', () => {
  const step = (worker: number, access: Workflow['steps'][number]['access'] = 'none', subtask = 's') => ({ worker, subtask, access });
  it('accepts a valid workflow', () => {
    expect(checkWorkflow({ steps: [step(0), step(1, [0]), step(2, 'all')] }, { poolSize: 3 })).toBeUndefined();
  });
  it('names the list and the 1-based step of each fault', () => {
    expect(checkWorkflow({ steps: [] }, { poolSize: 3 })).toMatchObject({ list: 'model id' });
    expect(checkWorkflow({ steps: Array.from({ length: 6 }, () => step(0)) }, { poolSize: 3 })?.message).toMatch(/6 steps, more than the maximum of 5/);
    expect(checkWorkflow({ steps: [step(0), step(3)] }, { poolSize: 3 })).toMatchObject({ list: 'model id', step: 2 });
    expect(checkWorkflow({ steps: [step(0), step(1.5)] }, { poolSize: 3 })).toMatchObject({ list: 'model id', step: 2 });
    expect(checkWorkflow({ steps: [step(0, 'none', ' ')] }, { poolSize: 3 })).toMatchObject({ list: 'subtasks', step: 1 });
    expect(checkWorkflow({ steps: [step(0), step(0, [1])] }, { poolSize: 3 })).toMatchObject({ list: 'access list', step: 2 });
    expect(checkWorkflow({ steps: [step(0), step(0, [0, 0])] }, { poolSize: 3 })?.message).toMatch(/appears twice/);
    expect(checkWorkflow({ steps: [step(0), step(0, [-1])] }, { poolSize: 3 })).toMatchObject({ list: 'access list', step: 2 });
  });
});
