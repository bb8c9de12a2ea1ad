// The HTML report of an ES run (`fugu report <es run>`): the run's settings, the fitness curve
// (mean, best, median per generation and best so far, sigma on the right axis) and the
// per-generation table. Renders only; the data comes from the caller.
import { CHART_W, esc, fact, figure, fmtInt, fmtTime, htmlDocument, pageFooter, pageHeader, table } from './page.ts';
import { lineChart, paletteColor } from './svg.ts';

/** What the ES report shows of a run (the fields of @fugu/db's EsRunRecord it reads). */
export type EsReportRun = {
  id: string;
  status: string;
  statusReason: string | null;
  config: Record<string, unknown>;
  codeVersion: string;
  checkpointId: string;
  bestCheckpointId: string | null;
  createdAt: Date;
};

/** One committed generation (the fields of @fugu/db's EsGenerationRecord it reads). */
export type EsGenerationRecord = {
  generation: number;
  meanFitness: number;
  bestFitness: number;
  medianFitness: number;
  bestSoFar: number;
  sigma: number;
  evaluations: number;
  dispatches: number;
  wallMs: number | null;
};

export type EsReportData = { run: EsReportRun; generations: readonly EsGenerationRecord[] };

const f4 = (v: number): string => (Number.isFinite(v) ? v.toFixed(4) : '—');
const sig = (v: number): string => (Number.isFinite(v) ? v.toPrecision(4) : '—');

/** The fitness curve: mean, median and best of each generation, best so far, and sigma (right axis). */
export function esFitnessChart(gens: readonly EsGenerationRecord[], title = 'Fitness per generation'): string {
  const pts = (y: (g: EsGenerationRecord) => number) => gens.map((g) => ({ x: g.generation, y: y(g) }));
  return lineChart({
    title,
    description: 'ES fitness (maximised) per generation: the candidates\' mean, median and best, the best so far, and the step size sigma on the right axis.',
    width: CHART_W,
    xLabel: 'generation',
    yLabel: 'fitness',
    y2Label: 'sigma',
    series: [
      { name: 'mean', points: pts((g) => g.meanFitness), color: paletteColor(0) },
      { name: 'median', points: pts((g) => g.medianFitness), color: paletteColor(5), dashed: true },
      { name: 'best', points: pts((g) => g.bestFitness), color: paletteColor(2) },
      { name: 'best so far', points: pts((g) => g.bestSoFar), color: paletteColor(3), dashed: true },
      { name: 'sigma', points: pts((g) => g.sigma), color: paletteColor(7), axis: 'right' },
    ],
  });
}

export function renderEsReport(d: EsReportData, opts: { generatedAt?: string } = {}): string {
  const { run, generations } = d;
  const c = run.config as Record<string, unknown> & { task?: Record<string, unknown> };
  const task = c.task ? Object.entries(c.task).map(([k, v]) => `${k} ${String(v)}`).join(', ') : '—';
  const last = generations.at(-1);
  const facts = [
    fact('status', run.status + (run.statusReason ? ` (${run.statusReason})` : '')),
    fact('generations', `${generations.length} of ${String(c.generations)}`),
    fact('lambda x replicas', `${String(c.lambda)} x ${String(c.replicas)}`),
    fact('sigma0', String(c.sigma0)),
    fact('task', task),
    fact('seed', String(c.seed)),
    fact('from checkpoint', run.checkpointId),
    fact('best checkpoint', run.bestCheckpointId ?? '—'),
    fact('best fitness so far', last ? f4(last.bestSoFar) : '—'),
    fact('code version', run.codeVersion),
    fact('started', fmtTime(run.createdAt.toISOString())),
  ];
  const rows = generations
    .map(
      (g) =>
        `<tr><td class="num">${g.generation}</td><td class="num">${f4(g.meanFitness)}</td><td class="num">${f4(g.medianFitness)}</td>` +
        `<td class="num">${f4(g.bestFitness)}</td><td class="num">${f4(g.bestSoFar)}</td><td class="num">${sig(g.sigma)}</td>` +
        `<td class="num">${fmtInt(g.evaluations)}</td><td class="num">${fmtInt(g.dispatches)}</td><td class="num">${g.wallMs === null ? '—' : (g.wallMs / 1000).toFixed(1)}</td></tr>`,
    )
    .join('');
  const body =
    pageHeader('fugu · ES run', esc(run.id), facts) +
    `<section id="curve"><h2>Fitness curve</h2>${figure(esFitnessChart(generations), 'Mean, median and best candidate fitness of each generation (each candidate\'s fitness is the mean over its replicas), the best so far, and sigma (right axis).')}</section>` +
    `<section id="generations"><h2>Generations</h2>` +
    table(
      'es',
      '<tr><th scope="col" class="num">generation</th><th scope="col" class="num">mean</th><th scope="col" class="num">median</th><th scope="col" class="num">best</th><th scope="col" class="num">best so far</th><th scope="col" class="num">sigma</th><th scope="col" class="num">evaluations</th><th scope="col" class="num">dispatches</th><th scope="col" class="num">wall s</th></tr>',
      rows,
    ) +
    `</section>` +
    pageFooter(`ES run ${run.id}`, opts.generatedAt);
  return htmlDocument(`ES run ${run.id}`, body);
}
