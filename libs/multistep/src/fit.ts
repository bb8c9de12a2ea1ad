import { InputError } from '@fugu/core';
// `fugu multistep fit`: the step model's parameters measured on each recorded run (per table,
// and per MATH level where the table has levels), with bootstrap intervals over questions, and
// the out-of-sample check: one parameter set for the whole table, one per level, and one set
// whose answers of a question share a part of their draw (rho). What is
// fitted is the second round (round 1, from 0): every agent's answer after it read the first
// round's answers; later rounds of these runs follow a selection (DyLAN's ranking of agents),
// which the step model does not describe.

import { estimateReplayParams, type ReplayConfig, type ReplayEstimate, type ReplayParams } from '@fugu/conductor';
import type { MultistepReportData } from '@fugu/report';
import { observationsOf, type ObservationCounts } from './observations.ts';
import { outOfSample, type OutOfSample } from './out-of-sample.ts';
import type { MultistepQuestion } from './types.ts';

export const FIT_ROUND = 1;

export type GroupFit = { group: string; questions: number; observations: number; estimate: ReplayEstimate };

export type TableFit = {
  source: string;
  questions: number;
  /** questions that reached the fitted round */
  reached: number;
  counts: ObservationCounts;
  /** `all`, then `level 1` to `level 5` where the table has levels */
  groups: GroupFit[];
  /** one parameter set for the table, its predictions reported per level where there are levels (else for all) */
  pooled: OutOfSample;
  /** a parameter set per level, where there are levels */
  perLevel?: OutOfSample;
  /** one parameter set, and a question's answers sharing a part of their draw (rho, fitted on the fit half) */
  correlated: OutOfSample;
};

const levelOf = (q: MultistepQuestion): string => `level ${q.level ?? '?'}`;

export function fitTable(source: string, questions: readonly MultistepQuestion[], opts: { seed: number; samples: number }): TableFit {
  const { observations, counts } = observationsOf(questions, { rounds: [FIT_ROUND] });
  const levels = questions.some((q) => q.level !== undefined);
  const groupNames = ['all', ...(levels ? [...new Set(questions.map(levelOf))].sort() : [])];
  const groups = groupNames.map((group): GroupFit => {
    const qs = group === 'all' ? questions : questions.filter((q) => levelOf(q) === group);
    const ids = new Set(qs.map((q) => `${q.source}/${q.id}`));
    const obs = group === 'all' ? observations : observations.filter((o) => ids.has(o.cluster));
    return { group, questions: qs.length, observations: obs.length, estimate: estimateReplayParams(obs, { bootstrap: { samples: opts.samples, seed: `${opts.seed}/${source}/${group}` } }) };
  });
  const reached = questions.filter((q) => q.rounds.length > FIT_ROUND).length;
  const pooled = outOfSample(questions, { seed: opts.seed, samples: opts.samples, round: FIT_ROUND, ...(levels && { reportBy: levelOf }) });
  const perLevel = levels ? outOfSample(questions, { seed: opts.seed, samples: opts.samples, round: FIT_ROUND, fitBy: levelOf }) : undefined;
  const correlated = outOfSample(questions, { seed: opts.seed, samples: opts.samples, round: FIT_ROUND, correlated: true, ...(levels && { reportBy: levelOf }) });
  return { source, questions: questions.length, reached, counts, groups, pooled, ...(perLevel && { perLevel }), correlated };
}

const f3 = (x: number): string => x.toFixed(3);
const iv = ([lo, hi]: [number, number]): string => `${f3(lo)}-${f3(hi)}`;

/** The parameter table and the out-of-sample table, as text. */
export function formatFits(fits: readonly TableFit[]): string {
  const lines: string[] = [];
  lines.push('The step model measured on recorded multi-agent runs (second round; 95% intervals: a bootstrap over questions)');
  const head = ['table', 'group', 'questions', 'steps', 'keep', 'misled', 'adopt', 'fix', 'herd'];
  const rows: string[][] = [];
  for (const t of fits) {
    for (const g of t.groups) {
      const e = g.estimate, b = e.bootstrap!.intervals;
      // a parameter no observation informs is the preset's, not a measurement: said so
      const cell = (k: 'keep' | 'misled' | 'adopt' | 'fix' | 'herd') =>
        k === 'herd' ? (e.herd.source === 'fallback' ? '(no split f)' : `${f3(e.params.herd)} (${iv(b.herd)})`) : e.cells[k].source !== 'data' ? '(no data)' : `${f3(e.params[k])} (${iv(b[k])})`;
      rows.push([t.source, g.group, String(g.questions), String(g.observations), cell('keep'), cell('misled'), cell('adopt'), cell('fix'), cell('herd')]);
    }
  }
  lines.push(...align([head, ...rows]));
  lines.push('');
  lines.push('Out of sample: fitted on half of the questions, the other half\'s second round predicted from its first round\'s recorded outcomes (95% interval, predictive p-value; * outside the interval)');
  const oosHead = ['table', 'parameters', 'group', 'questions', 'statistic', 'predicted', 'interval', 'observed', 'p'];
  const oosRows: string[][] = [];
  for (const t of fits) {
    for (const [name, o] of [['one set', t.pooled], ['per level', t.perLevel], [`one set, rho ${t.correlated.rho?.['all']?.toFixed(2)}`, t.correlated]] as const) {
      if (!o) continue;
      for (const [g, p] of Object.entries(o.predictions)) {
        for (const s of p.stats) oosRows.push([t.source, name, g, String(p.questions), s.statistic, f3(s.predicted), iv(s.interval), `${f3(s.observed)}${s.inside ? '' : '*'}`, s.p < 0.001 ? '<0.001' : s.p.toFixed(3)]);
      }
    }
  }
  lines.push(...align([oosHead, ...oosRows]));
  return lines.join('\n');
}

function align(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd());
}

/** The corners of the measured intervals a replay figure is rerun at (issue 29, 5 and 6). */
export const CONFIG_CORNERS = ['point', 'optimistic', 'pessimistic'] as const;
export type ConfigCorner = (typeof CONFIG_CORNERS)[number];

/**
 * A table's measured parameters as ReplayConfig files for `fugu ultra eval --replay` and GRPO:
 * the point estimate; `optimistic`, each corner at the bound of its 95% interval that favours a
 * step reading other answers (keep and adopt and fix high, misled low); `pessimistic`, the other
 * bounds. The same values for both size classes (the runs are same-model agents: they say
 * nothing of size); herd at its estimate (or the preset where not identified) in all three.
 */
export function replayConfigsOf(fit: TableFit): Record<ConfigCorner, ReplayConfig> {
  const all = fit.groups.find((g) => g.group === 'all')!.estimate;
  const b = all.bootstrap!.intervals;
  const round = (x: number) => Math.round(x * 1e4) / 1e4;
  const at = (pick: (k: 'keep' | 'misled' | 'adopt' | 'fix') => number): ReplayParams => ({
    keep: round(pick('keep')), misled: round(pick('misled')), adopt: round(pick('adopt')), fix: round(pick('fix')), herd: round(all.params.herd),
  });
  const favour = { keep: 1, misled: 0, adopt: 1, fix: 1 } as const;
  const configs = {
    point: at((k) => all.params[k]),
    optimistic: at((k) => b[k][favour[k]]!),
    pessimistic: at((k) => b[k][1 - favour[k]]!),
  };
  const f3 = (x: number) => x.toFixed(3);
  const measured = (['keep', 'misled', 'adopt', 'fix'] as const)
    .map((k) => (all.cells[k].source === 'data' ? `${k} ${f3(all.params[k])} (${f3(b[k][0]!)}-${f3(b[k][1]!)})` : `${k} not measured (the preset ${f3(all.params[k])})`))
    .join(', ');
  const what = { point: 'the point estimate', optimistic: 'each parameter at the bound of its 95% interval that favours reading others', pessimistic: 'each parameter at the bound of its 95% interval that disfavours reading others' };
  const source = (c: ConfigCorner) =>
    `${fit.source}, ${c}: ${what[c]}; measured by fugu multistep fit (95% intervals from ${all.bootstrap!.samples} resamples of questions) on recorded runs of same-model gpt-3.5 agents ` +
    `(data/multistep), not this pool's workers: ${measured}, herd ${f3(all.params.herd)}`;
  return Object.fromEntries(CONFIG_CORNERS.map((c) => [c, { source: source(c), presets: { large: configs[c], small: configs[c] } }])) as Record<ConfigCorner, ReplayConfig>;
}

/** DyLAN's MMLU teams by the number of other agents a round-2 agent reads (team size - 1). */
export const DYLAN_MMLU_BY_SOURCES: ReadonlyArray<readonly [number, string]> = [[1, 'dylan-mmlu-optimal7-2'], [2, 'dylan-mmlu-optimal7-3'], [3, 'dylan-mmlu-optimal7-4'], [6, 'dylan-mmlu-optimal7-7']];

/**
 * One model from tables that differ in how many sources a step read (the same task and agents):
 * per corner, the one-source table's parameters as the presets and each other table's as the
 * `sources` override for its count, so a step reading k answers takes the table measured with k.
 */
export function bySourcesConfigsOf(name: string, family: ReadonlyArray<readonly [number, TableFit]>): Record<ConfigCorner, ReplayConfig> {
  const per = [...family].sort((a, b) => a[0] - b[0]).map(([k, fit]) => [k, fit.source, replayConfigsOf(fit)] as const);
  if (per[0]?.[0] !== 1) throw new InputError('the family needs its one-source table', { field: 'tables' });
  return Object.fromEntries(CONFIG_CORNERS.map((c) => {
    const base = per[0]![2][c].presets!.large!;
    const sources = Object.fromEntries(per.slice(1).map(([k, , cfg]) => [String(k), cfg[c].presets!.large!]));
    const source = `${name}, ${c}: a step reading k other answers takes the table measured with k (${per.map(([k, t]) => `${k}: ${t}`).join(', ')}), each at ${c === 'point' ? 'its point estimate' : `its ${c} bounds`}; measured by fugu multistep fit on recorded runs of same-model gpt-3.5 agents (data/multistep), not this pool's workers`;
    return [c, { source, presets: { large: base, small: base }, sources }];
  })) as Record<ConfigCorner, ReplayConfig>;
}

/** The report's data from the fits and their ceilings (libs/report renders it). */
export function multistepReportData(fits: readonly TableFit[], ceilings: { presets: number; rows: MultistepReportData['ceilings']['rows'] }, opts: { seed: number; samples: number }): MultistepReportData {
  const params: MultistepReportData['params'] = fits.flatMap((t) =>
    t.groups.map((g) => {
      const e = g.estimate, b = e.bootstrap!.intervals;
      const v = (k: 'keep' | 'misled' | 'adopt' | 'fix' | 'herd') =>
        (k === 'herd' ? e.herd.source === 'data' : e.cells[k].source === 'data') ? { estimate: e.params[k], lo: b[k][0], hi: b[k][1] } : null;
      return { table: t.source, group: g.group, questions: g.questions, steps: g.observations, values: { keep: v('keep'), misled: v('misled'), adopt: v('adopt'), fix: v('fix'), herd: v('herd') } };
    }),
  );
  const predictions: MultistepReportData['predictions'] = fits.flatMap((t) =>
    ([['independent draws', t.pooled], ['per MATH level', t.perLevel], ['answers of a question correlated (rho)', t.correlated]] as const).flatMap(([model, o]) =>
      o ? Object.entries(o.predictions).flatMap(([group, p]) => p.stats.map((s) => ({ table: t.source, model, group, questions: p.questions, statistic: s.statistic, predicted: s.predicted, lo: s.interval[0], hi: s.interval[1], observed: s.observed, p: s.p }))) : [],
    ),
  );
  return { seed: opts.seed, samples: opts.samples, params, predictions, ceilings };
}
