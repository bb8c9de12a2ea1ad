import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { dylanMmluSample, LegacyRandomState, pandasSample, parseCsv, readMmluSubject } from './mmlu.ts';

// numpy 2.4.6 and pandas 3.0.6 (the legacy RandomState has not changed since numpy 1.17):
// np.random.RandomState(0).permutation(n) and pd.DataFrame(range(n)).sample(frac=0.2, random_state=0).index
describe('LegacyRandomState (numpy RandomState)', () => {
  it('MT19937 seeded by init_genrand: the first outputs for seed 0', () => {
    const rs = new LegacyRandomState(0);
    expect([rs.nextUint32(), rs.nextUint32(), rs.nextUint32()]).toEqual([2357136044, 2546248239, 3071714933]);
  });

  it('permutation(n) as numpy gives it', () => {
    const perm = (n: number, seed = 0) => new LegacyRandomState(seed).permutation(n);
    expect(perm(1)).toEqual([0]);
    expect(perm(2)).toEqual([1, 0]);
    expect(perm(5)).toEqual([2, 0, 1, 3, 4]);
    expect(perm(10)).toEqual([2, 8, 4, 9, 1, 6, 7, 3, 0, 5]);
    expect(perm(20, 12345)).toEqual([13, 8, 16, 3, 15, 12, 0, 10, 7, 11, 6, 17, 19, 18, 14, 9, 4, 1, 5, 2]);
    expect(perm(12, 4294967295)).toEqual([11, 8, 5, 9, 1, 10, 6, 0, 4, 7, 2, 3]);
    expect(perm(100).slice(0, 20)).toEqual([26, 86, 2, 55, 75, 93, 16, 73, 54, 95, 53, 92, 78, 13, 7, 30, 22, 24, 33, 8]);
    expect(perm(235).slice(0, 10)).toEqual([222, 101, 214, 191, 137, 229, 149, 106, 145, 92]);
    // the whole permutation, as sum(i * p[i])
    const weighted = (p: number[]) => p.reduce((s, x, i) => s + i * x, 0);
    expect(weighted(perm(102))).toBe(270025);
    expect(weighted(perm(144))).toBe(736812);
    expect(perm(1534).slice(0, 8)).toEqual([479, 1057, 1367, 298, 651, 1145, 1165, 494]);
    expect(weighted(perm(1534))).toBe(903142688);
  });

  it('refuses a seed numpy would not take as one 32-bit word', () => {
    expect(() => new LegacyRandomState(-1)).toThrow(InputError);
    expect(() => new LegacyRandomState(2 ** 32)).toThrow(InputError);
    expect(() => new LegacyRandomState(0.5)).toThrow(InputError);
  });
});

describe('pandasSample and dylanMmluSample', () => {
  it('sample(frac) takes round(frac * n) of the permutation, in its order', () => {
    expect(pandasSample(10, 0.2, 0)).toEqual([2, 8]);
    expect(dylanMmluSample(10)).toEqual([2, 8]);
    expect(dylanMmluSample(5)).toEqual([2]);
    // MMLU's sizes: abstract_algebra 100 -> 20, astronomy 152 -> 30, college_biology 144 -> 29, professional_law 1534 -> 307
    expect([100, 152, 144, 1534].map((n) => dylanMmluSample(n).length)).toEqual([20, 30, 29, 307]);
    expect(dylanMmluSample(100).slice(0, 4)).toEqual([26, 86, 2, 55]);
  });
});

describe('parseCsv', () => {
  it('reads quoted fields with commas, doubled quotes and newlines, and CRLF; each row with its first line', () => {
    const text = 'a,"b, c","say ""hi"""\r\n"two\nlines",,x\n\nlast,row,"" \n';
    expect(parseCsv(text)).toEqual([
      { fields: ['a', 'b, c', 'say "hi"'], line: 1 },
      { fields: ['two\nlines', '', 'x'], line: 2 },
      { fields: ['last', 'row', ' '], line: 5 },
    ]);
    expect(parseCsv('no,newline')).toEqual([{ fields: ['no', 'newline'], line: 1 }]);
  });
});

describe('readMmluSubject', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'fugu-mmlu-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads the original layout (no header, the letter) and a re-export (a header, an index), in the directory or under test/', async () => {
    await writeFile(join(dir, 'a_test.csv'), '"Q one, with a comma",1,2,3,4,B\nQ two,w,x,y,z,D\n');
    await mkdir(join(dir, 'test'), { recursive: true });
    await writeFile(join(dir, 'test', 'b_test.csv'), 'question,choice0,choice1,choice2,choice3,answer\n"multi\nline",1,2,3,4,0\nQ,1,2,3,4,3\n');
    expect(await readMmluSubject(dir, 'a')).toEqual({
      file: 'a_test.csv',
      questions: [
        { question: 'Q one, with a comma', choices: ['1', '2', '3', '4'], answer: 'B' },
        { question: 'Q two', choices: ['w', 'x', 'y', 'z'], answer: 'D' },
      ],
    });
    const b = await readMmluSubject(dir, 'b');
    expect(b?.file).toBe(join('test', 'b_test.csv'));
    expect(b?.questions.map((q) => [q.question, q.answer])).toEqual([['multi\nline', 'A'], ['Q', 'D']]);
    expect(await readMmluSubject(dir, 'absent')).toBeUndefined();
  });

  it('names the file and line of a row that is not a question', async () => {
    await writeFile(join(dir, 'c_test.csv'), 'Q,1,2,3,4,A\n"two\nlines",1,2,3,4,E\n');
    await expect(readMmluSubject(dir, 'c')).rejects.toThrow(/c_test\.csv:2: answer is not a letter A to D nor an index 0 to 3: "E"/);
    await writeFile(join(dir, 'd_test.csv'), 'Q,1,2,3,A\n');
    await expect(readMmluSubject(dir, 'd')).rejects.toThrow(/d_test\.csv:1: a question row has 6 fields .* this one 5/);
  });
});
