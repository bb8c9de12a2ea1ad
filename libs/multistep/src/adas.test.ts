import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { convertAdas, parseAdasScore } from './adas.ts';

// Cut from ShengranHu/ADAS at 2702bee, results/<benchmark>_gpt3.5_results.json: each file's first
// design (Chain-of-Thought), MMLU's second, and DROP's entries 30-34 (two names that occur more than once).
const FIXTURE = join(import.meta.dirname, 'testing/fixtures/adas');

const score = (accuracy: number, lo: number, hi: number, raw: string) => ({ accuracy, interval: [lo, hi], raw });
const ci = (lo: string, hi: string, m: string): string => `95% Bootstrap Confidence Interval: (${lo}%, ${hi}%), Median: ${m}%`;

describe('parseAdasScore', () => {
  it('reads the median and interval as fractions, keeping the string', () => {
    expect(parseAdasScore(ci('62.0', '68.6', '65.4'))).toEqual(score(0.654, 0.62, 0.686, ci('62.0', '68.6', '65.4')));
    expect(parseAdasScore(ci('0.0', '7.0', '3.0'))).toEqual(score(0.03, 0, 0.07, ci('0.0', '7.0', '3.0')));
  });
  it('is null for another form', () => {
    expect(parseAdasScore('Median: 65.4%')).toBeNull();
  });
});

describe('convertAdas', () => {
  it('benchmark -> design -> test score (and validation), repeated names numbered', async () => {
    const { table, report } = await convertAdas(FIXTURE);
    expect(Object.keys(table)).toEqual(['mmlu', 'gpqa', 'drop', 'mgsm', 'arc']);
    expect(table['mmlu']).toEqual({
      'Chain-of-Thought': {
        ...score(0.654, 0.62, 0.686, ci('62.0', '68.6', '65.4')),
        generation: 'initial',
        validation: score(0.648, 0.562, 0.727, ci('56.2', '72.7', '64.8')),
      },
      'Self-Consistency with Chain-of-Thought': {
        ...score(0.659, 0.626, 0.691, ci('62.6', '69.1', '65.9')),
        generation: 'initial',
        validation: score(0.695, 0.617, 0.773, ci('61.7', '77.3', '69.5')),
      },
    });
    const drop = table['drop']!;
    expect(Object.keys(drop)).toEqual([
      'Chain-of-Thought',
      'Distributed Consensus Agent [1]',
      'Role-Adaptive Agent [1]',
      'Distributed Consensus Agent [2]',
      'Role-Adaptive Agent [2]',
      'Distributed Consensus Agent [3]',
    ]);
    // DROP's interval does not contain its median: kept as the source has it
    expect(drop['Chain-of-Thought']).toMatchObject(score(0.642, 0.59, 0.607, ci('59.0', '60.7', '64.2')));
    // the same design tested twice: 75.4% and 79.4% (the paper's figure)
    expect([drop['Distributed Consensus Agent [2]'], drop['Distributed Consensus Agent [3]']].map((d) => [d!.generation, d!.accuracy])).toEqual([
      [30, 0.754],
      [30, 0.794],
    ]);
    expect(table['arc']!['Chain-of-Thought']!.validation).toEqual(score(0.03, 0, 0.07, ci('0.0', '7.0', '3.0')));
    expect(report).toEqual({
      source: 'adas-gpt3.5',
      filesRead: ['mmlu', 'gpqa', 'drop', 'mgsm', 'arc'].map((b) => `results/${b}_gpt3.5_results.json`),
      filesMissing: [],
      questions: 0,
      dropped: {},
    });
  });

  describe('on a made-up checkout', () => {
    let root: string;
    beforeAll(async () => {
      root = await mkdtemp(join(tmpdir(), 'fugu-adas-'));
      await mkdir(join(root, 'results'));
      const d = (name: string, test: string) => ({ name, generation: 1, fitness: ci('1.0', '3.0', '2.0'), test_fitness: test });
      await writeFile(join(root, 'results/mmlu_gpt3.5_results.json'), JSON.stringify([d('A', ci('10.0', '30.0', '20.0')), d('B', 'n/a')]));
    });
    afterAll(async () => {
      await rm(root, { recursive: true, force: true });
    });
    it('lists absent files as missing and counts scores it cannot read', async () => {
      const { table, report } = await convertAdas(root);
      expect(Object.keys(table)).toEqual(['mmlu']);
      expect(Object.keys(table['mmlu']!)).toEqual(['A']);
      expect(report.filesMissing).toEqual(['gpqa', 'drop', 'mgsm', 'arc'].map((b) => `results/${b}_gpt3.5_results.json`));
      expect(report.dropped).toEqual({ 'a score not of the form `95% Bootstrap Confidence Interval: (lo%, hi%), Median: m%`': 1 });
    });
  });
});
