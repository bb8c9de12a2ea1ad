// The Conductor's margin over the router across the measured intervals, for the report: read from
// the JSON of `fugu ultra analyse planner --json` and `fugu ultra analyse score --json` run with
// the measured ReplayConfigs (data/multistep/replay/<table>.<point|pessimistic|optimistic>.json, so
// each step model's name says its table and corner). A conductor planned or trained under a table's
// point estimate, scored at each corner of the same table. Exact expectations in the replay model:
// a simulation from recorded outcomes.
import { InputError } from '@fugu/core';

export type MarginRow = { conductor: string; table: string; split: string; pessimistic: number; point: number; optimistic: number };

const CORNER = /^(.+)\.(point|pessimistic|optimistic)$/;

type PlannerJson = { splits: Array<{ split: string; router: number; cells: Array<{ planner: string; plan: string; score: string; accuracy: number }> }> };
type ScoreJson = { split: string; configs: string[]; rows: Array<{ spec: string; accuracy: Record<string, number> }> };

const corners = (names: readonly string[]) => {
  const by = new Map<string, Set<string>>();
  for (const n of names) {
    const m = CORNER.exec(n);
    if (m) by.set(m[1]!, (by.get(m[1]!) ?? new Set()).add(m[2]!));
  }
  return [...by.entries()].filter(([, c]) => c.size === 3).map(([t]) => t);
};

/** Margins (points of expected accuracy over the router) from one analyse JSON document; `file` names it in errors. */
export function marginsOf(doc: unknown, file: string): MarginRow[] {
  const d = doc as Partial<PlannerJson & ScoreJson>;
  const pts = (x: number) => Math.round(x * 1e5) / 1e3;
  if (Array.isArray(d.splits)) {
    return (d as PlannerJson).splits.flatMap((s) =>
      corners(s.cells.map((c) => c.score)).flatMap((table) =>
        [...new Set(s.cells.map((c) => c.planner))].flatMap((planner) => {
          const at = (corner: string) => s.cells.find((c) => c.planner === planner && c.plan === `${table}.point` && c.score === `${table}.${corner}`);
          const [lo, mid, hi] = [at('pessimistic'), at('point'), at('optimistic')];
          return lo && mid && hi ? [{ conductor: planner === 'free' ? 'planner' : 'anchored planner', table, split: s.split, pessimistic: pts(lo.accuracy - s.router), point: pts(mid.accuracy - s.router), optimistic: pts(hi.accuracy - s.router) }] : [];
        }),
      ),
    );
  }
  if (Array.isArray(d.rows) && Array.isArray(d.configs)) {
    const r = d as ScoreJson;
    const router = r.rows.find((row) => row.spec.startsWith('router:'));
    if (!router) throw new InputError(`${file}: a score document needs a router:<checkpoint> row to measure margins against`, { field: '--margins' });
    return corners(r.configs).flatMap((table) =>
      r.rows.filter((row) => row !== router).map((row) => {
        const m = (corner: string) => pts(row.accuracy[`${table}.${corner}`]! - router.accuracy[`${table}.${corner}`]!);
        return { conductor: row.spec, table, split: r.split, pessimistic: m('pessimistic'), point: m('point'), optimistic: m('optimistic') };
      }),
    );
  }
  throw new InputError(`${file}: not the JSON of fugu ultra analyse planner or score`, { field: '--margins' });
}
