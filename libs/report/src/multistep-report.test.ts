import { describe, expect, it } from 'vitest';
import { renderMultistepReport, type MultistepReportData } from './multistep-report.ts';

const data: MultistepReportData = {
  seed: 0,
  samples: 200,
  params: [{ table: 'dylan-mmlu-optimal7-2', group: 'all', questions: 2659, steps: 1366, values: { keep: null, misled: { estimate: 0.297, lo: 0.26, hi: 0.33 }, adopt: { estimate: 0.64, lo: 0.59, hi: 0.68 }, fix: { estimate: 0.15, lo: 0.1, hi: 0.19 }, herd: null } }],
  predictions: [
    { table: 't', model: 'independent draws', group: 'all', questions: 355, statistic: 'any', predicted: 0.754, lo: 0.707, hi: 0.804, observed: 0.69, p: 0.016 },
    { table: 't', model: 'independent draws', group: 'all', questions: 355, statistic: 'accuracy', predicted: 0.553, lo: 0.504, hi: 0.602, observed: 0.545, p: 0.736 },
  ],
  ceilings: { presets: 2.54, rows: [{ table: 't', pessimistic: 2.1, point: 4.68, optimistic: 7.12 }] },
};

describe('the multistep report', () => {
  it('marks a figure outside its interval, counts the misses, says a parameter without data is not a measurement', () => {
    const html = renderMultistepReport(data);
    expect(html).toContain('any 1/1, accuracy 0/1');
    expect(html.match(/<tr class="miss">/g)).toHaveLength(1);
    expect(html).toContain('no data');
    expect(html).toContain('presets 2.54');
    expect(html).toContain('not fugu&#39;s pool');
    // the same data, the same bytes (no time unless asked)
    expect(renderMultistepReport(data)).toBe(html);
  });

  it("draws the Conductor's margin over the router only when given, shading a margin that is below the router at the pessimistic corner", () => {
    expect(renderMultistepReport(data)).not.toContain('id="margins"');
    const html = renderMultistepReport({
      ...data,
      margins: [
        { conductor: 'planner', table: 'dylan-math-cot', split: 'test', pessimistic: -1.68, point: -0.33, optimistic: 0.79 },
        { conductor: 'anchored planner', table: 'dylan-mmlu-optimal7-2', split: 'test', pessimistic: 1.05, point: 2.33, optimistic: 3.61 },
      ],
    });
    const section = html.slice(html.indexOf('id="margins"'));
    expect(section).toContain('math-cot · planner');
    expect(section.slice(0, section.indexOf('</section>')).match(/<tr class="miss">/g)).toHaveLength(1);
    expect(html).toContain('href="#margins"');
  });
});
