// The HTML report of a GRPO run (`fugu report <grpo run>`): the run's settings, the reward curve
// (train rollouts' mean and the validation argmax per iteration), steps per workflow and parse
// failures, the clip fraction and KL of each update, and the worker and topology mix over
// iterations. Renders only; the data comes from the caller (@fugu/ultra-training's GRPO run).
import { CHART_W, esc, fact, figure, fmtInt, fmtTime, htmlDocument, pageFooter, pageHeader, table } from './page.ts';
import { lineChart, paletteColor, stackedBarChart } from './svg.ts';
import { REPLAY_NOTE } from './conductor-report.ts';

export type GrpoReportRun = {
  id: string;
  status: string;
  statusReason: string | null;
  config: Record<string, unknown>;
  codeVersion: string;
  startCheckpointId: string;
  policyCheckpointId: string;
  bestCheckpointId: string | null;
  bestValReward: number | null;
  createdAt: Date;
  /** every pool worker is a replay worker: the figures are a simulation */
  replay: boolean;
};

/** One committed iteration's record (libs/ultra-training's GrpoIterationStats). */
export type GrpoReportIteration = {
  iteration: number;
  meanReward: number;
  rewardSd: number;
  accuracy: number;
  groups: number;
  zeroAdvantageGroups: number;
  parseFailures: number;
  meanSteps: number;
  meanCost: number;
  clipFraction: number;
  approxKl: number;
  workers: Record<string, number>;
  topologies: Record<string, number>;
  val?: { meanReward: number; accuracy: number; meanSteps: number } | undefined;
  /** the checkpoint criterion of the sampling policy (the run's best is chosen by it; records before it existed: absent) */
  criterion?: { value: number; accuracy: number; usd: number; items: number; mu: number; exact: boolean } | undefined;
  wallMs?: number | undefined;
};

export type GrpoReportData = { run: GrpoReportRun; iterations: readonly GrpoReportIteration[] };

const f4 = (v: number | undefined): string => (v !== undefined && Number.isFinite(v) ? v.toFixed(4) : '—');

/** The reward curve: the train rollouts' mean reward (± sd band as dashed lines) and the validation argmax. */
export function grpoRewardChart(its: readonly GrpoReportIteration[]): string {
  const pts = (y: (i: GrpoReportIteration) => number | undefined) => its.flatMap((i) => { const v = y(i); return v === undefined ? [] : [{ x: i.iteration + 1, y: v }]; });
  return lineChart({
    title: 'Reward per iteration',
    description: "Mean reward of each iteration's sampled rollouts (train questions), of the sampling policy's argmax on the validation items, and its checkpoint criterion (the expected validation reward the best is chosen by).",
    width: CHART_W,
    xLabel: 'iteration',
    yLabel: 'mean reward',
    series: [
      { name: 'train (sampled)', points: pts((i) => i.meanReward), color: paletteColor(0) },
      { name: 'validation (argmax)', points: pts((i) => i.val?.meanReward), color: paletteColor(3) },
      ...(its.some((i) => i.criterion) ? [{ name: 'checkpoint criterion', points: pts((i) => i.criterion?.value), color: paletteColor(4) }] : []),
    ],
  });
}

function mixChart(title: string, its: readonly GrpoReportIteration[], pick: (i: GrpoReportIteration) => Record<string, number>): string {
  const names = [...new Set(its.flatMap((i) => Object.keys(pick(i))))].sort();
  // at most 12 rows: evenly spaced iterations, the last one included
  const step = Math.max(1, Math.ceil(its.length / 12));
  const shown = its.filter((_, k) => k % step === 0 || k === its.length - 1);
  return stackedBarChart({
    title,
    description: `${title}: the share of each, per iteration (train rollouts).`,
    width: CHART_W,
    rows: shown.map((i) => `iteration ${i.iteration + 1}`),
    series: names.map((n, k) => ({ name: n, color: paletteColor(k) })),
    values: shown.map((i) => names.map((n) => pick(i)[n] ?? 0)),
  });
}

export function renderGrpoReport(d: GrpoReportData, opts: { generatedAt?: string } = {}): string {
  const { run, iterations } = d;
  const c = run.config;
  const last = iterations.at(-1);
  const facts = [
    fact('status', run.status + (run.statusReason ? ` (${run.statusReason})` : '')),
    fact('iterations', `${iterations.length} of ${String(c.iterations)}`),
    fact('Q x G', `${String(c.q)} x ${String(c.g)}`),
    fact('optimiser', `Adam lr ${String(c.lr)}, ${String(c.epochs)} epoch(s), clip ${String(c.clipLow)}/${String(c.clipHigh)}, advantages ${String(c.advantageScale)}, KL ${String(c.klCoef)}, step tie-break ${String(c.stepTiebreak ?? 0)}`),
    fact('trained heads', Array.isArray(c.heads) ? (c.heads as string[]).join(', ') : '—'),
    fact('seed', String(c.seed)),
    fact('split', c.splitBy === 'dataset' ? `the dataset's own split (seed ${String(c.splitSeed ?? 0)} for a val part carved from train)` : `by unique prompt (seed ${String(c.splitSeed ?? 0)})`),
    fact('reward', rewardFact(c)),
    fact('pools', typeof c.poolK === 'number' && c.poolK > 0
      ? `a random ${String(c.poolK)} of the workers per question${Array.isArray(c.poolHoldout) && c.poolHoldout.length > 0 ? `, ${String(c.poolHoldout.length)} pool(s) held out` : ''}`
      : 'the whole pool'),
    fact('start', run.startCheckpointId),
    fact('current policy', run.policyCheckpointId),
    fact('best on validation', run.bestCheckpointId ? `${run.bestCheckpointId} (${iterations.some((i) => i.criterion) ? 'checkpoint criterion' : 'validation reward'} ${f4(run.bestValReward ?? undefined)})` : '—'),
    fact('last train reward', last ? f4(last.meanReward) : '—'),
    fact('code version', run.codeVersion),
    fact('started', fmtTime(run.createdAt.toISOString())),
  ];
  const note = run.replay ? `<p class="note"><strong>Simulation.</strong> ${esc(REPLAY_NOTE.replace(' (parameters below).', '.'))} Every worker of this run's pool is a replay worker.</p>` : '';
  const stepsChart = lineChart({
    title: 'Steps per workflow and parse failures',
    description: 'Mean steps per sampled workflow (left axis) and parse failures per iteration (right axis).',
    width: CHART_W,
    xLabel: 'iteration',
    yLabel: 'steps per workflow',
    y2Label: 'parse failures',
    series: [
      { name: 'steps (train)', points: iterations.map((i) => ({ x: i.iteration + 1, y: i.meanSteps })), color: paletteColor(2) },
      { name: 'steps (validation)', points: iterations.flatMap((i) => (i.val ? [{ x: i.iteration + 1, y: i.val.meanSteps }] : [])), color: paletteColor(4), dashed: true },
      { name: 'parse failures', points: iterations.map((i) => ({ x: i.iteration + 1, y: i.parseFailures })), color: paletteColor(7), axis: 'right' },
    ],
  });
  const updateChart = lineChart({
    title: 'The update: clip fraction and KL',
    description: "Share of decisions whose ratio was clipped in the last epoch, and the approximate KL from the sampling policy to the updated one (right axis).",
    width: CHART_W,
    xLabel: 'iteration',
    yLabel: 'clip fraction',
    y2Label: 'approx. KL',
    series: [
      { name: 'clip fraction', points: iterations.map((i) => ({ x: i.iteration + 1, y: i.clipFraction })), color: paletteColor(1) },
      { name: 'approx. KL', points: iterations.map((i) => ({ x: i.iteration + 1, y: i.approxKl })), color: paletteColor(5), axis: 'right' },
    ],
  });
  const rows = iterations
    .map(
      (i) =>
        `<tr><td class="num">${i.iteration + 1}</td><td class="num">${f4(i.meanReward)}</td><td class="num">${f4(i.rewardSd)}</td><td class="num">${f4(i.accuracy)}</td>` +
        `<td class="num">${f4(i.val?.meanReward)}</td><td class="num">${f4(i.val?.accuracy)}</td><td class="num">${f4(i.criterion?.value)}</td><td class="num">${i.meanSteps.toFixed(2)}</td>` +
        `<td class="num">${fmtInt(i.zeroAdvantageGroups)}/${fmtInt(i.groups)}</td><td class="num">${fmtInt(i.parseFailures)}</td>` +
        `<td class="num">${i.clipFraction.toFixed(3)}</td><td class="num">${i.approxKl.toExponential(2)}</td><td class="num">${i.meanCost.toPrecision(3)}</td>` +
        `<td class="num">${i.wallMs === undefined ? '—' : (i.wallMs / 1000).toFixed(1)}</td></tr>`,
    )
    .join('');
  const body =
    pageHeader('fugu · GRPO run of the embedded Conductor', esc(run.id), facts, note) +
    `<section id="curve"><h2>Reward curve</h2>${figure(grpoRewardChart(iterations), 'Train: the mean reward of the iteration\'s G samples of Q questions under the sampling policy. Validation: the same policy\'s argmax on the validation items (the same items and draws every time). Checkpoint criterion: the expected reward of that argmax on the validation split, mu x $ included (exact on a replay pool, over the whole val split; from the validation rollouts on a live pool): the best on validation is the checkpoint with the highest.')}</section>` +
    `<section id="steps"><h2>Workflows</h2>${figure(stepsChart, 'Steps per workflow and parse failures.')}` +
    `${figure(mixChart('Worker mix', iterations, (i) => i.workers), 'Which workers run the steps of the sampled workflows, by iteration.')}` +
    `${figure(mixChart('Topology mix', iterations, (i) => i.topologies), 'The shapes of the sampled workflows, by iteration.')}</section>` +
    `<section id="update"><h2>Update</h2>${figure(updateChart, 'Clip fraction and approximate KL per iteration.')}</section>` +
    `<section id="iterations"><h2>Iterations</h2>` +
    table(
      'grpo',
      '<tr><th scope="col" class="num">iteration</th><th scope="col" class="num">train reward</th><th scope="col" class="num">sd</th><th scope="col" class="num">train acc.</th><th scope="col" class="num">val reward</th><th scope="col" class="num">val acc.</th><th scope="col" class="num">criterion</th><th scope="col" class="num">steps</th><th scope="col" class="num">zero-adv. groups</th><th scope="col" class="num">parse failures</th><th scope="col" class="num">clip</th><th scope="col" class="num">KL</th><th scope="col" class="num">$ / rollout</th><th scope="col" class="num">wall s</th></tr>',
      rows,
    ) +
    `</section>` +
    pageFooter(`GRPO run ${run.id}`, opts.generatedAt);
  return htmlDocument(`GRPO run ${run.id}`, body);
}

/** The reward line: its cost term per dollar (`--mu`), or in the pool's unit (`--cost-weight`) with the mu it became. */
function rewardFact(c: Record<string, unknown>): string {
  const mu = (c.reward as { costPerUsd?: number } | undefined)?.costPerUsd;
  if (typeof mu !== 'number') return '1 / 0.5 / 0';
  const ref = c.costReference as { worker: string; usdPerItem: number } | undefined;
  if (typeof c.costWeight !== 'number' || !ref) return `1 / 0.5 / 0 minus ${String(mu)} x $`;
  return `1 / 0.5 / 0 minus ${String(c.costWeight)} x $ / $${ref.usdPerItem.toPrecision(3)} (the best single worker ${ref.worker}'s $ per train item): mu ${mu === 0 ? '0' : mu.toPrecision(4)} per $`;
}
