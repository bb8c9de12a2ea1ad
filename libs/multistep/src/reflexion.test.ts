import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { convertReflexion, REFLEXION_DROP, REFLEXION_RUNS, type ReflexionSource } from './reflexion.ts';

// Cut from noahshinn/reflexion at 218cf0e, programming_runs/root: the chosen runs' files, each cut to
// its first 3 tasks (the reflexion runs: the first 2, and the first with reflections where those are
// not among them).
const FIXTURE = join(import.meta.dirname, 'testing/fixtures/reflexion');

const one = (id: string, source: string, task: string, correct: boolean) => ({ id, source, task, rounds: [[{ agent: 0, answer: null, correct, read: [] }]] });

describe('convertReflexion', () => {
  it('a simple run: one round of one answer a task, graded by the hidden tests', async () => {
    const source = 'reflexion-humaneval-py-simple';
    const run = await convertReflexion(FIXTURE, source);
    expect(run.questions).toEqual([
      one('HumanEval/0', source, 'HumanEval-py', true),
      one('HumanEval/1', source, 'HumanEval-py', false),
      one('HumanEval/2', source, 'HumanEval-py', true),
    ]);
    expect(run.tasks).toEqual([
      { id: 'HumanEval/0', attempts: 1, solved: true },
      { id: 'HumanEval/1', attempts: 1, solved: false },
      { id: 'HumanEval/2', attempts: 1, solved: true },
    ]);
    expect(run.report).toEqual({ source, filesRead: [REFLEXION_RUNS[source].file], filesMissing: [], questions: 3, dropped: {} });
  });

  it('task ids from `name` where the log has no task_id (MBPP)', async () => {
    const run = await convertReflexion(FIXTURE, 'reflexion-mbpp-py-simple');
    expect(run.questions.map((q) => [q.id, q.task, q.rounds[0]![0]!.correct])).toEqual([
      ['mbpp_234_volume_cube', 'MBPP-py', true],
      ['mbpp_89_closest_num', 'MBPP-py', true],
      ['mbpp_245_max_sum', 'MBPP-py', true],
    ]);
  });

  it('a reflexion run: no rows, each task\'s attempts (1 + reflections) and final result', async () => {
    const he = await convertReflexion(FIXTURE, 'reflexion-humaneval-py-reflexion');
    expect(he.questions).toEqual([]);
    expect(he.tasks).toEqual([
      { id: 'HumanEval/0', attempts: 1, solved: true },
      { id: 'HumanEval/1', attempts: 2, solved: true },
    ]);
    expect(he.report.questions).toBe(0);
    expect(he.report.dropped).toEqual({ [REFLEXION_DROP.ungraded]: 1, [REFLEXION_DROP.single]: 1 });
    const leet = await convertReflexion(FIXTURE, 'reflexion-leetcodehard-py-reflexion');
    expect(leet.tasks).toEqual([
      { id: 'minimum-reverse-operations', attempts: 5, solved: false },
      { id: 'collect-coins-in-a-tree', attempts: 5, solved: false },
    ]);
    expect(leet.report.dropped).toEqual({ [REFLEXION_DROP.ungraded]: 2 });
  });

  it('every run of the table converts, in the log\'s order', async () => {
    for (const source of Object.keys(REFLEXION_RUNS) as ReflexionSource[]) {
      const run = await convertReflexion(FIXTURE, source);
      expect(run.tasks.length).toBeGreaterThan(0);
      expect(run.report.questions).toBe(REFLEXION_RUNS[source].strategy === 'simple' ? run.tasks.length : 0);
    }
  });

  describe('a checkout without the run', () => {
    let root: string;
    beforeAll(async () => {
      root = await mkdtemp(join(tmpdir(), 'fugu-reflexion-'));
    });
    afterAll(async () => {
      await rm(root, { recursive: true, force: true });
    });
    it('reports the file missing; an unknown run is refused', async () => {
      const run = await convertReflexion(root, 'reflexion-mbpp-py-reflexion');
      expect(run.report).toEqual({
        source: 'reflexion-mbpp-py-reflexion',
        filesRead: [],
        filesMissing: [REFLEXION_RUNS['reflexion-mbpp-py-reflexion'].file],
        questions: 0,
        dropped: {},
      });
      await expect(convertReflexion(root, 'reflexion-mbpp-rs-simple' as ReflexionSource)).rejects.toThrow(InputError);
    });
  });
});
