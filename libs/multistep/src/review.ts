// Reflexion's review rounds against its one-pass runs (issue 29, 4): per benchmark, how often a
// task the one pass got wrong ends right after review (wrong-to-right) and how often one it got
// right ends wrong (right-to-wrong), with 95% intervals. The two logs are separate runs of the
// same first prompt (temperature 0, yet not deterministic), so some of those moves are the runs'
// own sampling noise, not the review. Reflexion only reviews a task whose first attempt fails the
// tests the model wrote itself; a task whose first attempt passes them is graded as it is. Those
// one-attempt tasks are two independent samples of the same first attempt: their flips measure
// the noise alone. The review's effect is what the reviewed tasks move beyond that.

import { wilsonInterval } from '@fugu/conductor';
import type { ReflexionTask } from './reflexion.ts';

export type Rate = { k: number; n: number; rate: number; interval: [number, number] };

export type ReviewMeasure = {
  benchmark: string;
  tasks: number;
  simple: Rate;
  reflexion: Rate;
  /** wrong in the one pass, right after reflexion, over all tasks wrong in the one pass */
  wrongToRight: Rate;
  /** right in the one pass, wrong after reflexion, over all tasks right in the one pass */
  rightToWrong: Rate;
  /** the same among the tasks reflexion graded at their first attempt (no review): the two runs' noise */
  noise: { wrongToRight: Rate; rightToWrong: Rate; tasks: number };
  /** the same among the reviewed tasks (two or more attempts) */
  reviewed: { wrongToRight: Rate; rightToWrong: Rate; tasks: number };
};

const rate = (k: number, n: number): Rate => ({ k, n, rate: n === 0 ? 0 : k / n, interval: wilsonInterval(k, n) });

function moves(pairs: ReadonlyArray<{ s: boolean; r: boolean }>): { wrongToRight: Rate; rightToWrong: Rate } {
  const wrong = pairs.filter((p) => !p.s), right = pairs.filter((p) => p.s);
  return { wrongToRight: rate(wrong.filter((p) => p.r).length, wrong.length), rightToWrong: rate(right.filter((p) => !p.r).length, right.length) };
}

/** One benchmark's measure from its one-pass run's tasks and its reflexion run's (matched by id). */
export function measureReview(benchmark: string, simple: readonly ReflexionTask[], reflexion: readonly ReflexionTask[]): ReviewMeasure {
  const byId = new Map(reflexion.map((t) => [t.id, t]));
  const pairs = simple.flatMap((t) => {
    const r = byId.get(t.id);
    return r ? [{ s: t.solved, r: r.solved, attempts: r.attempts }] : [];
  });
  const once = pairs.filter((p) => p.attempts === 1), more = pairs.filter((p) => p.attempts > 1);
  return {
    benchmark,
    tasks: pairs.length,
    simple: rate(pairs.filter((p) => p.s).length, pairs.length),
    reflexion: rate(pairs.filter((p) => p.r).length, pairs.length),
    ...moves(pairs),
    noise: { ...moves(once), tasks: once.length },
    reviewed: { ...moves(more), tasks: more.length },
  };
}

const pct = (r: Rate): string => `${(100 * r.rate).toFixed(1)}% (${r.k}/${r.n}, ${(100 * r.interval[0]).toFixed(1)}-${(100 * r.interval[1]).toFixed(1)})`;

export function formatReview(ms: readonly ReviewMeasure[]): string {
  const head = ['benchmark', 'tasks', 'one pass', 'reflexion', 'wrong->right', 'right->wrong', 'noise: w->r', 'noise: r->w', 'reviewed: w->r', 'reviewed: r->w'];
  const rows = ms.map((m) => [m.benchmark, String(m.tasks), pct(m.simple), pct(m.reflexion), pct(m.wrongToRight), pct(m.rightToWrong), pct(m.noise.wrongToRight), pct(m.noise.rightToWrong), pct(m.reviewed.wrongToRight), pct(m.reviewed.rightToWrong)]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  return [
    "Reflexion's review (GPT-4; up to 5 attempts, each after a self-reflection on failed self-written tests) against its one-pass run, per task (95% Wilson intervals).",
    'noise: the tasks reflexion graded at their first attempt (no review): two independent samples of the same first prompt. reviewed: the tasks with 2+ attempts.',
    line(head),
    ...rows.map(line),
  ].join('\n');
}

/** The benchmarks of data/multistep/reflexion-tasks.json: each `reflexion-<b>-simple` against `reflexion-<b>-reflexion`. */
export function reviewsOf(runs: Record<string, { tasks: ReflexionTask[] }>): ReviewMeasure[] {
  const out: ReviewMeasure[] = [];
  for (const name of Object.keys(runs).sort()) {
    const m = /^reflexion-(.+)-simple$/.exec(name);
    const other = m && runs[`reflexion-${m[1]}-reflexion`];
    if (m && other) out.push(measureReview(m[1]!, runs[name]!.tasks, other.tasks));
  }
  return out;
}
