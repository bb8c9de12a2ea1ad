import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { resolveWorkerParams, validateReplayConfig } from '@fugu/conductor';
import { bySourcesConfigsOf, fitTable, formatFits, replayConfigsOf } from './fit.ts';
import { readTable, readTables, writeTable } from './tables.ts';
import type { MultistepQuestion } from './types.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'fugu-multistep-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const q = (i: number, right: boolean[], second: boolean[]): MultistepQuestion => ({
  id: `q${i}`, source: 'two', task: 't', level: 1 + (i % 2),
  rounds: [right.map((correct, agent) => ({ agent, answer: correct ? '1' : '2', correct, read: [] })), second.map((correct, agent) => ({ agent, answer: null, correct, read: [0, 1, 2] }))],
});

describe('the tables', () => {
  it('write and read back the same questions', async () => {
    const qs = [q(0, [true, false, true], [true, true, true]), q(1, [false, false, true], [false, true, false])];
    await writeTable(path.join(dir, 'two.jsonl'), qs);
    expect(await readTable(path.join(dir, 'two.jsonl'))).toEqual(qs);
    expect(Object.keys(await readTables(dir))).toEqual(['two']);
  });

  it('a bad line is an InputError naming the file, the line and the field', async () => {
    const good = JSON.stringify(q(0, [true], [true]));
    const bad = JSON.stringify({ ...q(1, [true], [true]), rounds: [[{ agent: 0, answer: null, correct: 'yes', read: [] }]] });
    const file = path.join(dir, 'bad.jsonl');
    await writeFile(file, `${good}\n${bad}\n`);
    await expect(readTable(file)).rejects.toThrow(new RegExp(`${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}:2: rounds\\[0\\]\\[0\\]\\.correct: must be true or false`));
    await writeFile(file, '{"id": "x"\n');
    await expect(readTable(file)).rejects.toBeInstanceOf(InputError);
  });

  it('a parameter no observation informs is printed as no data, not as a measurement', () => {
    // three agents: every second-round answer of an agent right in round 1 read others all wrong or split; no (s = 1, f = 1)
    const qs = Array.from({ length: 40 }, (_, i) => q(i, [i % 4 === 0, false, false], [i % 3 === 0, false, i % 2 === 0]));
    const text = formatFits([fitTable('two', qs, { seed: 0, samples: 20 })]);
    const row = text.split('\n').find((l) => l.startsWith('two') && / all /.test(l))!;
    expect(row).toContain('(no data)');
  });
});

describe('replayConfigsOf', () => {
  it('writes the point estimate and the interval bounds that favour and disfavour reading others, valid ReplayConfigs', () => {
    const qs = Array.from({ length: 80 }, (_, i) => q(i, [i % 2 === 0, i % 3 === 0, i % 5 === 0], [i % 2 === 0 || i % 7 === 0, i % 3 === 0, i % 4 === 0]));
    const fit = fitTable('two', qs, { seed: 0, samples: 40 });
    const c = replayConfigsOf(fit);
    for (const corner of ['point', 'optimistic', 'pessimistic'] as const) expect(validateReplayConfig(c[corner])).toEqual(c[corner]);
    const [p, o, w] = [c.point.presets!.large!, c.optimistic.presets!.large!, c.pessimistic.presets!.large!];
    expect(o.keep).toBeGreaterThanOrEqual(p.keep!);
    expect(o.misled).toBeLessThanOrEqual(p.misled!);
    expect(w.adopt).toBeLessThanOrEqual(p.adopt!);
    expect(w.misled).toBeGreaterThan(o.misled!);
    expect(c.point.presets!.small).toEqual(c.point.presets!.large);
    // each file says where its values come from: the table, the corner, not this pool's workers, the intervals
    expect(c.pessimistic.source).toMatch(/^two, pessimistic: .*disfavours.*not this pool's workers: .*misled [0-9.]+ \([0-9.]+-[0-9.]+\)/);
  });
});

describe('bySourcesConfigsOf', () => {
  it('one model from tables measured with different numbers of sources: a step reading k answers takes the table measured with k', () => {
    const one = fitTable('one', Array.from({ length: 80 }, (_, i) => q(i, [i % 2 === 0, i % 3 === 0], [i % 2 === 0 || i % 7 === 0, i % 3 === 0])), { seed: 0, samples: 20 });
    const two = fitTable('two', Array.from({ length: 80 }, (_, i) => q(i, [i % 2 === 0, i % 3 === 0, i % 5 === 0], [i % 2 === 0 || i % 3 === 0, i % 3 === 0, i % 2 === 0])), { seed: 0, samples: 20 });
    const c = bySourcesConfigsOf('fam', [[2, two], [1, one]]);
    expect(validateReplayConfig(c.point)).toEqual(c.point);
    expect(c.point.presets!.large).toEqual(replayConfigsOf(one).point.presets!.large);
    expect(c.pessimistic.sources!['2']).toEqual(replayConfigsOf(two).pessimistic.presets!.large);
    expect(resolveWorkerParams(c.point, 'w', { sources: 2 }).adopt).toBe(replayConfigsOf(two).point.presets!.large!.adopt);
    expect(resolveWorkerParams(c.point, 'w', { sources: 1 }).adopt).toBe(replayConfigsOf(one).point.presets!.large!.adopt);
    expect(() => bySourcesConfigsOf('fam', [[2, two]])).toThrow(/one-source/);
  });
});

