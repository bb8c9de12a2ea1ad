import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { convertDylanHumanEval, dylanHumanEvalSource, NOT_GRADED, type DylanHumanEvalModel } from './dylan-humaneval.ts';

// Cut from SALT-NLP/DyLAN at 572341b, exp/HumanEval/gpt_4_0613: the transcripts of tasks 0-3, 50,
// 100-106 and 150 (each reply cut to its first 80 characters: the converter reads only which are
// null), and the graded answers of those tasks and of task 51 (whose transcript is not kept).
const FIXTURE = join(import.meta.dirname, 'testing/fixtures/dylan-humaneval');

describe('convertDylanHumanEval', () => {
  it('records per task the graded final answer and the coders answering each round; no table rows', async () => {
    const { tasks, report } = await convertDylanHumanEval(FIXTURE, 'gpt_4_0613');
    const t = (id: number, answered: number[], passed = true, result = 'passed') => ({ id: `HumanEval/${id}`, passed, result, answered });
    expect(tasks).toEqual([
      t(0, [4, 4, 2]),
      t(1, [4, 4, 2]),
      t(2, [4, 4, 2]),
      // 3 alike codes in round 1: stopped after the third
      t(3, [4, 3, 0]),
      t(50, [4, 4, 2]),
      t(100, [4, 4, 2]),
      t(101, [4, 4, 2]),
      t(102, [4, 4, 2]),
      t(103, [4, 4, 2]),
      t(104, [4, 4, 2]),
      t(105, [4, 4, 2]),
      t(106, [4, 4, 2], false, 'failed: '),
      t(150, [4, 4, 2]),
    ]);
    const dir = 'exp/HumanEval/gpt_4_0613';
    expect(report).toEqual({
      source: 'dylan-humaneval-gpt-4-0613',
      filesRead: [
        `${dir}/llmlp_human_eval_0.jsonl_results.jsonl`,
        `${dir}/llmlp_human_eval_0_0_443.json`,
        `${dir}/llmlp_human_eval_0_1_443.json`,
        `${dir}/llmlp_human_eval_0_2_443.json`,
        `${dir}/llmlp_human_eval_0_3_443.json`,
      ],
      filesMissing: [],
      questions: 0,
      dropped: { 'no transcript': 1, [NOT_GRADED]: 13 },
    });
  });

  it('names the runs', () => {
    expect(dylanHumanEvalSource('gpt_35_turbo_0301')).toBe('dylan-humaneval-gpt-35-turbo-0301');
  });

  describe('refuses', () => {
    let root: string;
    beforeAll(async () => {
      root = await mkdtemp(join(tmpdir(), 'fugu-dylan-he-'));
    });
    afterAll(async () => {
      await rm(root, { recursive: true, force: true });
    });

    it('a run it does not know, and a checkout without the files', async () => {
      await expect(convertDylanHumanEval(FIXTURE, 'gpt_5' as DylanHumanEvalModel)).rejects.toThrow(InputError);
      await expect(convertDylanHumanEval(root, 'gpt_4_0613')).rejects.toThrow(/llmlp_human_eval_0\.jsonl_results\.jsonl/);
    });

    it('a transcript not of 8 agents by 3 rounds', async () => {
      const dir = join(root, 'exp/HumanEval/gpt_4_0613');
      await mkdir(dir, { recursive: true });
      await writeFile(join(dir, 'llmlp_human_eval_0.jsonl_results.jsonl'), JSON.stringify({ task_id: 'HumanEval/0', completion: '', result: 'passed', passed: true }) + '\n');
      await writeFile(join(dir, 'llmlp_human_eval_0_0_443.json'), JSON.stringify([['x', null, null]]) + '\n');
      await expect(convertDylanHumanEval(root, 'gpt_4_0613')).rejects.toThrow(/llmlp_human_eval_0_0_443\.json:1/);
    });
  });
});
