import { describe, expect, it } from 'vitest';
import { marginsOf } from './margins.ts';

const cell = (planner: string, plan: string, score: string, accuracy: number) => ({ planner, plan, score, accuracy });

describe('the Conductor margin over the router across the corners', () => {
  it('from a planner document: the plan made under the point estimate, scored at each corner of the same table, in points over the router', () => {
    const doc = {
      splits: [{
        split: 'test', router: 0.65,
        cells: [
          cell('free', 't.point', 't.pessimistic', 0.64), cell('free', 't.point', 't.point', 0.66), cell('free', 't.point', 't.optimistic', 0.68),
          // a plan made under a corner is not the margin of a conductor that chose under the point
          cell('free', 't.pessimistic', 't.pessimistic', 0.9), cell('free', 't.pessimistic', 't.point', 0.9), cell('free', 't.pessimistic', 't.optimistic', 0.9),
          // a table without its three corners gives no row
          cell('free', 'u.point', 'u.point', 0.7),
        ],
      }],
    };
    expect(marginsOf(doc, 'p.json')).toEqual([{ conductor: 'planner', table: 't', split: 'test', pessimistic: -1, point: 1, optimistic: 3 }]);
  });

  it('from a score document: each policy against the router row under the same corner; a document without a router row or of another shape is an error naming the file', () => {
    const configs = ['t.point', 't.pessimistic', 't.optimistic', 'presets'];
    const doc = { split: 'val', configs, rows: [
      { spec: 'router:ck', accuracy: { 't.point': 0.6, 't.pessimistic': 0.6, 't.optimistic': 0.6, presets: 0.6 } },
      { spec: 'pol-i25', accuracy: { 't.point': 0.61, 't.pessimistic': 0.595, 't.optimistic': 0.63, presets: 0.7 } },
    ] };
    const [row] = marginsOf(doc, 's.json');
    expect(row).toMatchObject({ conductor: 'pol-i25', table: 't', split: 'val' });
    expect([row!.pessimistic, row!.point, row!.optimistic].map((x) => Math.round(x * 10) / 10)).toEqual([-0.5, 1, 3]);
    expect(() => marginsOf({ ...doc, rows: doc.rows.slice(1) }, 's.json')).toThrow(/s\.json: .*router/);
    expect(() => marginsOf({ what: 1 }, 'x.json')).toThrow(/x\.json: not the JSON of fugu ultra analyse/);
  });
});
