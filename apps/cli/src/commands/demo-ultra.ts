// Which Conductor the demo publishes as fugu-ultra: the one with the best mean reward on the
// router's validation split (never the test questions its table reports), the best single worker
// (by train mean, from the recorded scores) among the candidates; a tie goes to the cheaper.
import type { ConductorResult } from '@fugu/report';

export type UltraPick = { spec: string; why: string };

const SINGLE = /^best single \(([^,)]+)/;

/** The spec to publish and one line saying why, from a run's results (conductor rows and the best-single reference row). */
export function pickUltraConductor(results: readonly ConductorResult[], questions: number): UltraPick {
  const candidates = results.flatMap((r) => {
    if (r.kind === 'conductor') return [{ spec: r.name, r }];
    const single = SINGLE.exec(r.name);
    return single ? [{ spec: `fixed:single:${single[1]}`, r }] : [];
  });
  if (candidates.length === 0) throw new Error('the Conductor run has no results to choose fugu-ultra from');
  const usd = (r: ConductorResult) => r.usdPerItem.conductor + r.usdPerItem.workers;
  const sorted = [...candidates].sort((a, b) => b.r.meanReward - a.r.meanReward || usd(a.r) - usd(b.r));
  const best = sorted[0]!;
  const figures = sorted.map((c) => `${c.spec} ${c.r.meanReward.toFixed(3)} at $${usd(c.r).toFixed(6)}/item`).join(', ');
  return { spec: best.spec, why: `the best mean reward on ${questions} validation questions (the router's split by unique prompt): ${figures}` };
}
