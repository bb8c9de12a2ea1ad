import { describe, expect, it } from 'vitest';
import { readySteps, scheduleOf, type Topology } from './schedule.ts';
import type { Access, Workflow } from './workflow.ts';

const wf = (...access: Access[]): Workflow => ({ steps: access.map((a, i) => ({ worker: 0, subtask: `s${i}`, access: a })) });

describe('scheduleOf', () => {
  it('levels, critical path and ready steps of a mixture of agents', () => {
    const s = scheduleOf(wf('none', 'none', 'none', 'all'));
    expect(s.inputs).toEqual([[], [], [], [0, 1, 2]]);
    expect(s.dependents).toEqual([[3], [3], [3], []]);
    expect(s.levels).toEqual([[0, 1, 2], [3]]);
    expect(s.criticalPath).toBe(2);
    expect(s.topology).toBe('parallel');
    expect(s.finalStep).toBe(3);
    expect(readySteps(s, [])).toEqual([0, 1, 2]);
    expect(readySteps(s, [0, 2])).toEqual([1]);
    expect(readySteps(s, new Set([0, 1, 2]))).toEqual([3]);
    expect(readySteps(s, [0, 1, 2, 3])).toEqual([]);
  });

  it('a chain runs one step at a time', () => {
    const s = scheduleOf(wf('none', [0], 'all'));
    expect(s.levels).toEqual([[0], [1], [2]]);
    expect(s.criticalPath).toBe(3);
    expect(s.topology).toBe('chain');
    expect(readySteps(s, [])).toEqual([0]);
    expect(readySteps(s, [0])).toEqual([1]);
  });

  it('finds steps whose answers never reach the final step', () => {
    const s = scheduleOf(wf('none', 'none', [0]));
    expect(s.unused).toEqual([1]);
    expect(s.topology).toBe('other');
  });

  const topologies: Array<[string, Access[], Topology, number]> = [
    ['one step', ['none'], 'single', 1],
    ['one step that sees all (nothing)', ['all'], 'single', 1],
    ['two steps, second sees the first', ['none', 'all'], 'chain', 2],
    ['solve then verify then refine, each sees the previous only', ['none', [0], [1]], 'chain', 3],
    ['three proposers and an aggregator', ['none', 'none', 'none', [0, 1, 2]], 'parallel', 2],
    ['two proposers and an aggregator', ['none', 'none', 'all'], 'parallel', 2],
    ['two steps, independent', ['none', 'none'], 'other', 1],
    ['aggregator that misses a proposer', ['none', 'none', 'none', [0, 1]], 'other', 2],
    ['proposers, an aggregator, then a verifier of the aggregate', ['none', 'none', 'all', [2]], 'tree', 3],
    ['plan, two solvers from the plan, a judge of the solvers', ['none', [0], [0], [1, 2]], 'tree', 3],
    ['a proposer sees another proposer, the last sees all', ['none', [0], 'none', 'all'], 'tree', 3],
  ];
  for (const [name, access, topology, critical] of topologies) {
    it(`topology: ${name} -> ${topology}`, () => {
      const s = scheduleOf(wf(...access));
      expect(s.topology).toBe(topology);
      expect(s.criticalPath).toBe(critical);
    });
  }
});
