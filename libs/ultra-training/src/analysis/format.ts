// The text `fugu ultra analyse` prints: markdown tables, every figure named a simulation.
import { splitLabel } from '@fugu/datasets';
import type { LandscapeResult, PlannerResult, ScoreResult } from './run.ts';

const splitOf = (r: { split: string; splitBy: ScoreResult['splitBy']; splitSeed: number }) => `${r.split} split (${r.split === 'all' ? 'every item' : splitLabel({ by: r.splitBy, seed: r.splitSeed })})`;

const f4 = (x: number) => x.toFixed(4);
const pts = (x: number) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}`;

export function formatScores(r: ScoreResult): string {
  const routerRow = r.rows.find((row) => row.spec.startsWith('router:'));
  const head = `${r.dataset}, ${splitOf(r)}: ${r.items} items${r.samples > 0 ? `, ${r.samples} sampled workflows each` : ', argmax workflows'}; expected accuracy in the replay model (a simulation from recorded outcomes)` +
    (routerRow ? `; (points against ${routerRow.spec})` : '');
  const c = r.criterion;
  const lines = [head];
  if (c) {
    lines.push(
      `checkpoint criterion: the expected reward of the argmax workflows, ${c.correct} correct / ${c.incorrect} wrong minus mu = ${c.mu} x $ per item, exact, under ${c.replay.name}, at most ${c.maxSteps} steps` +
        `${c.runs.length > 0 ? ` (the settings of GRPO run ${c.runs.join(', ')}: what its best on validation is chosen by)` : ''}`,
    );
  }
  const critHead = c ? ' criterion | $ per item |' : '';
  lines.push('', `| conductor | steps | ${r.configs.join(' | ')} |${critHead}`, `|---|---|${r.configs.map(() => '---|').join('')}${c ? '---|---|' : ''}`);
  for (const row of r.rows) {
    const cells = r.configs.map((cfg) => `${f4(row.accuracy[cfg]!)}${routerRow && row !== routerRow ? ` (${pts(row.accuracy[cfg]! - routerRow.accuracy[cfg]!)})` : ''}`);
    const crit = c && row.criterion ? ` ${f4(row.criterion.value)} | ${row.criterion.usd.toFixed(6)} |` : c ? ' — | — |' : '';
    lines.push(`| ${row.spec} | ${row.steps.toFixed(2)} | ${cells.join(' | ')} |${crit}`);
  }
  const multi = r.rows.filter((row) => row.steps > 1);
  if (multi.length > 0) {
    lines.push('', 'most frequent workflows:');
    for (const row of multi) lines.push(`  ${row.spec}: ${row.top.map((t) => `${t.count}x ${t.workflow}`).join(' | ')}`);
  }
  if (r.best && r.rows.length > 1) {
    lines.push('', `best policy by the checkpoint criterion (mu = ${c!.mu}): ${r.best.spec} (${f4(r.best.value)}; expected accuracy ${f4(r.best.accuracy)}, $ ${r.best.usd.toFixed(6)} per item)`);
  }
  return lines.join('\n');
}

export function formatPlanner(r: PlannerResult): string {
  const lines = [
    `model-based planner on ${r.dataset}, the split ${splitLabel({ by: r.splitBy, seed: r.splitSeed })} (regressions: L2 ${r.l2}, ${r.iterations} iterations; free: every single worker and every "A, then B reading A"; router-anchored: the router's pick alone or a helper A, then the pick reading A); expected accuracy in the replay model (a simulation from recorded outcomes)`,
  ];
  for (const s of r.splits) {
    lines.push('', `${s.split} (${s.items} items): router ${f4(s.router)}, best single (${r.bestSingle}) ${f4(s.bestSingle)}, regression's single pick ${f4(s.regressionPick)}`);
    const scores = [...new Set(s.cells.map((c) => c.score))];
    lines.push(`| planner | planned under \\ scored under | ${scores.join(' | ')} | steps | two-step items |`, `|---|---|${scores.map(() => '---|').join('')}---|---|`);
    for (const planner of ['free', 'router-anchored'] as const) {
      for (const plan of [...new Set(s.cells.map((c) => c.plan))]) {
        const row = s.cells.filter((c) => c.plan === plan && c.planner === planner);
        lines.push(`| ${planner} | ${plan} | ${scores.map((sc) => { const c = row.find((x) => x.score === sc)!; return `${f4(c.accuracy)} (${pts(c.accuracy - s.router)})`; }).join(' | ')} | ${row[0]!.steps.toFixed(2)} | ${row[0]!.twoStep} |`);
      }
    }
  }
  lines.push('', '(points against the router)');
  return lines.join('\n');
}

export function formatLandscape(r: LandscapeResult): string {
  return [
    `${r.dataset}, ${splitOf(r)}: ${r.items} items, step model ${r.config} (a simulation from recorded outcomes)`,
    `best single (${r.bestSingle.worker}) ${f4(r.bestSingle.accuracy)}; router ${f4(r.router)}`,
    'best fixed pairs "A, then B reading A":',
    ...r.pairs.map((p) => `  ${`${p.first} -> ${p.then}`.padEnd(72)} ${f4(p.accuracy)}`),
    `per-question best of {router pick, A then (router pick | ${r.bestSingle.worker}) reading A}: ${f4(r.oracle)} (an upper bound)`,
    `router's pick reading A's answer first (A = router's pick: alone): ${r.routerReading.map((h) => `${h.helper} ${f4(h.accuracy)}`).join(', ')}`,
  ].join('\n');
}
