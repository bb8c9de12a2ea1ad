// The HTML report of a Batch API batch (`fugu report <batch id>`): its status, counts, times and
// files, and per worker the lines it ran, answered, failed and what they cost. The data is handed
// in (the CLI reads it from Postgres); report depends on core only.
import { esc, fact, fmtInt, fmtTime, htmlDocument, pageFooter, pageHeader, table, usdText } from './page.ts';

export type BatchReportData = {
  id: string;
  status: string;
  endpoint: string;
  createdAt: string;
  endedAt: string | null;
  total: number;
  completed: number;
  failed: number;
  inputFileId: string;
  outputFileId: string | null;
  errorFileId: string | null;
  /** per worker (null: lines that did not run) */
  workers: Array<{ worker: string | null; lines: number; completed: number; failed: number; cost: bigint }>;
  /** the pool's workers are replay workers: the answers are recorded outcomes */
  replay: boolean;
};

export function renderBatchReport(d: BatchReportData, opts: { generatedAt?: string } = {}): string {
  const cost = d.workers.reduce((t, w) => t + w.cost, 0n);
  const facts = [
    fact('status', d.status),
    fact('endpoint', d.endpoint),
    fact('lines', `${fmtInt(d.completed)} answered, ${fmtInt(d.failed)} failed, of ${fmtInt(d.total)}`),
    fact('cost', usdText(cost)),
    fact('created', fmtTime(d.createdAt)),
    fact('ended', d.endedAt ? fmtTime(d.endedAt) : '—'),
    fact('input file', d.inputFileId),
    fact('output file', d.outputFileId ?? '—'),
    fact('error file', d.errorFileId ?? '—'),
  ];
  const rows = d.workers
    .map((w) => `<tr><td>${esc(w.worker ?? '(not run)')}</td><td class="num">${fmtInt(w.lines)}</td><td class="num">${fmtInt(w.completed)}</td><td class="num">${fmtInt(w.failed)}</td><td class="num">${esc(usdText(w.cost))}</td></tr>`)
    .join('');
  const foot = `<tr><th>all</th><td class="num">${fmtInt(d.workers.reduce((t, w) => t + w.lines, 0))}</td><td class="num">${fmtInt(d.completed)}</td><td class="num">${fmtInt(d.failed)}</td><td class="num">${esc(usdText(cost))}</td></tr>`;
  const body =
    pageHeader('fugu · batch', esc(d.id), facts) +
    `<section id="workers"><h2>Lines per worker</h2>` +
    (d.replay ? '<p>The workers are replay workers: answers and costs are recorded outcomes of the LLMRouter data, a simulation, not live calls.</p>' : '') +
    table('batch', '<tr><th scope="col">worker</th><th scope="col" class="num">lines</th><th scope="col" class="num">answered</th><th scope="col" class="num">failed</th><th scope="col" class="num">cost</th></tr>', rows, foot) +
    `</section>` +
    pageFooter(`batch ${d.id}`, opts.generatedAt);
  return htmlDocument(`batch ${d.id}`, body);
}
