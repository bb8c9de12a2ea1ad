import { describe, expect, it } from 'vitest';
import { renderGrpoReport, type GrpoReportData, type GrpoReportIteration } from './grpo-report.ts';
import { contentWidth, tableMinWidths } from './testing/table-width.ts';

const it0 = (i: number, val?: number): GrpoReportIteration => ({
  iteration: i, meanReward: 0.7 + i / 100, rewardSd: 0.2, accuracy: 0.5, groups: 8, zeroAdvantageGroups: 2, parseFailures: 0, meanSteps: 1.2, meanCost: 0.0003,
  clipFraction: 0.01, approxKl: 0.001, workers: { alpha: 10, beta: 6 }, topologies: { single: 12, chain: 4 }, ...(val !== undefined && { val: { meanReward: val, accuracy: 0.6, meanSteps: 1 } }),
});

const data = (config: Record<string, unknown>): GrpoReportData => ({
  run: {
    id: 'run-<1>', status: 'completed', statusReason: null, config: { q: 8, g: 4, iterations: 3, lr: 0.003, epochs: 2, clipLow: 0.2, clipHigh: 0.2, advantageScale: 'none', klCoef: 0, heads: ['stop', 'worker'], seed: 3, ...config },
    codeVersion: 'src-x', startCheckpointId: 'run-start', policyCheckpointId: 'run-i3', bestCheckpointId: 'run-best-i2', bestValReward: 0.8123, createdAt: new Date('2026-12-01T00:00:00Z'), replay: true,
  },
  iterations: [it0(0, 0.8), it0(1), it0(2, 0.8123)],
});

describe('renderGrpoReport', () => {
  it('states the run\'s pools and reward: randomised pools with hold-outs, mu, or the whole pool; escapes the run id', () => {
    const k = renderGrpoReport(data({ poolK: 5, poolHoldout: [['a'], ['b'], ['c']], reward: { costPerUsd: 10 } }));
    expect(k).toContain('a random 5 of the workers per question, 3 pool(s) held out');
    expect(k).toContain('1 / 0.5 / 0 minus 10 x $');
    const whole = renderGrpoReport(data({ poolK: 0, poolHoldout: [], reward: {} }));
    expect(whole).toContain('the whole pool');
    expect(whole).not.toContain('minus');
    expect(whole).toContain('run-&lt;1&gt;');
    expect(whole).not.toContain('run-<1>');
    // the simulation note and the best validation checkpoint
    expect(whole).toMatch(/Simulation/);
    expect(whole).toContain('run-best-i2 (validation reward 0.8123)');
    expect(whole).toContain('by unique prompt (seed 0)');
  });

  it('a run with the checkpoint criterion (issue 29, item 2) names it for its best, plots it and lists it per iteration; the dataset\'s own split is named', () => {
    const d = data({ splitBy: 'dataset', splitSeed: 2 });
    const crit = { value: 0.8123, accuracy: 0.6246, usd: 0.0004, items: 611, mu: 0, exact: true };
    const html = renderGrpoReport({ ...d, iterations: d.iterations.map((i) => (i.val ? { ...i, criterion: { ...crit, value: i.val.meanReward } } : i)) });
    expect(html).toContain('run-best-i2 (checkpoint criterion 0.8123)');
    expect(html).toContain('checkpoint criterion</text>');
    expect(html).toContain('<th scope="col" class="num">criterion</th>');
    expect(html).toContain('the dataset&#39;s own split (seed 2 for a val part carved from train)');
  });
});

describe('the GRPO iterations table at 1400 px (issue 28)', () => {
  it('fits the page, numbers right-aligned under right-aligned headers', () => {
    const html = renderGrpoReport(data({ poolK: 5, poolHoldout: [], reward: {} }));
    const page = contentWidth(html, 1400);
    for (const w of tableMinWidths(html)) expect(w.width, w.table).toBeLessThanOrEqual(page);
    expect(html).toContain('<th scope="col" class="num">$ / rollout</th><th scope="col" class="num">wall s</th>');
    // the run has no replay parameters table: the note does not point "below"
    expect(html).not.toContain('(parameters below)');
  });
});
